"""Notebook 07 (GPED beside EnD2, Hydra, KD and the thesis' online distillation, on one posterior) as an
:class:`~gped_kit.experiments.frame.Experiment`: its summary and claims, what a run stores and its row of the
README's claims table."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...core.status import Status
from ..chains import ChainTask
from ..frame import (
    SCALED_CHAIN,
    AfterChains,
    Experiment,
    Summary,
    chain_summaries,
    check_executor,
    derived_rows,
    task_chains,
)
from ..numerics import numerics_code
from ..store import ResultsStore
from ..verdicts import (
    HYDRA,
    NO_EVIDENCE,
    OURS,
    SKILL_FLOOR,
    Claim,
    artifact_table,
    judged_verdict,
    link,
    number,
    profile_evidence,
    unskilled,
)
from .artifacts import ARTIFACTS, CHECKS
from .run import ComparisonRun, SpiralRun, run_comparison, spiral_run
from .settings import PROFILES, SNAPSHOTS, TEACHER, ZERO_MU, ComparisonSettings
from .tasks import comparison_task, spiral_task

#: The tables notebook 07 writes to ``figures/`` (``.csv`` and ``.md``), per profile; the README's row reads the
#: MNIST comparison.
MNIST_TABLE = ARTIFACTS["mnist"].file
#: Each method's model uncertainty (MU) against the long-chain teacher's, and the zero-MU baseline.
MU_SPLIT_TABLE = ARTIFACTS["mu_split"].file
#: The Hydra paper's Table 2 (MNIST, test NLL, mean of n = 3 runs), the reference of notebook 07.
HYDRA_TABLE2_MNIST_NLL = {"ensemble (M = 50)": 0.0439, "Hydra": 0.0465, "KD": 0.0497, "prior networks": 0.0521}


@dataclass
class ComparisonRuns:
    """Notebook 07's two stored runs: the MNIST comparison and the spiral (None when not stored)."""

    mnist: ComparisonRun | None
    spiral: SpiralRun | None


def mu_mae(table: pd.DataFrame, method: str, eval_set: str, ref: str) -> float:
    """A method's mean |MU - MU_ref| on ``eval_set`` against ``ref`` (``"snapshots"`` or ``"teacher"``)
    from a comparison table (:func:`~.compute.comparison_table`); NaN without the row."""
    row = table[(table["method"] == method) & (table["eval_set"] == eval_set)]
    return float(row[f"mu_mae_{ref}"].iloc[0]) if len(row) else float("nan")


#: Notebook 07's claims, in the order its checks print them, with what the papers report.
COMPARISON_CLAIMS = (
    ("Hydra's MU is the closest to its snapshot ensemble's", "on MNIST shifted and rotated by Table 1's numbers; "
     "Prior Networks closer on MNIST test (2.60e-5 vs 3.11e-5, though the paper bolds Hydra's) and Fashion-MNIST "
     "(Hydra paper, Table 1)"),
    ("GPED's MU is the closest to the long-chain teacher's", "not reported"),
    ("Hydra within 1 point of its snapshot ensemble's test accuracy", "True (Hydra paper, Table 2)"),
    ("Hydra's MU closer to the snapshot ensemble than EnD2's on the MNIST test set",
     "False by Table 1's numbers (Hydra 3.11e-5, Prior Networks 2.60e-5; the paper bolds Hydra's)"),
    ("pure-noise distillation inputs give a worse student than resampled D'", "True (the thesis)"),
    ("spiral: Hydra's MU map closer to its snapshots than GPED's and EnD2's", "not reported"),
    ("GPED's MU closer to the teacher's than predicting zero on the MNIST test set", "not reported"),
)


