"""The runs of notebook 01's paper profile on a GPU, as committed under ``docs/device-runs/``: the chains' last
values beside the paper's cells, and the run-to-run spread that says which differences they can tell apart.

Each run is a folder ``docs/device-runs/<date>-<device>[-n]/`` with the history of notebook 01's paper-profile
chain of a model (:data:`DEVICE_HISTORY`, one row per log point and student) and the manifests of its slices
(``*.json``: the cell, with its seed, and the numerics code of the chain). The newest run of a model (folders
sorted by name, which starts with the date) is the one judged (:func:`newest_runs`).

**Which paper table holds a cell.** The paper's Table 1 has, per model, the teacher NLL, one student NLL (the
predictive distilled with U_s: Section 4.1 says so) and one entropy MAE (its estimator is not named; the values
are those of Tables 5 and 6's U_o column). Tables 5 (CNN-MNIST) and 6 (FCNN) have all five cells at N = 60,000,
r = 0: the teacher, both students' NLL and both entropy MAEs. So the U_o student NLL and the U_s entropy MAE
are Table 5's or 6's only (:data:`TABLE1_ESTIMATORS`, :func:`paper_tables`).

**The run-to-run spread** (:func:`run_spread`) of a metric is the largest difference between two runs of the
same chain (the same cell and seed, under the same numerics code; e.g. the eager and the graph-mode engine)
at any log point both logged, over every student of that metric: the differences their optimisers' round-off
makes. A value closer than that to a bound it is judged against is *not separable*
(:func:`~gped_kit.experiments.verdicts.compare`).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import paper_tables
from .numerics import LEGACY_CODES
from .paper import PAPER_NUM_ITERATIONS
from .verdicts import NO_EVIDENCE, compare, separable, student_skill, unskilled

#: Where the logs and tables of runs on a GPU are committed, one folder per run (relative to the repository).
DEVICE_RUNS = Path("docs") / "device-runs"
#: The history a GPU run wrote of notebook 01's paper-profile chain of one model (``<run>/<this, formatted>``).
DEVICE_HISTORY = "01_experiment1-paper-{model}-history.csv"
#: The models notebook 01's paper profile runs on MNIST, with their names in the rows and their paper table of
#: U_o against U_s (the full grid of Experiment 2).
DEVICE_MODELS = {"fcnn": ("FCNN", "Table 6"), "cnn_mnist": ("CNN-MNIST", "Table 5")}
#: The estimator of Table 1's student NLL and entropy MAE (paper_tables.table1: the predictive distilled with
#: U_s, the expected entropy with U_o); the teacher NLL is in Table 1 too.
TABLE1_ESTIMATORS = {"student_nll": "U_s", "entropy_mae": "U_o"}
#: The paper-length cells: (the history's student or None for the teacher, the column, the cell's name).
PAPER_LENGTH_CELLS = ((None, "teacher_nll", "teacher NLL"),
                      ("predictive-U_s-K1x1", "student_nll", "student NLL U_s"),
                      ("predictive-U_o-K1x1", "student_nll", "student NLL U_o"),
                      ("entropy-U_o-K1x1", "entropy_mae", "entropy MAE U_o"),
                      ("entropy-U_s-K1x1", "entropy_mae", "entropy MAE U_s"))
#: The students whose values give a metric's spread (by the student label's first part), None: the teacher's.
METRIC_TARGETS = {"teacher_nll": None, "student_nll": "predictive", "entropy_mae": "entropy"}
#: T of notebook 01's paper profile (Appendix A.2): a chain judged beside the paper's cells has reached it.
PAPER_STEPS = PAPER_NUM_ITERATIONS


@dataclass(frozen=True)
class DeviceRun:
    """One committed GPU run of notebook 01's paper-profile chain of ``model``: its ``history`` file, the run's
    folder ``name``, the ``seed`` and numerics ``code`` its manifests give (None where they do not)."""

    model: str
    path: Path
    seed: int | None
    code: str | None

    @property
    def name(self) -> str:
        return self.path.parent.name

    def history(self) -> pd.DataFrame:
        return pd.read_csv(self.path)

    def last(self) -> tuple[int, pd.DataFrame]:
        """The last log point: its step and its rows, one per student (index: the student)."""
        h = self.history()
        step = int(h["step"].max())
        return step, h[h["step"] == step].set_index("student")


def _manifest_cell(folder: Path, model: str) -> tuple[int | None, str | None]:
    """The seed and the numerics code of ``model``'s cell in the run's slice manifests (None, None without)."""
    seeds, codes = set(), set()
    for path in sorted(folder.glob("*.json")):
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(manifest, dict) or manifest.get("kind") != "gped-kit slice":
            continue
        for cell in manifest.get("cells", []):
            if cell.get("model") == model and (m := re.search(r"\bseed=(\d+)", str(cell.get("cell", "")))):
                seeds.add(int(m.group(1)))
                codes.add(str(manifest.get("code")))
    return (seeds.pop() if len(seeds) == 1 else None), (codes.pop() if len(codes) == 1 else None)


def device_runs(root: Path, model: str) -> list[DeviceRun]:
    """Every committed GPU run of ``model``'s paper-profile chain under ``root / DEVICE_RUNS``, oldest first."""
    paths = sorted((Path(root) / DEVICE_RUNS).glob(f"*/{DEVICE_HISTORY.format(model=model)}"),
                   key=lambda p: p.parent.name)
    return [DeviceRun(model, p, *_manifest_cell(p.parent, model)) for p in paths]


