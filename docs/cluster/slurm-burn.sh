#!/bin/sh
# envcheck's burn-in as a Slurm job on a node reserved for it (docs/cluster.md: Burn-in). Submit it as root (it
# drains the node itself), after a repair or before a new node joins; the reservation ends only when it passes:
#   scontrol create reservation=burn_gpu07 nodes=gpu07 starttime=now duration=60 users=root flags=maint,ignore_jobs
#   scontrol update nodename=gpu07 state=resume
#   sbatch --wait --reservation=burn_gpu07 --nodelist=gpu07 --exclusive --time=40 slurm-burn.sh \
#       && scontrol delete reservation=burn_gpu07
# ENVCHECK_BURN_BUDGET: 15m after a repair (the default), 4h for a new node's acceptance, 2m as a smoke test.
# Exit 0: nothing found (a straggler warning is in the job's output): the reservation is deleted, the node takes jobs.
# 10, a node fault (wrong bits, a GPU far below the fleet): the node is drained with envcheck's reason in `sinfo -R`.
# Anything else (3: envcheck could not judge, a worker died; 2: bad input): the node stays in its reservation; read
# the job's output. The JSON report (envcheck-burn-NODE.json) is what `envcheck fleet` compares across nodes.
node=${SLURMD_NODENAME:-$(hostname -s)}
verdict=$(/opt/envcheck/bin/envcheck burn --for preflight --budget "${ENVCHECK_BURN_BUDGET:-15m}" \
    --json "envcheck-burn-$node.json")
rc=$?
case $rc in
    0) ;;
    10) scontrol update nodename="$node" state=drain reason="envcheck burn: $verdict" ;;
    *) echo "envcheck burn could not judge $node (exit $rc): it stays in reservation $SLURM_JOB_RESERVATION" >&2 ;;
esac
exit "$rc"
