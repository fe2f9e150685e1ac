"""The offline bundle: what a GPU node without internet lacks, built on a machine with internet,
copied to the node with the checkout, installed there offline.

A typical GPU compute node (docs/gpu.md) has Python 3.12 with torch, numpy, pandas and the other
packages of :data:`GPU_MACHINE_PACKAGES`, but no Jupyter, papermill or ipywidgets, no data and no
internet. ``make device-bundle`` (``python -m gped_kit.cli.device build``) writes, into the
git-ignored folder ``.device-bundle/``:

* ``wheels/``: the wheels of ``device/requirements.txt`` for CPython 3.12 on manylinux x86-64
  (``pip download --no-deps --only-binary=:all:``), checked to be complete: every requirement a
  bundled wheel declares (for Python 3.12 on Linux x86-64, no extras) is bundled in a version
  that satisfies it, is on the GPU node already, or is one of :data:`LEFT_OUT` (not needed to
  run notebooks headlessly; left out to keep the bundle small);
* ``data/<Class>/raw/<file>.xz``: the raw IDX files of MNIST and Fashion-MNIST in torchvision's
  layout (read here through the kit's loader, :func:`gped_kit.data.sources.load_split`),
  xz-compressed;
* ``manifest.json``: every file with its size and SHA-256 (for data, also the SHA-256 and size
  of the decompressed file). ``--max-mib`` makes the build fail when the bundle is larger (where it
  must fit a transfer or a quota of yours; no limit by default).

``device/install.sh`` (sourced on the GPU node) installs the wheels with ``pip install
--no-index --no-deps --target``, decompresses and verifies the data under a data root and sets
``PYTHONPATH``, ``GPED_DATA_ROOT`` and the Jupyter paths; ``device/install.py`` does the work
with the standard library only.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..data.sources import DATASETS, SPLITS, canonical_name, default_data_root, expected_files, load_split
from ..files import BLOCK, atomic_path, sha256_of

DEFAULT_BUNDLE = Path(".device-bundle")
DEFAULT_STANDIN = Path(".device-standin")
DEFAULT_REQUIREMENTS = Path("device/requirements.txt")
MANIFEST = "manifest.json"
FORMAT = 1
#: The GPU node's Python and platform tags (pip download matches manylinux_2_N exactly).
PYTHON_VERSION = (3, 12)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64")
#: The data sets the paper profile reads that the bundle can hold (CIFAR-10, 170 MB, is copied by hand).
BUNDLE_DATASETS = ("mnist", "fashion_mnist")

#: Python packages the bundle expects on the GPU node's Python (a CUDA image with PyTorch and the
#: scientific stack, as of 2026-11): bundled wheels may depend on these without bundling them.
#: ``device/install.sh`` checks that the notebook machinery imports, so a missing one shows there.
GPU_MACHINE_PACKAGES = frozenset(canonicalize_name(n) for n in """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split())

#: Declared requirements left out of the bundle on purpose, with the reason each is not needed
#: to execute notebooks headlessly (together about 13 MB).
LEFT_OUT: Mapping[str, str] = {
    "debugpy": "ipykernel runs without its debugger (ipykernel.debugger checks for debugpy)",
    "jedi": "IPython imports it only for tab completion (IPython.core.completer: lazily)",
    "parso": "needed only by jedi",
    "widgetsnbextension": "the classic-notebook front-end of ipywidgets; the kernel side does not import it",
    "jupyterlab-widgets": "the JupyterLab front-end of ipywidgets; the kernel side does not import it",
}


class BundleError(RuntimeError):
    """The bundle cannot be built or is incomplete; the message says what and how to fix it."""


@dataclass(frozen=True)
class Pin:
    """One line of the requirements file: ``name==version``."""

    name: str
    version: Version


def read_requirements(path: Path) -> list[Pin]:
    """The pinned requirements (``name==version`` per line; ``#`` comments); ``BundleError`` for
    anything else, a duplicate, a package the GPU node has or one of :data:`LEFT_OUT`."""
    if not path.is_file():
        raise BundleError(f"requirements file {path} not found (run from the repository root)")
    pins: dict[str, Pin] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        req = Requirement(text)
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or req.marker or req.extras:
            raise BundleError(f"{path}:{number}: {text!r} must be a plain pin NAME==VERSION")
        name = canonicalize_name(req.name)
        if name in pins:
            raise BundleError(f"{path}:{number}: {name} is pinned twice (one version each: two stop the install)")
        if name in GPU_MACHINE_PACKAGES:
            raise BundleError(f"{path}:{number}: {name} is on the GPU node already; carrying another version "
                              "would shadow it")
        if name in LEFT_OUT:
            raise BundleError(f"{path}:{number}: {name} is left out on purpose ({LEFT_OUT[name]})")
        pins[name] = Pin(name, Version(specs[0].version))
    if not pins:
        raise BundleError(f"{path}: no requirements")
    return list(pins.values())


