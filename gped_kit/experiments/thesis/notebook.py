"""Notebook 08 (Papamakarios' thesis toys) as an :class:`~gped_kit.experiments.frame.Experiment`: what a run
stores, and its row of the README's claims table."""

from __future__ import annotations

import inspect
from collections.abc import Collection, Sequence
from pathlib import Path

import pandas as pd

from ..chains import ChainTask
from ..frame import Experiment
from ..store import ResultsStore
from ..verdicts import NO_EVIDENCE, THESIS, Claim, Evidence, artifact_table, link, verdict
from .artifacts import ARTIFACTS, CHECKS
from .toys import (
    BY_CONSTRUCTION,
    PROFILES,
    ThesisToysSettings,
    logreg_config,
    mog_configs,
    thesis_toys_claims,
    toy_record,
)

#: The claims table notebook 08 writes to ``figures/`` (``.csv`` and ``.md``), per profile; the README reads it.
CLAIMS_TABLE = ARTIFACTS["claims"].file


def _toy_gaps(store: ResultsStore, settings: ThesisToysSettings, tasks: Sequence[ChainTask],
              absent: Collection[str], seed: int) -> list[str]:
    """A complete toy entry for every mixture-of-Gaussians size and for the logistic regression."""
    configs = [*mog_configs(settings, seed), logreg_config(settings, seed)]
    return [f"toy {toy_record(c)}: no complete entry" for c in configs
            if not store.entry("toy", toy_record(c)).complete]


def count_claims(claims: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The thesis' findings (notebook 08's claims table, both metrics stacked) split into ``(held, failing,
    by_construction, unjudged)``: the counted findings that hold and those that do not (each claim and metric
    once), the memory findings, which hold by construction (:data:`~.toys.BY_CONSTRUCTION`), each once, and the
    findings that are no evidence: judged in fewer comparisons than were left out because no student behind them
    beats the best constant prediction (:func:`~gped_kit.experiments.verdicts.judged_verdict`'s majority rule; an
    ``of`` of 0 among them; they count neither way)."""
    by_construction = claims[claims["claim"].isin(BY_CONSTRUCTION)].drop_duplicates("claim")
    counted = claims[~claims["claim"].isin(BY_CONSTRUCTION)]
    of = counted["of"].astype(int)
    left_out = _left_out(counted)
    unjudged = (of == 0) | (left_out > of)
    holds = counted["holds"].astype(bool)
    return counted[holds & ~unjudged], counted[~holds & ~unjudged], by_construction, counted[unjudged]


def claims_text(claims: pd.DataFrame) -> str:
    """``k of n claims hold; not: ...; no evidence: ...; not counted, as they hold by construction: ...``
    (:func:`count_claims`; a comparison whose students do not beat the best constant is named, not counted)."""
    held, failing, by_construction, unjudged = count_claims(claims)
    text = f"{len(held)} of {len(held) + len(failing)} claims hold" + ("" if failing.empty else "; not: " + "; ".join(
        f"{r.claim} on {r.metric} ({int(r['count'])} of {int(r['of'])})" for _, r in failing.iterrows()))
    if len(unjudged):
        text += f"; {NO_EVIDENCE}: " + "; ".join(
            f"{r.claim} on {r.metric} ({_unjudged_reason(int(r['of']), int(left))})"
            for (_, r), left in zip(unjudged.iterrows(), _left_out(unjudged)))
    left_out = int(_left_out(claims[~claims["claim"].isin(BY_CONSTRUCTION)]).sum())
    if left_out:
        text += f"; {left_out} comparisons left out as {NO_EVIDENCE}"
    if len(by_construction):
        text += ("; not counted, as they hold by construction: " +
                 "; ".join(f"{r.claim} ({r.ours})" for _, r in by_construction.iterrows()))
    return text


def _left_out(claims: pd.DataFrame) -> pd.Series:
    """Each claim's comparisons left out as no evidence (0 for a table stored without the column)."""
    column = claims["no_evidence"] if "no_evidence" in claims else pd.Series(0, index=claims.index)
    return column.fillna(0).astype(int)


def _unjudged_reason(judged: int, left_out: int) -> str:
    """Why a claim of :func:`count_claims`' ``unjudged`` is no evidence, in its own counts."""
    if not judged and not left_out:
        return "no comparison ran"
    return (f"{left_out} of its {judged + left_out} comparisons rest on students that do not beat the best "
            "constant prediction")


def online_rule() -> str:
    """The rule by which notebook 08 counts "online as close as batch", read from the code that applies it
    (:func:`~.toys.thesis_toys_claims`' ``factor`` and ``slack``): ``online ≤ 2 × batch + 0.002``."""
    defaults = inspect.signature(thesis_toys_claims).parameters
    return f"online ≤ {defaults['factor'].default:g} × batch + {defaults['slack'].default:g}"


def toys_evidence(profile: str = "default") -> Evidence:
    """The toys' runs: their MCMC bag sizes S (no chain of the kit's), one seed (the notebook's)."""
    p = PROFILES[profile]
    return Evidence(profile, None, 1, length=f"S = {p.mog.num_samples:,} (MoG) / {p.logreg.num_samples:,} (LogReg) "
                                              "samples")


def readme_rows(figures: Path) -> list[Claim]:
    """Rule: the notebook's ``holds`` column for each of the thesis' claims, each claim and metric once;
    the memory findings hold by construction and are reported, not counted (:func:`count_claims`). "Online as
    close as batch" is :func:`online_rule`, on the distance to p_MC (KL) of each comparison."""
    name = CLAIMS_TABLE.format(profile="default")
    t = artifact_table(figures, ARTIFACTS["claims"], profile="default")
    if t is None:
        return []
    held, failing, _, _ = count_claims(t)
    return [Claim("Papamakarios' thesis (Chapters 2–3): online distillation as good as batch (counted as "
                  f"{online_rule()}, in KL to p_MC) with a fraction of the memory; data-based inputs; derivative "
                  "matching",
                  verdict(len(held), len(held) + len(failing)), claims_text(t),
                  "online ≈ batch; noise inputs far worse; derivative matching better",
                  link(f"{name}.md", "claims") + ", notebook 08", evidence=toys_evidence(), kind=THESIS)]


# S = 10,000 -> 1,000 samples (burn-in 100) for both toys, M = 100, 500 SGD iterations per student
EXPERIMENT = Experiment(
    "08_thesis_toys", PROFILES, artifacts=ARTIFACTS, checks=CHECKS,
    description="Papamakarios' toys: online vs batch distillation (mixture of Gaussians, logistic regression)",
    scaled_paper={"mog.num_samples": 1_000, "mog.burn_in": 100, "mog.num_distill_samples": 100,
                  "logreg.num_samples": 1_000, "logreg.burn_in": 100, "logreg.num_iterations": 500},
    stored=_toy_gaps, readme_rows=readme_rows)
