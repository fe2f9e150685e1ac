"""Notebook 05 (Experiment 3: the student search) as an :class:`~gped_kit.experiments.frame.Experiment`: its
summary, what a run stores, the lines its checks print and its rows of the README's claims table."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from ...core.schema import record
from ...core.status import Status
from ..chains import ChainTask
from ..frame import (
    SCALED_CHAIN,
    AfterChains,
    Experiment,
    Summary,
    chain_summaries,
    check_executor,
    dataset_of,
    derived_rows,
    first_chain_missing,
    task_chains,
)
from ..paper import paper_model
from ..store import ResultsStore
from ..verdicts import (
    MODELS,
    NO_EVIDENCE,
    NOT_COMPARABLE,
    UNSKILLED_EITHER,
    Claim,
    artifact_table,
    judged_verdict,
    link,
    profile_evidence,
    unskilled,
    verdict,
)
from .artifacts import ARTIFACTS, CHECKS
from .pareto import METHODS, METRICS, metric_rows, search_candidates
from .report import SKILL_QUANTITY, SMALL_SKILL_QUANTITY, experiment3_comparison, stored_skill
from .search import SEARCH_KIND, SEARCH_TABLE, SearchResult, merged_search, run_searches
from .settings import PROFILES, Experiment3Settings
from .tasks import experiment3_tasks, task_targets

#: The tables notebook 05 writes to ``figures/`` (``.csv`` and ``.md``): a model's search beside the paper's per
#: metric and profile (the README's rows read them), the students and the frontier.
VS_PAPER_TABLE = ARTIFACTS["vs_paper"].file
VS_PAPER_PROFILES = ARTIFACTS["profiles"].file
STUDENTS_TABLE = ARTIFACTS["students"].file
FRONTIER_TABLE = ARTIFACTS["frontier"].file
#: Figures 2, 7 and 10, which the README's rows link to.
FIGURE2 = "fig2_experiment3_cnn_mnist_student_nll_{profile}"
FIGURE7 = "fig7_experiment3_cnn_mnist_entropy_mae_{profile}"
FIGURE10 = "fig10_experiment3_fcnn_entropy_mae_{profile}"


@dataclass
class SearchRun:
    """Notebook 05's searches: the :class:`~.search.SearchResult` of each chain (``searches``: model x
    target, :func:`~.tasks.experiment3_tasks`) and our search beside the paper's statements per (model,
    metric) (:func:`~.report.experiment3_comparison`)."""

    searches: list[SearchResult]

    @property
    def results(self) -> dict[str, SearchResult]:
        """Each model's searches of every target as one (:func:`~.search.merged_search`), by model."""
        models = dict.fromkeys(s.model for s in self.searches)
        return {m: merged_search([s for s in self.searches if s.model == m]) for m in models}

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        """The search table of every model with results (every target's rows)."""
        return {model: res.table for model, res in self.results.items() if len(res.table)}

    @cached_property
    def comparisons(self) -> dict[tuple[str, str], pd.DataFrame]:
        """Our search beside the paper's statements per (model, metric) (:func:`experiment3_comparisons`)."""
        return experiment3_comparisons(self.tables)

    @property
    def entries(self) -> list[str]:
        """The store keys of every stored search (for :class:`~gped_kit.viz.pareto_explorer.ParetoExplorer`)."""
        return [s.entry.key for s in self.searches if s.entry is not None]


def experiment3_comparisons(tables: Mapping[str, pd.DataFrame]) -> dict[tuple[str, str], pd.DataFrame]:
    """:func:`~.report.experiment3_comparison` for every model's search table and every metric of
    :data:`~.pareto.METRICS` that a searched student of its target has (Figures 2, 6-13), by (model, metric)."""
    out = {}
    for model, table in tables.items():
        for metric in METRICS:
            cands = search_candidates(table)
            if metric not in cands or metric_rows(cands, metric)[metric].isna().all():
                continue
            out[(model, metric)] = experiment3_comparison(table, model, metric)
    return out


