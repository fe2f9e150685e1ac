"""device/gpu_job.sh, one GPU job's command: its lanes (slices run side by side) get their own store,
pack folder and resume folder, each lane's exit status is the slice's own, the job without lanes is the
single slice it always was, and the wall-time budget is the user's, given, never a default.

The GPU node's programs are stood in for: ``device/install.sh`` by a script that does nothing,
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


def stand_ins(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """A copy of device/gpu_job.sh in ``tmp_path`` with stand-ins: the environment to run it in, its
    output folder and the folder where the slices' arguments are recorded."""
    (tmp_path / "device").mkdir()
    shutil.copy(ROOT / "device" / "gpu_job.sh", tmp_path / "device" / "gpu_job.sh")
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
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "OUT_DIR": str(out),
           "STUB_CALLS": str(calls), "JOB_BENCHES": ""}
    for old in ("OUT", "LEASE_BENCHES", "LEASE_GRAPH", "LEASE_DETERMINISTIC", "JOB_GRAPH", "JOB_DETERMINISTIC"):
        env.pop(old, None)
    return env, out, calls


def job(tmp_path: Path, *args: str, **env_vars: str) -> tuple[str, list[list[str]], Path]:
    """Run a copy of device/gpu_job.sh in ``tmp_path`` with stand-ins; its log, the slices' argument
    lists (in lane order) and the output folder."""
    env, out, calls = stand_ins(tmp_path)
    subprocess.run(["bash", "device/gpu_job.sh", *args], cwd=tmp_path, env={**env, **env_vars}, check=True,
                   capture_output=True, timeout=60)
    recorded = [f.read_text().splitlines() for f in calls.iterdir()]
    recorded.sort(key=lambda a: a[a.index("--results") + 1])  # lane 1's store sorts first
    return (out / "gpu_job.log").read_text(), recorded, out


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_two_lanes_run_side_by_side_each_with_its_own_store_pack_and_status(tmp_path):
    log, (one, two), out = job(tmp_path, "200", "01_experiment1", 'models=["fcnn"]',
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
    log, calls, out = job(tmp_path, "600")
    assert len(calls) == 1
    (args,) = calls
    assert args[3] == "01_experiment1" and "-p" not in args
    assert option(args, "--out") == str(out)
    assert 8.8 <= float(option(args, "--minutes")) <= 9.0  # 600 s, less a minute, less what the steps before took
    assert "pytest stand-in" in log and "lane 1: slice exit 0" in log


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_budget_and_the_output_folder_are_the_users_to_give(tmp_path):
    env, out, calls = stand_ins(tmp_path)
    cases = [((), {}, "BUDGET_S: the wall time in seconds this job may use"),
             (("9m",), {}, "a whole number; got '9m'"),
             (("600",), {"OUT_DIR": ""}, "OUT_DIR: give the folder")]
    for args, extra, says in cases:
        done = subprocess.run(["bash", "device/gpu_job.sh", *args], cwd=tmp_path, env={**env, **extra},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr and "usage: OUT_DIR=FOLDER" in done.stderr
    assert not list(calls.iterdir()) and not list(out.iterdir())  # nothing ran


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_older_variable_names_still_work(tmp_path):
    env, _, calls = stand_ins(tmp_path)
    env.update(OUT_DIR="", OUT=str(tmp_path / "from-out"), LEASE_DETERMINISTIC="1")
    subprocess.run(["bash", "device/gpu_job.sh", "200"], cwd=tmp_path, env=env, check=True, capture_output=True,
                   timeout=60)
    (args,) = [f.read_text().splitlines() for f in calls.iterdir()]
    assert (tmp_path / "from-out" / "gpu_job.log").is_file() and "--deterministic" in args


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_job_deterministic_passes_the_flag_to_every_lane(tmp_path):
    _, calls, _ = job(tmp_path, "200", "01_experiment1", "--", "01_experiment1", JOB_DETERMINISTIC="1")
    assert len(calls) == 2 and all("--deterministic" in args for args in calls)
