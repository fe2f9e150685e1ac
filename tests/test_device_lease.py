"""device/lease.sh, the one command of a GPU lease: its lanes (slices run side by side) get their own
store, pack folder and resume folder, each lane's exit status is the slice's own, and the call without
lanes is the single slice it always was.

The GPU machine's programs are stood in for: ``device/install.sh`` by a script that does nothing,
``nvidia-smi`` and ``python3 -m gped_kit.cli.slices`` by scripts that record their arguments (the
slice writes a file into its ``--out`` and fails with 3 when told so), so the test runs here in a
second and checks the script's wiring, not the slices (tests/test_slices.py does those).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

STUB_PYTHON = f"""#!/bin/bash
if [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi
if [ "$1" = "-m" ] && [ "$2" = "pytest" ]; then echo "pytest stand-in"; exit 0; fi
printf '%s\\n' "$@" > "$STUB_CALLS/$$.args"
out=""; fail=0
while [ $# -gt 0 ]; do [ "$1" = "--out" ] && out=$2; [ "$1" = "fail=1" ] && fail=3; shift; done
touch "$out/slice-001.json"
exit $fail
"""


def lease(tmp_path: Path, *args: str, **env_vars: str) -> tuple[str, list[list[str]], Path]:
    """Run a copy of device/lease.sh in ``tmp_path`` with stand-ins; its log, the slices' argument
    lists (in lane order) and the $OUT folder."""
    (tmp_path / "device").mkdir()
    shutil.copy(ROOT / "device" / "lease.sh", tmp_path / "device" / "lease.sh")
    (tmp_path / "device" / "install.sh").write_text("echo install stand-in\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text(STUB_PYTHON)
    (bin_ / "nvidia-smi").write_text("#!/bin/bash\necho nvidia-smi stand-in\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    out, calls = tmp_path / "out", tmp_path / "calls"
    out.mkdir()
    calls.mkdir()
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "OUT": str(out),
           "STUB_CALLS": str(calls), "LEASE_BENCHES": "", **env_vars}
    subprocess.run(["bash", "device/lease.sh", *args], cwd=tmp_path, env=env, check=True,
                   capture_output=True, timeout=60)
    recorded = [f.read_text().splitlines() for f in calls.iterdir()]
    recorded.sort(key=lambda a: a[a.index("--results") + 1])  # lane 1's store sorts first
    return (out / "lease.log").read_text(), recorded, out


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_two_lanes_run_side_by_side_each_with_its_own_store_pack_and_status(tmp_path):
    log, (one, two), out = lease(tmp_path, "200", "01_experiment1", 'models=["fcnn"]',
                                 "--", "01_experiment1", 'models=["cnn_mnist"]', "fail=1")
    assert one[:4] == ["-m", "gped_kit.cli.slices", "run", "01_experiment1"]
    assert [a for a in one if a.startswith("models")] == ['models=["fcnn"]']
    assert [a for a in two if a.startswith("models") or a == "fail=1"] == ['models=["cnn_mnist"]', "fail=1"]
    assert (option(one, "--results"), option(one, "--resume"), option(one, "--out")) == (
        ".device-slices/store", ".device-slices/in", str(out))
    assert (option(two, "--results"), option(two, "--resume"), option(two, "--out")) == (
        ".device-slices/store-2", ".device-slices/in-2", str(out / "lane-2"))
    assert option(one, "--minutes") == option(two, "--minutes")  # the same share of the budget
    assert (out / "slice-001.json").exists() and (out / "lane-2" / "slice-001.json").exists()
    assert "lane 1: slice exit 0" in log
    assert "lane 2: slice exit 3" in log  # the slice's status, not the line-marking sed's
    assert "--deterministic" not in one + two


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_without_lanes_one_slice_of_notebook_01_as_before(tmp_path):
    log, calls, out = lease(tmp_path)
    assert len(calls) == 1
    (args,) = calls
    assert args[3] == "01_experiment1" and "-p" not in args
    assert option(args, "--out") == str(out)
    assert 7.8 <= float(option(args, "--minutes")) <= 8.0  # 540 s, less a minute, less what the steps before took
    assert "pytest stand-in" in log and "lane 1: slice exit 0" in log


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_lease_deterministic_passes_the_flag_to_every_lane(tmp_path):
    _, calls, _ = lease(tmp_path, "200", "01_experiment1", "--", "01_experiment1", LEASE_DETERMINISTIC="1")
    assert len(calls) == 2 and all("--deterministic" in args for args in calls)
