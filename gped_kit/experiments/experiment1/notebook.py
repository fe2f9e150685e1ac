"""Notebook 01 (Table 1) as an :class:`~gped_kit.experiments.frame.Experiment`: its summary, the lines its
checks print and its rows of the README's claims table."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..device_runs import paper_length_runs
from ..frame import SCALED_CHAIN, Experiment, Summary, chain_seconds, read_chains
from ..paper import teacher_caption
from ..store import ResultsStore
from ..verdicts import (
    ANOTHER_PROFILE,
    GPED,
    MODELS,
    NO_EVIDENCE,
    NOT_SEPARABLE,
    UNSKILLED_EITHER,
    Claim,
    Evidence,
    Finding,
    artifact_table,
    judged_verdict,
    link,
    lowest_known,
    number,
    profile_evidence,
    seeds_of,
    seeds_text,
    unskilled,
    unskilled_reason,
)
from .ablation import ablation_for
from .analysis import TABLE1, experiment1_table, table1_outcome
from .artifacts import ARTIFACTS, CHECKS
from .settings import PROFILES, Experiment1Settings
from .tasks import experiment1_tasks

#: The notebook's models (its parameter ``models``).
MODELS_RUN = ["fcnn", "cnn_mnist", "cnn_cifar10"]


def experiment1_summary(experiment: Experiment, store: ResultsStore, settings: Experiment1Settings, *,
                        models: Sequence[str] = tuple(MODELS_RUN), profile: str = "default", seed: int = 0,
                        device: str = "auto", data_root: str | None = None, executor: str = "local",
                        recompute: bool = False, progress: bool = True) -> Summary:
    """Table 1 (paper Section 4.2): Experiment 1's chains (:func:`~.tasks.experiment1_tasks`) run, reused or
    (``executor="stored"``) read back; ``run`` is the :class:`~gped_kit.experiments.chains.ChainGrid`. Tables:
    ``table1`` (:func:`~.analysis.experiment1_table` for ``models``) and ``run_time``
    (:func:`~gped_kit.experiments.frame.chain_seconds`)."""
    tasks = experiment1_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    grid, missing = read_chains(tasks, store, executor, recompute, progress, settings.chains_per_batch)
    if grid is None:
        return Summary(experiment, profile, settings, None, {}, missing)
    table1 = experiment1_table(grid.table)
    table1 = table1[table1["model"].isin(models)]
    return Summary(experiment, profile, settings, grid, {"table1": table1, "run_time": chain_seconds(grid)}, missing)


def _tasks(settings: Experiment1Settings, *, seed: int, device: str, data_root: str | None,
           models: Sequence[str], estimator_ablation: bool) -> list:
    """Table 1's chains, then (``estimator_ablation``) the U_s - U_o ablation's (:func:`~.ablation.ablation_for`),
    in the order the notebook runs them."""
    tasks = experiment1_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    if estimator_ablation:
        tasks += ablation_for(settings).tasks(seed, device, data_root)
    return tasks


def _expected_checks(settings: Experiment1Settings, absent: Collection[str]) -> dict[str, Any]:
    """Every run's MNIST cells complete, and every cell runs or reports missing data."""
    return {CHECKS["mnist_finished"].cell(): True, CHECKS["finished_or_missing"].cell(): True}


# ----------------------------------------------------------------------------- the README's rows
#: Table 1's metrics, with their names in the rows.
NAMES = {"teacher_nll": "teacher", "student_nll": "student", "entropy_mae": "entropy MAE"}
GAP_CLAIM = "Table 1: a student distilled online stays close to its teacher (NLL gap > 0, at most 2× the paper's)"
VALUES_CLAIM = "Table 1 within 10% of the paper's values"


def _seeds(t: pd.DataFrame) -> int:
    return min(seeds_of(t.loc[m]) for m in t.index)


