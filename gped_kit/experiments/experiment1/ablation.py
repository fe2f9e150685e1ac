"""The U_s - U_o gap against the thinning H and the students' learning-rate schedule (paper 003, Section 4.1;
Table 6 at N = 60,000, r = 0: FCNN student NLL 0.054 with U_o against 0.082 with U_s).

**What it asks.** The paper's FCNN student is distilled better with the running estimates of U_o (Eq. 10) than
with the current sample's targets of U_s (Eq. 9); none of our profiles shows more than a tenth of that gap
(:func:`~.analysis.estimator_gap`). Two settings differ between the paper's run and ours and could produce it:

* **H**, the steps between two student updates (the paper's 100, the CPU profiles' 2): a U_s student sees one
  posterior sample per update, so fewer updates average fewer samples;
* **the schedule**: Appendix A.2 halves the students' learning rate every 200 epochs. Read as teacher epochs of
  the labelled set (the kit's reading, :class:`~gped_kit.engine.StudentConfig`), that is about eight halvings in
  10^6 steps; read as student epochs of |D'| / M' updates it never happens within the chain, and a U_s student
  at a constant rate keeps the noise of single-sample targets to the end.

**How.** One FCNN chain per seed on Table 1's cell (N = 60,000, m = 0; SGLD with the paper's eta, T = 20,000,
B = 1,000) feeds one predictive student per (estimator, H, schedule): U_s and U_o, H in {2, 10, 100}, and the
rate held constant or halved as often over the chain as the kit's reading halves it over the paper's 10^6
steps (:func:`~gped_kit.experiments.paper.paper_shaped_lr_scale`: eight times). The teacher chain does not
depend on its students, so all twelve share it; the paper's recipe otherwise (Adam at 1e-3, M' = 100, dropout
0.5, no warm-up). At H = 100 a student takes 190 updates here (the paper's: 9,990), so that row measures the
gap of an undertrained student, not the paper's setting; H = 2 gives 9,500 updates, the paper's count, from
samples 2 steps apart instead of 100.

**At the paper's length** (:func:`ablation_for` of a profile with ``ablation_at_profile_length``, the paper
profile's): one FCNN chain (seed 0) of the profile's own T and B (10^6 and the paper's) at its H (100) feeds four
predictive students, U_s and U_o with the rate held constant or halved on the kit's reading (eight times over the
chain), each taking the paper's 9,990 updates. Its teacher is Table 1's FCNN chain of that seed (the same
configuration and random streams; students do not move a teacher). If the paper's U_s 0.082 against U_o 0.054
comes from a student whose rate never anneals, the constant-rate U_s loses about 0.02 here while U_o holds."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ...core.options import Estimator, check_int
from ...data.experiment import DataConfig
from ...engine import StudentConfig
from ...models.presets import ArchSpec
from .. import paper_tables
from ..chains import ChainTask
from ..frame import read_chains
from ..paper import FULL_TRAINING_SIZE, ChainSettings, paper_model, paper_shaped_lr_scale, teacher_config
from ..store import ResultsStore
from ..verdicts import lowest_known, separable, student_skill, unskilled
from .artifacts import ARTIFACTS

#: The schedules compared: the rate held constant, or halved as many times over the chain as the kit's reading of
#: Appendix A.2 halves it over 10^6 steps.
SCHEDULES = ("constant", "annealed")
#: The table notebook 01 writes (``figures/``): the gap per (H, schedule), mean and spread over the seeds.
ESTIMATOR_ABLATION_TABLE = ARTIFACTS["estimator_ablation"].file


@dataclass(frozen=True)
class EstimatorAblation:
    """The chains of the ablation: ``model`` on its full, unmasked training set, one chain per seed of
    ``seeds`` (offset by the notebook's seed), ``chain`` (T, B, evaluation and logging; its thinnings are
    unused: every student carries its own H), and one predictive student per (estimator, H in ``thinnings``,
    schedule in :data:`SCHEDULES`)."""

    model: str = "fcnn"
    seeds: tuple[int, ...] = (0, 1, 2)
    thinnings: tuple[int, ...] = (2, 10, 100)
    chain: ChainSettings = ChainSettings(num_iterations=20_000, burn_in=1_000, predictive_thinning=2,
                                         entropy_thinning=2, eval_thinning=50, log_every=2_000,
                                         checkpoint_every=2_000)

    def __post_init__(self) -> None:
        paper_model(self.model)
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "thinnings", tuple(self.thinnings))
        for name in ("seeds", "thinnings"):
            values = getattr(self, name)
            if not values:
                raise ValueError(f"EstimatorAblation.{name}=(): give at least one value")
            for i, value in enumerate(values):
                check_int(f"EstimatorAblation.{name}[{i}]", value, 0 if name == "seeds" else 1)

    def halving_epochs(self, schedule: str) -> float | None:
        """The students' lr-halving period in teacher epochs for ``schedule`` (None: constant)."""
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule={schedule!r} is not known; allowed: {list(SCHEDULES)}")
        if schedule == "constant":
            return None
        return paper_model(self.model).lr_halving_epochs * paper_shaped_lr_scale(self.model, self.chain)

    def students(self) -> tuple[StudentConfig, ...]:
        """One predictive student per (estimator, H, schedule), named ``predictive-<U>-H<h>-<schedule>``."""
        dropout = paper_model(self.model).student_dropout
        return tuple(
            StudentConfig(target="predictive", estimator=estimator, thinning=h,
                          arch=ArchSpec(self.model, dropout=dropout), lr_halving_epochs=self.halving_epochs(schedule),
                          name=f"predictive-{estimator.value}-H{h}-{schedule}")
            for h in self.thinnings for schedule in SCHEDULES for estimator in (Estimator.U_S, Estimator.U_O))

    def tasks(self, seed: int = 0, device: str = "auto", data_root: str | None = None) -> list[ChainTask]:
        """One chain per seed: the model on its full training set, every student of :meth:`students` attached."""
        size = FULL_TRAINING_SIZE[paper_model(self.model).dataset]
        students = self.students()
        return [ChainTask(DataConfig(paper_model(self.model).dataset, labelled_size=size, mask_size=0, seed=seed + s,
                                     root=data_root, test_size=self.chain.test_size),
                          teacher_config(self.model, size, self.chain, seed + s, device), students,
                          name=f"U_s vs U_o ablation {self.model} seed={seed + s}")
                for s in self.seeds]