def experiment3_summary(experiment: Experiment, store: ResultsStore, settings: Experiment3Settings, *,
                        profile: str = "default", seed: int = 0, device: str = "auto", data_root: str | None = None,
                        executor: str = "local", recompute: bool = False, progress: bool = True) -> Summary:
    """Experiment 3 (paper Section 3.3; Figures 2, 6-13): every model's chain and search
    (:func:`~.search.run_searches`); ``run`` is a :class:`SearchRun`. Table ``comparison``: every
    (model, metric) of :func:`experiment3_comparisons`, stacked."""
    stored = check_executor(executor, recompute)
    tasks = experiment3_tasks(settings, seed=seed, device=device, data_root=data_root)
    if stored and (missing := first_chain_missing(tasks, store)):
        return Summary(experiment, profile, settings, None, {}, missing)
    found = run_searches(tasks, settings.search_settings(seed), store, recompute=recompute, progress=progress,
                         executor=executor)
    missing = [f"{task.label}: search {Status.NOT_STORED}" for task, r in zip(tasks, found)
               if r.status == Status.NOT_STORED]
    run = SearchRun(found)
    frames = list(run.comparisons.values())
    tables = {"comparison": pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["figure", "model", "metric", "quantity", "ours", "paper", "note"])}
    return Summary(experiment, profile, settings, run, tables, missing)


def _tasks(settings: Experiment3Settings, *, seed: int, device: str, data_root: str | None) -> list[ChainTask]:
    return experiment3_tasks(settings, seed=seed, device=device, data_root=data_root)


def _search_gaps(store: ResultsStore, settings: Experiment3Settings, tasks: Sequence[ChainTask],
                 absent: Collection[str], seed: int) -> list[str]:
    """Every present model's search table of every target (derived from that model's chain of
    ``settings`` for the target, under the profile's search settings; the fair comparison's searches,
    :mod:`.fair`, are extra and not expected): the exhaustive grid and each lambda's distilled, pruned and
    fine-tuned group l1/l2 student."""
    summaries, gaps = chain_summaries(store), []
    for task in tasks:
        model = task.config.model_name
        if dataset_of(task) in absent:
            continue
        table = derived_rows(store, SEARCH_KIND, SEARCH_TABLE, task_chains(summaries, [task]),
                             record(settings.search_settings(seed)))
        k1, k2 = settings.grid(model)
        for target in task_targets(task):
            rows = table[table["target"] == target] if len(table) else table
            grid = (rows["method"] == "exhaustive") & (rows["stage"] == "distilled") if len(rows) else []
            exhaustive = int(sum(grid))
            if exhaustive != len(k1) * len(k2):
                gaps.append(f"search {model} {target}: {exhaustive} exhaustive students, expected {len(k1) * len(k2)}")
            for stage in ("distilled", "pruned", "fine-tuned"):
                n = int(((rows["method"] == "group_lasso") & (rows["stage"] == stage)).sum()) if len(rows) else 0
                if n != len(settings.reg_weights):
                    gaps.append(f"search {model} {target}: {n} group l1/l2 students {stage}, expected "
                                f"{len(settings.reg_weights)}")
    return gaps


def _expected_checks(settings: Experiment3Settings, absent: Collection[str]) -> dict[str, Any]:
    """MNIST ships with the kit, so its models' searches must finish; others may report missing data."""
    return {(CHECKS["search_finished"] if paper_model(model).dataset == "mnist"
             else CHECKS["search_finished_or_missing"]).cell(model=model): True for model in settings.models}


#: Why a verdict whose searched student had an advantage the grid lacked is no evidence without the fair comparison.
UNFAIR_REASON = ("no fair comparison stored: the group l1/l2 students were fine-tuned and trained without dropout, "
                 "the grid not (notebook 05, fair_comparison=True)")
UNFAIR = f"no evidence ({UNFAIR_REASON})"
#: Why a comparison resting on a student not known to beat the best constant prediction is no evidence.
UNSKILLED_REASON = UNSKILLED_EITHER  # the fair table stores one skill per comparison: either reason may hold
#: How the README names the searches' students as they came out, beside the fair comparison its verdict rests on:
#: the group l1/l2 students fine-tuned without dropout, the grid's and the base as trained.
AS_SEARCHED = "as searched (group l1/l2 fine-tuned, the rest not)"


def _fair(figures: Path, profile: str) -> pd.DataFrame | None:
    """The fair comparison notebook 05 wrote for ``profile`` (:func:`~.fair.fair_comparison`), by (model, metric)."""
    t = artifact_table(figures, ARTIFACTS["fair"], profile=profile)
    return t.set_index(["model", "metric"]) if t is not None and len(t) else None


