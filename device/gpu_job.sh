#!/usr/bin/env bash
# One job that checks a GPU node and then runs slices within a wall-time budget you choose, and leaves
# everything it measured in an output folder (one log, plus the slices' packs):
#
#   OUT_DIR=FOLDER bash device/gpu_job.sh BUDGET_S [NOTEBOOK [PARAM ...] [-- NOTEBOOK [PARAM ...]]]
#   (on the GPU node, from the checkout's root; docs/gpu.md)
#
#   1. the offline bundle installed (device/install.sh; build it with `make device-bundle`), the GPU
#      and the software named;
#   2. the CUDA tests (pytest -k cuda over the engine, batching and pooled-teacher tests; the graph mode's tests);
#   3. the benchmarks named in JOB_BENCHES (unset: "engine kernels counter"; empty: none): "engine",
#      benchmarks/bench_engine.py on CUDA (the engine eager and in graph mode against a plain loop, one chain and
#      K = 24); "kernels", benchmarks/bench_kernels.py (kernels per step, K = 1 and 24); "counter", both with
#      counter-based random numbers (GPEDConfig(random_numbers="counter")); "batched",
#      benchmarks/bench_batched.py (K = 1, 4, 12, 24, 48); "graph", benchmarks/bench_cuda_graph.py (a period
#      captured by hand, the measurement that preceded the engine's graph mode);
#   4. with the time left (less a minute for packing), a resumable slice of NOTEBOOK's paper profile
#      (default 01_experiment1) with each PARAM (KEY=VALUE, e.g. 'models=["cnn_mnist"]') as a notebook
#      parameter, resumed from the pack in .device-slices/in (copy the previous job's pack there), packed
#      into OUT_DIR.
#
# BUDGET_S (required) is the wall time in seconds this script may use: your job's wall-time limit less what
# runs before and after it (a one-hour SLURM job: 3300, say). OUT_DIR is the folder for the log and the
# packs (created if missing); put it where the next job, or you, can read it.
#
# Each further "-- NOTEBOOK [PARAM ...]" is a second lane: a slice run side by side with the first, with
# its own store (.device-slices/store-2), resumed from .device-slices/in-2 and packed into OUT_DIR/lane-2
# (a third lane: -3, and so on). One chain leaves a large GPU partly idle, so two lanes advance two chains
# further than one after the other (eager on an H200: 1.52x the steps per second; docs/device-runs/
# 2026-11-26-nvidia-h200-3).
#
# The slices replay CUDA graphs (--graph auto) when the graph mode's tests of step 2 passed, else run eagerly
# (--graph off); JOB_GRAPH=auto|on|off decides instead.
#
# JOB_DETERMINISTIC=1 runs the slices with cuDNN's deterministic convolution kernels (slices run
# --deterministic): CNN chains then repeat run to run on CUDA (without it they do not; FCNN chains do).
#
# Every step's output goes to OUT_DIR/gpu_job.log with the seconds elapsed (a lane's lines marked [lane N]);
# a failing step is logged and the next one still runs (one failure must not waste the rest of the job).
# The variables' older names (OUT, LEASE_BENCHES, LEASE_GRAPH, LEASE_DETERMINISTIC) are read too.
set -u
usage="usage: OUT_DIR=FOLDER bash device/gpu_job.sh BUDGET_S [NOTEBOOK [PARAM ...] [-- NOTEBOOK [PARAM ...]]]"
budget="${1:-}"
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
    echo "$usage" >&2
    echo "BUDGET_S: the wall time in seconds this job may use (your job's wall-time limit less a few minutes)," \
         "a whole number; got '${budget}'" >&2
    exit 2
