#!/usr/bin/env bash
# One device call that does the GPU checklist of ../shared/GPU.md in order, inside a time budget, and
# leaves everything it measured under $OUT (one log, plus the slice's pack):
#
#   device/lease.sh [BUDGET_S [NOTEBOOK [PARAM ...]]]      (on the GPU machine, from the checkout's root)
#
#   1. the device bundle installed offline (device/install.sh), the GPU and the software named;
#   2. the CUDA tests (pytest -k cuda over the engine, batching and pooled-teacher tests);
#   3. the benchmarks named in LEASE_BENCHES (unset: "batched graph"; empty: none): benchmarks/bench_batched.py on
#      CUDA (one chain, K = 1, 4, 12, 24, 48 batched, the matmul rate) and benchmarks/bench_cuda_graph.py
#      (the engine's steps captured as a CUDA graph against eager, K = 1, 4, 24, 48);
#   4. with the time left (less a minute for packing), a resumable slice of NOTEBOOK's paper profile
#      (default 01_experiment1) with each PARAM (KEY=VALUE, e.g. 'models=["cnn_mnist"]') as a notebook
#      parameter, resumed from the pack carried in .device-slices/in, packed into $OUT.
#
# BUDGET_S (default 540) is the wall time this call may use; keep it under the call's timeout_s.
# Every step's output goes to $OUT/lease.log with the seconds elapsed; a failing step is logged and the
# next one still runs (the lease is short: one failure must not waste the rest).
set -u
budget="${1:-540}"
notebook="${2:-01_experiment1}"
shift 2 2>/dev/null || shift $#
params=()
for p in "$@"; do params+=(-p "$p"); done
benches="${LEASE_BENCHES-batched graph}"  # set and empty: no benchmarks
out="${OUT:?OUT must name the folder whose files come back}"
log="$out/lease.log"
started=$(date +%s)
elapsed() { echo $(( $(date +%s) - started )); }
step() { echo; echo "=== [$(elapsed) s] $*"; }

{
step "install the device bundle"
# shellcheck source=/dev/null
source device/install.sh .device-bundle || { echo "install failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
date -u +"date %Y-%m-%dT%H:%M:%SZ"

step "CUDA tests"
timeout 180 python3 -m pytest -q -rs -p no:cacheprovider tests/test_engine.py tests/test_batching.py \
    tests/test_pooled.py tests/test_no_host_sync.py -k cuda
echo "pytest exit $?"

if [[ " $benches " == *" batched "* ]]; then
    step "bench_batched on CUDA"
    timeout 200 python3 benchmarks/bench_batched.py --device cuda --chains 1,4,12,24,48 --steps 300 --repeats 2 \
        --sequential-chains 4
    echo "bench_batched exit $?"
fi
if [[ " $benches " == *" graph "* ]]; then
    step "bench_cuda_graph on CUDA"
    timeout 200 python3 benchmarks/bench_cuda_graph.py --device cuda --chains 1,4,24,48 --replays 10 --repeats 3
    echo "bench_cuda_graph exit $?"
fi

left=$(( budget - $(elapsed) - 60 ))
if [ "$left" -ge 60 ]; then
    minutes=$(python3 -c "print(round($left / 60, 2))")
    step "slice of $notebook's paper profile, $minutes minutes ${*}"
    mkdir -p .device-slices/in
    python3 -m gped_kit.cli.slices run "$notebook" --profile paper --minutes "$minutes" "${params[@]}" \
        --results .device-slices/store --resume .device-slices/in --out "$out"
    echo "slice exit $?"
else
    step "no time left for a slice ($left s)"
fi
step "done"
} 2>&1 | tee "$log"
