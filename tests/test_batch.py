"""Tests for gped_kit.cli.batch: tiny notebooks run by the real papermill executor,
plus fast checks of planning and bookkeeping with a fake executor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from gped_kit.cli import batch, parameters, plan
from gped_kit.cli.batch import main, move_aside, run_batch
from gped_kit.cli.executors import Executor, LocalPapermillExecutor, NotebookRun
from gped_kit.cli.parameters import ParameterOverride, check_overrides, parse_override, parse_value
from gped_kit.cli.plan import plan_runs, select_notebooks
from gped_kit.core.status import Status

KERNEL = "python3"  # ipykernel's native kernel: always present where ipykernel is installed

PARAMS_SOURCE = ('from gped_kit.experiments.settings import Overrides\n'
                 'profile = "default"\nsteps = 10\nlr = 0.1\nadam = Overrides()')
DUMP_SOURCE = (
    "import json, os\n"
    "with open('00_params.out.json', 'w') as fh:\n"
    "    json.dump({'profile': profile, 'steps': steps, 'lr': lr, 'cwd': os.getcwd(),\n"
    "               'progress': os.environ.get('GPED_PROGRESS'), 'adam': vars(adam)}, fh)"
)


def _write_notebook(path: Path, cells: list[nbformat.NotebookNode]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = cells
    nbformat.write(nb, str(path))
    return path


def _parameters_cell(source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["parameters"]
    return cell


@pytest.fixture
def notebook_dir(tmp_path: Path) -> Path:
    """notebooks/ with 00_params (declares profile, steps, lr), 01_fails, 02_plain."""
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    _write_notebook(
        nb_dir / "00_params.ipynb",
        [_parameters_cell(PARAMS_SOURCE), nbformat.v4.new_code_cell(DUMP_SOURCE)],
    )
    _write_notebook(
        nb_dir / "01_fails.ipynb",
        [_parameters_cell('profile = "default"'), nbformat.v4.new_code_cell('raise RuntimeError("boom")')],
    )
    _write_notebook(
        nb_dir / "02_plain.ipynb",
        [nbformat.v4.new_code_cell("open('02_plain.ran', 'w').write('yes')")],
    )
    return nb_dir


def _dumped(nb_dir: Path) -> dict:
    return json.loads((nb_dir / "00_params.out.json").read_text())


class FakeExecutor(Executor):
    """Writes a stub output (fails for notebooks whose name contains 'fail')."""

    def __init__(self) -> None:
        self.calls: list[NotebookRun] = []

    def execute(self, run: NotebookRun) -> None:
        self.calls.append(run)
        Path(run.output_path).write_text(json.dumps({"executed": run.path.name}))
        if "fail" in run.path.name:
            raise ValueError("fake failure\nwith a second line")


class ExplodingExecutor(Executor):
    def execute(self, run: NotebookRun) -> None:  # pragma: no cover - must not be called
        raise AssertionError("dry run executed a notebook")


# ------------------------------------------------------------- real papermill runs


@pytest.mark.slow  # a real papermill kernel: in make test-slow
def test_run_batch_real_papermill(notebook_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    progress_before = os.environ.get("GPED_PROGRESS")
    runs = plan_runs(
        select_notebooks([], notebook_dir),
        output_dir=out,
        profile="ci",
        overrides=[
            ParameterOverride("steps", 5),
            ParameterOverride("lr", 0.001, notebook="00_params"),
            ParameterOverride("adam.beta1", 0.8),  # a field of the composed setting `adam`
            ParameterOverride("undeclared", 1),
            ParameterOverride("undeclared.field", 1),
        ],
    )
    assert [r.path.name for r in runs] == ["00_params.ipynb", "01_fails.ipynb", "02_plain.ipynb"]
    summary = run_batch(runs, LocalPapermillExecutor(kernel_name=KERNEL), summary_path=out / "summary.csv")

    assert list(summary["status"]) == [Status.RAN, Status.FAILED, Status.RAN]
    assert summary.loc[1, "error"] == "RuntimeError: boom"
    assert (summary.loc[[0, 2], "error"] == "").all()
    # profile, global override and per-notebook override reached the notebook; cwd is its folder
    # and the kernel was told to show no progress (no frozen bars or progress lines in saved notebooks)
    assert _dumped(notebook_dir) == {"profile": "ci", "steps": 5, "lr": 0.001, "cwd": str(notebook_dir),
                                     "progress": "off", "adam": {"beta1": 0.8}}
    assert os.environ.get("GPED_PROGRESS") == progress_before  # restored in this process
    assert runs[1].parameters == {"profile": "ci"}  # declares profile only
    assert runs[2].parameters == {}  # no parameters cell: nothing injected
    assert (notebook_dir / "02_plain.ran").exists()  # ran after the failure
    for run in runs:  # executed copies, including the failed one
        assert run.output_path.exists()
    executed = nbformat.read(str(out / "00_params.ipynb"), as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "steps = 5" in injected[0].source and "adam.beta1 = 0.8" in injected[0].source
    assert runs[0].parameters == {"profile": "ci", "steps": 5, "lr": 0.001, "adam.beta1": 0.8}
    on_disk = pd.read_csv(out / "summary.csv", keep_default_na=False)
    assert list(on_disk["status"]) == [Status.RAN, Status.FAILED, Status.RAN]
    assert list(on_disk.columns) == list(batch.SUMMARY_COLUMNS)


@pytest.mark.slow  # a real papermill kernel: in make test-slow
def test_main_exit_status_outputs_kept(notebook_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    common = ["--notebook-dir", str(notebook_dir), "--output-dir", str(out), "--kernel", KERNEL]

    assert main(common + ["--only", "00_params", "-p", "00_params:steps=7", "--profile", "p1"]) == 0
    assert _dumped(notebook_dir)["steps"] == 7 and _dumped(notebook_dir)["profile"] == "p1"
    assert (out / batch.SUMMARY_FILENAME).exists()
    first = (out / "00_params.ipynb").read_text()

    assert main(common + ["00_params", "-p", "steps=8"]) == 0
    assert _dumped(notebook_dir)["steps"] == 8
    kept = sorted(p for p in out.glob("00_params.*.ipynb"))
    assert len(kept) == 1 and kept[0].read_text() == first  # previous output moved aside, intact
    assert len(list(out.glob("batch_summary.*.csv"))) == 1  # and the previous summary too

    assert main(common + ["--only", "00_params,01_fails"]) == 1
    summary = pd.read_csv(out / batch.SUMMARY_FILENAME, keep_default_na=False)
    assert list(summary["status"]) == [Status.RAN, Status.FAILED]


@pytest.mark.slow  # a real papermill kernel: in make test-slow
def test_module_entry_point_uses_the_default_folders(notebook_dir: Path) -> None:
    """``python -m gped_kit.cli.batch`` runs as a script: notebooks from ./notebooks, outputs planned
    in ./outputs/notebooks/<profile>, the parameters each notebook declares."""
    cmd = [sys.executable, "-m", "gped_kit.cli.batch", "--dry-run", "--profile", "ci", "-p", "lr=0.5"]
    done = subprocess.run(cmd, cwd=notebook_dir.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("dry run: 3 notebook(s)")
    for name in ("00_params", "01_fails", "02_plain"):
        assert f"notebooks/{name}.ipynb -> outputs/notebooks/ci/{name}.ipynb" in done.stdout
    assert '"lr": 0.5' in done.stdout and '"profile": "ci"' in done.stdout
    assert not (notebook_dir.parent / "outputs").exists()  # a dry run writes nothing
    usage = subprocess.run([sys.executable, "-m", "gped_kit.cli.batch", "--no-such-option"], cwd=notebook_dir.parent,
                           capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "python -m gped_kit.cli.batch" in usage.stderr


# ------------------------------------------------------------------- fast checks


def test_dry_run_executes_nothing(notebook_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    argv = ["--notebook-dir", str(notebook_dir), "--output-dir", str(out), "--dry-run", "-p", "00_params:lr=0.5"]
    assert main(argv, executor=ExplodingExecutor()) == 0
    assert main(argv) == 0  # default (papermill) executor is not called either
    printed = capsys.readouterr().out
    assert '"lr": 0.5' in printed and '"profile": "default"' in printed
    assert not out.exists()
    assert not (notebook_dir / "00_params.out.json").exists()


@pytest.mark.parametrize("output", [".", "../notebooks"])
def test_output_dir_of_the_notebooks_is_refused_before_any_work(
    output: str, notebook_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--output-dir`` equal to the notebooks' folder would rename every source aside and then fail every run:
    a usage error (exit status 2) naming the option and the folder and pointing to ``--inplace``; nothing moved."""
    before = {p.name: p.read_text() for p in notebook_dir.iterdir()}
    executor = FakeExecutor()
    folder = notebook_dir / output
    with pytest.raises(SystemExit) as exited:
        main(["--notebook-dir", str(notebook_dir), "--output-dir", str(folder)], executor=executor)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and executor.calls == []
    assert f"--output-dir {str(folder)!r} is the folder of {notebook_dir / '00_params.ipynb'}" in err
    assert "--inplace" in err
    assert {p.name: p.read_text() for p in notebook_dir.iterdir()} == before
    with pytest.raises(ValueError, match="is the folder of"):
        plan_runs([notebook_dir / "02_plain.ipynb"], output_dir=folder, inspect=lambda p: {})