#: Why a model's small-student claim is :data:`~gped_kit.experiments.verdicts.NOT_COMPARABLE`.
NONE_THAT_SMALL = "no pruned student at <= 50% of the base's FLOPs"


def _fair_verdict(results: Sequence[tuple[str, ...]], fair_stored: bool) -> str:
    """The verdict over models from each one's ``(model, word)`` or ``(model, word, reason)``, the word ``yes`` /
    ``no`` / ``no evidence`` / ``not comparable``: :func:`~gped_kit.experiments.verdicts.judged_verdict` over
    those judged (``yes`` / ``no``; no evidence where more models are no evidence than are judged), the rest named
    with their reason: no evidence (the ``reason`` given, else a student below the skill floor or without its
    stored skill, :data:`UNSKILLED_REASON`, where the fair comparison is stored, else its absence:
    :data:`UNFAIR_REASON`), not comparable (:data:`NONE_THAT_SMALL`: nothing of the size the claim is about, which
    is no failure of the claim). A no evidence over models some of which were judged names what they said."""
    default = UNSKILLED_REASON if fair_stored else UNFAIR_REASON
    words = [r[1] for r in results]
    judged = [v for v in words if v in ("yes", "no")]
    reasons = [(r[2] if len(r) > 2 and r[2] else default) for r in results if r[1] == NO_EVIDENCE]
    by_reason = {why: reasons.count(why) for why in dict.fromkeys(reasons)}
    no_evidence, none_small = len(reasons), words.count(NOT_COMPARABLE)
    evidence_notes = [f"{n} no evidence: {why}" for why, n in by_reason.items()]
    small_notes = [f"{none_small} {NOT_COMPARABLE}: {NONE_THAT_SMALL}"] if none_small else []
    if not judged:
        if not none_small:  # all no evidence: one reason is the parentheses, several are counted
            why = "; ".join(evidence_notes) if len(by_reason) > 1 else next(iter(by_reason), default)
            return f"no evidence ({why})"
        if not no_evidence:
            return f"{NOT_COMPARABLE} ({NONE_THAT_SMALL})"
        return f"no evidence ({'; '.join(evidence_notes + small_notes)})"
    word = judged_verdict(judged.count("yes"), len(judged), 0, no_evidence)
    said = [f"{len(judged)} judged: {verdict(judged.count('yes'), len(judged))}"] if word == NO_EVIDENCE else []
    notes = said + evidence_notes + small_notes
    return word + (f" ({'; '.join(notes)})" if notes else "")