def supported_tags() -> frozenset[Tag]:
    """The wheel tags CPython 3.12 on manylinux x86-64 installs."""
    tags = set(cpython_tags(PYTHON_VERSION, abis=[f"cp{PYTHON_VERSION[0]}{PYTHON_VERSION[1]}", "abi3", "none"],
                            platforms=PLATFORMS))
    tags |= set(compatible_tags(PYTHON_VERSION, interpreter=f"cp{PYTHON_VERSION[0]}{PYTHON_VERSION[1]}",
                                platforms=PLATFORMS))
    return frozenset(tags)


def marker_environment() -> dict[str, str]:
    """Environment markers of the GPU node's Python (3.12.3 on Linux x86-64)."""
    env = dict(default_environment())
    env.update(python_version="3.12", python_full_version="3.12.3", implementation_name="cpython",
               implementation_version="3.12.3", platform_python_implementation="CPython", sys_platform="linux",
               platform_system="Linux", platform_machine="x86_64", os_name="posix")
    return env


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """The ``Requires-Dist`` entries of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise BundleError(f"{wheel.name}: expected one *.dist-info/METADATA, found {names}")
        headers = HeaderParser().parsestr(z.read(names[0]).decode("utf-8"))
    return [Requirement(r) for r in headers.get_all("Requires-Dist") or []]


def unmet_requirements(wheels: Iterable[Path]) -> list[str]:
    """Every requirement of the wheels (Python 3.12, Linux x86-64, no extras) that is neither
    bundled in a satisfying version, on the GPU node, nor in :data:`LEFT_OUT`: one line each."""
    wheels = list(wheels)
    versions = {canonicalize_name(parse_wheel_filename(w.name)[0]): parse_wheel_filename(w.name)[1] for w in wheels}
    env = marker_environment()
    problems = []
    for wheel in sorted(wheels):
        for req in wheel_requirements(wheel):
            if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
                continue
            name = canonicalize_name(req.name)
            if name in versions:
                if not req.specifier.contains(versions[name], prereleases=True):
                    problems.append(f"{wheel.name} needs {req}, the bundle has {name} {versions[name]}")
            elif name not in GPU_MACHINE_PACKAGES and name not in LEFT_OUT:
                problems.append(f"{wheel.name} needs {req}: neither bundled nor on the GPU node")
    return problems


def check_wheels(wheel_dir: Path, pins: Sequence[Pin]) -> list[Path]:
    """The wheels of ``pins`` in ``wheel_dir``, checked: exactly one per pin at its version, no
    other wheel, tags that CPython 3.12 on manylinux x86-64 installs, requirements met."""
    wheels = sorted(wheel_dir.glob("*.whl"))
    found: dict[str, list[Path]] = {}
    for w in wheels:
        name, version, _, tags = parse_wheel_filename(w.name)
        found.setdefault(canonicalize_name(name), []).append(w)
        if not tags & supported_tags():
            raise BundleError(f"{w.name}: no tag that CPython {PYTHON_VERSION[0]}.{PYTHON_VERSION[1]} on manylinux "
                              "x86-64 installs")
    wanted = {p.name: p for p in pins}
    extra = sorted(set(found) - set(wanted))
    if extra:
        raise BundleError(f"{wheel_dir}: wheels not in the requirements: {extra} (delete them or pin them)")
    for name, pin in wanted.items():
        got = found.get(name, [])
        if len(got) != 1 or parse_wheel_filename(got[0].name)[1] != pin.version:
            raise BundleError(f"{wheel_dir}: expected one wheel of {name}=={pin.version}, found "
                              f"{[g.name for g in got]}")
    problems = unmet_requirements(wheels)
    if problems:
        raise BundleError("the bundle is incomplete:\n  " + "\n  ".join(problems))
    return wheels


def _pip_download(pins: Sequence[Pin], wheel_dir: Path, deps: bool) -> None:
    """``pip download`` the pinned wheels (binary only; with their dependencies when ``deps``) for
    CPython 3.12 on manylinux x86-64 into ``wheel_dir``."""
    command = [sys.executable, "-m", "pip", "download", "--quiet", *([] if deps else ["--no-deps"]),
               "--only-binary=:all:", "--python-version", f"{PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}",
               "--implementation", "cp", *[arg for platform in PLATFORMS for arg in ("--platform", platform)],
               "--dest", str(wheel_dir), *[f"{p.name}=={p.version}" for p in pins]]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise BundleError("pip download failed (PyPI must be reachable to build the bundle):\n"
                          + (result.stderr or result.stdout)[-3000:])


def download_wheels(pins: Sequence[Pin], wheel_dir: Path) -> None:
    """The pinned wheels (no dependencies) into ``wheel_dir``, first removing wheels of other
    packages or versions."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    keep = {(p.name, p.version) for p in pins}
    for w in wheel_dir.glob("*.whl"):
        name, version, *_ = parse_wheel_filename(w.name)
        if (canonicalize_name(name), version) not in keep:
            w.unlink()
    _pip_download(pins, wheel_dir, deps=False)


