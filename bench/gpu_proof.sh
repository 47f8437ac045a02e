#!/usr/bin/env bash
# The GPU proof: everything one GPU can prove about envcheck, natively (no Docker), in one or two 10-minute calls.
#
#   bash bench/gpu_proof.sh [--part 1|2|3|all] OUTDIR     (make gpu-proof PROOF_DIR=... PROOF_PART=...)
#
# Part 1, the runs: host facts (nvidia-smi -q: driver, persistence); `envcheck run --level quick` and `--level full`,
# each cold then warm, with JSON and JUnit (the full level must end with no ERROR and no FAIL on a healthy
# GPU, quick <= 8 s, full <= 60 s cold); modules.train_eval and train.state_roundtrip on their own (two-checks); `--for prolog` and `--for npd` on the real driver (NVML, cuInit,
# contexts); gpu.health at idle and under a matmul load; the busy GPU (a process holding 90% of the free memory
# while `--for prolog` runs: it must not drain); the one-GPU LOCAL_RANK case (LOCAL_RANK=1 with one visible GPU, as
# `srun --gpus-per-task=1` gives its second task); ops.opdb three times (stable?); torchrun with one process per
# GPU; NGC's TF32 override.
# Part 2, tests and figures: `pytest -m gpu`; `envcheck bench --quick` (figures against the datasheet peak);
# bench/quick_phases.py (where a quick run's time goes); the rest of the non-Docker suite.
# Part 3, the burn-in: `envcheck burn --budget 2m` on every GPU (docs/cluster.md: Burn-in): sustained TFLOP/s per
# dtype against the peak table, clocks, temperature and power under load, bit-for-bit agreement, burn.png.
#
# Writes, in OUTDIR (the device tool's $OUT: at most 8 files come back, no deeper than 2 folders):
#   gpu-proof-part<N>.tar.gz  the evidence folder <date>-<gpu>/ with every report and log; unpack it into
#                             docs/gpu-evidence/ unedited (both parts unpack into the same folder)
#   summary-part<N>.md        bench/proof_summary.py over that folder: GPU, driver, persistence, time to verdict
#                             per mode, every check's verdict and time, gpu.health idle/load, CUDA margins above
#                             0.3, ops.opdb stability, the busy-GPU and LOCAL_RANK cases, bench vs peak; every
#                             section that did not run says why
#   steps-part<N>.txt         each step's exit code and wall time, or why it did not run
# Exit status: 0 every step ran and exited 0; 1 a step failed, or the budget ran out; 2 bad usage; 4 no GPU is
# visible, so nothing was proven (every section says so). The proof never stops at a failing step: a failure is
# evidence too.
#
# Environment: PYTHON (default python3), PROOF_BUDGET_S (per call, default 540), PROOF_DATE (the folder's date,
# default today, UTC: give both parts the same), PROOF_ONLY (comma-separated step names: a smoke subset; the others
# say "not selected"), PROOF_ALLOW_CPU=1 (rehearse the steps without a GPU, `--allow-cpu`: figures are not GPU
# figures and the summary says so), PROOF_BURN_BUDGET (part 3's burn, default 2m).
set -uo pipefail

