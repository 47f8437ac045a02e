#!/usr/bin/env bash
# The GPU proof: run envcheck natively on a GPU machine (no Docker) and keep every report in one folder.
#
#   bash bench/gpu_proof.sh [OUTDIR]      (make gpu-proof OUT_DIR=...)
#
# Steps (each capped, so the whole proof ends well inside 10 minutes on one GPU):
#   1. facts: nvidia-smi -q, torch/CUDA versions, `envcheck facts --json`
#   2. `envcheck run --level quick --json` (twice: cold, then warm caches) and `--level full --json`
#   3. `envcheck bench --quick --json --plots`
#   4. torchrun with one process per GPU: `python -m envcheck.distributed --level full --json`
#   5. NGC's TF32 override: `autograd.device_agreement` with TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1
#   6. pytest: the `gpu`-marked tests, then the rest of the non-Docker suite on this GPU host
#   7. bench/quick_phases.py: where a quick run's time goes (torch import, CUDA init, torchvision, ...)
# Writes OUTDIR/summary.txt with each step's exit code and wall time. The proof never stops at a failing
# step: a failure is evidence too. Exit status: 0 when every step exited 0.
set -uo pipefail

out=${1:-gpu-proof}
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
summary=$out/summary.txt
deadline=$(( $(date +%s) + ${PROOF_BUDGET_S:-540} ))  # the whole proof, so it fits one 10-minute device call
: >"$summary"
overall=0

step() {  # step NAME TIMEOUT_S COMMAND... : run with a cap, log to OUTDIR/NAME.log, record rc and wall time
    local name=$1 cap=$2
    shift 2
    local t0 t1 rc left
    left=$(( deadline - $(date +%s) - 5 ))
    if [ "$left" -lt 10 ]; then
        printf '%-14s skipped: the proof budget is spent\n' "$name" | tee -a "$summary"
        overall=1
        return
    fi
    [ "$cap" -le "$left" ] || cap=$left
    t0=$(date +%s.%N)
    timeout --kill-after=10 "$cap" "$@" >"$out/$name.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    printf '%-14s rc=%-3s wall=%6.1fs  %s\n' "$name" "$rc" "$(awk "BEGIN{print $t1 - $t0}")" "$*" | tee -a "$summary"
    [ "$rc" -eq 0 ] || overall=1
}

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    uname -a
    nvidia-smi -L 2>&1
    "$py" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpus", torch.cuda.device_count())' 2>&1
    git rev-parse HEAD 2>/dev/null
} >"$out/host.txt"
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1

gpus=$("$py" -c 'import torch; print(max(1, torch.cuda.device_count()))' 2>/dev/null || echo 1)
gpus=${gpus:-1}
export PYTHONUNBUFFERED=1

step facts 60 "$py" -m envcheck facts --json "$out/facts.json"
step run-quick 120 "$py" -m envcheck run --level quick --json "$out/run-quick.json" --junit "$out/run-quick.xml"
step run-quick-2 120 "$py" -m envcheck run --level quick --json "$out/run-quick-2.json"  # warm caches
step run-full 240 "$py" -m envcheck run --level full --json "$out/run-full.json" --junit "$out/run-full.xml"
step bench-quick 240 "$py" -m envcheck bench --quick --json "$out/bench-quick.json" --plots "$out/bench-plots"
step torchrun 180 "$py" -m torch.distributed.run --standalone --nproc-per-node "$gpus" \
    -m envcheck.distributed --level full --json "$out/torchrun.json" --timeout 60
TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 step tf32-override 90 "$py" -m envcheck run \
    --only autograd.device_agreement,cudnn.conv --json "$out/tf32-override.json"
step pytest-gpu 240 "$py" -m pytest -m gpu -p no:cacheprovider -q -rs --junitxml "$out/pytest-gpu.xml" tests
xdist=$("$py" -c 'import xdist' 2>/dev/null && echo "-n 8")
# shellcheck disable=SC2086
step pytest-rest 240 "$py" -m pytest -m "not gpu and not docker" -p no:cacheprovider -q -rs $xdist \
    --junitxml "$out/pytest-rest.xml" tests/core tests/checks tests/cli tests/report tests/bench
step quick-phases 150 "$py" bench/quick_phases.py  # last: diagnostic figures, skipped when time is short
echo "overall: rc=$overall" | tee -a "$summary"
exit "$overall"