def search_rows(figures: Path, profile: str = "default") -> list[Claim]:
    """Rule: a searched student has a lower test NLL than the base student (the teacher's architecture);
    and a pruned student at most half the base's FLOPs loses at most 10% NLL against the base (not comparable
    where no pruned student is that small: :data:`NONE_THAT_SMALL`).

    Judged fairly (:mod:`.fair`): where the profile's fair comparison is stored, the best of both searches
    fine-tuned alike without dropout against the base student fine-tuned the same way. Without it, a win by a group
    l1/l2 student (fine-tuned, no dropout, the base neither) and a small pruned student at most 10% above an untuned
    base are no evidence; a win by a wider grid student (treated as the base was) and a loss stand where the students
    compared are known to beat the best constant prediction (the skill the table carries,
    :data:`~.report.SKILL_QUANTITY` and :data:`~.report.SMALL_SKILL_QUANTITY`), else they are no evidence too. The
    verdict over the models: :func:`_fair_verdict`."""
    beat, small = [], []
    beat_results: list[tuple[str, str, str]] = []  # (model, word, why it is no evidence) for _fair_verdict
    small_results: list[tuple[str, str, str]] = []
    fair = _fair(figures, profile)
    for model in MODELS:
        t = artifact_table(figures, ARTIFACTS["vs_paper"], model=model, metric="student_nll", profile=profile)
        if t is None:
            continue
        q = t.set_index("quantity")
        wins = str(q.loc["a searched student beats the base student", "ours"]) == "True"
        by_group = str(q.loc["best student found by", "ours"]) == METHODS["group_lasso"]
        small_value = q.loc["best group l1/l2 NLL at <= 50% of the base FLOPs", "ours"]
        base = float(q.loc["base student test NLL", "ours"])
        ok = small_value not in ("—", None) and not pd.isna(small_value) and float(small_value) <= 1.1 * base
        paper = (q.loc["best searched student test NLL", "paper"], q.loc["base student test NLL", "paper"],
                 q.loc["best / base FLOPs", "paper"], q.loc["teacher ensemble test NLL", "paper"])
        searched = (f"best {q.loc['best searched student test NLL', 'ours']} vs base "
                    f"{q.loc['base student test NLL', 'ours']} at {q.loc['best / base FLOPs', 'ours']}× FLOPs "
                    f"(teacher {q.loc['teacher ensemble test NLL', 'ours']})")
        small_searched = f"{small_value if small_value != '—' else 'none that small'} vs base {base:.4f}"
        text, small_text = f"{MODELS[model]} {searched}", f"{MODELS[model]} {small_searched}"
        if fair is not None and (model, "student_nll") in fair.index:
            f = fair.loc[(model, "student_nll")]
            skilled = not unskilled(f["skill"])
            beat_word = ("yes" if str(f["beats_base"]) == "True" else "no") if skilled else NO_EVIDENCE
            half = f["group_half_flops_best"]
            small_ok = pd.notna(half) and float(half) <= 1.1 * float(f["base_finetuned"])
            # the small student's comparison rests on it and the base (a table written before says only `skill`)
            small_skilled = not unskilled(f["group_half_flops_skill"] if "group_half_flops_skill" in f.index
                                          else f["skill"])
            best = min(float(f["grid_best_finetuned"]), float(f["group_best_finetuned"]))
            # the verdict's own comparison first, then the searches' students as they came out (not alike)
            text = (f"{MODELS[model]} fine-tuned alike: best {best:.4f} vs base {float(f['base_finetuned']):.4f}; "
                    f"{AS_SEARCHED}: {searched}")
            small_text = (f"{MODELS[model]} fine-tuned alike: "
                          + (f"{float(half):.4f}" if pd.notna(half) else "none that small")
                          + f" vs base {float(f['base_finetuned']):.4f}; {AS_SEARCHED}: {small_searched}")
            beat.append((model, beat_word, text, *paper))
            beat_results.append((model, beat_word, UNSKILLED_REASON))
            small_word = (NOT_COMPARABLE if pd.isna(half) else NO_EVIDENCE if not small_skilled
                          else "yes" if small_ok else "no")
            small.append((model, small_word, small_text))
            small_results.append((model, small_word, UNSKILLED_REASON))
        else:
            # a group l1/l2 student's win is unfair; a grid student's win or a loss stands only where both students it
            # compares are known to beat the best constant prediction (the skill the table carries: a table written
            # before it carried one is no evidence), and so does a small student's loss against the base
            if wins and by_group:
                beat_word, beat_why = NO_EVIDENCE, UNFAIR_REASON
            elif unskilled(stored_skill(q, SKILL_QUANTITY)):
                beat_word, beat_why = NO_EVIDENCE, UNSKILLED_REASON
            else:
                beat_word, beat_why = ("yes" if wins else "no"), ""
            none_small = small_value in ("—", None) or pd.isna(small_value)
            if none_small:
                small_word, small_why = NOT_COMPARABLE, ""
            elif ok:
                small_word, small_why = NO_EVIDENCE, UNFAIR_REASON
            elif unskilled(stored_skill(q, SMALL_SKILL_QUANTITY)):
                small_word, small_why = NO_EVIDENCE, UNSKILLED_REASON
            else:
                small_word, small_why = "no", ""
            beat.append((model, beat_word, text, *paper))
            beat_results.append((model, beat_word, beat_why))
            small.append((model, small_word, small_text))
            small_results.append((model, small_word, small_why))
    if not beat:
        return []
    paper = "; ".join(f"{MODELS[m]} ≈{b} vs {base} at {fl}× FLOPs (teacher {te})" for m, _, _, b, base, fl, te in beat
                      if b != "—")
    where = link(f"{FIGURE2.format(profile='default')}.png", "Figure 2") + ", notebook 05"
    evidence = profile_evidence(profile, PROFILES[profile], 1)  # the notebook runs one seed
    beat_verdict = _fair_verdict(beat_results, fair is not None)
    small_verdict = _fair_verdict(small_results, fair is not None)
    return [Claim("Exp. 3: a searched student beats the base student (test NLL)",
                  beat_verdict, "; ".join(b[2] for b in beat), paper, where, evidence=evidence),
            Claim("Exp. 3: pruned students at ≤ 50% of the base's FLOPs lose little (≤ 10% NLL)",
                  small_verdict, "; ".join(s[2] for s in small), "a small loss (Figure 2)", where, evidence=evidence)]