def method_skills(table: pd.DataFrame, eval_set: str = "test", column: str = "skill") -> dict[str, float]:
    """Each distilled method's skill over the best constant prediction on ``eval_set`` from a comparison
    table (:func:`~.compute.method_skill`): ``column`` ``"skill"`` (the lower of its predictive and expected-entropy
    skills: for claims on its uncertainties) or ``"predictive_skill"`` (for claims on its predictive: NLL,
    accuracy); NaN for every method where the table has no such column (stored before the comparison reported
    it). The references (teacher, snapshot ensemble) are left out: they need none."""
    rows = table[(table["eval_set"] == eval_set) & ~table["method"].isin((TEACHER, SNAPSHOTS, ZERO_MU))]
    skill = rows[column] if column in rows else pd.Series(math.nan, index=rows.index)
    return {str(m): float(k) for m, k in zip(rows["method"], skill)}


def not_known_skilled(skills: dict[str, float], methods: Sequence[str]) -> list[str]:
    """The ``methods`` (students) not known to beat the best constant prediction
    (:func:`~gped_kit.experiments.verdicts.unskilled`: skill below the floor or not stored, or no row)."""
    return [m for m in methods if unskilled(skills.get(m, math.nan))]


def comparison_claims(table: pd.DataFrame, kd: pd.DataFrame, spiral: pd.DataFrame) -> pd.DataFrame:
    """Notebook 07's claims on the MNIST comparison ``table``, its KD students ``kd``
    (:func:`~gped_kit.experiments.comparison.kd_variants`) and the spiral's table: one row per claim of
    :data:`COMPARISON_CLAIMS` with ``ours`` (``"k of n"`` for the evaluation sets where a method's MU
    is the closest, with ``sets`` naming them; True/False for the others) and ``paper`` (what the Hydra
    paper or the thesis reports). A claim about a student not known to beat the best constant prediction on
    the set the claim compares (:func:`not_known_skilled`; the MNIST test set, the spiral's grid) is
    :data:`~gped_kit.experiments.verdicts.NO_EVIDENCE`, with ``sets`` naming the students and their skill."""
    sets = list(dict.fromkeys(table["eval_set"]))
    acc = table[table["eval_set"] == "test"].set_index("method")["accuracy"]
    kd_nll = kd.set_index("student")["student_nll"]
    gped_test = table[(table["eval_set"] == "test") & (table["method"] == "GPED")]["mu_mae_teacher"]
    ours = [
        _closest(table, sets, "Hydra", ("GPED", "EnD2"), "snapshots"),
        _closest(table, sets, "GPED", ("Hydra", "EnD2"), "teacher"),
        (bool(abs(acc["Hydra"] - acc["Snapshot ensemble"]) < 0.01), ""),
        (bool(mu_mae(table, "Hydra", "test", "snapshots") < mu_mae(table, "EnD2", "test", "snapshots")), ""),
        (bool(kd_nll["KD (noise inputs)"] > kd_nll["KD"]), ""),
        (bool(mu_mae(spiral, "Hydra", "grid", "snapshots") < min(mu_mae(spiral, "GPED", "grid", "snapshots"),
                                                                 mu_mae(spiral, "EnD2", "grid", "snapshots"))), ""),
        (bool(len(gped_test) and gped_test.iloc[0] < mu_mae(table, ZERO_MU, "test", "teacher")), ""),
    ]
    mnist, toy = method_skills(table), method_skills(spiral, "grid")  # each gated on the set its claim compares
    predictive = method_skills(table, column="predictive_skill")
    # the students each claim is about (the closest-MU claims are gated set by set, in _closest); the thesis' claim
    # is that noise inputs fail, so only the student it is set against (KD on resampled D', the same network, loss
    # and budget) must be known to learn; accuracy and NLL rest on the predictive alone
    students = [({}, ()), ({}, ()), (predictive, ("Hydra",)), (mnist, ("Hydra", "EnD2")), (predictive, ("KD",)),
                (toy, ("Hydra", "GPED", "EnD2")), (mnist, ("GPED",))]
    rows = []
    for (claim, paper), (value, where), (skills, involved) in zip(COMPARISON_CLAIMS, ours, students):
        if lacking := not_known_skilled(skills, involved):
            value, where = NO_EVIDENCE, "not known to beat the best constant: " + ", ".join(
                f"{m} ({skill_text(skills.get(m, math.nan))})" for m in lacking)
        rows.append({"claim": claim, "ours": value, "sets": where, "paper": paper})
    return pd.DataFrame(rows)