@pytest.mark.parametrize("extra, message", [
    (["--timeout", "-1"], "--timeout=-1.0: must be a finite number of seconds > 0 (leave it out for no timeout)"),
    (["--timeout", "0"], "--timeout=0.0: must be a finite number of seconds > 0"),
    (["--timeout", "nan"], "--timeout=nan: must be a finite number of seconds > 0"),
    (["--timeout", "inf"], "--timeout=inf: must be a finite number of seconds > 0"),
    (["--cwd", "/nonexistent"], "--cwd='/nonexistent': not a directory"),
    (["--ray-address", "10.0.0.1:6379"], "--ray-address='10.0.0.1:6379': only --executor ray joins a cluster; "
                                          "got --executor local"),
    (["--ray-address", "X", "--executor", "stored"], "got --executor stored"),
])
def test_bad_run_options_are_refused_before_any_work(
    extra: list[str], message: str, notebook_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["--notebook-dir", str(notebook_dir), "--output-dir", str(tmp_path / "out"), *extra]
    for dry in ([], ["--dry-run"]):
        with pytest.raises(SystemExit) as exited:
            main(argv + dry, executor=ExplodingExecutor())
        assert exited.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    # the values that are fine: a timeout in seconds, an existing folder, a Ray address with --executor ray
    fine = ["--timeout", "0.5", "--cwd", str(tmp_path), "--ray-address", "X", "--executor", "ray", "--dry-run"]
    assert main(["--notebook-dir", str(notebook_dir), "--output-dir", str(tmp_path / "out"), *fine],
                executor=ExplodingExecutor()) == 0


def test_undeclared_override_is_an_error_before_anything_runs(
    notebook_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``-p KEY=VALUE`` whose KEY none of the selected notebooks declares (a typo would otherwise run everything
    with the default): exit status 2 before any notebook runs, naming the override as given, the selected
    notebooks and the closest declared names; one line per such override."""
    out = tmp_path / "out"
    argv = ["--notebook-dir", str(notebook_dir), "--output-dir", str(out)]
    executor = FakeExecutor()

    def error(*args: str) -> str:
        with pytest.raises(SystemExit) as stop:
            main([*argv, *args], executor=executor)
        assert stop.value.code == 2
        return capsys.readouterr().err

    assert ("error: -p step=5: no selected notebook declares 'step' (selected: 00_params, 01_fails, 02_plain); "
            "did you mean steps?") in error("-p", "step=5")
    printed = error("--only", "01_fails,02_plain", "-p", "lr=0.5", "-p", "adm.beta1=0.8", "-p", "steps=1")
    assert "-p lr=0.5: no selected notebook declares 'lr' (selected: 01_fails, 02_plain)\n" in printed
    assert "-p steps=1: no selected notebook declares 'steps'" in printed  # every bad override, one line each
    # a NOTEBOOK: override must name a parameter of that notebook (of one of the notebooks a glob matches)
    assert ("-p 01_fails:lr=1: 01_fails does not declare 'lr' (declared by 00_params)"
            in error("-p", "01_fails:lr=1"))
    assert ("-p 0[01]_*:stepz=2: no selected notebook matching '0[01]_*' declares 'stepz' (matching: 00_params, "
            "01_fails); did you mean steps?") in error("-p", "0[01]_*:stepz=2")
    # a dotted KEY needs its composed setting declared; the suggestion keeps the field
    assert "-p adm.beta1=0.8: no selected notebook declares 'adm.beta1'" in error("-p", "adm.beta1=0.8")
    assert "did you mean adam.beta1?" in error("--only", "00_params", "-p", "adm.beta1=0.8")
    assert "did you mean steps?" in error("--profile", "all", "--dry-run", "-p", "step=5")
    assert executor.calls == [] and not out.exists()  # nothing ran, nothing was written
    assert not (notebook_dir / "00_params.out.json").exists()

    with pytest.raises(parameters.UnknownParameterError, match=r"02_plain does not declare 'lr'"):
        check_overrides(select_notebooks([], notebook_dir), [ParameterOverride("lr", 1, "02_plain")])

    def unreadable(path: Path) -> dict[str, str] | None:
        raise OSError(f"cannot read {path}")

    with pytest.raises(parameters.UnknownParameterError, match=r"could not read the parameters of 00_params"):
        check_overrides([notebook_dir / "00_params.ipynb"], [ParameterOverride("steps", 1)], inspect=unreadable)


def test_override_declared_by_one_selected_notebook_is_accepted(
    notebook_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A KEY that one of the selected notebooks declares is passed to it and left out, with a warning, for the
    others; a NOTEBOOK: override matching none of the selected notebooks is only a warning."""
    out = tmp_path / "out"
    executor = FakeExecutor()
    argv = ["--notebook-dir", str(notebook_dir), "--output-dir", str(out), "--only", "00_params,01_fails"]
    assert main([*argv, "-p", "lr=0.5", "-p", "adam.beta1=0.8", "-p", "02_plain:steps=1"], executor=executor) == 1
    assert [(run.name, dict(run.parameters)) for run in executor.calls] == [
        ("00_params", {"profile": "default", "lr": 0.5, "adam.beta1": 0.8}),
        ("01_fails", {"profile": "default"}),
    ]
    assert "01_fails.ipynb does not declare 'lr', 'adam.beta1'; not passed" in caplog.text
    assert "override 02_plain:steps matches none of the selected notebooks" in caplog.text
    check_overrides(select_notebooks([], notebook_dir), [parse_override("0*:lr=1"), parse_override("steps=2")])


REPO_NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_settings_are_checked_before_any_notebook_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The project's notebooks: a bad override (an unknown field of a composed setting, a bad value, an
    unknown profile or chain parameter) is a usage error naming the notebook, before anything runs."""
    argv = ["--notebook-dir", str(REPO_NOTEBOOKS), "--output-dir", str(tmp_path / "out"), "--only", "07_*"]
    with pytest.raises(SystemExit) as stop:
        main([*argv, "-p", "hydra.phase3_steps=1"], executor=ExplodingExecutor())
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "07_hydra_comparison: ValueError: hydra.phase3_steps is not a setting of HydraConfig" in error
    with pytest.raises(SystemExit):
        main([*argv, "-p", "spiral.hydra.phase1_steps=true"], executor=ExplodingExecutor())
    assert "HydraConfig.phase1_steps=True" in capsys.readouterr().err
    assert main([*argv, "--dry-run", "-p", "spiral.hydra.phase1_steps=50"], executor=ExplodingExecutor()) == 0
    assert '"spiral.hydra.phase1_steps": 50' in capsys.readouterr().out
    runs = plan_runs(select_notebooks(["00_quickstart", "01_experiment1", "04_figure3_masking"], REPO_NOTEBOOKS),
                     output_dir=tmp_path, profile="cpu30", overrides=[parse_override("01_*:models=['resnet']")])
    problems = plan.check_runs(runs)  # cpu30 is Experiment 1's profile only; 04 has no profiles
    assert set(problems) == {"00_quickstart (profile cpu30)", "01_experiment1 (profile cpu30)"}
    assert "profile='cpu30' is not known" in problems["00_quickstart (profile cpu30)"]
    assert "resnet" in problems["01_experiment1 (profile cpu30)"]
    assert not (tmp_path / "out").exists()


def test_a_labelled_size_beyond_the_training_set_is_refused_before_any_notebook_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The data set's published split sizes are known without its files: a labelled size MNIST does not hold is a
    usage error before anything runs, not a failure after the data are loaded."""
    argv = ["--notebook-dir", str(REPO_NOTEBOOKS), "--output-dir", str(tmp_path / "out"), "02_experiment2_mnist"]
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--dry-run", "-p", "labelled_sizes=[70000]"], executor=ExplodingExecutor())
    assert stop.value.code == 2
    assert ("02_experiment2_mnist: ValueError: labelled_size=70000 exceeds the 60000 training images of mnist"
            in capsys.readouterr().err)


def test_profile_all_runs_every_shown_profile_before_default(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--profile all``: each notebook once per profile it shows, the other profiles first and every notebook's
    ``default`` run last (it reads the others back from the store), each profile into its own folder; with
    ``--inplace`` only the default runs are copied back over the notebooks."""
    notebooks = select_notebooks([], REPO_NOTEBOOKS)
    runs = plan.plan_all_profiles(notebooks, output_dir=tmp_path, inplace=True)
    planned = [(run.name, run.parameters.get("profile")) for run in runs]
    declares = {nb.stem: "profile" in (parameters.inspect_parameters(nb) or {}) for nb in notebooks}
    assert planned[-len(notebooks):] == [(nb.stem, "default" if declares[nb.stem] else None) for nb in notebooks]
    others = planned[:len(planned) - len(notebooks)]
    assert ("01_experiment1", "cpu30") in others and ("05_experiment3_search", "long") in others
    assert ("06_experiment4_uncertainty", "seeds") in others and ("10_samplers", "pooling") in others
    assert all(profile != "default" for _, profile in others)
    assert len(others) == sum(len(plan.notebook_profiles(nb)) - 1 for nb in notebooks)
    for run in runs:
        profile = run.parameters.get("profile", "default")
        assert run.output_path == tmp_path / profile / f"{run.name}.ipynb"
        assert (run.publish_path is not None) == (profile == "default")
    assert plan.check_runs(runs) == {}  # every shown profile resolves and builds its chains
    assert main(["--notebook-dir", str(REPO_NOTEBOOKS), "--output-dir", str(tmp_path / "dry"), "--profile", "all",
                 "--dry-run", "--only", "06_*"], executor=ExplodingExecutor()) == 0
    printed = capsys.readouterr().out
    where = [printed.index(f'"profile": "{profile}"') for profile in ("long", "seeds", "default")]
    assert where == sorted(where)
    assert not (tmp_path / "dry").exists()


def test_failures_do_not_stop_batch_and_fail_fast_skips(notebook_dir: Path, tmp_path: Path) -> None:
    notebooks = select_notebooks([], notebook_dir)
    runs = plan_runs(notebooks, output_dir=tmp_path / "a", inspect=lambda p: {})
    summary = run_batch(runs, FakeExecutor())
    assert list(summary["status"]) == [Status.RAN, Status.FAILED, Status.RAN]
    assert summary.loc[1, "error"] == "ValueError: fake failure"

    runs = plan_runs(notebooks, output_dir=tmp_path / "b", inspect=lambda p: {})
    executor = FakeExecutor()
    summary = run_batch(runs, executor, fail_fast=True)
    assert list(summary["status"]) == [Status.RAN, Status.FAILED, Status.SKIPPED]
    assert len(executor.calls) == 2


def test_existing_outputs_are_moved_aside(notebook_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "00_params.ipynb").write_text("old")
    (out / "00_params.20000101-000000.ipynb").write_text("older")  # unrelated name is left alone
    runs = plan_runs([notebook_dir / "00_params.ipynb"], output_dir=out, inspect=lambda p: {})
    run_batch(runs, FakeExecutor())
    run_batch(runs, FakeExecutor())
    texts = sorted(p.read_text() for p in out.glob("00_params*.ipynb"))
    assert len(texts) == 4 and "old" in texts and "older" in texts
    assert json.loads((out / "00_params.ipynb").read_text()) == {"executed": "00_params.ipynb"}


def test_moving_aside_never_replaces_a_name_taken_meanwhile(notebook_dir: Path, tmp_path: Path) -> None:
    """The stamped name an old output would move to is taken by another run (here: before): it stays, and the
    old output takes the next free name."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "00_params.ipynb").write_text("old")
    os.utime(out / "00_params.ipynb", (1_700_000_000, 1_700_000_000))
    stamp = datetime.fromtimestamp(1_700_000_000).strftime("%Y%m%d-%H%M%S")
    (out / f"00_params.{stamp}.ipynb").write_text("another run's")
    moved = move_aside(out / "00_params.ipynb")
    assert moved == out / f"00_params.{stamp}-2.ipynb" and moved.read_text() == "old"
    assert (out / f"00_params.{stamp}.ipynb").read_text() == "another run's" and not (out / "00_params.ipynb").exists()
    assert move_aside(out / "00_params.ipynb") is None


HOLDER = """import pathlib, sys
from filelock import FileLock
with FileLock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_notebook_another_run_is_writing_is_refused_and_its_output_left_alone(notebook_dir: Path,
                                                                                 tmp_path: Path) -> None:
    """Two batch runs writing one output notebook would interleave their writes: the second is refused for that
    notebook at once (its lock, ``<output>.lock``, is held) and moves nothing aside; the others run."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "00_params.ipynb").write_text("being written")
    runs = plan_runs(select_notebooks([], notebook_dir), output_dir=out, inspect=lambda p: {})
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out / "00_params.ipynb.lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        summary = run_batch(runs, FakeExecutor())
    finally:
        holder.communicate("", timeout=30)
    assert list(summary["status"]) == [Status.FAILED, Status.FAILED, Status.RAN]  # the second fails by design
    assert summary.loc[0, "error"].startswith(f"not run: another run is writing {out / '00_params.ipynb'}")
    assert (out / "00_params.ipynb").read_text() == "being written" and len(list(out.glob("00_params*.ipynb"))) == 1
    assert list(run_batch(runs[:1], FakeExecutor())["status"]) == [Status.RAN]  # once it is done


def test_inplace_copies_back_only_on_success(notebook_dir: Path, tmp_path: Path) -> None:
    before = {p.name: p.read_text() for p in notebook_dir.glob("*.ipynb")}
    runs = plan_runs(
        select_notebooks(["00_params", "01_fails"], notebook_dir),
        output_dir=tmp_path / "out",
        inplace=True,
        inspect=lambda p: {},
    )
    run_batch(runs, FakeExecutor())
    assert json.loads((notebook_dir / "00_params.ipynb").read_text()) == {"executed": "00_params.ipynb"}
    assert (notebook_dir / "01_fails.ipynb").read_text() == before["01_fails.ipynb"]
    assert sorted(p.name for p in notebook_dir.glob("*.ipynb")) == sorted(before)


def test_parameter_planning_precedence(notebook_dir: Path, tmp_path: Path) -> None:
    overrides = [parse_override(t) for t in ["00_*:steps=3", "steps=2", "lr=1e-3", "02_plain:lr=9"]]
    runs = plan_runs(select_notebooks([], notebook_dir), output_dir=tmp_path, profile="paper", overrides=overrides)
    assert runs[0].parameters == {"profile": "paper", "steps": 3, "lr": 0.001}  # per-notebook beats global
    assert runs[1].parameters == {"profile": "paper"}
    assert runs[2].parameters == {}
    assert runs[0].output_path == tmp_path / "00_params.ipynb"
    assert runs[0].working_dir == notebook_dir
    assert plan_runs([notebook_dir / "00_params.ipynb"], output_dir=tmp_path, profile=None)[0].parameters == {}


def test_duplicate_output_names_rejected(notebook_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "00_params.ipynb").write_text((notebook_dir / "00_params.ipynb").read_text())
    with pytest.raises(ValueError, match="would both be written"):
        plan_runs(
            [notebook_dir / "00_params.ipynb", other / "00_params.ipynb"], output_dir=tmp_path / "o"
        )


def test_select_notebooks(notebook_dir: Path) -> None:
    assert [p.name for p in select_notebooks([], notebook_dir)] == [
        "00_params.ipynb",
        "01_fails.ipynb",
        "02_plain.ipynb",
    ]
    assert [p.name for p in select_notebooks(["02_plain", "00_params.ipynb"], notebook_dir)] == [
        "02_plain.ipynb",
        "00_params.ipynb",
    ]
    assert [p.name for p in select_notebooks(["0[01]_*"], notebook_dir)] == ["00_params.ipynb", "01_fails.ipynb"]
    assert select_notebooks([str(notebook_dir / "01_fails.ipynb")], notebook_dir) == [
        notebook_dir / "01_fails.ipynb"
    ]
    with pytest.raises(ValueError, match="no notebook matches"):
        select_notebooks(["99_missing"], notebook_dir)


def test_inspect_parameters(notebook_dir: Path) -> None:
    assert parameters.inspect_parameters(notebook_dir / "00_params.ipynb") == {
        "profile": '"default"',
        "steps": "10",
        "lr": "0.1",
        "adam": "Overrides()",
    }
    assert parameters.inspect_parameters(notebook_dir / "02_plain.ipynb") is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("3", 3),
        ("-2.5", -2.5),
        ("1e-3", 0.001),
        ("true", True),
        ("False", False),
        ("None", None),
        ("null", None),
        ("[1, 2]", [1, 2]),
        ("{a: 1}", {"a": 1}),
        ("mnist", "mnist"),
        ("a:b", "a:b"),
        ("2020-01-01", "2020-01-01"),
        ("", ""),
    ],
)
def test_parse_value(raw: str, expected: object) -> None:
    value = parse_value(raw)
    assert value == expected and type(value) is type(expected)