def gpu_student_nll(figures: Path) -> dict[str, dict[str, float]]:
    """Per model, the predictive students' test NLL under U_s and U_o of its complete paper-length GPU chain
    (committed beside ``figures``), with the lower of their skills (NaN where one was not stored), for
    :func:`~.analysis.estimator_gap`."""
    out = {}
    for model, run in _gpu_runs(figures).items():
        us, uo = run.cell("student_nll", "U_s"), run.cell("student_nll", "U_o")
        if us is not None and uo is not None:
            out[model] = {"U_s": us.ours, "U_o": uo.ours, "skill": lowest_known(pd.Series([us.skill, uo.skill]))}
    return out


def gpu_table1(figures: Path) -> dict[str, dict[str, float]]:
    """Per model, Table 1's cells of its complete paper-length GPU chain (committed beside ``figures``): the
    teacher NLL, the U_s student's NLL and the U_o entropy student's MAE, for
    :func:`~.analysis.table1_by_profile`."""
    out = {}
    for model, run in _gpu_runs(figures).items():
        cells = {"teacher_nll": run.cell("teacher_nll", None), "student_nll": run.cell("student_nll", "U_s"),
                 "entropy_mae": run.cell("entropy_mae", "U_o")}
        if all(c is not None for c in cells.values()):
            out[model] = {k: c.ours for k, c in cells.items()}
    return out


def _gpu_runs(figures: Path) -> dict:
    """The complete paper-length GPU runs of notebook 01 (committed beside ``figures``, under
    ``docs/device-runs``), per model."""
    return {m: r for m, r in paper_length_runs(Path(figures).parent).items() if r.complete and m in MODELS}


def _gpu_evidence(runs: dict) -> Evidence:
    """The evidence of the paper profile's GPU runs: T, one run per model (its seed), which models."""
    scope = " and ".join(MODELS[m] for m in MODELS if m in runs) + (" only" if len(runs) < len(MODELS) else "")
    return Evidence("paper", PROFILES["paper"].num_iterations, 1, device="a GPU", scope=scope)


def gap_outcome(gap: float, theirs: float, spread: float, skill: float) -> str:
    """One model's outcome of the gap rule (:func:`table1_gap`): ``hold`` (0 < gap <= twice the paper's gap),
    ``fail``, :data:`NOT_SEPARABLE` (a gap closer to 0 or to twice the paper's than ``spread``, the run-to-run or
    seed-to-seed spread of the gap; 0 or NaN: unknown) or :data:`NO_EVIDENCE` (the student's ``skill`` below the
    floor or not stored)."""
    if unskilled(skill):
        return NO_EVIDENCE
    if spread > 0 and min(abs(gap), abs(gap - 2 * theirs)) < spread:
        return NOT_SEPARABLE
    return "hold" if 0 < gap <= 2 * theirs else "fail"


def gap_verdict(outcomes: Sequence[str], reason: str = UNSKILLED_EITHER) -> str:
    """The verdict of :func:`gap_outcome`'s outcomes over the models judged, those not judged named (where none
    is judged, the word says it and the parentheses say why; ``reason``: why the students that are no evidence
    are, :func:`~gped_kit.experiments.verdicts.unskilled_reason`)."""
    held, near, none = (outcomes.count(w) for w in ("hold", NOT_SEPARABLE, NO_EVIDENCE))
    judged = len(outcomes) - near - none
    if not judged and none and not near:
        return f"{NO_EVIDENCE} ({reason})"
    if not judged and near and not none:
        return f"{NOT_SEPARABLE} (each gap within its spread of 0 or of twice the paper's)"
    notes = ([f"{near} {NOT_SEPARABLE}"] if near else []) + ([f"{none} {NO_EVIDENCE}: {reason}"] if none else [])
    return judged_verdict(held, judged, near, none) + (f" ({'; '.join(notes)})" if notes else "")


def _signed(x: float) -> str:
    """``x`` with its sign and 3 decimals (``+0.027``, ``-0.010``), or "—" when missing."""
    return "—" if pd.isna(x) else f"{x:+.3f}"


