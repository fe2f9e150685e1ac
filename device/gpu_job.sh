#!/usr/bin/env bash
# One job that checks a GPU node and then runs the paper's work units within a wall-time budget you choose, and
# leaves everything it measured and computed in an output folder (one log, plus the pack of what finished):
#
#   OUT_DIR=FOLDER bash device/gpu_job.sh BUDGET_S [UNITS_RUN_OPTION ...]
#   (on the GPU node, from the checkout's root; docs/gpu.md)
#
#   1. the offline bundle installed (device/install.sh; build it with `make device-bundle`), the GPU
#      and the software named;
#   2. the CUDA tests (pytest -k cuda over the engine, batching and pooled-teacher tests; the graph mode's tests);
#      JOB_TESTS=0 skips them (a further job on a node and code whose tests passed: more time for units);
#   3. the benchmarks named in JOB_BENCHES (unset: "engine kernels counter"; empty: none): "engine",
#      benchmarks/bench_engine.py on CUDA (the engine eager and in graph mode against a plain loop, one chain and
#      K = 24); "kernels", benchmarks/bench_kernels.py (kernels per step, K = 1 and 24); "counter", both with
#      counter-based random numbers (GPEDConfig(random_numbers="counter")); "batched",
#      benchmarks/bench_batched.py (K = 1, 4, 12, 24, 48); "graph", benchmarks/bench_cuda_graph.py (a period
#      captured by hand, the measurement that preceded the engine's graph mode);
#   4. the checks named in JOB_CHECKS (unset or empty: none), each `python -m gped_kit.cli.speedups OPTION`: "tf32"
#      and "counter", whether Table 1's FCNN chain with TF32 matrix products or counter-based random numbers distils
#      what the default's does (JOB_CHECK_STEPS steps, default 100000, seeds 0 1 2; docs/gpu.md), its chains packed
#      into OUT_DIR beside the units' pack;
#   5. with the time left (less a minute for packing), the paper profile's work units, one after another in one
#      process (python -m gped_kit.cli.units run: Table 1's seeds first, then Experiment 2's grid, then the
#      rest; each unit sized to finish), into the store JOB_RESULTS (default: results), after unpacking the
#      packs in .device-slices/in (copy the previous job's pack there); what the run wrote is packed into
#      OUT_DIR. Each UNITS_RUN_OPTION goes to `units run` as it is, e.g. --notebook 01_experiment1 (only that
#      notebook's units), --slices (a chain longer than a job runs as resumable slices), -p KEY=VALUE.
#
# BUDGET_S (required) is the wall time in seconds this script may use: your job's wall-time limit less what
# runs before and after it (a one-hour SLURM job: 3300, say). OUT_DIR is the folder for the log and the
# pack (created if missing); put it where the next job, or you, can read it, and merge the pack into your
# store with `python -m gped_kit.cli.slices unpack OUT_DIR --results results`.
#
# One process on the GPU at a time: two processes side by side deliver less than one after another
# (docs/benchmarks.md), so the units run one after another, each batching its chains.
#
# The units replay CUDA graphs (--graph auto) when the graph mode's tests of step 2 passed, else run eagerly
# (--graph off); JOB_GRAPH=auto|on|off decides instead.
#
# JOB_DETERMINISTIC=1 runs the units with cuDNN's deterministic convolution kernels (units run
# --deterministic): CNN chains then repeat run to run on CUDA (without it they do not; FCNN chains do).
#
# Every step's output goes to OUT_DIR/gpu_job.log with the seconds elapsed; a failing step is logged and the
# next one still runs (one failure must not waste the rest of the job).
# OUT, the older name of OUT_DIR, is read too.
set -u
usage="usage: OUT_DIR=FOLDER bash device/gpu_job.sh BUDGET_S [UNITS_RUN_OPTION ...]"
budget="${1:-}"
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
    echo "$usage" >&2
    echo "BUDGET_S: the wall time in seconds this job may use (your job's wall-time limit less a few minutes)," \
         "a whole number; got '${budget}'" >&2
    exit 2
fi
shift
# the options for `units run`: options only (a notebook is chosen with --notebook NAME)
units_options=("$@")
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then
    echo "$usage" >&2
    echo "UNITS_RUN_OPTION: options of python -m gped_kit.cli.units run, such as --notebook 01_experiment1 or" \
         "--slices; got '$1' (the job runs the paper's work units; give a notebook as --notebook $1)" >&2
    exit 2
fi
benches="${JOB_BENCHES-engine kernels counter}"  # set and empty: no benchmarks
for option in ${JOB_CHECKS:-}; do
    case "$option" in
        tf32|counter) ;;
        *) echo "JOB_CHECKS: the speedup checks to run, 'tf32' and/or 'counter' (python -m gped_kit.cli.speedups);" \
                "got '$option'" >&2; exit 2 ;;
    esac
done
deterministic=()
if [ -n "${JOB_DETERMINISTIC:-}" ]; then deterministic=(--deterministic); fi
out="${OUT_DIR:-${OUT:-}}"
if [ -z "$out" ]; then echo "$usage" >&2; echo "OUT_DIR: give the folder for the log and the pack" >&2; exit 2; fi
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

if [ "${JOB_TESTS:-1}" != 0 ]; then
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
else
    step "CUDA tests skipped (JOB_TESTS=0)"
    graph_tests=0
fi
# the units replay CUDA graphs only where the graph mode's tests passed on this node (JOB_GRAPH overrides)
unit_graph="${JOB_GRAPH:-$([ "$graph_tests" -eq 0 ] && echo auto || echo off)}"
echo "units run with --graph $unit_graph"

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

for option in ${JOB_CHECKS:-}; do
    left=$(( budget - $(elapsed) - 60 ))
    if [ "$left" -lt 60 ]; then step "no time left for the $option check ($left s)"; continue; fi
    step "speedup check $option, at most $left s: python -m gped_kit.cli.speedups $option"
    python3 -m gped_kit.cli.speedups "$option" --steps "${JOB_CHECK_STEPS:-100000}" --results "${JOB_RESULTS:-results}" \
        --graph "$unit_graph" --budget-s "$left" --pack "$out"
    echo "speedups $option exit $?"
done

left=$(( budget - $(elapsed) - 60 ))
if [ "$left" -ge 60 ]; then
    step "work units of the paper profile, $left s: python -m gped_kit.cli.units run ${units_options[*]:-}"
    python3 -m gped_kit.cli.units run --budget-s "$left" --results "${JOB_RESULTS:-results}" \
        --graph "$unit_graph" "${deterministic[@]}" --resume .device-slices/in --pack "$out" "${units_options[@]}"
    echo "units exit $?"
else
    step "no time left for a unit ($left s)"
fi
step "done"
} 2>&1 | tee "$log"