def newest_runs(root: Path) -> dict[str, DeviceRun]:
    """Per model of :data:`DEVICE_MODELS`, the newest GPU run of its paper-profile chain."""
    return {model: runs[-1] for model in DEVICE_MODELS if (runs := device_runs(root, model))}


def _numerics(code: str | None) -> str | None:
    """A chain's numerics code with a legacy fingerprint read as the version it is (``chain=1``)."""
    legacy = {fingerprint: f"{kind}=1" for kind, fingerprint in LEGACY_CODES.items() if kind == "chain"}
    return legacy.get(code, code) if code is not None else None


def same_chain(a: DeviceRun, b: DeviceRun) -> bool:
    """Whether two runs computed the same chain: the same model and seed, under the same numerics."""
    return (a.model == b.model and a.seed is not None and a.seed == b.seed and a.code is not None
            and _numerics(a.code) == _numerics(b.code))


def run_spread(root: Path, run: DeviceRun) -> dict[str, float]:
    """Per metric (:data:`METRIC_TARGETS`), the largest ``|a - b|`` between any two runs of ``run``'s chain
    (:func:`same_chain`, ``run`` among them) at a log point both logged, over that metric's students; empty
    when no other run of that chain is committed."""
    runs = [r for r in device_runs(root, run.model) if r.path == run.path or same_chain(run, r)]
    spread: dict[str, float] = {}
    for a, b in itertools.combinations(runs, 2):
        both = a.history().merge(b.history(), on=["step", "student"], suffixes=("_a", "_b"))
        for metric, target in METRIC_TARGETS.items():
            rows = both if target is None else both[both["student"].str.startswith(f"{target}-")]
            if f"{metric}_a" not in rows:
                continue
            difference = (rows[f"{metric}_a"] - rows[f"{metric}_b"]).abs().max()
            if not pd.isna(difference):
                spread[metric] = max(spread.get(metric, 0.0), float(difference))
    return spread


@dataclass(frozen=True)
class PaperCell:
    """One cell of a GPU chain at the paper's length beside the paper's: ``name`` (e.g. "student NLL U_o"), the
    metric, the estimator (None for the teacher), ours, the paper's, the paper's tables that hold it, the
    run-to-run spread of the metric (None where unknown), the student's skill over the best constant prediction
    (NaN where the run's history does not report it) and the outcome (:func:`~.verdicts.compare`; a student's
    cell without known skill, :func:`~.verdicts.unskilled`, is :data:`NO_EVIDENCE`)."""

    model: str
    name: str
    metric: str
    estimator: str | None
    ours: float
    paper: float
    tables: str
    spread: float | None
    skill: float = math.nan

    @property
    def outcome(self) -> str:
        if self.estimator is not None and unskilled(self.skill):
            return NO_EVIDENCE
        return compare(self.ours, self.paper, spread=self.spread)

    @property
    def in_table1(self) -> bool:
        return self.estimator is None or TABLE1_ESTIMATORS.get(self.metric) == self.estimator


