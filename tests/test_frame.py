"""Adding a notebook is the notebook, one experiment package and one line in the registry
(gped_kit.experiments.frame): a small experiment, registered here, is checked by the batch runner before it runs,
executed end to end by it (papermill), found complete by the store check, its declared figure and table and the
outcome of its declared check recorded in the figures' manifest and listed by the report with their captions, and
judged in the README's rows."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from gped_kit.cli import batch, parameters, plan, report
from gped_kit.cli import readme as R
from gped_kit.experiments import registry
from gped_kit.experiments.artifacts import read_manifest
from gped_kit.experiments.store import ResultsStore
from gped_kit.viz.writer import ArtifactWriter

KERNEL = "python3"  # ipykernel's native kernel: always present where ipykernel is installed

#: The experiment package of the small notebook: settings and profiles, tasks, a summary, the README's row.
PACKAGE = '''
"""A small experiment: one short SGLD chain on scikit-learn's 8x8 digits, a predictive U_s student."""

import dataclasses
from pathlib import Path

import torch
from sklearn.datasets import load_digits

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, StudentConfig
from gped_kit.experiments.artifacts import Artifact, Kind, declare
from gped_kit.experiments.chains import ChainTask
from gped_kit.experiments.checks import Check, Role, declare_checks
from gped_kit.experiments.frame import Experiment, Summary, read_chains
from gped_kit.experiments.verdicts import Claim, artifact_table, link, number, verdict

ARTIFACTS = declare(
    Artifact("table", Kind.TABLE, "99_tiny_{profile}", "The tiny chain's teacher and student NLL ({profile} profile)",
             "the tiny chain (store kind chain)"),
    Artifact("nll", Kind.FIGURE, "99_tiny_nll_{profile}",
             "The tiny student's NLL beside its teacher's ({profile} profile)", "the tiny chain (store kind chain)"),
)
TABLE = ARTIFACTS["table"].file
CHECKS = declare_checks(Check("finished", "the tiny chain completed", Role.INVARIANT))


@dataclasses.dataclass(frozen=True)
class TinySettings:
    num_iterations: int = 60
    thinning: int = 2


PROFILES = {"default": TinySettings(), "long": TinySettings(num_iterations=80)}


def digits() -> GPEDData:
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    return GPEDData(train_x=x[:600], train_y=y[:600], distill_x=x[:600], test_x=x[600:900], test_y=y[600:900],
                    num_outputs=10, info={"dataset": "digits"})


def tasks(settings, *, seed, device, data_root):
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50),
                        num_iterations=settings.num_iterations, burn_in=20, eval_thinning=5, log_every=20,
                        checkpoint_every=20, seed=seed, device="cpu")
    return [ChainTask(digits(), config, (StudentConfig("predictive", "U_s", thinning=settings.thinning),),
                      name=f"tiny seed={seed}")]


def summary(experiment, store, settings, *, profile="default", executor="local", recompute=False, progress=True,
            seed=0):
    grid, missing = read_chains(tasks(settings, seed=seed, device="cpu", data_root=None), store, executor,
                                recompute, progress)
    tables = {"table": grid.table[["student", "teacher_nll", "student_nll"]]} if grid is not None else {}
    return Summary(experiment, profile, settings, grid, tables, missing)


def readme_rows(figures: Path) -> list:
    t = artifact_table(figures, ARTIFACTS["table"], profile="default")
    if t is None:
        return []
    row = t.iloc[0]
    close = int(row.student_nll - row.teacher_nll < 1)
    return [Claim("tiny: the student is within 1 nat of its teacher", verdict(close, 1),
                  f"teacher {number(row.teacher_nll)}, student {number(row.student_nll)}", "—",
                  link(f"{TABLE.format(profile='default')}.md", "table"))]


EXPERIMENT = Experiment("99_tiny", PROFILES, tasks, summary=summary, shown_profiles=("default", "long"),
                        readme_rows=readme_rows, artifacts=ARTIFACTS, checks=CHECKS,
                        expected_checks=lambda settings, absent: {CHECKS["finished"].cell(): True})
