"""Install the device bundle offline (run by device/install.sh; standard library only, the kit's
``gped_kit/files.py``, loaded by its path because the kit's dependencies are not installed yet, and ``packaging``
where installed, for step 4).

On a GPU node (or on a workstation, for a dry run) this

1. installs the bundle's wheels into ``TARGET/site`` with ``pip install --no-index --no-deps
   --target`` (skipped when ``TARGET/site`` already holds this bundle's wheels: a second run on one node);
2. decompresses each data file of the bundle into ``TARGET/data/<Class>/raw/`` (torchvision's
   layout, which the kit reads with ``GPED_DATA_ROOT=TARGET/data``), checking size and SHA-256
   against the bundle's manifest; a file already there with the right checksum is kept, a data
   file the manifest lists but that was not copied to the node is reported and skipped;
3. checks that the notebook machinery imports (papermill, nbclient, nbformat, ipykernel,
   jupyter_client, zmq, ipywidgets) from the target;
4. compares the installed releases, the node's own (torch, numpy, pandas, matplotlib, ...) and the bundle's, with
   the ranges of ``pyproject.toml`` (the library's requirements and the ``notebooks`` extra's) and warns, naming
   each one outside its range: the kit is tested only within them (``make test-oldest`` tests their lower
   bounds), and a node with an older pandas or matplotlib than the kit uses fails in the middle of a job.

Exit status 0 when everything is installed, 1 otherwise (the message says what is wrong); a release outside its
range is a warning, not a failure (the job may still run what does not need it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import lzma
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

IMPORTS = ("papermill", "nbclient", "nbformat", "ipykernel", "jupyter_client", "zmq", "ipywidgets", "IPython")
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _kit_files():
    """``gped_kit/files.py`` of this checkout, loaded by its path (importing the package would need torch)."""
    spec = importlib.util.spec_from_file_location("gped_kit_files", Path(__file__).resolve().parents[1] / "gped_kit"
                                                  / "files.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FILES = _kit_files()
sha256_of = FILES.sha256_of


def install_wheels(bundle: Path, manifest: dict, site: Path) -> str:
    """The wheels into ``site`` (unless the stamp says they are there); returns what was done."""
    wheels = [bundle / row["file"] for row in manifest["wheels"]]
    missing = [w.name for w in wheels if not w.is_file()]
    if missing:
        raise SystemExit(f"install: {len(missing)} wheel(s) of the manifest are not in {bundle / 'wheels'}: "
                         f"{missing[:5]}... (copy the bundle's wheels/ folder with it)")
    for wheel, row in zip(wheels, manifest["wheels"]):
        if wheel.stat().st_size != row["bytes"] or sha256_of(wheel) != row["sha256"]:
            raise SystemExit(f"install: {wheel} does not match the manifest's checksum (rebuild the bundle)")
    stamp = site / ".gped-bundle"
    fingerprint = hashlib.sha256("".join(sorted(r["sha256"] for r in manifest["wheels"])).encode()).hexdigest()
    if stamp.is_file() and stamp.read_text() == fingerprint:
        return f"{len(wheels)} wheels already installed in {site}"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
               "--no-cache-dir", "--upgrade", "--disable-pip-version-check", "--target", str(site),
               *map(str, wheels)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("install: pip install failed:\n" + (result.stderr or result.stdout)[-3000:])
    stamp.write_text(fingerprint)
    return f"{len(wheels)} wheels installed in {site}"


def install_data(bundle: Path, manifest: dict, root: Path) -> list[str]:
    """Each data file decompressed and verified under ``root``; one line per data set file group."""
    lines = []
    for row in manifest["data"]:
        packed, raw = bundle / row["file"], root / row["raw"]
        if raw.is_file() and raw.stat().st_size == row["raw_bytes"] and sha256_of(raw) == row["raw_sha256"]:
            lines.append(f"{row['raw']}: present")
            continue
        if not packed.is_file():
            lines.append(f"{row['raw']}: not copied ({row['file']} absent), skipped")
            continue
        with FILES.atomic_path(raw) as tmp:
            with lzma.open(packed, "rb") as src, open(tmp, "wb") as dst:
                for block in iter(lambda: src.read(FILES.BLOCK), b""):
                    dst.write(block)
            if tmp.stat().st_size != row["raw_bytes"] or sha256_of(tmp) != row["raw_sha256"]:
                raise SystemExit(f"install: {packed} decompresses to a file whose checksum is not the manifest's")
        lines.append(f"{row['raw']}: written")
    return lines


def check_imports(site: Path) -> None:
    """The notebook machinery imports from ``site`` in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    code = "import " + ", ".join(IMPORTS)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"install: `{code}` fails with the bundle installed:\n{result.stderr[-3000:]}")