#: The ablation notebook 01 runs in its CPU profiles.
ESTIMATOR_ABLATION = EstimatorAblation()


def ablation_for(settings: ChainSettings) -> EstimatorAblation:
    """The ablation a notebook 01 profile runs: :data:`ESTIMATOR_ABLATION`, or with
    ``settings.ablation_at_profile_length`` one FCNN chain (seed 0) of the profile's own chain settings at its
    predictive H (module docstring)."""
    if not getattr(settings, "ablation_at_profile_length", False):
        return ESTIMATOR_ABLATION
    chain = ChainSettings(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(ChainSettings)})
    return EstimatorAblation(seeds=(0,), thinnings=(settings.predictive_thinning,), chain=chain)


def ablation_gaps(table: pd.DataFrame) -> pd.DataFrame:
    """Per seed, H and schedule: the U_s and U_o students' test NLL and the gap U_s - U_o (positive: U_o better),
    with the students' updates ((T - B) // H) and ``skill``, the lower of the two students' skills over the best
    constant prediction (:func:`~gped_kit.experiments.verdicts.student_skill`), from the ablation chains' student
    rows (``ChainGrid.table``)."""
    columns = ["seed", "H", "schedule", "student_updates", "student_nll_U_s", "student_nll_U_o", "gap", "skill"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    rows = table[table["target"] == "predictive"].copy()
    parts = rows["student"].str.extract(r"^predictive-(U_[so])-H(\d+)-(\w+)$")
    rows = rows.assign(est=parts[0], H=pd.to_numeric(parts[1]), schedule=parts[2]).dropna(subset=["est"])
    rows["skill"] = student_skill(rows)
    keys = ["seed", "H", "schedule"]
    nll = rows.pivot_table(index=keys, columns="est", values="student_nll").reset_index()
    nll = nll.merge(rows.groupby(keys)["skill"].agg(lowest_known).reset_index(), on=keys, how="left")
    first = rows.iloc[0]
    nll["student_updates"] = (int(first["num_iterations"]) - int(first["burn_in"])) // nll["H"]
    nll = nll.rename(columns={"U_s": "student_nll_U_s", "U_o": "student_nll_U_o"})
    nll["gap"] = nll["student_nll_U_s"] - nll["student_nll_U_o"]
    return nll[columns].sort_values(["H", "schedule", "seed"]).reset_index(drop=True)


def ablation_summary(gaps: pd.DataFrame) -> pd.DataFrame:
    """:func:`ablation_gaps` per (H, schedule): the mean U_s and U_o NLL, the gap's mean and standard deviation
    over the seeds, ``seeds``, the lowest ``skill`` of the students behind them and, on a constant-rate row,
    ``change`` and ``change_std``: how holding the rate constant changes the gap against the annealed students
    at the same H, the mean and standard deviation over the seeds of each seed's change (both students ride one
    chain a seed, so the seed pairs them; NaN on annealed rows, and ``change_std`` NaN with one seed)."""
    columns = ["H", "schedule", "student_updates", "seeds", "student_nll_U_s", "student_nll_U_o", "gap", "gap_std",
               "change", "change_std", "skill"]
    if gaps.empty:
        return pd.DataFrame(columns=columns)
    grouped = gaps.groupby(["H", "schedule"], sort=True)
    out = grouped.agg(student_updates=("student_updates", "first"), seeds=("seed", "size"),
                      student_nll_U_s=("student_nll_U_s", "mean"), student_nll_U_o=("student_nll_U_o", "mean"),
                      gap=("gap", "mean"), gap_std=("gap", "std"), skill=("skill", lowest_known)).reset_index()
    each = gaps.pivot_table(index=["H", "seed"], columns="schedule", values="gap")
    if {"constant", "annealed"} <= set(each.columns):
        change = (each["constant"] - each["annealed"]).dropna().groupby(level="H").agg(["mean", "std"])
        change = change.rename(columns={"mean": "change", "std": "change_std"}).reset_index()
        out = out.merge(change.assign(schedule="constant"), on=["H", "schedule"], how="left")
    return out.reindex(columns=columns)


def paper_gap(model: str = "fcnn") -> float:
    """The paper's U_s - U_o student NLL at Table 1's cell (Tables 5 and 6 at N = 60,000, r = 0)."""
    t = paper_tables.experiment2_table(model)
    cell = t[(t["labelled_size"] == 60_000) & (t["masking_rate"] == 0)].iloc[0]
    return float(cell["student_nll_U_s"] - cell["student_nll_U_o"])


def estimator_ablation(store: ResultsStore, ablation: EstimatorAblation = ESTIMATOR_ABLATION, *, seed: int = 0,
                       device: str = "auto", data_root: str | None = None, executor: str = "local",
                       recompute: bool = False, progress: bool = True) -> tuple[pd.DataFrame, list[str]]:
    """The ablation's chains run, reused or (``executor="stored"``) read back through the results store, and
    :func:`ablation_summary` of them, with the lines of chains not stored (an empty table when the first is not)."""
    grid, missing = read_chains(ablation.tasks(seed, device, data_root), store, executor, recompute, progress)
    if grid is None:
        return ablation_summary(pd.DataFrame()), missing
    return ablation_summary(ablation_gaps(grid.table)), missing


def ablation_text(summary: pd.DataFrame, gap: float, schedules: Sequence[str] = SCHEDULES) -> str:
    """One paragraph on :func:`ablation_summary` beside the paper's gap ``gap``: the largest gap measured, where,
    and whether holding the rate constant widens the gap by at least half the paper's (what the "never anneals"
    reading predicts) at each H, judged with the seeds' spread: the change's spread is its standard deviation over
    the seeds (``change_std`` of :func:`ablation_summary`, each seed's change), and a change nearer half the paper's
    gap than that is not separable from it (:func:`~gped_kit.experiments.verdicts.separable`; with one seed no spread is
    known and every change is judged). Settings whose students are below the skill floor (or whose skill was not
    stored) are no evidence: named, not compared."""
    if summary.empty:
        return ""
    skill = summary["skill"] if "skill" in summary else pd.Series(float("nan"), index=summary.index)
    weak = summary[skill.map(unskilled)]
    usable = summary[~skill.map(unskilled)]
    seeds = int(summary["seeds"].min())
    lines = [f"**H and the schedule** (FCNN, Table 1's cell, {seeds} seed{'s' if seeds != 1 else ''} a setting):"]
    if usable.empty:
        return " ".join(lines + ["every setting's students are below the skill floor or without a stored skill: "
                                 "no evidence."])
    top = usable.loc[usable["gap"].idxmax()]
    lines.append(f"the largest U_s - U_o gap is {top['gap']:+.4f}{_spread(top.get('gap_std'), top['seeds'])} "
                 f"(H = {int(top['H'])}, {top['schedule']} rate, {int(top['student_updates']):,} updates); the "
                 f"paper's is {gap:+.3f}.")
    changes = []  # (H, change, its spread or None)
    if set(schedules) <= set(usable["schedule"]):
        by = usable.set_index(["H", "schedule"])
        for h in sorted(usable["H"].unique()):
            if (h, "constant") not in by.index or (h, "annealed") not in by.index:
                continue  # a setting left out as no evidence: no change to judge
            c = by.loc[(h, "constant")]
            if pd.notna(c["change"]):
                spread = None if pd.isna(c["change_std"]) else float(c["change_std"])  # one seed: none known
                changes.append((int(h), float(c["change"]), spread))
    if changes:
        half = gap / 2
        each = ", ".join(f"H = {h}: {c:+.4f}" + (f" ± {sd:.4f}" if sd is not None else "") for h, c, sd in changes)
        grows = [h for h, c, sd in changes if c >= half and separable(c - half, sd)]
        near = [h for h, c, sd in changes if not separable(c - half, sd)]
        parts = []
        if grows:
            parts.append(f"at H = {', '.join(map(str, grows))} by at least half the paper's gap")
        if near:
            parts.append(f"at H = {', '.join(map(str, near))} the seeds' spread cannot tell it from half the "
                         "paper's gap (not separable)")
        if not grows and not near:
            parts.append("at no H by half the paper's gap, so a student that never anneals does not explain it at "
                         "this chain length")
        else:
            short = [h for h, _, _ in changes if h not in near and h not in grows]
            if short:
                parts.append(f"at H = {', '.join(map(str, short))} by less than half")
        lines.append(f"A constant rate against an annealed one changes the gap by {each}; " + "; ".join(parts) + ".")
    if len(weak):
        lines.append("No evidence (a student below the skill floor or without a stored skill): "
                     + ", ".join(f"H = {int(r.H)} {r.schedule}" for r in weak.itertuples()) + ".")
    return " ".join(lines)


def _spread(std: object, seeds: object) -> str:
    """``" ± std"`` for a value over two or more seeds with its standard deviation, else ``""``."""
    return f" ± {float(std):.4f}" if pd.notna(std) and pd.notna(seeds) and int(seeds) >= 2 else ""
