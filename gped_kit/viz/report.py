"""What a notebook reports about itself: its profile, how long it ran, and where its results came from.

A notebook starts a :class:`NotebookClock` in its first code cell and calls
:meth:`NotebookClock.report` in its last: one line with the profile, the measured wall time of
the run, the device and torch version of this kernel, and how many stored results were reused
or computed, with the device and torch version that made them (a result reused from the store
may have been made on another machine, e.g. a GPU).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch

from ..engine import resolve_device


def _statuses(source: Any) -> list[str]:
    if isinstance(source, str):
        return [source]
    if isinstance(source, pd.DataFrame):
        return [str(s) for s in source["status"]] if "status" in source else []
    cells = getattr(source, "cells", None)
    if isinstance(cells, pd.DataFrame):
        return _statuses(cells)
    status = getattr(source, "status", None)
    if isinstance(status, str):
        return [status]
    if isinstance(source, Iterable):
        return [s for item in source for s in _statuses(item)]
    return []


def _makers(source: Any) -> list[str]:
    """``"<device>, torch <version>"`` of every stored result in ``source`` (entries' metadata)."""
    out: list[str] = []
    entries = []
    for outcome in getattr(source, "outcomes", []) or []:
        if getattr(outcome, "entry", None) is not None:
            entries.append(outcome.entry)
    if getattr(source, "entry", None) is not None:
        entries.append(source.entry)
    for entry in entries:
        meta = entry.meta
        if meta:
            out.append(f"{meta.get('device') or 'cpu'}, torch {meta.get('machine', {}).get('torch', '?')}")
    if isinstance(source, Iterable) and not isinstance(source, (str, pd.DataFrame)):
        for item in source:
            out.extend(_makers(item))
    return out


class NotebookClock:
    """Started when a notebook starts; :meth:`report` prints the summary line (see the module docstring)."""

    def __init__(self, profile: str, device: str = "auto") -> None:
        self.profile = profile
        self.device = str(resolve_device(device))
        self.started = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def summary(self, *sources: Any) -> str:
        counts = Counter(s for source in sources for s in _statuses(source))
        makers = Counter(m for source in sources for m in _makers(source))
        line = (f"profile {self.profile!r}: this run took {self.seconds:.1f} s on {self.device} "
                f"(torch {torch.__version__})")
        if counts:
            line += "; results " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        if makers:
            line += "; stored results made on " + ", ".join(f"{m} ({n})" for m, n in sorted(makers.items()))
        return line

    def report(self, *sources: Any) -> None:
        """Print :meth:`summary` for ``sources``: chain grids, search results, status tables or strings."""
        print(self.summary(*sources))
