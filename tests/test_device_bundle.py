"""The offline bundle (gped_kit.cli.device, device/install.sh): pinned, complete, within a size limit when
one is given, installable offline with Python 3.12, and its data read by the kit without zarr.

The tests of the built bundle use ``.device-bundle/`` (and ``.device-standin/``, wheels standing
in for the GPU node's own packages) as ``make device-bundle`` leaves them; they skip when the
bundle is not built (building it needs PyPI) or this machine has no Python 3.12.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from gped_kit.cli import device as D
from gped_kit.data.sources import MNIST_CLASS_COUNTS

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / ".device-bundle"
STANDIN = ROOT / ".device-standin"
TINY_NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "execution_count": None, "id": "p", "metadata": {"tags": ["parameters"]},
         "outputs": [], "source": ["x = 1"]},
        {"cell_type": "code", "execution_count": None, "id": "c", "metadata": {}, "outputs": [],
         "source": ["import sys, ipywidgets\n", "print('kernel', sys.version_info[:2], x + 1)"]},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def python312() -> str | None:
    """A CPython 3.12 on this machine (PATH or pyenv), or None."""
    candidates = [shutil.which("python3.12"), *sorted(Path("/root/.pyenv/versions").glob("3.12*/bin/python"))]
    for c in candidates:
        if c and subprocess.run([str(c), "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                                capture_output=True).returncode == 0:
            return str(c)
    return None


def load_installer():
    """device/install.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("device_install", ROOT / "device" / "install.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_wheel(folder: Path, name: str, version: str, requires: list[str],
               tag: str = "py3-none-any") -> Path:
    """A wheel file holding only its METADATA (enough for the checks)."""
    path = folder / f"{name}-{version}-{tag}.whl"
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(lines) + "\n")
    return path


# ----------------------------------------------------------------------------- the checks, on known answers
def test_the_installer_names_each_installed_release_outside_the_kits_ranges(tmp_path, capsys):
    """device/install.py's step 4 on known answers: a release below a range's lower bound, one above its upper bound
    and one within; a requirement not installed and one whose marker does not hold are not reported. On this
    machine's .venv (made from pyproject.toml) every release is within its range."""
    installer = load_installer()
    requirements = ["pandas>=2.2.2", "torch>=2.8,<2.15", "numpy>=2.0", "zarr>=3.1", "tomli>=2; python_version < '3'"]
    versions = {"pandas": "2.1.4", "torch": "2.15.0", "numpy": "2.3.1", "tomli": "1.0"}
    assert installer.releases_out_of_range(requirements, versions.get) == [
        "pandas 2.1.4 is outside >=2.2.2 (pyproject.toml)", "torch 2.15.0 is outside <2.15,>=2.8 (pyproject.toml)"]
    kit = installer.kit_requirements()
    assert any(r.startswith("torch>=") for r in kit) and any(r.startswith("matplotlib>=") for r in kit)
    installer.check_releases(tmp_path)
    out = capsys.readouterr()
    assert "every installed release the kit requires is within pyproject.toml's ranges" in out.out, out.err
    assert installer.installed_version("torch", sys.path) == metadata.version("torch")


def test_requirements_are_plain_pins_of_what_the_gpu_machine_lacks(tmp_path):
    pins = D.read_requirements(ROOT / "device" / "requirements.txt")
    names = {p.name for p in pins}
    assert {"papermill", "nbclient", "nbformat", "ipykernel", "jupyter-client", "pyzmq", "tornado",
            "ipywidgets"} <= names
    assert not names & {"torch", "numpy", "pandas", "matplotlib", "seaborn", "scikit-learn", "zarr", "debugpy"}
    bad = tmp_path / "req.txt"
    for text, message in [("torch==2.11.0", "on the GPU node already"), ("papermill>=2.5", "plain pin"),
                          ("debugpy==1.8.22", "left out on purpose"), ("tornado==6.6.1\ntornado==6.5", "twice"),
                          ("# nothing", "no requirements")]:
        bad.write_text(text + "\n")
        with pytest.raises(D.BundleError, match=message):
            D.read_requirements(bad)


