#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/prolog.d/envcheck.sh). Runs as root on the node before each job.
# Exit 1 = node fault: slurmd drains the node ("Prolog error") and requeues the job; envcheck calls no Slurm command
# (Slurm's prolog guide) and keeps its reason in /var/lib/envcheck/slurm-prolog.json, where the HealthCheckProgram
# (`envcheck run --for health`) finds it, puts it in `sinfo -R` and resumes the node once the check passes again.
# Image and config faults exit 0 (the user's image, not the node): they are warnings. envcheck's own failures
# (a full disk, a full stderr, the job user's ulimits) exit 0 with a warning: they never drain a node.
# Without --only, `--for prolog` runs the torch-free node path (node.cuda_driver, gpu.health, dcgm.diag,
# node.profile): no torch import, bounded (--timeout), and it judges only the GPUs this node has.
exec /opt/envcheck/bin/envcheck run --for prolog --expect-gpus "${ENVCHECK_EXPECT_GPUS:-8}" --timeout 120 \
    --prometheus /var/lib/node_exporter/textfile/envcheck.prom