def build_standin(out: Path = DEFAULT_STANDIN, requirements: Path = DEFAULT_REQUIREMENTS) -> list[Path]:
    """A stand-in for the GPU node's own packages, for dry runs (not needed on the node): the wheels
    that the bundle's requirements reach beyond the bundle (of :data:`GPU_MACHINE_PACKAGES`:
    attrs, requests, pyyaml, aiohttp, ..., and what these need), as pip resolves them for CPython
    3.12 (the newest releases that fit, which need not be the GPU node's versions), in
    ``out/wheels``. Installed beside the bundle into a
    Python 3.12 without them, they let the bundle be tested on a workstation as it will run on the node."""
    pins = read_requirements(requirements)
    wheel_dir = out / "wheels"
    wheel_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        _pip_download(pins, Path(scratch), deps=True)
        for old in wheel_dir.glob("*.whl"):
            old.unlink()
        bundled = {p.name for p in pins} | set(LEFT_OUT)
        kept = [Path(shutil.move(wheel, wheel_dir / wheel.name)) for wheel in sorted(Path(scratch).glob("*.whl"))
                if canonicalize_name(parse_wheel_filename(wheel.name)[0]) not in bundled]
    return kept


def _compress(source: Path, target: Path) -> None:
    """``source`` xz-compressed into ``target`` (through a temporary file and a rename)."""
    with atomic_path(target) as tmp, open(source, "rb") as src, lzma.open(tmp, "wb", preset=9) as dst:
        for block in iter(lambda: src.read(BLOCK), b""):
            dst.write(block)


def bundle_data(names: Sequence[str], out: Path, data_root: Path, previous: Mapping[str, dict]) -> list[dict]:
    """Each data set's raw files (read through the kit's loader, which writes them under
    ``data_root`` from its offline sources) xz-compressed under ``out/data``, in torchvision's
    layout; a file already compressed from the same raw bytes (``previous`` manifest rows) is kept."""
    rows = []
    for name in names:
        for split in SPLITS:
            load_split(name, split, root=data_root)  # DatasetNotFoundError says where it looked
        for raw in expected_files(name, SPLITS[0], data_root):
            relative = raw.relative_to(data_root).as_posix()
            packed = out / "data" / f"{relative}.xz"
            digest = sha256_of(raw)
            old = previous.get(f"data/{relative}.xz")
            if not (packed.is_file() and old and old.get("raw_sha256") == digest
                    and old.get("sha256") == sha256_of(packed)):
                _compress(raw, packed)
            rows.append({"file": f"data/{relative}.xz", "bytes": packed.stat().st_size, "sha256": sha256_of(packed),
                         "raw": relative, "raw_bytes": raw.stat().st_size, "raw_sha256": digest})
    return rows


def bundle_size(out: Path) -> int:
    """Bytes of every file under the bundle folder."""
    return sum(f.stat().st_size for f in out.rglob("*") if f.is_file())


