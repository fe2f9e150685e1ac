"""device/gpu_job.sh, one GPU job's command: after the tests, the benchmarks and the speedup checks named in
JOB_CHECKS, it runs the paper's work units in one process (``units run``) with the time left, resumed from the
previous job's pack and packed into the output folder; the options given after the budget go to ``units run`` as
they are, a bare word (a notebook, as the job once took) is refused before any work, and the wall-time budget is
the user's, given, never a default.

The GPU node's programs are stood in for: ``device/install.sh`` by a script that does nothing, ``nvidia-smi``
and ``python3 -m gped_kit.cli.units`` by scripts that record their arguments (the run writes a file into its
``--pack`` folder and fails with 3 when told so), so the test runs here in a second and checks the script's
wiring, not the units (tests/test_units.py does those).
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
pack=""; fail=0
while [ $# -gt 0 ]; do [ "$1" = "--pack" ] && pack=$2; [ "$1" = "fail=1" ] && fail=3; shift; done
touch "$pack/slice-001.json"
exit $fail
"""

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def stand_ins(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """A copy of device/gpu_job.sh in ``tmp_path`` with stand-ins: the environment to run it in, its
    output folder and the folder where the units run's arguments are recorded."""
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
    for old in ("OUT", "JOB_GRAPH", "JOB_DETERMINISTIC", "JOB_RESULTS", "JOB_TESTS", "JOB_CHECKS",
                "JOB_CHECK_STEPS"):
        env.pop(old, None)
    return env, out, calls


def job(tmp_path: Path, *args: str, **env_vars: str) -> tuple[str, list[list[str]], Path]:
    """Run a copy of device/gpu_job.sh in ``tmp_path`` with stand-ins; its log, the recorded argument lists of
    the commands run through ``python3 -m`` and the output folder."""
    env, out, calls = stand_ins(tmp_path)
    subprocess.run(["bash", "device/gpu_job.sh", *args], cwd=tmp_path, env={**env, **env_vars}, check=True,
                   capture_output=True, timeout=60)
    return (out / "gpu_job.log").read_text(), [f.read_text().splitlines() for f in calls.iterdir()], out


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_one_units_run_with_the_time_left_resumed_and_packed_into_the_output_folder(tmp_path):
    log, calls, out = job(tmp_path, "600")
    (args,) = calls
    assert args[:4] == ["-m", "gped_kit.cli.units", "run", "--budget-s"]
    assert 525 <= int(option(args, "--budget-s")) <= 540  # 600 s, less a minute, less what the steps before took
    assert (option(args, "--results"), option(args, "--resume"), option(args, "--pack")) == (
        "results", ".device-slices/in", str(out))
    assert option(args, "--graph") == "auto"  # the graph tests passed (stand-in)
    assert "--deterministic" not in args and "--notebook" not in args
    assert (out / "slice-001.json").exists()
    assert "pytest stand-in" in log and "units exit 0" in log


def test_options_after_the_budget_go_to_units_run_and_its_status_is_logged(tmp_path):
    log, (args,), _ = job(tmp_path, "600", "--notebook", "01_experiment1", "--slices", "-p", "fail=1",
                          JOB_RESULTS="store", JOB_GRAPH="off")
    assert args[-5:] == ["--notebook", "01_experiment1", "--slices", "-p", "fail=1"]
    assert option(args, "--results") == "store" and option(args, "--graph") == "off"
    assert "units exit 3" in log  # a failing step is logged; the job goes on to its end
    assert "=== [" in log.splitlines()[-1] and log.rstrip().endswith("done")


def test_no_unit_when_no_time_is_left(tmp_path):
    log, calls, _ = job(tmp_path, "100")
    assert calls == [] and "no time left for a unit" in log


def test_the_budget_the_output_folder_and_the_options_are_checked_before_any_work(tmp_path):
    env, out, calls = stand_ins(tmp_path)
    cases = [((), {}, "BUDGET_S: the wall time in seconds this job may use"),
             (("9m",), {}, "a whole number; got '9m'"),
             (("600",), {"OUT_DIR": ""}, "OUT_DIR: give the folder"),
             (("600", "01_experiment1"), {}, "give a notebook as --notebook 01_experiment1")]
    for args, extra, says in cases:
        done = subprocess.run(["bash", "device/gpu_job.sh", *args], cwd=tmp_path, env={**env, **extra},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and says in done.stderr and "usage: OUT_DIR=FOLDER" in done.stderr
    assert not list(calls.iterdir()) and not list(out.iterdir())  # nothing ran


def test_out_the_older_name_of_out_dir_still_works(tmp_path):
    env, _, calls = stand_ins(tmp_path)
    env.update(OUT_DIR="", OUT=str(tmp_path / "from-out"), JOB_DETERMINISTIC="1", JOB_GRAPH="on")
    subprocess.run(["bash", "device/gpu_job.sh", "200"], cwd=tmp_path, env=env, check=True, capture_output=True,
                   timeout=60)
    (args,) = [f.read_text().splitlines() for f in calls.iterdir()]
    assert (tmp_path / "from-out" / "gpu_job.log").is_file() and "--deterministic" in args
    assert option(args, "--graph") == "on"


def test_job_tests_0_skips_the_cuda_tests_and_leaves_graph_mode_on_auto(tmp_path):
    log, (args,), _ = job(tmp_path, "600", JOB_TESTS="0")
    assert "pytest stand-in" not in log and "CUDA tests skipped (JOB_TESTS=0)" in log
    assert option(args, "--graph") == "auto"


def test_job_deterministic_passes_the_flag(tmp_path):
    _, (args,), _ = job(tmp_path, "200", JOB_DETERMINISTIC="1")
    assert "--deterministic" in args


def test_job_checks_run_the_speedup_checks_before_the_units_and_pack_beside_them(tmp_path):
    log, calls, out = job(tmp_path, "600", JOB_CHECKS="tf32 counter", JOB_CHECK_STEPS="20000", JOB_GRAPH="off")
    checks = [a for a in calls if a[1] == "gped_kit.cli.speedups"]
    assert sorted(a[2] for a in checks) == ["counter", "tf32"] and len(calls) == 3
    for args in checks:
        assert option(args, "--steps") == "20000" and option(args, "--graph") == "off"
        assert option(args, "--pack") == str(out) and option(args, "--results") == "results"
        assert 525 <= int(option(args, "--budget-s")) <= 540
    assert log.index("speedup check tf32") < log.index("speedup check counter") < log.index("work units")
    assert "speedups tf32 exit 0" in log and "units exit 0" in log


def test_job_checks_default_to_none_and_take_only_the_checks_names(tmp_path):
    _, calls, _ = job(tmp_path, "600")
    assert [a[1] for a in calls] == ["gped_kit.cli.units"]
    (tmp_path / "again").mkdir()
    env, out, calls = stand_ins(tmp_path / "again")
    done = subprocess.run(["bash", "device/gpu_job.sh", "600"], cwd=tmp_path / "again",
                          env={**env, "JOB_CHECKS": "tf32 bf16"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "JOB_CHECKS" in done.stderr and "got 'bf16'" in done.stderr
    assert not list(calls.iterdir()) and not list(out.iterdir())