def kit_requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """The requirements a GPU job needs met: the library's and the ``notebooks`` extra's, as ``pyproject.toml``
    declares them."""
    project = tomllib.loads(pyproject.read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["notebooks"]]


def installed_version(name: str, path: list[str]) -> str | None:
    """The release of distribution ``name`` found on ``path`` (the bundle's site first), or None."""
    found = next(iter(metadata.distributions(name=name, path=path)), None)
    return None if found is None else found.version


def releases_out_of_range(requirements: list[str], version_of: Callable[[str], str | None]) -> list[str]:
    """One line for each requirement whose installed release (``version_of(name)``; None: not installed, which
    :func:`check_imports` and the jobs themselves report) is outside its range; a requirement whose marker does
    not hold here is skipped."""
    from packaging.requirements import Requirement  # optional: on the GPU node, not in the standard library

    lines = []
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        version = version_of(requirement.name)
        if version is not None and not requirement.specifier.contains(version, prereleases=True):
            lines.append(f"{requirement.name} {version} is outside {requirement.specifier} (pyproject.toml)")
    return lines


def check_releases(site: Path) -> None:
    """Warns, on standard error, of each installed release outside the kit's ranges (module docstring, step 4)."""
    path = [str(site), *sys.path]
    try:
        outside = releases_out_of_range(kit_requirements(), lambda name: installed_version(name, path))
    except ModuleNotFoundError as error:
        print(f"install: note: the releases were not compared with pyproject.toml's ranges ({error})",
              file=sys.stderr)
        return
    for line in outside:
        print(f"install: warning: {line}; the kit is tested within that range only", file=sys.stderr)
    if not outside:
        print("install: every installed release the kit requires is within pyproject.toml's ranges")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundle", type=Path, required=True, help="the bundle folder (with manifest.json)")
    parser.add_argument("--target", type=Path, required=True, help="where to install: TARGET/site, TARGET/data")
    parser.add_argument("--data-only", action="store_true",
                        help="only the data (e.g. a dry run with a Python other than the bundle's)")
    args = parser.parse_args()
    manifest_file = args.bundle / "manifest.json"
    if not manifest_file.is_file():
        raise SystemExit(f"install: {manifest_file} not found (build it with `make device-bundle` and copy "
                         f"{args.bundle}/manifest.json with the checkout)")
    manifest = json.loads(manifest_file.read_text())
    if manifest.get("python") != f"{sys.version_info[0]}.{sys.version_info[1]}":
        print(f"install: note: the bundle is for Python {manifest.get('python')}, this is "
              f"{sys.version_info[0]}.{sys.version_info[1]}", file=sys.stderr)
    site = args.target / "site"
    if not args.data_only:
        print("install:", install_wheels(args.bundle, manifest, site))
    for line in install_data(args.bundle, manifest, args.target / "data"):
        print("install: data", line)
    if args.data_only:
        return 0
    check_imports(site)
    print(f"install: {', '.join(IMPORTS)} import with Python {sys.version.split()[0]}")
    check_releases(site)
    return 0


if __name__ == "__main__":
    sys.exit(main())