part=all
while [ $# -gt 0 ]; do
    case $1 in
        --part) part=${2:-}; shift 2 ;;
        --part=*) part=${1#--part=}; shift ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        -*) echo "gpu_proof.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
case $part in 1|2|3|all) ;; *) echo "gpu_proof.sh: --part must be 1, 2, 3 or all, got '$part'" >&2; exit 2 ;; esac
[ $# -le 1 ] || { echo "gpu_proof.sh: one OUTDIR, got $# arguments (try --help)" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-gpu-proof}
mkdir -p "$out" || { echo "gpu_proof.sh: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
deadline=$(( $(date +%s) + ${PROOF_BUDGET_S:-540} ))
scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpu-proof.XXXXXX") || exit 2
background=()
# shellcheck disable=SC2329  # called by the EXIT trap
cleanup() {
    local pid
    for pid in "${background[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export ENVCHECK_SLURM_STATE=$scratch/slurm-state.json  # --for prolog/health keep their state here, not in /var/lib

# --- is there a GPU? ------------------------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null; then
    smi=$(timeout 30 nvidia-smi -L 2>&1 | head -n 4) || true
else
    smi="nvidia-smi is not installed (no NVIDIA driver on this host)"
fi
gpus=$(timeout 120 "$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' \
       2>/dev/null | tail -n 1)
[[ $gpus =~ ^[0-9]+$ ]] || gpus=0
no_gpu=""
if [ "$gpus" -eq 0 ]; then
    no_gpu="no GPU visible: torch.cuda.device_count() is 0; nvidia-smi -L: ${smi:-no output}"
    no_gpu=${no_gpu//$'\n'/; }
fi
rehearsal=""
cpu_flag=()
if [ -n "$no_gpu" ] && [ "${PROOF_ALLOW_CPU:-}" = 1 ]; then
    rehearsal="CPU rehearsal (PROOF_ALLOW_CPU=1): $no_gpu; no figure here is a GPU figure"
    no_gpu=""
    cpu_flag=(--allow-cpu)
fi
name=$(timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
slug=$(printf '%s' "${name:-no-gpu}" | tr '[:upper:]' '[:lower:]' | tr -cs 'a-z0-9' '-' | sed 's/^-*//; s/-*$//')
[ -z "$rehearsal" ] || slug=cpu-rehearsal
folder=${PROOF_DATE:-$(date -u +%Y-%m-%d)}-${slug:-no-gpu}
dir=$scratch/$folder
mkdir -p "$dir"
tag=part$part
steps=$dir/steps-$tag.tsv
: >"$steps"
overall=0

record() {  # record NAME RC WALL NOTE COMMAND: one row of steps.tsv, one line on stdout
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$steps"
    if [ "$2" = - ]; then
        printf '%-16s not run: %s\n' "$1" "$4"
    else
        printf '%-16s rc=%-3s wall=%6.1fs  %s\n' "$1" "$2" "$3" "$5"
    fi
}

in_part() {  # in_part N: is part N part of this call?
    [ "$part" = all ] || [ "$part" = "$1" ]
}

selected() {
    [ -z "${PROOF_ONLY:-}" ] || [[ ",$PROOF_ONLY," == *",$1,"* ]]
}

step() {  # step PART NAME TIMEOUT_S COMMAND...: run with a cap into NAME.log, or say why not
    local p=$1 name=$2 cap=$3
    shift 3
    local t0 t1 rc left
    if ! in_part "$p"; then
        record "$name" - 0 "part $p of the proof (bash bench/gpu_proof.sh --part $p)" "$*"; return
    fi
    if [ -n "$no_gpu" ]; then
        record "$name" - 0 "$no_gpu" "$*"; return
    fi
    if ! selected "$name"; then
        record "$name" - 0 "not selected (PROOF_ONLY=$PROOF_ONLY)" "$*"; return
    fi
    left=$(( deadline - $(date +%s) - 5 ))
    if [ "$left" -lt 10 ]; then
        record "$name" - 0 "the proof budget is spent (PROOF_BUDGET_S=${PROOF_BUDGET_S:-540})" "$*"
        overall=1
        return
    fi
    [ "$cap" -le "$left" ] || cap=$left
    t0=$(date +%s.%N)
    # SIGINT at the cap, as Ctrl-C: pytest tears its fixtures down and envcheck reports what finished (a pytest ended
    # by SIGTERM left a fixture's temp dir behind when the budget cut the CPU rehearsal's pytest-rest); KILL 15 s later
    timeout --signal=INT --kill-after=15 "$cap" "$@" >"$dir/$name.log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    record "$name" "$rc" "$(awk "BEGIN{print $t1 - $t0}")" "" "$*"
    [ "$rc" -eq 0 ] || overall=1
}

helper() {  # helper MODE READY SECONDS: start bench/gpu_proof_load.py in the background, wait until it is ready
    local ready=$2 waited=0
    "$py" "$repo/bench/gpu_proof_load.py" "$1" "$ready" "$3" >"$dir/$1-helper.log" 2>&1 &
    background+=("$!")
    while [ ! -s "$ready" ] && kill -0 "$!" 2>/dev/null && [ "$waited" -lt 120 ]; do
        sleep 0.5
        waited=$((waited + 1))
    done
}

stop_helpers() {
    local pid
    for pid in "${background[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
    background=()
}

free_port() {
    "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    uname -a
    echo "${smi:-nvidia-smi: no output}"
    "$py" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "gpus", torch.cuda.device_count())' 2>&1
    git -C "$repo" rev-parse HEAD 2>/dev/null
    echo "part: $part; gpus: $gpus; ${no_gpu:-${rehearsal:-GPU run}}"
} >"$dir/host-$tag.txt"
timeout 60 nvidia-smi -q >"$dir/nvidia-smi-q-$tag.txt" 2>&1

envcheck=("$py" -m envcheck)
# --- part 1: the runs ---------------------------------------------------------------------------------------------
step 1 facts 60 "${envcheck[@]}" facts --json "$dir/facts.json"
step 1 run-quick-cold 120 "${envcheck[@]}" run --level quick "${cpu_flag[@]}" --json "$dir/run-quick-cold.json" \
    --junit "$dir/run-quick-cold.xml"
step 1 run-quick-warm 120 "${envcheck[@]}" run --level quick "${cpu_flag[@]}" --json "$dir/run-quick-warm.json"
step 1 run-full-cold 240 "${envcheck[@]}" run --level full "${cpu_flag[@]}" --json "$dir/run-full-cold.json" \
    --junit "$dir/run-full-cold.xml"
step 1 run-full-warm 240 "${envcheck[@]}" run --level full "${cpu_flag[@]}" --json "$dir/run-full-warm.json"
# The two checks verified on CPU only since their last fix: shown on their own, whatever the full run did
step 1 two-checks 240 "${envcheck[@]}" run --level full --only modules.train_eval,train.state_roundtrip \
    "${cpu_flag[@]}" --json "$dir/two-checks.json"
step 1 prolog 90 "${envcheck[@]}" run --for prolog "${cpu_flag[@]}" --json "$dir/prolog.json"
step 1 npd 90 "${envcheck[@]}" run --for npd "${cpu_flag[@]}" --json "$dir/npd.json"
# The documented prolog (docs/cluster/slurm-prolog.sh: the node path, --expect-gpus, --timeout 120), the health
# check and the Kubernetes preflight on the real driver; then the fault twin: a prolog that expects one GPU more
# than the node has must fail as a node fault (exit 1, node.gpu_count).
expect=$(( gpus > 0 ? gpus : 1 ))
step 1 prolog-node 150 "${envcheck[@]}" run --for prolog --expect-gpus "$expect" --timeout 120 "${cpu_flag[@]}" \
    --json "$dir/prolog-node.json"
step 1 health 90 "${envcheck[@]}" run --for health --expect-gpus "$expect" "${cpu_flag[@]}" --json "$dir/health.json"
step 1 preflight 120 "${envcheck[@]}" run --for preflight "${cpu_flag[@]}" --json "$dir/preflight.json"
# shellcheck disable=SC2016  # expanded by the inner bash
step 1 prolog-missing-gpu 150 bash -c '"$@"; rc=$?; echo "exit $rc (a node fault is exit 1)"; [ "$rc" -eq 1 ]' _ \
    "${envcheck[@]}" run --for prolog --expect-gpus "$(( expect + 1 ))" --timeout 120 "${cpu_flag[@]}" \
    --json "$dir/prolog-missing-gpu.json"
step 1 health-idle 60 "${envcheck[@]}" run --only gpu.health,node.cuda_driver "${cpu_flag[@]}" \
    --json "$dir/health-idle.json"
if in_part 1 && [ -z "$no_gpu" ] && selected health-load; then helper load "$scratch/load.ready" 60; fi
step 1 health-load 60 "${envcheck[@]}" run --only gpu.health,node.cuda_driver "${cpu_flag[@]}" \
    --json "$dir/health-load.json"
stop_helpers
if in_part 1 && [ -z "$no_gpu" ] && selected busy-prolog; then helper hold "$scratch/hold.ready" 300; fi
cp "$scratch/hold.ready" "$dir/busy-hold.txt" 2>/dev/null
step 1 busy-prolog 90 "${envcheck[@]}" run --for prolog "${cpu_flag[@]}" --json "$dir/busy-prolog.json"
step 1 busy-prolog-node 150 "${envcheck[@]}" run --for prolog --expect-gpus "$expect" --timeout 120 "${cpu_flag[@]}" \
    --json "$dir/busy-prolog-node.json"
step 1 busy-health 90 "${envcheck[@]}" run --for health --expect-gpus "$expect" "${cpu_flag[@]}" \
    --json "$dir/busy-health.json"
stop_helpers
step 1 local-rank 120 env RANK=0 WORLD_SIZE=1 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 CUDA_VISIBLE_DEVICES=0 \
    MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" "$py" -m envcheck.distributed --level full "${cpu_flag[@]}" \
    --json "$dir/local-rank.json" --timeout 60
step 1 torchrun 180 "$py" -m torch.distributed.run --standalone --nproc-per-node "$(( gpus > 0 ? gpus : 1 ))" \
    -m envcheck.distributed --level full "${cpu_flag[@]}" --json "$dir/torchrun.json" --timeout 60
TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 step 1 tf32-override 90 "${envcheck[@]}" run \
    --only autograd.device_agreement,cudnn.conv "${cpu_flag[@]}" --json "$dir/tf32-override.json"
for i in 1 2 3; do
    step 1 "opdb-$i" 200 "${envcheck[@]}" run --only ops.opdb "${cpu_flag[@]}" --json "$dir/opdb-$i.json"
done
# --- part 2: tests and figures -------------------------------------------------------------------------------------
# Cap 420 s: 266 s on the H100 in call 2; the last proof's call 4 ran out of a 300 s cap (train.state_roundtrip's
# device pairs, since cut to one GPU of each model and to one dtype run per optimizer implementation beyond float32).
# Only the files that hold gpu tests (tests/compose needs Docker, which the GPU machine lacks): the rest of the suite
# imports test-only packages (docker, paramiko, jsonschema) that a bare GPU machine may not have.
mapfile -t gpu_tests < <(grep -rlE '^pytestmark = pytest\.mark\.gpu|^@pytest\.mark\.gpu' "$repo/tests" --include='test_*.py' \
    | grep -v '/tests/compose/' | sort)
step 2 pytest-gpu 420 "$py" -m pytest -m gpu -p no:cacheprovider -q -rs --continue-on-collection-errors \
    --junitxml "$dir/pytest-gpu.xml" "${gpu_tests[@]}"
step 2 bench-quick 240 "${envcheck[@]}" bench --quick "${cpu_flag[@]}" --json "$dir/bench-quick.json" \
    --plots "$dir/bench-plots"
step 2 quick-phases 150 "$py" "$repo/bench/quick_phases.py"
xdist=()
"$py" -c 'import xdist' >/dev/null 2>&1 && xdist=(-n 8)
step 2 pytest-rest 240 "$py" -m pytest -m "not gpu and not docker" -p no:cacheprovider -q -rs --continue-on-collection-errors "${xdist[@]}" \
    --junitxml "$dir/pytest-rest.xml" "$repo/tests/core" "$repo/tests/checks" "$repo/tests/cli" "$repo/tests/report" \
    "$repo/tests/perf"
# --- part 3: the burn-in ------------------------------------------------------------------------------------------
# 2 minutes on every GPU (the budget counts the start-up); the cap leaves room for the report and the plot.
step 3 burn 200 "${envcheck[@]}" burn --budget "${PROOF_BURN_BUDGET:-2m}" "${cpu_flag[@]}" --json "$dir/burn.json" --plots "$dir/burn-plots"

# --- the summary and what comes back ------------------------------------------------------------------------------
note=${no_gpu:-$rehearsal}
if ! "$py" "$repo/bench/proof_summary.py" "$dir" --note "$note" --out "$dir/SUMMARY-$tag.md" \
        >"$dir/summary-$tag.log" 2>&1 || [ ! -s "$dir/SUMMARY-$tag.md" ]; then
    echo "bench/proof_summary.py wrote no summary: see summary-$tag.log in the tarball" >"$dir/SUMMARY-$tag.md"
    overall=1
fi
[ -n "$no_gpu" ] && status=4 || status=$overall
echo "overall: rc=$status${note:+ ($note)}" | tee -a "$dir/summary-$tag.txt"
cut -f1-4 "$steps" >>"$dir/summary-$tag.txt"
cp "$dir/SUMMARY-$tag.md" "$out/summary-$tag.md"
cp "$dir/summary-$tag.txt" "$out/steps-$tag.txt"
tar -C "$scratch" -czf "$out/gpu-proof-$tag.tar.gz" "$folder"
exit "$status"
