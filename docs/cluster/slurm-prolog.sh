#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/etc/slurm/prolog.d/envcheck.sh). Runs as root on the node before each job.
# Exit 1 = node fault: envcheck has already drained the node with its reason (`sinfo -R` shows it) and Slurm
# requeues the job. Image and config faults exit 0 (the user's image, not the node): they are warnings.
# Keep it fast (--only) and bounded (--timeout): every job waits for it.
exec /opt/envcheck/bin/envcheck run --for prolog --expect-gpus "${ENVCHECK_EXPECT_GPUS:-8}" \
    --only cuda.available,cuda.devices --timeout 120 \
    --prometheus /var/lib/node_exporter/textfile/envcheck.prom
