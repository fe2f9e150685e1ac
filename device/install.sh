# Install the device bundle offline and set the paths; SOURCE it (bash), from anywhere:
#
#   source device/install.sh [BUNDLE [TARGET]]
#
# BUNDLE: the bundle folder made by `make device-bundle` (default: .device-bundle of this checkout);
# TARGET: where wheels and data go (default: ${TMPDIR:-/tmp}/gped-device); $GPED_PYTHON picks the
# Python (default python3: on a GPU node, the one with torch). It installs the wheels into
# TARGET/site (pip --no-index --no-deps --target), decompresses and verifies the data into
# TARGET/data (device/install.py), then exports
#   PYTHONPATH      this checkout and TARGET/site (so `import gped_kit` and papermill work)
#   GPED_DATA_ROOT  TARGET/data (MNIST/raw, FashionMNIST/raw: the kit's loader reads them there)
#   PATH            TARGET/site/bin first (papermill's and jupyter's scripts)
#   JUPYTER_DATA_DIR, JUPYTER_RUNTIME_DIR, JUPYTER_PLATFORM_DIRS  Jupyter's files under TARGET
#   MPLBACKEND=Agg, PYTHONUNBUFFERED=1, GPED_PROGRESS=lines  headless, logs as they happen
# Running it twice is cheap: wheels and data already in place are kept. On failure it returns 1
# and exports nothing. See docs/gpu.md.

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "device/install.sh must be sourced: source device/install.sh [BUNDLE [TARGET]]" >&2
    exit 2
fi

_gped_checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_gped_bundle="${1:-$_gped_checkout/.device-bundle}"
_gped_target="${2:-${TMPDIR:-/tmp}/gped-device}"
_gped_python="${GPED_PYTHON:-python3}"

if "$_gped_python" "$_gped_checkout/device/install.py" --bundle "$_gped_bundle" --target "$_gped_target"; then
    export PYTHONPATH="$_gped_checkout:$_gped_target/site${PYTHONPATH:+:$PYTHONPATH}"
    export GPED_DATA_ROOT="$_gped_target/data"
    export PATH="$_gped_target/site/bin:$PATH"
    export JUPYTER_DATA_DIR="$_gped_target/jupyter"
    export JUPYTER_RUNTIME_DIR="$_gped_target/jupyter/runtime"
    export JUPYTER_PLATFORM_DIRS=1
    export MPLBACKEND=Agg PYTHONUNBUFFERED=1 GPED_PROGRESS=lines
    echo "install: PYTHONPATH=$PYTHONPATH GPED_DATA_ROOT=$GPED_DATA_ROOT"
    unset _gped_checkout _gped_bundle _gped_target _gped_python
else
    unset _gped_checkout _gped_bundle _gped_target _gped_python
    return 1
fi
