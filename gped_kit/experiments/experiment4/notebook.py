"""Notebook 06 (Experiment 4: downstream uncertainty) as an :class:`~gped_kit.experiments.frame.Experiment`: its
summary, what a run stores, the lines its checks print and its rows of the README's claims table."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .. import paper_tables
from ..chains import ChainTask
from ..claims import AGREEMENT_COUNTS
from ..frame import (
    SCALED_CHAIN,
    Experiment,
    Summary,
    chain_summaries,
    check_executor,
    dataset_of,
    derived_missing,
    derived_rows,
    first_chain_missing,
    task_chains,
)
from ..paper import paper_model
from ..prose import method_name
from ..store import ResultsStore
from ..verdicts import (
    MODELS,
    NO_EVIDENCE,
    NOT_SEPARABLE,
    PRECONDITION,
    Claim,
    Evidence,
    artifact_table,
    judged_verdict,
    link,
    number,
    profile_evidence,
    verdict,
    within,
)
from .analysis import experiment4_claims, experiment4_teacher_lines
from .artifacts import ARTIFACTS, CHECKS
from .evaluate import run_experiment4
from .settings import ENDD_EVAL_TEMPERATURES, PROFILES, Experiment4Settings
from .tasks import experiment4_tasks

#: Notebook 06's models (its parameter ``models``).
MODELS_RUN = ["fcnn", "cnn_mnist", "cnn_cifar10"]
#: The tables notebook 06 writes to ``figures/`` (``.csv`` and ``.md``); the README's rows read the claims of a
#: profile and every profile's teacher quality.
CLAIMS_TABLE = ARTIFACTS["claims"].file
#: The expected calibration error of the teachers and the largest GPED and EnD2 students, per profile.
CALIBRATION_TABLE = ARTIFACTS["calibration"].file
CLAIMS_PROFILES = ARTIFACTS["profiles"].file
TEACHER_QUALITY_PROFILES = ARTIFACTS["teacher_quality"].file
#: Every student's value beside its own teacher ensemble's (:func:`~.analysis.experiment4_teacher_lines`).
TEACHER_LINES = ARTIFACTS["teacher_lines"].file


def students_above_teacher(figures: Path, profile: str, ood_inputs: str) -> tuple[int, int] | None:
    """How many students' OOD AUROC (every method, estimator, size, uncertainty and seed; OOD inputs
    ``ood_inputs``, "whole" or "masked") exceeds their own teacher ensemble's, of how many: a student above
    its teacher separates the OOD set better than what it distils, so its AUROC does not measure how
    faithfully it distilled the ensemble. None without the notebook's table."""
    t = artifact_table(figures, ARTIFACTS["teacher_lines"], profile=profile)
    return None if t is None else above_teacher(t, ood_inputs)


def above_teacher(teacher_lines: pd.DataFrame, ood_inputs: str) -> tuple[int, int]:
    """How many rows of ``teacher_lines`` (:func:`~.analysis.experiment4_teacher_lines`, in memory or read
    back) have an OOD AUROC with OOD inputs ``ood_inputs`` above their own teacher ensemble's, of how many."""
    if teacher_lines.empty:
        return 0, 0
    rows = teacher_lines[(teacher_lines["metric"] == "auroc") & (teacher_lines["ood_inputs"] == ood_inputs)]
    rows = rows.dropna(subset=["minus_teacher"])
    return int((rows["minus_teacher"] > 0).sum()), len(rows)


def teacher_summary(downstream: pd.DataFrame) -> pd.DataFrame:
    """The teacher lines per (metric, model, uncertainty, OOD inputs, method) for the test NLL and the OOD
    AUROC (:func:`~.analysis.experiment4_teacher_lines`): the ensemble's value (mean over seeds and sets), how
    many student values, the lowest and highest, and the range of student minus teacher."""
    teacher = experiment4_teacher_lines(downstream)
    keys = ["metric", "model", "uncertainty", "ood_inputs", "method"]
    return (teacher[teacher["metric"].isin(["nll", "auroc"])].fillna({"uncertainty": "—", "ood_inputs": "—"})
            .groupby(keys, sort=False)
            .agg(teacher=("teacher", "mean"), students=("value", "size"), lowest=("value", "min"),
                 highest=("value", "max"), minus_teacher_min=("minus_teacher", "min"),
                 minus_teacher_max=("minus_teacher", "max"))
            .reset_index())


