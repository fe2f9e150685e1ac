"""Notebook 10 (the teacher's sampler at equal work) as an :class:`~gped_kit.experiments.frame.Experiment`:
its summary, its profiles side by side and its rows of the README's claims table."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..frame import Experiment, Summary, read_chains, side_by_side
from ..paper_tables import table1
from ..store import ResultsStore
from ..verdicts import NO_EVIDENCE, OURS, Claim, Evidence, artifact_table, link, number, seeds_text, unskilled
from .artifacts import ARTIFACTS, CHECKS
from .study import (
    PROFILES,
    SamplerStudySettings,
    paper_row,
    sampler_study_tasks,
    study_history,
    study_table,
    study_winners,
)

#: The tables notebook 10 writes to ``figures/`` (``.csv`` and ``.md``), per profile; the README's rows read
#: the first.
STUDY_TABLE = ARTIFACTS["table"].file
STUDY_WINNERS = ARTIFACTS["winners"].file
#: Label of the paper's row in :func:`sampler_table_by_profile`.
PAPER_SAMPLER = "paper, T = 10^6 (Table 1)"


def sampler_summary(experiment: Experiment, store: ResultsStore, settings: SamplerStudySettings, *,
                    profile: str = "default", device: str = "auto", data_root: str | None = None,
                    executor: str = "local", recompute: bool = False, progress: bool = True) -> Summary:
    """Which teacher sampler gets closest to Table 1 at equal work: one chain per (seed, candidate)
    (:func:`~.study.sampler_study_tasks`); ``run`` is the grid. Tables, when every chain finished:
    ``history`` (:func:`~.study.study_history`), ``table`` (:func:`~.study.study_table`: each candidate's last
    values, mean over seeds, beside the paper's) and ``winners`` (:func:`~.study.study_winners`: the lowest
    candidate per quantity and whether the seeds separate it)."""
    tasks = sampler_study_tasks(settings, device=device, data_root=data_root)
    grid, missing = read_chains(tasks, store, executor, recompute, progress)
    tables = {}
    if grid is not None and not missing and not len(grid.failed):
        history = study_history(grid.results, tasks)
        tables = {"history": history, "table": study_table(history, settings.model),
                  "winners": study_winners(history)}
    return Summary(experiment, profile, settings, grid, tables, missing)


def sampler_table_by_profile(summaries: Mapping[str, Summary]) -> pd.DataFrame:
    """Every profile's candidates (:func:`~.study.study_table`) stacked, with a column ``profile``, then the
    paper's Table 1 row."""
    parts = {profile: s.tables["table"] for profile, s in summaries.items()}
    model = next(iter(summaries.values())).settings.model if summaries else "fcnn"
    parts[PAPER_SAMPLER] = pd.DataFrame([{"candidate": PAPER_SAMPLER, **paper_row(model)}])
    return side_by_side(parts)


def _tasks(settings: SamplerStudySettings, *, seed: int, device: str, data_root: str | None) -> list:
    return sampler_study_tasks(settings, device=device, data_root=data_root)


def lowest_text(figures: Path, profile: str, quantities: tuple[str, ...]) -> str:
    """The README's word on a study row: "—" (our own study, not a claim), with, per quantity, the candidate the
    seeds establish as lowest (the stored ``winners`` table, :func:`~.study.study_winners`) or why none is: a gap
    within the seeds' spread, one seed, or a student below the skill floor."""
    w = artifact_table(figures, ARTIFACTS["winners"], profile=profile)
    if w is None:
        return "—"
    w = w.set_index("quantity")
    parts = []
    for q in (q for q in quantities if q in w.index):
        r = w.loc[q]
        parts.append({"yes": f"lowest {q} {r['winner']}",
                      "no": f"lowest {q} not established, {r['winner']} vs {r['runner_up']} within the seeds' spread",
                      "one seed": f"lowest {q} {r['winner']} in one seed, no spread"}.get(
            str(r["separated"]), f"lowest {q} {NO_EVIDENCE}, a student below the skill floor"))
    return f"— ({'; '.join(parts)})" if parts else "—"


def study_row(figures: Path, profile: str = "default") -> Claim | None:
    """Not a claim of the paper: the candidates at equal work, lowest teacher NLL first, the word saying which
    candidate the seeds establish as lowest (:func:`lowest_text`). The ``default``
    profile compares the samplers (teacher NLL); ``pooling`` one chain, pooled chains and the cyclical
    schedule, with the student NLL and entropy MAE that Table 1 also judges, each "no evidence" where its
    student (the lowest over the seeds) is not known to beat the best constant prediction."""
    name = STUDY_TABLE.format(profile=profile)
    t = artifact_table(figures, ARTIFACTS["table"], profile=profile)
    if t is None:
        return None
    t = t.sort_values("teacher NLL")
    steps, seeds = int(t["T"].max()), int(t["seeds"].min())
    seeds_line = seeds_text(seeds)
    where = link(f"{name}.md", "table") + ", notebook 10"
    paper = table1().set_index("model").loc[PROFILES["default"].model]
    evidence = (Evidence(profile, None, seeds, length=f"{steps:,} teacher steps in all") if profile == "pooling"
                else Evidence(profile, steps, seeds))
    if profile == "pooling":
        def student(r: pd.Series, quantity: str) -> str:
            """A student's value, or the verdict word where it is not known to beat the best constant."""
            return NO_EVIDENCE if unskilled(r.get(f"{quantity} skill")) else number(r[quantity], 4)

        return Claim(f"(ours) pooled chains and cyclical step sizes at equal teacher work (FCNN, {steps:,} teacher "
                     f"steps in all, {seeds_line}): teacher NLL / student NLL / entropy MAE",
                     lowest_text(figures, profile, ("teacher NLL", "student NLL", "entropy MAE")),
                     "; ".join(f"{r.candidate} {number(r['teacher NLL'], 4)} / {student(r, 'student NLL')} / "
                               f"{student(r, 'entropy MAE')}" for _, r in t.iterrows()),
                     f"Table 1, FCNN, SGLD at T = 10^6: {paper['teacher_nll']:g} / {paper['student_nll']:g} / "
                     f"{paper['entropy_mae']:g}", where, evidence=evidence, kind=OURS)
    return Claim(f"(ours) the teacher's sampler at equal work (FCNN, T = {steps:,}, {seeds_line})",
                 lowest_text(figures, profile, ("teacher NLL",)),
                 ", ".join(f"{r.candidate} {number(r['teacher NLL'])}" for _, r in t.iterrows()),
                 f"SGLD {paper['teacher_nll']:g} at T = 10^6 (FCNN)", where, evidence=evidence, kind=OURS)


def readme_rows(figures: Path) -> list[Claim]:
    """Notebook 10's rows: the default study, then the ``pooling`` profile's."""
    return [r for r in (study_row(figures), study_row(figures, "pooling")) if r is not None]


# T = 1,101 with the paper's B = 1,000 kept: the warm-up candidate needs B >= its 1,000 warm-up steps
EXPERIMENT = Experiment("10_samplers", PROFILES, _tasks, summary=sampler_summary, shown_profiles=("default", "pooling"),
                        scaled_paper={"num_iterations": 1_101, "test_size": 500}, readme_rows=readme_rows,
                        artifacts=ARTIFACTS, checks=CHECKS,
    description="SGLD, SGHMC, SGNHT, BAOA, pooled and cyclical teachers at equal teacher work")