def test_unmet_requirements_name_what_is_missing_or_too_old(tmp_path):
    fake_wheel(tmp_path, "alpha", "1.0", ["beta>=2", "numpy>=1.25", "debugpy>=1.6", "gamma",
                                          "old; python_version < '3.12'", "docs; extra == 'docs'",
                                          "winonly; sys_platform == 'win32'"])
    fake_wheel(tmp_path, "beta", "1.5", [])
    problems = D.unmet_requirements(sorted(tmp_path.glob("*.whl")))
    assert problems == ["alpha-1.0-py3-none-any.whl needs beta>=2, the bundle has beta 1.5",
                        "alpha-1.0-py3-none-any.whl needs gamma: neither bundled nor on the GPU node"]
    fake_wheel(tmp_path, "gamma", "0.1", [])
    (tmp_path / "beta-1.5-py3-none-any.whl").unlink()
    fake_wheel(tmp_path, "beta", "2.0", [])
    assert D.unmet_requirements(sorted(tmp_path.glob("*.whl"))) == []


def test_check_wheels_rejects_foreign_tags_strays_and_missing_pins(tmp_path):
    pins = [D.Pin("alpha", D.Version("1.0"))]
    fake_wheel(tmp_path, "alpha", "1.0", [], tag="cp311-cp311-manylinux_2_17_x86_64")
    with pytest.raises(D.BundleError, match="no tag that CPython 3.12"):
        D.check_wheels(tmp_path, pins)
    for w in tmp_path.glob("*.whl"):
        w.unlink()
    fake_wheel(tmp_path, "alpha", "1.0", [], tag="cp312-abi3-manylinux_2_28_x86_64")
    fake_wheel(tmp_path, "stray", "1.0", [])
    with pytest.raises(D.BundleError, match=r"not in the requirements: \['stray'\]"):
        D.check_wheels(tmp_path, pins)
    (tmp_path / "stray-1.0-py3-none-any.whl").unlink()
    assert [w.name for w in D.check_wheels(tmp_path, pins)] == ["alpha-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"]
    with pytest.raises(D.BundleError, match=r"expected one wheel of beta==2.0, found \[\]"):
        D.check_wheels(tmp_path, [*pins, D.Pin("beta", D.Version("2.0"))])


# ----------------------------------------------------------------------------- the built bundle
needs_bundle = pytest.mark.skipif(not (BUNDLE / D.MANIFEST).is_file(),
                                  reason="the device bundle is not built (make device-bundle; needs PyPI)")


def test_a_size_limit_is_checked_only_when_given(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "a.whl").write_bytes(b"x" * 3 * 2**20)
    (tmp_path / "manifest.json").write_text("{}")
    assert D.check_size(tmp_path, None) == 3 * 2**20 + 2  # no limit unless one is given
    assert D.check_size(tmp_path, 4 * 2**20) == 3 * 2**20 + 2
    with pytest.raises(D.BundleError, match=r"3\.0 MiB, over the limit of 2 MiB given \(--max-mib\)"):
        D.check_size(tmp_path, 2 * 2**20)


@needs_bundle
def test_built_bundle_is_complete_and_verified():
    manifest = json.loads((BUNDLE / D.MANIFEST).read_text())
    print(D.describe(manifest, BUNDLE))
    wheels = D.check_wheels(BUNDLE / "wheels", D.read_requirements(ROOT / "device" / "requirements.txt"))
    assert [f"wheels/{w.name}" for w in wheels] == [r["file"] for r in manifest["wheels"]]
    for row in manifest["wheels"] + manifest["data"]:
        assert D.sha256_of(BUNDLE / row["file"]) == row["sha256"], row["file"]
    raw = {row["raw"] for row in manifest["data"]}
    for split_files in (("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                        ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")):
        assert {f"MNIST/raw/{f}" for f in split_files} <= raw