def teacher_quality(downstream: pd.DataFrame) -> pd.DataFrame:
    """The teacher ensemble's own test NLL and accuracy per model (mean over seeds, with the seeds'
    range), beside the paper's ensemble NLL (Table 2, same setting) and their ratio."""
    columns = ["model", "metric", "teacher", "lowest", "highest", "seeds", "paper", "teacher / paper"]
    if downstream.empty or "metric" not in downstream:
        return pd.DataFrame(columns=columns)
    rows = downstream[(downstream["method"] == "Ensemble") & downstream["metric"].isin(["nll", "accuracy"])]
    if "seed" not in rows:
        rows = rows.assign(seed=0)
    per_seed = rows.groupby(["model", "metric", "seed"], sort=False)["value"].mean().reset_index()
    out = (per_seed.groupby(["model", "metric"], sort=False)
           .agg(teacher=("value", "mean"), lowest=("value", "min"), highest=("value", "max"), seeds=("seed", "size"))
           .reset_index())
    paper = paper_tables.experiment4_in_distribution()
    paper = paper[paper["method"] == "Ensemble"].groupby(["model", "metric"])["value"].first()
    out["paper"] = [paper.get((m, k), float("nan")) for m, k in zip(out["model"], out["metric"])]
    out["teacher / paper"] = out["teacher"] / out["paper"]
    return out[columns]


def experiment4_summary(experiment: Experiment, store: ResultsStore, settings: Experiment4Settings, *,
                        models: Sequence[str] = tuple(MODELS_RUN), profile: str = "default", seed: int = 0,
                        device: str = "auto", data_root: str | None = None, executor: str = "local",
                        recompute: bool = False, progress: bool = True) -> Summary:
    """Experiment 4 (paper Section 4; Appendices A.3, A.4, B.3): every chain's evaluation
    (:func:`~.evaluate.run_experiment4`, one chain per seed and model); ``run`` is the
    :class:`~.evaluate.Experiment4Run`. Tables: ``claims`` (:func:`~.analysis.experiment4_claims`: ours, the
    paper's, agreement per cell, the count per seed), ``teacher`` (:func:`teacher_summary`) and
    ``teacher_quality`` (:func:`teacher_quality`)."""
    stored = check_executor(executor, recompute)
    tasks = experiment4_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    if stored and (missing := first_chain_missing(tasks, store)):
        return Summary(experiment, profile, settings, None, {}, missing)
    run = run_experiment4(tasks, store, settings, seed=seed, recompute=recompute, progress=progress,
                          executor=executor)
    missing = derived_missing(run.evaluations, "evaluation")
    downstream = run.downstream
    tables = {"claims": experiment4_claims(downstream), "teacher": teacher_summary(downstream),
              "teacher_quality": teacher_quality(downstream)}
    return Summary(experiment, profile, settings, run, tables, missing)


def _tasks(settings: Experiment4Settings, *, seed: int, device: str, data_root: str | None,
           models: Sequence[str]) -> list[ChainTask]:
    """Notebook 06's chains: one per seed of the settings and model, seeds outermost."""
    return experiment4_tasks(models, settings, seed=seed, device=device, data_root=data_root)


def _evaluation_gaps(store: ResultsStore, settings: Experiment4Settings, tasks: Sequence[ChainTask],
                     absent: Collection[str], seed: int) -> list[str]:
    """Every present chain's downstream evaluation, with a row group for each of its students, and one
    more for each student with a temperature (EnD2) at every further evaluation temperature."""
    summaries, gaps = chain_summaries(store), []
    for task in tasks:
        if dataset_of(task) in absent:
            continue
        downstream = derived_rows(store, "experiment4", "downstream", task_chains(summaries, [task]))
        rows = downstream[downstream["method"] != "Ensemble"] if len(downstream) else downstream
        n = rows.groupby(["method", "estimator", "student"]).ngroups if len(rows) else 0
        heated = sum(student.resolved_target.has_temperature for student in task.students)
        expected = len(task.students) + heated * len(ENDD_EVAL_TEMPERATURES)
        if n != expected:
            gaps.append(f"experiment 4 {task.label}: {n} evaluated students, expected {expected} "
                        f"({len(task.students)} students, {heated} of them EnD2 also at "
                        f"τ = {', '.join(f'{t:g}' for t in ENDD_EVAL_TEMPERATURES)})")
    return gaps