def test_parse_override() -> None:
    assert parse_override("steps=5") == ParameterOverride("steps", 5, None)
    assert parse_override(" steps = 5").given == " steps = 5"  # as given, for error messages
    assert ParameterOverride("lr", 0.001, "00_*").given == "00_*:lr=0.001"
    assert parse_override("01_teacher:data=a=b") == ParameterOverride("data", "a=b", "01_teacher")
    with pytest.raises(ValueError):
        parse_override("steps")
    with pytest.raises(ValueError):
        parse_override("nb:not-an-identifier=1")
    # a field of a composed setting (the notebook declares hydra = Overrides())
    assert parse_override("07_*:hydra.phase1_steps=500") == ParameterOverride("hydra.phase1_steps", 500, "07_*")
    for bad in ("hydra..lr=1", "hydra.=1", ".lr=1", "hydra.1x=1"):
        with pytest.raises(ValueError, match="identifier"):
            parse_override(bad)


def test_executor_stored_makes_every_notebook_that_can_read_the_store_compute_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``--executor stored``: the notebooks run here, one after another, each that declares an ``executor``
    parameter with it set to ``stored`` (reading the store, computing no chain); one without it as it is. Before,
    the choice was accepted and ignored, so the notebooks computed (and set aside what they recomputed)."""
    argv = ["--notebook-dir", str(REPO_NOTEBOOKS), "--output-dir", str(tmp_path), "--dry-run",
            "--only", "10_samplers,08_thesis_toys", "--executor", "stored"]
    assert main(argv, executor=ExplodingExecutor()) == 0
    printed = capsys.readouterr().out
    assert 'parameters={"profile": "default", "executor": "stored"}' in printed  # 10_samplers
    assert 'parameters={"profile": "default"}' in printed  # 08_thesis_toys declares no executor
    with pytest.raises(SystemExit):
        main([*argv, "-p", "executor=local"], executor=ExplodingExecutor())
    assert "give it or -p executor=..., not both" in capsys.readouterr().err


def test_a_published_notebook_replaces_its_source_whole_and_a_cluster_run_carries_absolute_paths(tmp_path,
                                                                                                  monkeypatch):
    """--inplace copies the executed notebook over its source as one rename (a reader never sees part of it, no
    temporary file stays); a run sent to a cluster's worker names every path absolutely, since the worker's
    working directory is not the submitting process's."""
    source, output = tmp_path / "nb.ipynb", tmp_path / "out" / "nb.ipynb"
    output.parent.mkdir()
    source.write_text("old")
    output.write_text("executed")
    run = NotebookRun(source, {}, output, publish_path=source)
    assert batch.publish(run) and source.read_text() == "executed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.ipynb", "out"]
    assert not batch.publish(NotebookRun(source, {}, output)) and not batch.publish(
        NotebookRun(source, {}, source, publish_path=source))
    monkeypatch.chdir(tmp_path)
    relative = NotebookRun(Path("nb.ipynb"), {"a": 1}, Path("out/nb.ipynb"), publish_path=Path("nb.ipynb"))
    sent = relative.absolute()
    assert (sent.path, sent.output_path, sent.cwd, sent.publish_path) == (
        tmp_path / "nb.ipynb", tmp_path / "out" / "nb.ipynb", tmp_path, tmp_path / "nb.ipynb")
    assert sent.parameters == {"a": 1} and NotebookRun(Path("nb.ipynb"), {}, Path("o.ipynb")).absolute().publish_path \
        is None
