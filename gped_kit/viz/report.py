"""What a notebook reports about itself: its profile, how long it ran, and where its results came from.

A notebook starts a :class:`NotebookClock` in its first code cell and calls
:meth:`NotebookClock.report` in its last: one line with the profile, the measured wall time of
the run, the device and torch version of this kernel, and how many stored results were reused
or computed, with the device and torch version that made them (a result reused from the store
may have been made on another machine, e.g. a GPU). :func:`missing_data_line` says once, in one
line and without paths, which data sets a run could not find (each cell that lacks its data keeps
the loader's full message, with the files it looked for, in its ``error``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch

from ..core.status import Status
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


def _missing(source: Any) -> list[str]:
    """The error messages of the cells of ``source`` whose status is ``missing data``."""
    if isinstance(source, pd.DataFrame):
        if "status" not in source or "error" not in source:
            return []
        return [str(e) for e in source.loc[source["status"] == Status.MISSING_DATA, "error"] if isinstance(e, str)]
    cells = getattr(source, "cells", None)
    if isinstance(cells, pd.DataFrame):
        return _missing(cells)
    if getattr(source, "status", None) == Status.MISSING_DATA and isinstance(getattr(source, "error", None), str):
        return [source.error]
    if isinstance(source, Iterable) and not isinstance(source, str):
        return [e for item in source for e in _missing(item)]
    return []


def missing_data_line(*sources: Any) -> str:
    """One line naming the data sets that ``sources`` (chain grids, search results, status tables
    with ``status`` and ``error`` columns) could not find, each once, by the first line of the
    loader's message (:attr:`gped_kit.data.sources.DatasetNotFoundError.summary`: no paths); empty
    when nothing is missing. A notebook prints it once instead of every cell's full message."""
    summaries = list(dict.fromkeys(e.splitlines()[0].strip() for s in sources for e in _missing(s) if e.strip()))
    if not summaries:
        return ""
    return (f"Not on this machine: {'; '.join(s.rstrip('.') for s in summaries)}. Those cells are skipped and "
            "show the paper's numbers only; place the data under the data root to run them (the loader's "
            "message in each skipped cell's `error` lists the files it looked for).")


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