def _expected_checks(settings: Experiment4Settings, absent: Collection[str]) -> dict[str, Any]:
    """Every cell ran or reported missing data, and the MNIST models whose data is here have results."""
    models = [m for m in MODELS_RUN if paper_model(m).dataset not in absent]
    return {CHECKS["finished_or_missing"].cell(): True, CHECKS["mnist_cells"].cell(): ", ".join(sorted(models))}


# ----------------------------------------------------------------------------- the README's rows
def claims_profile(figures: Path, profile: str = "default") -> str | None:
    """The profile Experiment 4's claim rows of ``profile`` rest on (:func:`claim_rows`): for ``default``, the
    ``seeds`` profile (the default's chains over three seeds, so each cell's winner comes with its spread) where
    notebook 06 wrote its claims, else ``default``; any other profile itself. None where that table is absent."""
    candidates = ("seeds", "default") if profile == "default" else (profile,)
    return next((p for p in candidates if artifact_table(figures, ARTIFACTS["claims"], profile=p) is not None), None)


def agreement_verdict(row: pd.Series) -> str:
    """The verdict on a claims row's agreement counts (:data:`~gped_kit.experiments.claims.AGREEMENT_COUNTS`:
    ``a`` cells agree of the ``c`` compared, ``k`` not separable, ``n`` no evidence):
    :func:`~gped_kit.experiments.verdicts.judged_verdict` over the ``c`` cells compared (no evidence where more
    cells are no evidence than compared), with the cells left out named after the count."""
    a, c, near, none = (int(row[k]) for k in AGREEMENT_COUNTS)
    left_out = ([f"{near} {NOT_SEPARABLE}: within the seeds' spread"] if near else []) + (
        [f"{none} {NO_EVIDENCE}: a student below the skill floor or stored without its skill"] if none else [])
    parts = ([f"agree in {a} of {c} cells"] if c else []) + left_out
    return judged_verdict(a, c, near, none) + (f" ({'; '.join(parts)})" if parts else "")


def claim_rows(figures: Path, profile: str = "default") -> list[Claim]:
    """Rule: cell by cell against the paper's MNIST cells (Tables 2-4, 8-16): ``yes`` when every cell
    compared agrees, ``partly`` when some do, ``no`` when none; a cell whose winner of ours lies within the seeds'
    spread (GPED's margin smaller than its standard deviation over the seeds: not separable) or rests on a student
    below the skill floor (no evidence) is named and not compared, and where more cells are no evidence than are
    compared the verdict is no evidence (:func:`agreement_verdict`). The OOD claims have no cell in common
    with the paper (its OOD sets, KMNIST and notMNIST, are not obtainable here), so they are shown
    as counts beside the paper's MNIST count, not judged. EnD² at τ = 1 decides; τ = 2.5 is beside it.
    The evidence for ``default``: its chains over three seeds (the ``seeds`` profile's table) where stored, else its
    one seed (where no spread is known, so every cell counts) (:func:`claims_profile`)."""
    source = claims_profile(figures, profile)
    if source is None:
        return []
    t = artifact_table(figures, ARTIFACTS["claims"], profile=source)
    seeds = len(PROFILES[source].seeds)
    rows = []
    for _, r in t.iterrows():
        if sum(int(r[k]) for k in AGREEMENT_COUNTS[1:]):  # a cell compared, or left out of the comparison
            judged = agreement_verdict(r)
        elif not int(r["judged_cells"]):  # none of our cells judged: no evidence or not separable
            judged = f"not comparable (no OOD set in common; on ours {r['ours']})"
        else:  # GPED higher in k of n cells of ours: say who leads on the OOD sets we have
            k, n = int(r["gped_cells"]), int(r["judged_cells"])
            # our cells left out of the count (not separable, no evidence), named after it
            left = "; ".join(f"{int(r[column])} {word}" for column, word in (
                ("ours_not_separable", NOT_SEPARABLE), ("ours_no_evidence", NO_EVIDENCE)) if int(r[column]))
            cells = "cells judged" if left else "cells"
            leader, lead = ("GPED", k) if 2 * k > n else ("EnD²", n - k) if 2 * k < n else ("neither", k)
            judged = (f"not comparable (no OOD set in common; on ours {leader} leads in {lead} of {n} {cells}"
                      if leader != "neither" else f"not comparable (no OOD set in common; on ours a tie, {k} of {n}")
            judged += f"; {left}" if left else ""
            inputs = "masked" if "masked" in str(r["claim"]) else "whole"
            above = students_above_teacher(figures, source, inputs)
            judged += f"; students above their teacher's AUROC in {above[0]} of {above[1]})" if above else ")"
        ours = f"{r['ours']}; vs {method_name(r['beside'])}: {r['ours_beside']}"
        if seeds > 1 and "seeds" in r and isinstance(r["seeds"], str):
            ours += f"; per seed: {r['seeds']}"
        if "students above their teacher's AUROC" in judged:
            ours += ("; a student above its own teacher ensemble's AUROC separates the OOD set better than what it "
                     "distils, so these AUROCs do not measure how faithfully the ensemble was distilled")
        claim = (r["claim"].replace("nll", "NLL").replace("entropy_mae", "entropy MAE").replace("auroc", "OOD AUROC")
                 .replace("ndcg@20", "nDCG@20"))
        rows.append(Claim(method_name(f"Exp. 4: {claim}"),
                          judged, ours,
                          f"{r['paper']}; {r['paper_statement']}",
                          link(f"{CLAIMS_TABLE.format(profile=source)}.md", "claims") + ", notebook 06",
                          evidence=_evidence(profile, source)))
    return rows