def _closest(table: pd.DataFrame, sets: Sequence[str], method: str, others: Sequence[str], ref: str
             ) -> tuple[str, str]:
    """``("k of n", sets)``: on how many of the evaluation sets where every method compared is known to beat the
    best constant prediction *on that set* (:func:`method_skills` of the set) ``method``'s MU is the closest to
    ``ref``'s; the other sets are named as no evidence (on an OOD set a student may do worse than a constant).
    :data:`~gped_kit.experiments.verdicts.NO_EVIDENCE` when no set is left."""
    judged, lacking = [], {}
    for s in sets:
        missing = not_known_skilled(method_skills(table, s), (method, *others))
        if missing:
            lacking[s] = missing
        else:
            judged.append(s)
    best = [s for s in judged if mu_mae(table, method, s, ref) < min(mu_mae(table, o, s, ref) for o in others)]
    left_out = "; ".join(f"{s}: {', '.join(m)}" for s, m in lacking.items())
    if not judged:
        return NO_EVIDENCE, f"not known to beat the best constant: {left_out}"
    return f"{len(best)} of {len(judged)}", str(best) + (
        f"; {len(lacking)} sets no evidence (not known to beat the best constant there: {left_out})" if lacking else "")


def skill_text(skill: float) -> str:
    """``skill 0.012`` or ``skill not stored``."""
    return "skill not stored" if pd.isna(skill) else f"skill {skill:.3f}"


#: The test-set columns of every method that notebook 07's profiles are compared on.
COMPARISON_TEST_COLUMNS = ("method", "accuracy", "nll", "brier", "mu_mean", "mu_mae_snapshots", "mu_mae_teacher",
                           "skill")


def comparison_summary(experiment: Experiment, store: ResultsStore, settings: ComparisonSettings, *,
                       profile: str = "default", seed: int = 0, device: str = "auto", data_root: str | None = None,
                       executor: str = "local", recompute: bool = False, progress: bool = True,
                       task: ChainTask | None = None) -> Summary:
    """The Hydra paper's Tables 1, 2 and 5 on one posterior: the MNIST comparison (:func:`~.run.run_comparison`,
    ``task`` as there) and the spiral (:func:`~.run.spiral_run`); ``run`` is a :class:`ComparisonRuns`. With
    ``executor="stored"`` a run the store lacks is None and listed in ``missing``; otherwise a failure raises
    as those functions do. Tables (when both are there): ``test`` (every method on the MNIST test set:
    :data:`COMPARISON_TEST_COLUMNS`) and ``claims`` (:func:`comparison_claims`)."""
    stored = check_executor(executor, recompute)
    kwargs = {"seed": seed, "device": device, "recompute": recompute, "progress": progress, "executor": executor}
    runs: dict[str, ComparisonRun | SpiralRun | None] = {}
    missing = []
    for name, run in (("comparison", lambda: run_comparison(settings, store, data_root=data_root, task=task,
                                                            **kwargs)),
                      ("spiral", lambda: spiral_run(settings, store, **kwargs))):
        try:
            runs[name] = run()
        except RuntimeError as exc:  # run_comparison / spiral_run raise unless their entry is there
            if not (stored and f": {Status.NOT_STORED}:" in str(exc)):
                raise
            runs[name] = None
            missing.append(f"{str(exc).split(': ')[0]}: {Status.NOT_STORED}")
    out, spiral = runs["comparison"], runs["spiral"]
    tables = {}
    if out is not None and spiral is not None:
        table = out.table
        tables["test"] = table[table["eval_set"] == "test"].reindex(columns=list(COMPARISON_TEST_COLUMNS)
                                                                      ).reset_index(drop=True)
        tables["claims"] = comparison_claims(table, out.kd_variants, spiral.table)
    return Summary(experiment, profile, settings, ComparisonRuns(out, spiral), tables, missing)


