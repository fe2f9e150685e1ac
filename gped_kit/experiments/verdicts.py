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
a verdict of its own, never counted as agreement, and given with its reason. Claims that hold by the
configuration (what the method stores, say) are reported and not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

#: The MNIST models of the claims, with their names in the table.
MODELS = {"fcnn": "FCNN", "cnn_mnist": "CNN"}


@dataclass(frozen=True)
class Claim:
    """One row of the claims table: the claim, the verdict by its rule, our numbers, the paper's
    numbers and the notebook and table that hold them."""

    claim: str
    verdict: str
    ours: str
    paper: str
    where: str
    long: str = "—"  # the verdict and our numbers with profile="long" (notebooks 05-07), where it ran
    long_verdict: str = "—"  # the verdict alone with profile="long", where it ran


def short_verdict(text: str) -> str:
    """A verdict without its reasons: the word(s) and, in parentheses, each count up to its colon,
    leaving out the reason clauses ("its students ...")."""
    word, _, inner = text.partition(" (")
    if not inner:
        return word
    parts = [p.split(": ", 1)[0] for p in inner.rstrip(")").split("; ") if not p.startswith("its ")]
    return f"{word} ({'; '.join(parts)})"


def number(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, or "—" when missing."""
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def link(name: str, label: str) -> str:
    """A Markdown link to ``figures/<name>``."""
    return f"[{label}](figures/{name})"


#: "Within 10%": the largest relative difference from the paper's value that counts as agreement, either way.
WITHIN = 0.10


def within(ours: float, paper: float, tolerance: float = WITHIN) -> bool:
    """``|ours / paper - 1| <= tolerance``: two-sided, so 11% above and 11% below both fail."""
    if not paper or math.isnan(ours) or math.isnan(paper):
        return False
    return abs(ours / paper - 1.0) <= tolerance + 1e-12


def compare(ours: float, paper: float, tolerance: float = WITHIN) -> str:
    """For a metric where lower is better: ``"within"`` (:func:`within`), ``"better"`` (more than
    ``tolerance`` below the paper's), ``"worse"`` (more than ``tolerance`` above) or ``"missing"``."""
    if not paper or math.isnan(ours) or math.isnan(paper):
        return "missing"
    if within(ours, paper, tolerance):
        return "within"
    return "better" if ours < paper else "worse"


def verdict(hits: int, n: int) -> str:
    """``yes`` when all ``n`` agree, ``partly`` when some do, ``no`` when none."""
    return "yes" if n and hits == n else ("partly" if hits else "no")


def counts(text: str, prefix: str = "") -> tuple[int, int]:
    """``(k, n)`` from a count text such as ``"agree in 9 of 12 cells compared"`` or ``"6 of 8"``."""
    body = str(text).split(prefix, 1)[1] if prefix and prefix in str(text) else str(text)
    k, rest = body.split(" of ", 1)
    return int(k.strip().split()[-1]), int(rest.strip().split()[0])


def read_table(figures: Path, name: str) -> pd.DataFrame | None:
    """The table ``figures/<name>`` (a CSV a notebook wrote), or None when it is not there."""
    path = Path(figures) / name
    return pd.read_csv(path) if path.exists() else None


def seeds_of(row: pd.Series) -> int:
    """The number of seeds behind a table row (1 without a ``seeds`` column)."""
    return int(row["seeds"]) if "seeds" in row and not pd.isna(row["seeds"]) else 1


def as_list(out: Claim | list[Claim] | None) -> list[Claim]:
    return out if isinstance(out, list) else [out] if out is not None else []


__all__ = ["MODELS", "Claim", "WITHIN", "within", "compare", "number", "link", "verdict", "counts", "read_table",
           "seeds_of", "as_list", "short_verdict"]