@dataclass(frozen=True)
class PaperLengthRun:
    """A model's newest GPU run of notebook 01's paper-profile chain: how far it went, its cells (complete
    chains only: a chain stopped short of T is not judged), the run-to-run spread and the run."""

    run: DeviceRun
    step: int
    cells: tuple[PaperCell, ...]
    spread: dict[str, float]

    @property
    def complete(self) -> bool:
        return self.step >= PAPER_STEPS

    def cell(self, metric: str, estimator: str | None) -> PaperCell | None:
        return next((c for c in self.cells if c.metric == metric and c.estimator == estimator), None)


def paper_row(model: str) -> pd.Series:
    """The paper's Table 5 (CNN-MNIST) or 6 (FCNN) at N = 60,000, r = 0 (Table 1's setting)."""
    t = paper_tables.experiment2_table(model)
    return t[(t["labelled_size"] == 60_000) & (t["masking_rate"] == 0)].iloc[0]


def paper_length_runs(root: Path) -> dict[str, PaperLengthRun]:
    """Per model, its newest GPU run (:func:`newest_runs`) with its last values beside the paper's cells (every
    cell of :data:`PAPER_LENGTH_CELLS`; ``cells`` is empty for a chain that has not reached the paper's T)."""
    out = {}
    for model, run in newest_runs(root).items():
        step, last = run.last()
        spread = run_spread(root, run)
        table = DEVICE_MODELS[model][1]
        cells = []
        if step >= PAPER_STEPS:
            paper = paper_row(model)
            for student, metric, name in PAPER_LENGTH_CELLS:
                estimator = None if student is None else student.split("-")[1]
                ours = float(last[metric].iloc[0]) if student is None else float(last.loc[student, metric])
                skill = math.nan if student is None else float(student_skill(last.loc[[student]]).iloc[0])
                theirs = float(paper[metric if estimator is None else f"{metric}_{estimator}"])
                in_table1 = estimator is None or TABLE1_ESTIMATORS.get(metric) == estimator
                cells.append(PaperCell(model, name, metric, estimator, ours, theirs,
                                       f"Tables 1, {table.split()[-1]}" if in_table1 else table, spread.get(metric),
                                       skill))
        out[model] = PaperLengthRun(run, step, tuple(cells), spread)
    return out


def uo_vs_us(run: PaperLengthRun) -> list[tuple[str, float, float, str]]:
    """U_o against U_s in a complete run, per metric: (the metric's name, U_o's value, U_s's value, the
    outcome: ``"U_o at least as good"``, ``"U_s better"``, ``"not separable"`` where the two differ by less
    than the metric's run-to-run spread, or :data:`NO_EVIDENCE` where either student's skill is not known to beat
    the best constant prediction)."""
    out = []
    for metric, name in (("student_nll", "student NLL"), ("entropy_mae", "entropy MAE")):
        uo, us = run.cell(metric, "U_o"), run.cell(metric, "U_s")
        if uo is None or us is None:
            continue
        outcome = (NO_EVIDENCE if unskilled(uo.skill) or unskilled(us.skill)
                   else "not separable" if not separable(uo.ours - us.ours, run.spread.get(metric))
                   else "U_o at least as good" if uo.ours <= us.ours else "U_s better")
        out.append((name, uo.ours, us.ours, outcome))
    return out


__all__ = ["NO_EVIDENCE", "DEVICE_RUNS", "DEVICE_HISTORY", "DEVICE_MODELS", "TABLE1_ESTIMATORS", "PAPER_LENGTH_CELLS",
           "DeviceRun", "PaperCell", "PaperLengthRun", "device_runs", "newest_runs", "same_chain", "run_spread",
           "paper_row", "paper_length_runs", "uo_vs_us"]
