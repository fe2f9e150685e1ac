#!/usr/bin/env bash
# The offline GPU procedure of docs/gpu.md, dry-run on the CPU (issue 30, item 3): notebook 01's paper
# profile with T scaled to 201 (Table 1's two MNIST chains, without the U_s - U_o ablation's), on two fresh
# "nodes" (scratch folders), as two jobs on nodes without internet and without each other's files would run it.
#
#   device/dry_run.sh [SCRATCH]        (from anywhere; needs `make device-bundle` first)
#
#   job 1, node A: install the bundle offline (device/install.sh: Python 3.12 with the stand-in for
#                  the GPU node's packages when this machine has both), a slice that stops after
#                  100 iterations (mid-chain, at a checkpoint), its pack written to node A's output folder;
#   job 2, node B: a fresh folder, the pack copied in (.device-slices/in), the bundle installed
#                  again, a slice of at most 8 minutes that resumes and finishes every chain;
#   here:          the last pack unpacked into a store, notebook 01 executed by papermill from it,
#                  which must reuse every chain (recompute nothing).
#
# The kit's steps run with $KIT_PYTHON (default: python3; a GPU node's python3 has torch, a workstation's
# Python 3.12 may not): it stands for the GPU node's python3, reading the bundle's data
# through GPED_DATA_ROOT as it will there.
# The bundle is installed with $PY312 (default: python3.12 on PATH, when it runs; without one, the data
# only). Prints the time each step took; exits non-zero on any failure.
set -euo pipefail

checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="${1:-$(mktemp -d "${TMPDIR:-/tmp}/gped-dry-run.XXXXXX")}"
kit_python="${KIT_PYTHON:-python3}"
py312="${PY312:-$(command -v python3.12 || true)}"
# a python3.12 on PATH may be a shim (pyenv's) that does not run here: use it only if it runs as 3.12
if [ -n "$py312" ] && ! "$py312" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    if [ -n "${PY312:-}" ]; then
        echo "PY312=$PY312 does not run as a Python 3.12 here; point PY312 at one that does, or unset it" >&2
        exit 2
    fi
    echo "python3.12 on PATH ($py312) does not run here (a pyenv shim of an inactive version?);" \
         "set PY312 to a Python 3.12 to rehearse the bundle's install with it"
    py312=""
fi
bundle="$checkout/.device-bundle"
standin="$checkout/.device-standin"
scaled=(--profile paper -p num_iterations=201 -p burn_in=100 -p log_every=50 -p checkpoint_every=50
        -p 'models=["fcnn","cnn_mnist"]' -p estimator_ablation=false)
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
started=$(date +%s)
step() { echo; echo "=== [$(( $(date +%s) - started )) s] $*"; }

[ -f "$bundle/manifest.json" ] || { echo "no bundle in $bundle: run make device-bundle first" >&2; exit 1; }
mkdir -p "$scratch"
echo "dry run in $scratch (kit: $kit_python; bundle Python: ${py312:-none})"

install_bundle() {  # $1: the node's folder. As the first line of every job on a node does.
    local machine="$1"
    if [ -n "$py312" ] && [ -d "$standin/wheels" ]; then
        # the GPU node's own packages (attrs, requests, pyyaml, ...), which this Python 3.12 lacks
        "$py312" -m pip install -q --no-index --no-deps --disable-pip-version-check --target "$machine/gpu-site" \
            "$standin"/wheels/*.whl 2>/dev/null
        ( export GPED_PYTHON="$py312" PYTHONPATH="$machine/gpu-site"
          source "$checkout/device/install.sh" "$bundle" "$machine/target"
          "$py312" -c 'import papermill, nbclient, ipykernel, sys; print("bundle imports with Python", sys.version.split()[0])' )
    else
        echo "no Python 3.12 or no .device-standin: installing the data only, with $kit_python"
        "$kit_python" "$checkout/device/install.py" --bundle "$bundle" --target "$machine/target" --data-only
    fi
}

run_slice() {  # $1: the node's folder; the rest: budget options. The command of every job.
    local machine="$1"; shift
    mkdir -p "$machine/out" "$machine/in"
    ( cd "$checkout"
      export PYTHONPATH="$checkout" GPED_DATA_ROOT="$machine/target/data" MPLBACKEND=Agg PYTHONUNBUFFERED=1 \
             GPED_PROGRESS=lines
      set -o pipefail
      "$kit_python" -m gped_kit.cli.slices run 01_experiment1 "${scaled[@]}" "$@" \
          --results "$machine/store" --resume "$machine/in" --out "$machine/out" 2>&1 | tee "$machine/out/slice.log" )
    local files; files=$(find "$machine/out" -type f | wc -l)
    local largest; largest=$(find "$machine/out" -type f -printf '%s\n' | sort -n | tail -1)
    echo "output of this job: $files file(s), largest $largest bytes (expected: the log and a pack, parts of at most 16 MiB)"
    compgen -G "$machine/out/slice-*.json" >/dev/null && [ "$largest" -le $((16 * 1024 * 1024)) ]
}

step "job 1, node A: install the bundle"
install_bundle "$scratch/a"
step "job 1, node A: slice 1 (stops after 100 iterations, at a checkpoint)"
run_slice "$scratch/a" --max-steps 100
grep -q "stopped at step 100" "$scratch/a/out/slice.log"

step "between the jobs: node A's pack is copied to a fresh node (.device-slices/in)"
mkdir -p "$scratch/b/in"
cp "$scratch"/a/out/slice-* "$scratch/b/in/"
ls -l "$scratch/b/in"

step "job 2, node B (fresh): install the bundle"
install_bundle "$scratch/b"
step "job 2, node B: slice 2 (at most 8 minutes: resumes and finishes)"
run_slice "$scratch/b" --minutes 8
grep -q "every chain of the notebook is done" "$scratch/b/out/slice.log"

step "here: unpack the last pack into the store and execute notebook 01 by papermill from it"
( cd "$checkout"
  export PYTHONPATH="$checkout" GPED_DATA_ROOT="$scratch/b/target/data" MPLBACKEND=Agg GPED_PROGRESS=lines
  "$kit_python" -m gped_kit.cli.slices unpack "$scratch/b/out" --results "$scratch/results"
  "$kit_python" -m gped_kit.cli.batch 01_experiment1 "${scaled[@]}" -p "results_dir=$scratch/results" \
      -p "figures_dir=$scratch/figures" --output-dir "$scratch/executed" )
executed="$scratch/executed/01_experiment1.ipynb"
# the notebook's last line counts its results by status: "results 2 reused" (none ran or resumed)
results=$(grep -o 'results [a-z0-9 ,]*;' "$executed" | head -1)
echo "notebook 01 from the unpacked store: ${results:-no count of results}"
[ "$results" = "results 2 reused;" ]

step "dry run passed (scratch: $scratch)"