def table1_gap(figures: Path) -> Claim | None:
    """Rule: the student's NLL is above its teacher's (a positive gap) by at most twice the paper's gap
    (:func:`gap_outcome`): over the seeds with their spread (Table 1's ``nll_gap_std``, the standard deviation
    over the seeds of each seed's gap; for a table written without it, the sum of the two NLLs' standard
    deviations), and on a GPU run at the paper's length (Table 1's student: U_s) with the run-to-run spread; a
    student that is no evidence (its skill below the floor or not stored) is not judged. The gaps are shown with
    their sign."""
    name = TABLE1.format(profile="default")
    t = artifact_table(figures, ARTIFACTS["table1"], profile="default")
    if t is None:
        return None
    t = t[t["model"].isin(list(MODELS))].set_index("model")
    per_seed = "nll_gap" in t and "nll_gap_std" in t  # the gap per seed: its own spread over seeds
    gaps = {m: t.loc[m, "nll_gap"] if per_seed else t.loc[m, "student_nll"] - t.loc[m, "teacher_nll"]
            for m in t.index}
    paper = {m: t.loc[m, "student_nll_paper"] - t.loc[m, "teacher_nll_paper"] for m in t.index}

    def column(m: str, c: str) -> float:
        return float(t.loc[m, c]) if c in t and pd.notna(t.loc[m, c]) else 0.0 if c.endswith("_std") else math.nan

    def spread(m: str) -> float:
        return column(m, "nll_gap_std") if per_seed else column(m, "student_nll_std") + column(m, "teacher_nll_std")

    seeds = _seeds(t)
    skills = {m: column(m, "student_nll_skill") for m in t.index}
    judged = gap_verdict([gap_outcome(gaps[m], paper[m], spread(m), skills[m]) for m in t.index],
                         unskilled_reason([s for s in skills.values() if unskilled(s)]))
    gpu = None
    if runs := _gpu_runs(figures):
        outcomes, ours, lacking = [], [], []
        for m, run in runs.items():
            student, teacher = run.cell("student_nll", "U_s"), run.cell("teacher_nll", None)
            gap, theirs = student.ours - teacher.ours, student.paper - teacher.paper
            outcomes.append(gap_outcome(gap, theirs, (student.spread or 0.0) + (teacher.spread or 0.0),
                                        student.skill))
            ours.append(f"{MODELS[m]} {gap:+.4f} (the paper's {theirs:+.3f})")
            lacking += [student.skill] if unskilled(student.skill) else []
        gpu = Finding(_gpu_evidence(runs), gap_verdict(outcomes, unskilled_reason(lacking)), ", ".join(ours))
    return Claim(GAP_CLAIM, judged,
                 ", ".join(f"{MODELS[m]} {_signed(gaps[m])}" for m in MODELS if m in gaps) + f" ({seeds_text(seeds)})",
                 ", ".join(f"{MODELS[m]} {_signed(paper[m])}" for m in MODELS if m in paper),
                 link(f"{name}.md", "Table 1") + ", notebook 01",
                 evidence=profile_evidence("default", PROFILES["default"], seeds), gpu=gpu)


def table1_minutes_per_seed(figures: Path, profile: str, models: list[str]) -> float | None:
    """The chains' measured computing time of one seed of ``profile``, every model in ``models``
    together, in minutes: per model, its chains' seconds (all seeds, as notebook 01's per-profile
    table gives them from the store entries) over its seeds, summed; None where that table or a
    model's time is missing."""
    t = artifact_table(figures, ARTIFACTS["profiles"])
    if t is None or "seconds" not in t:
        return None
    rows = t[(t["profile"] == profile) & t["model"].isin(models)].set_index("model")
    if set(rows.index) != set(models) or rows["seconds"].isna().any() or (rows["seeds"] < 1).any():
        return None
    return float((rows["seconds"] / rows["seeds"]).sum()) / 60


