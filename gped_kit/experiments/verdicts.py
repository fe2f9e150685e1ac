"""The README's claims table, row by row: each experiment judges the paper's claims on the tables it wrote.

Every number the README states about a result comes from a committed table its notebook wrote to
``figures/`` (never from a hand-copied value). Each experiment package gives its rows
(:attr:`~gped_kit.experiments.frame.Experiment.readme_rows`: a function of the figures folder returning
:class:`Claim` rows, each judged by the rule written beside it); ``python -m gped_kit.cli.readme`` puts
every experiment's rows into one table.

Verdicts: ``yes`` (the claim holds in the kit's run by the rule stated), ``partly`` (in some of the settings
the claim covers), ``no`` (in none), ``not run`` (a setting that cannot run here, with the reason). The
paper's numbers are always in their own column, labelled as the paper's.

"Within 10%" means one thing everywhere: ``|ours / paper's - 1| <= 0.10`` (:func:`within`), two-sided. A
value more than 10% below the paper's, where lower is better, is *better than the paper's* (:func:`compare`):
a verdict of its own, never counted as agreement. A value closer to a 10% bound than the measured spread of
runs of the same setting (:func:`compare` with ``spread``) is *not separable*: neither in nor out. A difference
between two of our values smaller than that spread is not separable either (:func:`separable`). No verdict
states a cause the results do not show; "unexplained" says so. Claims that hold by the configuration (what the
method stores, say) are reported and not counted.

Every row names its evidence (:class:`Evidence`: the profile, the chain length T, the chains pooled, the
seeds; "one seed" when there is one), and whose claim it is (:attr:`Claim.kind`): the README's verdict counts
only GPED's own claims (:data:`GPED`), each once, in the default profile; the Hydra paper's and the thesis'
rows, our own studies, preconditions and the same claim in another profile are reported apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.metrics import lowest_known as lowest_known_value
from ..core.metrics import lowest_skill
from ..core.targets import SKILL_FLOOR
from .artifacts import Artifact, read_manifest

#: The MNIST models of the claims, with their names in the table.
MODELS = {"fcnn": "FCNN", "cnn_mnist": "CNN"}


#: Whose claim a row judges (:attr:`Claim.kind`). Only :data:`GPED` rows are counted in the README's verdict.
GPED = "GPED"
#: A condition the paper's claims rest on (e.g. Experiment 4's teachers within 10% of the paper's): not a claim.
PRECONDITION = "precondition"
#: The same claim as a row above, judged in another profile (e.g. Table 1 with ``cpu30``): counted once, there.
ANOTHER_PROFILE = "another profile"
#: Claims of the Hydra paper (Tran et al.) and of Papamakarios' thesis: reported apart, each with its verdict.
HYDRA = "Hydra paper"
THESIS = "thesis"
#: Our own studies (rows "(ours) ..."): no claim of any paper.
OURS = "ours"
#: How far a profile ran (the paper profile at full length): a status, not a claim.
RUN = "run"
KINDS = (GPED, PRECONDITION, ANOTHER_PROFILE, HYDRA, THESIS, OURS, RUN)


def seeds_text(n: int) -> str:
    """``one seed`` or ``3 seeds``."""
    return "one seed" if int(n) == 1 else f"{int(n):,} seeds"


def steps_text(steps: int) -> str:
    """A chain length: ``5,000``, or ``10^6`` for a million steps."""
    return "10^6" if steps == 1_000_000 else f"{steps:,}"


@dataclass(frozen=True)
class Evidence:
    """What a verdict rests on: the ``profile``, the chain length ``steps`` (T of each chain; None for runs that
    are not chains, with ``length`` saying what instead), the ``chains`` pooled into one teacher, the number of
    ``seeds``, the ``device`` where it is not a CPU (e.g. "a GPU") and the ``scope`` where the evidence covers
    only part of the claim (e.g. "FCNN only"). ``str``: ``default, T = 5,000, 3 seeds``,
    ```long`, T = 16,000 × 4 chains, one seed``, ```paper` on a GPU (FCNN only), T = 10^6, one seed``."""

    profile: str
    steps: int | None
    seeds: int = 1
    chains: int = 1
    device: str = ""
    scope: str = ""
    length: str = ""

    def __str__(self) -> str:
        name = self.profile if self.profile == "default" else f"`{self.profile}`"
        if self.device:
            name += f" on {self.device}"
        if self.scope:
            name += f" ({self.scope})"
        if self.steps is not None:
            length = f"T = {steps_text(self.steps)}" + (f" × {self.chains} chains" if self.chains > 1 else "")
        else:
            length = self.length
        return ", ".join(p for p in (name, length, seeds_text(self.seeds)) if p)


def profile_evidence(profile: str, settings: object, seeds: int, scope: str = "") -> Evidence:
    """The :class:`Evidence` of a profile's chains (``settings``: a
    :class:`~gped_kit.experiments.paper.ChainSettings`: its ``num_iterations`` and ``num_chains``)."""
    return Evidence(profile, int(getattr(settings, "num_iterations")), int(seeds),
                    int(getattr(settings, "num_chains", 1)), scope=scope)


@dataclass(frozen=True)
class Finding:
    """A verdict on evidence other than the row's own (e.g. the paper profile on a GPU): the evidence, the
    verdict by the row's rule, and our numbers behind it."""

    evidence: Evidence
    verdict: str
    ours: str