def _tasks(settings: ComparisonSettings, *, seed: int, device: str, data_root: str | None) -> list[ChainTask]:
    """Notebook 07's MNIST comparison chain, then the spiral's."""
    return [comparison_task(settings, seed=seed, device=device, data_root=data_root),
            spiral_task(settings, seed=seed, device=device)]


def _comparison_gaps(store: ResultsStore, settings: ComparisonSettings, tasks: Sequence[ChainTask],
                     absent: Collection[str], seed: int) -> list[str]:
    """The MNIST comparison table (derived from the chains of ``settings``) with every method, and the
    spiral's entry."""
    table = derived_rows(store, "comparison", "comparison", task_chains(chain_summaries(store), tasks))
    methods = {"Hydra", "GPED", "EnD2", "KD", "Snapshot ensemble", "Long-chain teacher"}
    have = set(table["method"]) if len(table) else set()
    gaps = [f"comparison: no rows for {sorted(methods - have)}"] if methods - have else []
    if not store.entries("spiral", code=numerics_code("spiral")):
        gaps.append("spiral: no complete entry")
    return gaps


#: The Hydra paper's order of test NLLs (its Table 2): ensemble < Hydra < KD < prior networks (EnD²).
NLL_ORDER = (SNAPSHOTS, "Hydra", "KD", "EnD2")


def order_outcome(table: pd.DataFrame) -> str:
    """Rule: on the MNIST test set of a comparison ``table``, NLL ensemble < Hydra < KD < EnD² (prior networks)
    (:data:`NLL_ORDER`), as in the Hydra paper's Table 2: ``yes`` when every adjacent pair is in that order,
    ``partly`` when some are. A pair with a student not known to beat the best constant prediction with its
    predictive (``predictive_skill``: the NLL rests on it alone)
    (:func:`not_known_skilled`) is no evidence and not judged, and the verdict says how many; ``no evidence``
    when more pairs are no evidence than are judged (:func:`~gped_kit.experiments.verdicts.judged_verdict`)."""
    skills = method_skills(table, column="predictive_skill")  # the NLL rests on the predictive alone
    t = table[table["eval_set"] == "test"].set_index("method")["nll"]
    order = [m for m in NLL_ORDER if m in t.index]
    pairs = list(zip(order, order[1:]))
    lacking = not_known_skilled(skills, [m for m in order if m != SNAPSHOTS])
    judged = [(a, b) for a, b in pairs if a not in lacking and b not in lacking]
    hits = sum(t[a] < t[b] for a, b in judged)
    outcome = judged_verdict(hits, len(judged), 0, len(pairs) - len(judged)) if pairs else NO_EVIDENCE
    if lacking:
        outcome += (f" ({len(pairs) - len(judged)} of {len(pairs)} pairs no evidence: {', '.join(lacking)} not known "
                    "to beat the best constant)")
    return outcome


def order_row(figures: Path, profile: str = "default") -> list[Claim]:
    """The Hydra paper's order of test NLLs, judged by :func:`order_outcome` on notebook 07's MNIST table."""
    table = artifact_table(figures, ARTIFACTS["mnist"], profile=profile)
    if table is None:
        return []
    outcome, skills = order_outcome(table), method_skills(table, column="predictive_skill")
    t = table[table["eval_set"] == "test"].set_index("method")["nll"]
    shown = [m for m in (TEACHER, SNAPSHOTS, "Hydra", "KD", "GPED", "EnD2") if m in t.index]
    steps = table[table["eval_set"] == "test"].set_index("method").get("train_steps", pd.Series(dtype=float))
    budget = (f"; Hydra trained {steps['Hydra']:,.0f} steps against KD's {steps['KD']:,.0f}"
              if {"Hydra", "KD"} <= set(steps.dropna().index) and steps["Hydra"] != steps["KD"] else "")
    return [Claim("Hydra paper: test NLL ensemble < Hydra < KD < prior networks (MNIST)", outcome,
                  ", ".join(f"{m} {number(t[m])}" + (f" ({skill_text(skills.get(m, math.nan))})"
                                                      if m in skills and unskilled(skills[m]) else "")
                            for m in shown) + budget,
                  "Hydra paper, Table 2: " + " < ".join(f"{k} {v}" for k, v in HYDRA_TABLE2_MNIST_NLL.items()),
                  link(f"{MNIST_TABLE.format(profile='default')}.md", "comparison") + ", notebook 07",
                  evidence=profile_evidence(profile, PROFILES[profile], 1), kind=HYDRA)]


