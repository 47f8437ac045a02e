#!/bin/sh
# Slurm HealthCheckProgram (slurm.conf: HealthCheckProgram=/etc/slurm/envcheck-health.sh, HealthCheckInterval=300,
# HealthCheckNodeState=ANY). slurmd ignores its exit code: envcheck drains the node itself (scontrol, reason
# `envcheck: ...`) and resumes only its own drains once the check that drained passes again. It keeps inside
# slurmd's 60 s kill (its checks get at most 40 s). Without --only it runs the torch-free node path.
SLURMD_NODENAME="${SLURMD_NODENAME:-$(hostname -s)}" exec /opt/envcheck/bin/envcheck run --for health \
    --expect-gpus "${ENVCHECK_EXPECT_GPUS:-8}" --prometheus /var/lib/node_exporter/textfile/envcheck.prom