def entropy_rows(figures: Path, profile: str = "default") -> list[Claim]:
    """Rule (Figures 7 and 10, the expected-entropy students): per MNIST model, the best searched student has a
    lower expected-entropy MAE than the base student AND was found by group l1/l2 + pruning, as the paper's
    best entropy students were; judged fairly (:func:`~.fair.fair_comparison`: both searches fine-tuned alike,
    no dropout, at least one unit pruned), and without the profile's fair comparison no evidence (the group
    l1/l2 students' fine-tuning and missing dropout are advantages the grid lacked). The size ratios are shown
    beside the paper's, not judged. No row when no entropy table was written for ``profile``."""
    results, ours, paper = [], [], []
    fair = _fair(figures, profile)
    for model in MODELS:
        t = artifact_table(figures, ARTIFACTS["vs_paper"], model=model, metric="entropy_mae", profile=profile)
        if t is None:
            continue
        q = t.set_index("quantity")
        how = str(q.loc["best student found by", "ours"])
        ratios = {who: f"{q.loc['best / base parameters', who]}× parameters, {q.loc['best / base FLOPs', who]}× FLOPs"
                  for who in ("ours", "paper")}
        searched = (f"best {q.loc['best searched student expected-entropy MAE', 'ours']} vs base "
                    f"{q.loc['base student expected-entropy MAE', 'ours']} ({how}; {ratios['ours']})")
        text = f"{MODELS[model]} {searched}"
        if fair is not None and (model, "entropy_mae") in fair.index:
            f = fair.loc[(model, "entropy_mae")]
            results.append((model, str(f["verdict"]), UNSKILLED_REASON))
            text = (f"{MODELS[model]} fine-tuned alike: group {float(f['group_best_finetuned']):.4f} "
                    f"({int(f['units_pruned']):,} of {int(f['units_before']):,} units pruned) vs grid "
                    f"{float(f['grid_best_finetuned']):.4f}, base {float(f['base_finetuned']):.4f}; "
                    f"{AS_SEARCHED}: {searched}")
        else:
            results.append((model, NO_EVIDENCE, UNFAIR_REASON))
        ours.append(text)
        paper.append(f"{MODELS[model]} {q.loc['best student found by', 'paper']}, {ratios['paper']}")
    if not results:
        return []
    where = (link(f"{FIGURE7.format(profile='default')}.png", "Figure 7") + ", "
             + link(f"{FIGURE10.format(profile='default')}.png", "Figure 10") + ", notebook 05")
    return [Claim("Exp. 3 (Figures 7, 10): the best expected-entropy student is a searched one, found by group "
                  "ℓ1/ℓ2 + pruning", _fair_verdict(results, fair is not None), "; ".join(ours), "; ".join(paper), where,
                  evidence=profile_evidence(profile, PROFILES[profile], 1))]


def readme_rows(figures: Path, profile: str = "default") -> list[Claim]:
    """The README's rows of notebook 05: the predictive search (:func:`search_rows`) and the entropy search
    (:func:`entropy_rows`)."""
    return search_rows(figures, profile) + entropy_rows(figures, profile)


# Experiment 3's fine-tuning: 600 epochs -> 0.3 with the lr halved every 0.1 epochs; latency 50 -> 2 repeats
EXPERIMENT = Experiment(
    "05_experiment3_search", PROFILES, _tasks, summary=experiment3_summary, shown_profiles=("default", "long"),
    after_chains=AfterChains.SEARCH, artifacts=ARTIFACTS, checks=CHECKS,
    description="Experiment 3: width grid, group ℓ1/ℓ2 pruning and fine-tuning; Figures 2, 6, 8, 9; the Pareto "
                "explorer",
    scaled_paper={**SCALED_CHAIN, "search.finetune_epochs": 0.3, "search.finetune_lr_halving_epochs": 0.1,
                  "search.latency_repeats": 2},
    stored=_search_gaps, expected_checks=_expected_checks, needs_chain_state=True, readme_rows=readme_rows,
    long_rows=readme_rows)