def mu_row(figures: Path, profile: str = "default") -> list[Claim]:
    """Not a claim of the paper: each student's model uncertainty (MU) error against the long-chain teacher's
    on the MNIST test set (mean absolute error), beside the baseline that predicts zero MU; the verdict
    names the methods no better than predicting zero, those whose MU is no better than the best constant MU
    (``mu_skill`` below :data:`~gped_kit.core.targets.SKILL_FLOOR`) and the students that are no evidence
    (:func:`not_known_skilled`)."""
    t = artifact_table(figures, ARTIFACTS["mu_split"], profile=profile)
    if t is None:
        return []
    skills = method_skills(t)
    t = t[t["eval_set"] == "test"].set_index("method")
    errors = t["mu_mae_teacher"]
    zero = errors.get(ZERO_MU)
    shown = [m for m in ("GPED", "EnD2", "Hydra", SNAPSHOTS) if m in errors.index]
    if zero is None or not shown:
        return []
    lacking = not_known_skilled(skills, [m for m in shown if m != SNAPSHOTS])
    judged = [m for m in shown if m not in lacking]
    worse = [m for m in judged if errors[m] >= zero]
    constant = [m for m in judged if "mu_skill" in t and m != SNAPSHOTS and t.loc[m, "mu_skill"] < SKILL_FLOOR]
    parts = ([f"{', '.join(worse)} no better than predicting zero"] if worse else []) + (
        [f"MU of {', '.join(constant)} no better than the best constant MU"] if constant else []) + (
        [f"{', '.join(lacking)} no evidence (skill not stored or below the floor)"] if lacking else [])
    judged_students = [m for m in judged if m != SNAPSHOTS]
    if not parts:
        parts = ["every student better than predicting zero"]
    elif judged_students and not worse:
        parts.insert(0, f"{', '.join(judged_students)} better than predicting zero")
    return [Claim("(ours) model uncertainty on MNIST test inputs: MAE against the long-chain teacher's, beside "
                  "predicting zero", f"— ({'; '.join(parts)})",
                  ", ".join(f"{m} {number(errors[m])}" for m in shown) + f", predicting zero {number(zero)}",
                  "not in the papers", link(f"{MU_SPLIT_TABLE.format(profile='default')}.md", "MU errors")
                  + ", notebook 07", evidence=profile_evidence(profile, PROFILES[profile], 1), kind=OURS)]


def readme_rows(figures: Path, profile: str = "default") -> list[Claim]:
    """Notebook 07's rows: the Hydra paper's order, then the model uncertainty against predicting zero."""
    return order_row(figures, profile) + mu_row(figures, profile)


# Hydra 20,000 + 60,000 -> 200 + 600 steps; the spiral's chain 100,000 -> 1,000 (B 100), its Hydra 50 + 200
EXPERIMENT = Experiment(
    "07_hydra_comparison", PROFILES, _tasks, summary=comparison_summary, shown_profiles=("default", "long"),
    after_chains=AfterChains.HYDRA, artifacts=ARTIFACTS, checks=CHECKS,
    description="KD, GPED, EnD² and Hydra on one chain; a 2-D spiral; the thesis' input generators",
    scaled_paper={**SCALED_CHAIN, "hydra.phase1_steps": 200, "hydra.phase2_steps": 600,
                  "spiral.num_iterations": 1_000, "spiral.burn_in": 100, "spiral.hydra.phase1_steps": 50,
                  "spiral.hydra.phase2_steps": 200},
    stored=_comparison_gaps, needs_chain_state=True, readme_rows=readme_rows, long_rows=readme_rows)