def count_text(outcome: dict, n: int, label: Callable[[object], str], reason: str = UNSKILLED_EITHER) -> str:
    """The parentheses of a values verdict: how many ``within 10%`` of the ``n`` judged, then each other outcome
    counted and named (better than the paper's, not separable, no evidence, with ``reason``, why); empty when all
    are within."""
    within_n = sum(o == "within" for o in outcome.values())
    parts = [f"{within_n} of {n} within 10%"] if n and (within_n < n or len(outcome) > n) else []
    for word, text, why in (("better", "better than the paper's", ""), (NOT_SEPARABLE, NOT_SEPARABLE, ""),
                            (NO_EVIDENCE, NO_EVIDENCE, f" ({reason})")):
        cells = [c for c, o in outcome.items() if o == word]
        if cells:  # the count before the colon, which the README's short verdict keeps
            parts.append(f"{len(cells)} {text}: " + ", ".join(label(c) for c in cells) + why)
    return f" ({'; '.join(parts)})" if parts else ""


def _unexplained(figures: Path | None) -> str:
    """The clause that says a student better than the paper's is unexplained, with what the GPU run at the
    paper's H shows (its U_s student beside the paper's) where one is committed beside ``figures``."""
    clause = "unexplained"
    for m, run in (_gpu_runs(figures) if figures is not None else {}).items():
        cell = run.cell("student_nll", "U_s")
        if cell is not None and cell.outcome == "better":
            clause += (f": at the paper's H = {PROFILES['paper'].predictive_thinning} and T = 10^6 on a GPU our "
                       f"{MODELS[m]} U_s student is better than the paper's too ({cell.ours:.4f} vs {cell.paper:g})")
            break
    return clause


def values_verdict(outcome: dict, label: Callable[[object], str], unexplained: str = "unexplained",
                   reason: str = UNSKILLED_EITHER) -> str:
    """``yes``/``partly``/``no`` by the cells within 10% among those judged (:func:`judged_verdict`: cells not
    separable or no evidence left out), with :func:`count_text` (``reason``: why the cells that are no evidence
    are) and, where a cell is better than the paper's, the ``unexplained`` clause."""
    words = list(outcome.values())
    hits, near, none = words.count("within"), words.count(NOT_SEPARABLE), words.count(NO_EVIDENCE)
    judged = len(words) - near - none
    counted = count_text(outcome, judged, label, reason)
    if counted and "better" in words:
        counted = f"{counted[:-1]}; {unexplained})"
    return judged_verdict(hits, judged, near, none) + counted