fi
shift
# the lanes: lane i's notebook in notebooks[i], its parameters in lane_params[i] (one string, "-p" and value
# separated by newlines, since bash has no arrays of arrays)
notebooks=() lane_params=()
while :; do
    notebooks+=("${1:-01_experiment1}")
    shift 2>/dev/null
    ps=""
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do ps+=$'-p\n'"$1"$'\n'; shift; done
    lane_params+=("$ps")
    [ $# -gt 0 ] || break
    shift  # the "--"
done
benches="${JOB_BENCHES-${LEASE_BENCHES-engine kernels counter}}"  # set and empty: no benchmarks
deterministic=()
if [ -n "${JOB_DETERMINISTIC:-${LEASE_DETERMINISTIC:-}}" ]; then deterministic=(--deterministic); fi
out="${OUT_DIR:-${OUT:-}}"
if [ -z "$out" ]; then echo "$usage" >&2; echo "OUT_DIR: give the folder for the log and the packs" >&2; exit 2; fi
mkdir -p "$out" || exit 2
log="$out/gpu_job.log"
started=$(date +%s)
elapsed() { echo $(( $(date +%s) - started )); }
step() { echo; echo "=== [$(elapsed) s] $*"; }

{
step "install the offline bundle"
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
timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/test_counter_random.py
echo "pytest (counter random numbers) exit $?"
# the graph tests compile the fused SGLD updates (Triton) for a few shapes besides capturing
timeout 240 python3 -m pytest -q -rs -p no:cacheprovider tests/test_graphs.py
graph_tests=$?
echo "pytest (graphs) exit $graph_tests"
# the slices replay CUDA graphs only where the graph mode's tests passed on this node (JOB_GRAPH overrides)
slice_graph="${JOB_GRAPH:-${LEASE_GRAPH:-$([ "$graph_tests" -eq 0 ] && echo auto || echo off)}}"
echo "slices run with --graph $slice_graph"

if [[ " $benches " == *" engine "* ]]; then
    step "bench_engine on CUDA"
    timeout 240 python3 benchmarks/bench_engine.py --device cuda --chains 24 --steps 500 --repeats 2
    echo "bench_engine exit $?"
fi
if [[ " $benches " == *" kernels "* ]]; then
    step "bench_kernels on CUDA"
    for k in 1 24; do timeout 60 python3 benchmarks/bench_kernels.py --device cuda --chains "$k"; done
    echo "bench_kernels exit $?"
fi
if [[ " $benches " == *" counter "* ]]; then
    step "bench_engine and bench_kernels on CUDA, counter-based random numbers"
    timeout 240 python3 benchmarks/bench_engine.py --device cuda --chains 24 --steps 500 --repeats 2 --random-numbers counter
    echo "bench_engine (counter) exit $?"
    for k in 1 24; do timeout 90 python3 benchmarks/bench_kernels.py --device cuda --chains "$k" --random-numbers counter; done
    echo "bench_kernels (counter) exit $?"
fi

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
    pids=()
    for i in "${!notebooks[@]}"; do
        lane=$(( i + 1 ))
        suffix=""; lane_out="$out"
        if [ "$lane" -gt 1 ]; then suffix="-$lane"; lane_out="$out/lane-$lane"; fi
        mapfile -t params < <(printf '%s' "${lane_params[$i]}")
        step "lane $lane: slice of ${notebooks[$i]}'s paper profile, $minutes minutes ${params[*]:-}"
        mkdir -p ".device-slices/in$suffix" "$lane_out"
        (set -o pipefail  # the lane's exit status is the slice's, not sed's
         python3 -m gped_kit.cli.slices run "${notebooks[$i]}" --profile paper --minutes "$minutes" "${params[@]}" \
             "${deterministic[@]}" --graph "$slice_graph" \
             --results ".device-slices/store$suffix" --resume ".device-slices/in$suffix" --out "$lane_out" 2>&1 \
             | sed -u "s/^/[lane $lane] /") &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}"; echo "lane $(( i + 1 )): slice exit $?"
    done
else
    step "no time left for a slice ($left s)"
fi
step "done"
} 2>&1 | tee "$log"