@needs_bundle
def test_kit_reads_the_bundled_mnist_without_zarr(tmp_path):
    installer = load_installer()
    manifest = json.loads((BUNDLE / D.MANIFEST).read_text())
    lines = installer.install_data(BUNDLE, manifest, tmp_path / "data")
    assert all(line.endswith("written") for line in lines) and len(lines) == len(manifest["data"])
    assert all(line.endswith("present") for line in installer.install_data(BUNDLE, manifest, tmp_path / "data"))
    code = ("import sys; sys.modules['zarr'] = None; sys.modules['pureml'] = None\n"  # both unimportable
            "import torch\n"
            "from gped_kit.data.sources import load_split\n"
            "for split in ('train', 'test'):\n"
            "    s = load_split('mnist', split)\n"
            "    print(split, tuple(torch.bincount(s.labels).tolist()))\n")
    env = dict(os.environ, GPED_DATA_ROOT=str(tmp_path / "data"), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"train {MNIST_CLASS_COUNTS['train']}" in out.stdout and f"test {MNIST_CLASS_COUNTS['test']}" in out.stdout


@needs_bundle
@pytest.mark.skipif(python312() is None, reason="no CPython 3.12 on this machine")
@pytest.mark.skipif(not (STANDIN / "wheels").is_dir(), reason="no .device-standin (make device-bundle)")
def test_install_script_with_python312_no_index_then_papermill_runs_a_notebook(tmp_path):
    py = python312()
    gpu_site = tmp_path / "gpu-site"  # the GPU node's own packages, stood in for
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--disable-pip-version-check",
                    "--target", str(gpu_site), *map(str, sorted((STANDIN / "wheels").glob("*.whl")))],
                   check=True, capture_output=True)
    (tmp_path / "tiny.ipynb").write_text(json.dumps(TINY_NOTEBOOK))
    script = (f"source {ROOT / 'device' / 'install.sh'} {BUNDLE} {tmp_path / 'target'} || exit 1\n"
              "$GPED_PYTHON -c 'import papermill, nbclient, ipykernel; print(\"imports ok\")' || exit 1\n"
              "$GPED_PYTHON -m papermill tiny.ipynb out.ipynb -p x 41 -k python3 || exit 1\n"
              f"source {ROOT / 'device' / 'install.sh'} {BUNDLE} {tmp_path / 'target'} || exit 1\n"
              "echo \"data root $GPED_DATA_ROOT\"\n")
    env = dict(os.environ, GPED_PYTHON=py, PYTHONPATH=str(gpu_site), PIP_NO_INDEX="1")
    for key in ("JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "GPED_DATA_ROOT"):
        env.pop(key, None)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{len(json.loads((BUNDLE / D.MANIFEST).read_text())['wheels'])} wheels installed in" in out.stdout
    assert "imports ok" in out.stdout
    assert "wheels already installed" in out.stdout  # the second source: nothing redone
    assert f"data root {tmp_path / 'target' / 'data'}" in out.stdout
    executed = json.loads((tmp_path / "out.ipynb").read_text())
    text = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert "kernel (3, 12) 42" in text


@needs_bundle
@pytest.mark.slow
@pytest.mark.skipif(python312() is None, reason="no CPython 3.12 on this machine")
def test_dry_run_of_the_gpu_procedure(tmp_path):
    """device/dry_run.sh (docs/gpu.md): bundle installed on two fresh "machines", notebook 01's scaled
    paper profile in two slices carried between them, then papermill from the last pack."""
    env = dict(os.environ, KIT_PYTHON=sys.executable, PY312=python312(), PYTHONPATH=str(ROOT))
    out = subprocess.run([str(ROOT / "device" / "dry_run.sh"), str(tmp_path / "dry")], capture_output=True,
                         text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-3000:]
    assert "notebook 01 from the unpacked store: results 2 reused;" in out.stdout  # nothing ran or resumed
    assert "dry run passed" in out.stdout