def table1_values(figures: Path, profile: str, label: str) -> Claim | None:
    """Rule: teacher NLL, student NLL and entropy MAE each within 10% of the paper's, two-sided
    (:func:`~gped_kit.experiments.verdicts.compare`, with the seeds' standard deviation as the spread: a mean
    closer to a bound than that is not separable); cells more than 10% below the paper's are counted apart as
    better than the paper's (unexplained), and a student below the skill floor (where the table has a
    ``<metric>_skill`` column) as no evidence. The default profile's row has the verdict on a GPU run at the
    paper's length beside it, on Table 1's cells of the models that completed one (with the run-to-run spread);
    other profiles' rows are the same claim again (:data:`~gped_kit.experiments.verdicts.ANOTHER_PROFILE`)."""
    name = TABLE1.format(profile=profile)
    t = artifact_table(figures, ARTIFACTS["table1"], profile=profile)
    if t is None:
        return None
    t = t[t["model"].isin(list(MODELS))].set_index("model")
    metrics = ("teacher_nll", "student_nll", "entropy_mae")

    outcome = {}
    for m in (m for m in MODELS if m in t.index):
        for k in metrics:  # the table's own words (table1_outcome) in compare's, which the GPU cells use too
            word = table1_outcome(t.loc[m], k)
            outcome[(m, k)] = {"within 10%": "within", "—": "missing"}.get(word, word)

    def value(m: str, k: str) -> str:
        std = t.loc[m, f"{k}_std"] if f"{k}_std" in t else float("nan")
        return number(t.loc[m, k], 4) + ("" if pd.isna(std) else f" ± {number(std, 4)}")

    ours = "; ".join(f"{MODELS[m]}: " + ", ".join(f"{NAMES[k]} {value(m, k)}" for k in metrics) for m in MODELS
                     if m in t.index)
    seeds = _seeds(t)
    paper = "; ".join(f"{MODELS[m]}: " + ", ".join(f"{t.loc[m, f'{k}_paper']:g}" for k in metrics) for m in MODELS
                      if m in t.index)
    def cell_name(cell: object) -> str:
        m, k = cell  # type: ignore[misc]
        return f"{MODELS[m]} {NAMES[k]}"

    lacking = [t.loc[m].get(f"{k}_skill", math.nan) for (m, k), o in outcome.items() if o == NO_EVIDENCE]
    judged = values_verdict(outcome, cell_name, _unexplained(figures), unskilled_reason(lacking))
    per_model = {MODELS[m]: seeds_of(t.loc[m]) for m in MODELS if m in t.index}
    seeds_line = (seeds_text(seeds) if len(set(per_model.values())) <= 1 else
                  "seeds: " + ", ".join(f"{m} {n}" for m, n in per_model.items()))
    minutes = table1_minutes_per_seed(figures, profile, list(t.index))
    if minutes is not None:
        seeds_line += f"; {minutes:.1f} min a seed for {' and '.join(MODELS[m] for m in MODELS if m in t.index)}"
    gpu = None
    if profile == "default" and (runs := _gpu_runs(figures)):
        cells = {(m, c.metric): c for m, run in runs.items() for c in run.cells if c.in_table1}
        reason = unskilled_reason([c.skill for c in cells.values() if c.outcome == NO_EVIDENCE])
        gpu = Finding(_gpu_evidence(runs), values_verdict({key: c.outcome for key, c in cells.items()}, cell_name,
                                                          reason=reason),
            "; ".join(f"{MODELS[m]}: " + ", ".join(f"{NAMES[c.metric]} {c.ours:.4f} ({c.outcome}"
                                                   + (f"; spread {c.spread:.4f})" if c.spread else ")")
                                                   for (mm, _), c in cells.items() if mm == m)
                      for m in runs))
    return Claim(f"{VALUES_CLAIM}: {label}", judged, f"{ours} ({seeds_line})", paper + " (T = 10^6)",
                 link(f"{name}.md", "table") + ", notebook 01",
                 evidence=profile_evidence(profile, PROFILES[profile], seeds),
                 kind=GPED if profile == "default" else ANOTHER_PROFILE, gpu=gpu)


def readme_rows(figures: Path) -> list[Claim]:
    """Notebook 01's rows: the gap, then the values of the default and the ``cpu30`` profiles (the same claim
    again: counted once, in the default profile)."""
    rows = [table1_gap(figures),
            table1_values(figures, "default", f"the default profile ({teacher_caption(PROFILES['default'])})"),
            table1_values(figures, "cpu30", f"`profile=\"cpu30\"` ({teacher_caption(PROFILES['cpu30'])}; the row "
                                            "above in another profile, not counted again)")]
    return [r for r in rows if r is not None]


EXPERIMENT = Experiment(
    "01_experiment1", PROFILES, _tasks, parameters={"models": MODELS_RUN, "estimator_ablation": True},
    summary=experiment1_summary,
    shown_profiles=("default", "cpu30"), scaled_paper=SCALED_CHAIN,
    expected_checks=_expected_checks, readme_rows=readme_rows, artifacts=ARTIFACTS, checks=CHECKS,
    description="Experiment 1: Table 1 over 3 seeds; the `cpu30` profile beside it")