def build_bundle(out: Path = DEFAULT_BUNDLE, requirements: Path = DEFAULT_REQUIREMENTS,
                 datasets: Sequence[str] = BUNDLE_DATASETS, data_root: Path | None = None,
                 download: bool = True, limit: int | None = None) -> dict:
    """Build (or bring up to date) the bundle in ``out`` (see the module docstring) and return its
    manifest. ``download=False`` checks the wheels already there instead of downloading; ``limit`` (bytes,
    None: none) fails the build when the bundle is larger (:func:`check_size`)."""
    names = [canonical_name(n) for n in datasets]
    for name in names:
        if name not in BUNDLE_DATASETS:
            raise ValueError(f"datasets: {name!r} cannot be bundled; allowed: {list(BUNDLE_DATASETS)}")
    pins = read_requirements(requirements)
    out.mkdir(parents=True, exist_ok=True)
    wheel_dir = out / "wheels"
    if download:
        download_wheels(pins, wheel_dir)
    wheels = check_wheels(wheel_dir, pins)
    previous = {}
    if (out / MANIFEST).is_file():
        previous = {row["file"]: row for row in json.loads((out / MANIFEST).read_text()).get("data", [])}
    data = bundle_data(names, out, Path(data_root) if data_root is not None else default_data_root(), previous)
    kept = {row["file"] for row in data}
    for stale in (out / "data").rglob("*") if (out / "data").is_dir() else []:
        if stale.is_file() and stale.relative_to(out).as_posix() not in kept:
            stale.unlink()
    manifest = {
        "format": FORMAT,
        "python": f"{PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}",
        "platforms": list(PLATFORMS),
        "wheels": [{"file": f"wheels/{w.name}", "bytes": w.stat().st_size, "sha256": sha256_of(w)} for w in wheels],
        "left_out": dict(LEFT_OUT),
        "data": data,
        "datasets": names,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    check_size(out, limit)
    return manifest


def check_size(out: Path, limit: int | None) -> int:
    """The bundle's size in bytes; ``BundleError`` when it is over ``limit`` bytes (None: no limit)."""
    size = bundle_size(out)
    if limit is not None and size > limit:
        raise BundleError(f"the bundle in {out} is {size / 2**20:.1f} MiB, over the limit of {limit / 2**20:g} MiB "
                          "given (--max-mib); bundle fewer data sets (--data mnist) or raise the limit")
    return size


def describe(manifest: Mapping, out: Path) -> str:
    """A few lines: the bundle's parts and sizes."""
    mib = 2**20
    wheels = sum(r["bytes"] for r in manifest["wheels"])
    lines = [f"device bundle in {out}: {bundle_size(out) / mib:.1f} MiB",
             f"  wheels/: {len(manifest['wheels'])} wheels, {wheels / mib:.1f} MiB "
             f"(left out on purpose: {', '.join(sorted(manifest['left_out']))})"]
    for name in manifest["datasets"]:
        folder = DATASETS[name].torchvision_class
        rows = [r for r in manifest["data"] if r["raw"].startswith(f"{folder}/")]
        lines.append(f"  data/{folder}/raw/: {len(rows)} files, {sum(r['bytes'] for r in rows) / mib:.1f} MiB xz "
                     f"({sum(r['raw_bytes'] for r in rows) / mib:.1f} MiB raw)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.device",
                                     description="Build and check the device bundle (see docs/gpu.md).")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="download the wheels, pack the data, check both, write the manifest")
    build.add_argument("--out", type=Path, default=DEFAULT_BUNDLE, help="bundle folder (default: %(default)s)")
    build.add_argument("--requirements", type=Path, default=DEFAULT_REQUIREMENTS, help="default: %(default)s")
    build.add_argument("--data", default=",".join(BUNDLE_DATASETS),
                       help="comma-separated data sets to bundle (default: %(default)s)")
    build.add_argument("--data-root", type=Path, default=None, help="where the kit's loader reads them "
                       "(default: $GPED_DATA_ROOT or ~/.cache/gped_kit/data)")
    build.add_argument("--offline", action="store_true",
                       help="do not download: check the wheels already in the bundle")
    build.add_argument("--max-mib", type=float, default=None,
                       help="fail when the bundle is larger than this many MiB (default: no limit)")
    standin = sub.add_parser("standin", help="wheels standing in for the GPU node's own packages, for a dry run "
                             "with Python 3.12 (not needed on the node)")
    standin.add_argument("--out", type=Path, default=DEFAULT_STANDIN, help="default: %(default)s")
    standin.add_argument("--requirements", type=Path, default=DEFAULT_REQUIREMENTS, help="default: %(default)s")
    args = parser.parse_args(argv)
    if args.command == "standin":
        try:
            kept = build_standin(args.out, args.requirements)
        except BundleError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"stand-in for the GPU node's packages in {args.out}/wheels: {len(kept)} wheels "
              f"({', '.join(canonicalize_name(parse_wheel_filename(w.name)[0]) for w in kept)})")
        return 0
    try:
        manifest = build_bundle(args.out, args.requirements, [d for d in args.data.split(",") if d],
                                args.data_root, download=not args.offline,
                                limit=None if args.max_mib is None else int(args.max_mib * 2**20))
    except (BundleError, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(describe(manifest, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