def _evidence(profile: str, source: str | None = None) -> Evidence:
    """The profile's chains and seeds (one chain per seed and model); ``source``: the profile whose table the
    verdict reads (e.g. ``seeds``, the default's chains over three seeds), named by ``profile``."""
    source = source or profile
    return profile_evidence(profile, PROFILES[source], len(PROFILES[source].seeds))


def teacher_row(figures: Path, profile: str = "default") -> list[Claim]:
    """Rule: the teacher ensemble's test NLL within 10% of the paper's (two-sided) in Experiment 4's MNIST settings
    (Table 2: N = 60,000, m = 15); read from the teacher-quality table of every profile."""
    t = artifact_table(figures, ARTIFACTS["teacher_quality"])
    column = f"teacher / paper ({profile})"
    if t is None or column not in t:
        return []
    t = t[(t["metric"] == "nll") & t["model"].isin(list(MODELS))].dropna(subset=[column]).set_index("model")
    if t.empty:
        return []
    hits = sum(within(float(r), 1.0) for r in t[column])  # the column is ours / the paper's
    return [Claim("Exp. 4's teachers (MNIST, m = 15): test NLL within 10% of the paper's (a precondition: every "
                  "claim of Exp. 4 is judged against them; not counted)", verdict(hits, len(t)),
                  ", ".join(f"{MODELS[m]} {number(t.loc[m, f'teacher ({profile})'], 4)} "
                            f"({number(t.loc[m, column], 2)}× the paper's)" for m in MODELS if m in t.index),
                  ", ".join(f"{MODELS[m]} {t.loc[m, 'paper']:g}" for m in MODELS if m in t.index) + " (T = 10^6)",
                  link(f"{TEACHER_QUALITY_PROFILES}.md", "teachers") + ", notebook 06",
                  evidence=_evidence(profile), kind=PRECONDITION)]


def readme_rows(figures: Path, profile: str = "default") -> list[Claim]:
    """Notebook 06's rows: the teachers' quality, then every claim."""
    return teacher_row(figures, profile) + claim_rows(figures, profile)


EXPERIMENT = Experiment(
    "06_experiment4_uncertainty", PROFILES, _tasks, parameters={"models": MODELS_RUN}, summary=experiment4_summary,
    shown_profiles=("default", "long", "seeds"), scaled_paper=SCALED_CHAIN, stored=_evaluation_gaps,
    expected_checks=_expected_checks, needs_chain_state=True, readme_rows=readme_rows, long_rows=readme_rows,
    artifacts=ARTIFACTS, checks=CHECKS,
    description="Experiment 4: GPED vs EnD² on NLL, entropy, OOD AUROC, nDCG@20 (Tables 2–4, 8–16; Figures 14, 15)")