'''

#: The notebook: a parameters cell, the run through its experiment, its table, the other profiles beside it.
CELLS = [
    ('profile = "default"\nnum_iterations = None\nseed = 0\nresults_dir = "results"\nfigures_dir = "figures"\n'
     'executor = "local"', ["parameters"]),
    ("import matplotlib.pyplot as plt\nimport tiny99 as T\nfrom gped_kit.experiments.settings import resolve_settings\n"
     "from gped_kit.experiments.store import ResultsStore\nfrom gped_kit.viz.writer import ArtifactWriter\n\n"
     "p = resolve_settings(T.PROFILES, profile, globals())\nstore = ResultsStore(results_dir)\n"
     "writer = ArtifactWriter(T.EXPERIMENT, profile, figures_dir, store=store, settings=p)\n"
     "summary = T.EXPERIMENT.summarise(store, p, profile=profile, seed=seed, executor=executor, progress=False)\n"
     "table = summary.tables['table']\nwriter.table(table, 'table')\n"
     "fig, ax = plt.subplots()\n"
     "ax.bar(['teacher', 'student'], [table.teacher_nll.iloc[0], table.student_nll.iloc[0]])\n"
     "ax.set(ylabel='test NLL', title='tiny')\nwriter.figure(fig, 'nll')\n"
     "writer.check('finished', bool(summary.complete))\n"
     "beside = T.EXPERIMENT.stored_profiles(summary, store, seed=seed)\nprint(beside.lines)", []),
]


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The experiment package (here the module ``tiny99``, on the path of this process and of the notebook's
    kernel), its notebook ``99_tiny`` in a notebooks folder, and its line in the registry."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "tiny99.py").write_text(textwrap.dedent(PACKAGE))
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setenv("PYTHONPATH", str(package))
    sys.modules.pop("tiny99", None)
    tiny99 = importlib.import_module("tiny99")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, metadata={"tags": tags}) for source, tags in CELLS]
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(notebooks / "99_tiny.ipynb"))
    monkeypatch.setitem(registry.NOTEBOOKS, "99_tiny", tiny99.EXPERIMENT)
    monkeypatch.setattr(registry, "EXPERIMENTS", (*registry.EXPERIMENTS, tiny99.EXPERIMENT))
    yield tiny99, notebooks
    sys.modules.pop("tiny99", None)


def test_a_registered_experiment_is_checked_before_anything_runs(tiny, tmp_path):
    tiny99, notebooks = tiny
    assert registry.notebook("99") is tiny99.EXPERIMENT
    assert plan.notebook_profiles(notebooks / "99_tiny.ipynb") == ("default", "long")
    runs = plan.plan_runs([notebooks / "99_tiny.ipynb"], output_dir=tmp_path / "out", profile="default",
                           overrides=[parameters.ParameterOverride("num_iterations", 0)])
    (problem,) = plan.check_runs(runs).values()
    assert "num_iterations" in problem  # GPEDConfig refuses T = 0 before any notebook starts


def test_the_readme_asks_the_experiment_for_its_rows(tiny, tmp_path):
    tiny99, _ = tiny
    figures = tmp_path / "figures"
    figures.mkdir()
    assert R.claims_table(figures, [tiny99.EXPERIMENT])[0].claim != "tiny: the student is within 1 nat of its teacher"
    table = pd.DataFrame({"student": ["s"], "teacher_nll": [0.5], "student_nll": [0.75]})
    table.to_csv(figures / "99_tiny_default.csv", index=False)  # a file no notebook recorded: not read
    assert R.claims_table(figures, [tiny99.EXPERIMENT])[0].claim != "tiny: the student is within 1 nat of its teacher"
    ArtifactWriter(tiny99.EXPERIMENT, "default", figures).table(table, "table")
    row = R.claims_table(figures, [tiny99.EXPERIMENT])[0]
    assert (row.claim, row.verdict, row.ours) == ("tiny: the student is within 1 nat of its teacher", "yes",
                                                  "teacher 0.500, student 0.750")


@pytest.mark.slow  # a real papermill kernel: in make test-slow
def test_a_registered_experiment_runs_end_to_end_through_the_batch_runner(tiny, tmp_path, monkeypatch):
    tiny99, notebooks = tiny
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    code = batch.main(["--notebook-dir", str(notebooks), "--output-dir", str(out), "--profile", "all",
                       "--kernel", KERNEL, "-p", f"results_dir={tmp_path / 'results'}",
                       "-p", f"figures_dir={tmp_path / 'figures'}"])
    assert code == 0
    results = ResultsStore(tmp_path / "results")
    for profile in ("long", "default"):  # --profile all: every shown profile, default last
        assert tiny99.EXPERIMENT.missing(results, tiny99.EXPERIMENT.settings(profile)) == []
        assert (tmp_path / "figures" / f"99_tiny_{profile}.csv").exists()
    executed = nbformat.read(str(out / "default" / "99_tiny.ipynb"), as_version=4)
    (cell,) = [c for c in executed.cells if "stored_profiles" in c.source]
    printed = [o["text"].strip() for o in cell.outputs if o.get("name") == "stdout"]
    assert printed[-1].splitlines()[-1] == "[]"  # the long profile was stored: no line says it is missing
    (row,) = [r for r in R.claims_table(tmp_path / "figures", registry.EXPERIMENTS) if r.claim.startswith("tiny:")]
    assert row.verdict in ("yes", "no") and row.ours.startswith("teacher ")
    # the manifest records both files of both profiles; the report lists them under the notebook, captioned
    manifest = read_manifest(tmp_path / "figures")
    record = manifest.owner("99_tiny_nll_long.pdf")
    assert (record.notebook, record.artifact, record.profile) == ("99_tiny", "nll", "long")
    assert record.caption == "The tiny student's NLL beside its teacher's (long profile)"
    assert record.store_keys and all(key.startswith("chain/") for key in record.store_keys)
    assert manifest.runs["99_tiny/long"]["num_iterations"] == 80
    for profile in ("long", "default"):  # its declared check, tested and recorded under each profile
        (outcome,) = manifest.outcomes("99_tiny", profile)
        assert (outcome.line, outcome.failed) == ("the tiny chain completed: True", False)
        assert {outcome.statement: outcome.value} == tiny99.EXPERIMENT.expected_checks(None, ())
    folder = report.read_folder(tmp_path / "figures", notebooks)
    assert not folder.others
    assert sorted(i.stem for i in folder.items["99_tiny"]) == ["99_tiny_default", "99_tiny_long", "99_tiny_nll_default",
                                                                "99_tiny_nll_long"]
    assert "The tiny chain's teacher and student NLL (default profile)" in report.render_index(folder)