@dataclass(frozen=True)
class Claim:
    """One row of the claims table: the claim, the verdict by its rule, our numbers, the paper's
    numbers and the notebook and table that hold them; what the verdict rests on (``evidence``), whose
    claim it is (``kind``, one of :data:`KINDS`) and, where the store has stronger evidence for (part of)
    the same claim, the verdicts on it: the ``long`` profile's and the paper profile's on a GPU (``gpu``)."""

    claim: str
    verdict: str
    ours: str
    paper: str
    where: str
    long: str = "—"  # the verdict and our numbers with profile="long" (notebooks 05-07), where it ran
    long_verdict: str = "—"  # the verdict alone with profile="long", where it ran
    evidence: Evidence | None = None  # what ``verdict`` rests on
    kind: str = GPED
    long_evidence: Evidence | None = None  # what ``long_verdict`` rests on
    gpu: Finding | None = None  # the paper profile on a GPU, where the store has it for this claim


#: Clauses of a verdict's parentheses that explain rather than count ("unexplained: ..."); the short verdict
#: leaves them out (``figures/claims.md`` keeps them).
EXPLAINING = ("its ", "unexplained")


def verdict_word(text: str) -> str:
    """The verdict's word(s) without the parentheses: ``yes``, ``partly``, ``no``, ``not comparable``, ..."""
    return str(text).split(" (", 1)[0]


def short_verdict(text: str) -> str:
    """A verdict without its reasons: the word(s) and, in parentheses, each count up to its colon,
    leaving out the explaining clauses (:data:`EXPLAINING`)."""
    word, _, inner = text.partition(" (")
    if not inner:
        return word
    parts = [p.split(": ", 1)[0] for p in inner[:-1].split("; ") if not p.startswith(EXPLAINING)] \
        if inner.endswith(")") else [inner]
    return f"{word} ({'; '.join(parts)})" if parts else word


def number(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, or "—" when missing."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def link(name: str, label: str) -> str:
    """A Markdown link to ``figures/<name>``."""
    return f"[{label}](figures/{name})"


#: "Within 10%": the largest relative difference from the paper's value that counts as agreement, either way.
WITHIN = 0.10


#: The verdict word for a value closer to a bound (or to another value) than the measured spread of runs.
NOT_SEPARABLE = "not separable"
#: The verdict word for a claim the results have nothing to set against (e.g. no student of the size it is about).
NOT_COMPARABLE = "not comparable"
#: The verdict word for a comparison that involves a student not known to beat the best constant prediction
#: (:func:`unskilled`: its skill below :data:`~gped_kit.core.targets.SKILL_FLOOR`, or not stored): a shape or an
#: order of its errors is one a constant prediction also draws, so it is neither agreement nor disagreement.
NO_EVIDENCE = "no evidence"


def within(ours: float, paper: float, tolerance: float = WITHIN) -> bool:
    """``|ours / paper - 1| <= tolerance``: two-sided, so 11% above and 11% below both fail."""
    if not paper or math.isnan(ours) or math.isnan(paper):
        return False
    return abs(ours / paper - 1.0) <= tolerance + 1e-12


def _known(spread: float | None) -> bool:
    return spread is not None and not math.isnan(spread) and spread > 0


def bound_distance(ours: float, paper: float, tolerance: float = WITHIN) -> float:
    """How far ``ours`` is from the nearer of the paper's two bounds, ``paper * (1 -/+ tolerance)``."""
    return min(abs(ours - paper * (1 - tolerance)), abs(ours - paper * (1 + tolerance)))


def compare(ours: float, paper: float, tolerance: float = WITHIN, spread: float | None = None) -> str:
    """For a metric where lower is better: ``"within"`` (:func:`within`), ``"better"`` (more than
    ``tolerance`` below the paper's), ``"worse"`` (more than ``tolerance`` above) or ``"missing"``; where the
    run-to-run ``spread`` of ``ours`` is known, :data:`NOT_SEPARABLE` when ``ours`` is closer to a bound than
    that spread (``|ours - bound| < spread``): the runs cannot tell in from out."""
    if not paper or math.isnan(ours) or math.isnan(paper):
        return "missing"
    if _known(spread) and bound_distance(ours, paper, tolerance) < spread:
        return NOT_SEPARABLE
    if within(ours, paper, tolerance):
        return "within"
    return "better" if ours < paper else "worse"


def separable(difference: float, spread: float | None) -> bool:
    """Whether a difference between two of our values (e.g. U_o's and U_s's) is larger than the measured
    run-to-run ``spread`` (always, where no spread is known): ``|difference| >= spread``."""
    return not (_known(spread) and abs(difference) < spread)


def student_skill(rows: pd.DataFrame) -> pd.Series:
    """Each student row's lowest skill (:func:`~gped_kit.core.metrics.lowest_skill`: of its error against the
    teacher's expectation), NaN where the row reports none (stored before every target reported skill)."""
    if rows.empty:
        return pd.Series(dtype=float, index=rows.index)
    return pd.Series([(found[1] if (found := lowest_skill(row.dropna())) else math.nan)
                      for _, row in rows.iterrows()], index=rows.index, dtype=float)


def unskilled(skill: float) -> bool:
    """Whether a student with ``skill`` (over the best constant prediction, :func:`student_skill`) is no evidence:
    below :data:`~gped_kit.core.targets.SKILL_FLOOR`, or not stored (NaN: a result stored before every built-in
    target reported skill), since a student counts only where it is known to beat the best constant."""
    try:
        return bool(pd.isna(skill) or float(skill) < SKILL_FLOOR)
    except (TypeError, ValueError):
        return True


#: Why a comparison is no evidence where the skills behind it may be either below the floor or not stored.
UNSKILLED_EITHER = "a student below the skill floor, or stored without its skill"


def unskilled_reason(skills: list[float]) -> str:
    """Why the students with ``skills`` (those that are no evidence, :func:`unskilled`) count for nothing, from what
    is stored: "a student below the skill floor" where every skill is stored, "a student stored without its skill"
    where none is, :data:`UNSKILLED_EITHER` where both occur or ``skills`` is empty."""
    stored = sum(not pd.isna(s) for s in skills)
    if not skills or 0 < stored < len(skills):
        return UNSKILLED_EITHER
    return "a student below the skill floor" if stored else "a student stored without its skill"


def lowest_known(skill: pd.Series) -> float:
    """The lowest of ``skill`` (one student's over its seeds, or several students' behind one value), NaN where
    any of them was not stored: a value counts only if every student behind it is known to beat the constant."""
    return lowest_known_value(skill.astype(float))


def skill_unknown(row: pd.Series, metric: str) -> bool:
    """Whether ``row``'s ``metric`` is a student's whose skill was not stored (no ``<metric>_skill`` column, or
    a missing value); never for the teacher's metrics (``teacher_...``)."""
    column = f"{metric}_skill"
    return not metric.startswith("teacher_") and (column not in row.index or pd.isna(row[column]))


def no_evidence(row: pd.Series, metric: str) -> bool:
    """Whether ``row``'s ``metric`` comes from a student that is no evidence (:func:`unskilled`: its skill over
    the best constant prediction, the ``<metric>_skill`` column, below
    :data:`~gped_kit.core.targets.SKILL_FLOOR` or not stored): a comparison that involves such a student counts
    for nothing. Never for the teacher's metrics (``teacher_...``), which need no skill."""
    if metric.startswith("teacher_"):
        return False
    column = f"{metric}_skill"
    return unskilled(row[column] if column in row.index else math.nan)


def verdict(hits: int, n: int) -> str:
    """``yes`` when all ``n`` agree, ``partly`` when some do, ``no`` when none."""
    return "yes" if n and hits == n else ("partly" if hits else "no")


def judged_verdict(hits: int, judged: int, not_separable: int = 0, no_evidence: int = 0) -> str:
    """The verdict word over the ``judged`` cells (:func:`verdict`), as every verdict of the kit counts: cells
    within the seeds' spread (``not_separable``) or resting on a student that is no evidence (``no_evidence``)
    are left out of it, and named beside it by the caller. Where no cell is judged: :data:`NO_EVIDENCE` if any
    is no evidence, else :data:`NOT_SEPARABLE` if any is not separable (never ``no``). Where more of a claim's
    cells are no evidence than are judged, :data:`NO_EVIDENCE` too: a word resting on the fewer cells would
    speak for the claim (``yes`` from 1 cell of 8, the other 7 students no better than a constant)."""
    if judged and no_evidence <= judged:
        return verdict(hits, judged)
    return NO_EVIDENCE if no_evidence else NOT_SEPARABLE if not_separable else verdict(hits, judged)


def artifact_table(figures: Path, artifact: Artifact, **values: Any) -> pd.DataFrame | None:
    """The table a notebook wrote as ``artifact`` for the cell ``values`` (its profile among them) into
    ``figures``, found through the folder's manifest (:mod:`~gped_kit.experiments.artifacts`); None when no
    notebook has recorded it there."""
    record = read_manifest(figures).owner(f"{artifact.stem(**values)}.csv")
    path = Path(figures) / f"{record.stem}.csv" if record is not None else None
    return pd.read_csv(path) if path is not None and path.exists() else None


def seeds_of(row: pd.Series) -> int:
    """The number of seeds behind a table row (1 without a ``seeds`` column)."""
    return int(row["seeds"]) if "seeds" in row and not pd.isna(row["seeds"]) else 1


def as_list(out: Claim | list[Claim] | None) -> list[Claim]:
    return out if isinstance(out, list) else [out] if out is not None else []


__all__ = ["MODELS", "Claim", "Evidence", "Finding", "WITHIN", "NOT_SEPARABLE", "NOT_COMPARABLE", "NO_EVIDENCE",
           "SKILL_FLOOR", "KINDS", "GPED", "PRECONDITION", "ANOTHER_PROFILE", "HYDRA", "THESIS", "OURS", "RUN",
           "within", "compare", "bound_distance", "separable", "student_skill", "lowest_known", "unskilled",
           "skill_unknown", "no_evidence", "number", "link", "verdict", "judged_verdict", "verdict_word",
           "artifact_table",
           "seeds_of", "seeds_text", "steps_text", "profile_evidence", "as_list", "short_verdict"]
