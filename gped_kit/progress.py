"""Progress display for long loops: a live bar in JupyterLab, concise text lines in headless runs.

A bar saved into an executed notebook freezes at whatever it last drew (often "0%" when the
widget state is not saved), so a reader of a committed notebook sees a run that never
progressed. Headless runs therefore print short lines instead: one at the start, one at each
fifth of the run (or every five minutes on long runs) and one at the end, e.g.::

    GPED x3: 1000/5000 it (20%), 31.2 it/s, 2:08 left, teacher_nll=0.123

Which display a loop uses (:class:`ProgressMode`) is, in order: the caller's explicit choice,
the environment variable ``GPED_PROGRESS`` (``bar``, ``lines`` or ``off``; ``make test`` sets
``lines``, the notebook batch runner ``off``, so that executed notebooks keep no progress or status
lines), then ``bar``. :func:`status_line` prints the one-line statuses of a grid's cells (``[3/9]
fcnn ...: reused (0.3 s)``) under the same switch: ``off`` silences them too. Progress is how a run
is shown, never what it computes: nothing here enters a result's key or code fingerprint.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from tqdm.auto import tqdm

from .core.options import Option, parse_option

#: Environment variable naming the default progress display.
PROGRESS_ENV = "GPED_PROGRESS"


class ProgressMode(Option):
    """How a long loop shows its progress."""

    BAR = "bar"
    LINES = "lines"
    OFF = "off"


def progress_mode(progress: bool | str | ProgressMode = True) -> ProgressMode:
    """The display for a loop asked to show ``progress``.

    ``False`` is :attr:`ProgressMode.OFF`; ``True`` defers to ``$GPED_PROGRESS`` (default
    ``bar``); a mode or its name is taken as given. Unknown names raise ``ValueError`` naming
    the parameter (or the environment variable) and the allowed values.
    """
    if progress is False:
        return ProgressMode.OFF
    if progress is True:
        return parse_option(ProgressMode, os.environ.get(PROGRESS_ENV, "bar").strip().lower() or "bar",
                            f"${PROGRESS_ENV}")
    return parse_option(ProgressMode, progress, "progress")


def status_line(text: str, progress: bool | str | ProgressMode = True, stream: TextIO | None = None) -> None:
    """Print one status line of a long run (a cell of a grid done, reused, missing its data) unless
    ``progress`` (as for :func:`progress_mode`: True defers to ``$GPED_PROGRESS``) is off."""
    if progress_mode(progress) is not ProgressMode.OFF:
        print(text, file=stream or sys.stdout, flush=True)


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _format_postfix(postfix: Mapping[str, Any]) -> str:
    parts = []
    for name, value in postfix.items():
        parts.append(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}")
    return ", ".join(parts)


class Progress:
    """Progress of a loop of ``total`` units that starts at ``initial`` (a resumed run).

    :meth:`update` moves it to an absolute position with optional named values; :meth:`close`
    ends it. With :attr:`ProgressMode.LINES` it prints at the start, whenever a fifth of the
    run has passed or ``line_seconds`` since the last line, and at the end.
    """

    def __init__(self, total: int, description: str, unit: str = "it", initial: int = 0,
                 mode: bool | str | ProgressMode = True, line_seconds: float = 300.0,
                 stream: TextIO | None = None) -> None:
        self.mode = progress_mode(mode)
        self.total, self.description, self.unit = int(total), description, unit
        self.initial = self.position = int(initial)
        self.line_seconds = line_seconds
        self.stream = stream
        self.postfix: dict[str, Any] = {}
        self._started = self._last_line = time.perf_counter()
        self._next_fifth = 1  # the next k with position >= k/5 of the total gets a line
        self._bar = None
        self._closed = False
        if self.mode is ProgressMode.BAR:
            self._bar = tqdm(total=self.total, initial=self.initial, desc=description, unit=unit,
                             mininterval=1.0, file=stream)
        elif self.mode is ProgressMode.LINES:
            while self.total and 5 * self.initial >= self._next_fifth * self.total:
                self._next_fifth += 1
            start = f"resuming at {self.initial}/{self.total} {unit}" if self.initial else f"{self.total} {unit}"
            self._print(f"{description}: {start}")

    def _print(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)

    def _line(self) -> str:
        elapsed = time.perf_counter() - self._started
        done = self.position - self.initial
        rate = done / elapsed if elapsed > 0 else float("nan")
        percent = 100.0 * self.position / self.total if self.total else 100.0
        text = f"{self.description}: {self.position}/{self.total} {self.unit} ({percent:.0f}%)"
        if done > 0:
            text += f", {rate:.3g} {self.unit}/s"
            if self.position < self.total:
                text += f", {_clock((self.total - self.position) / rate)} left"
            else:
                text += f", {_clock(elapsed)} in all"
        if self.postfix:
            text += ", " + _format_postfix(self.postfix)
        return text

    def update(self, position: int, **postfix: Any) -> None:
        """Move to ``position`` (absolute) and show ``postfix`` values beside it."""
        position = int(position)
        self.postfix.update(postfix)
        if self._bar is not None:
            self._bar.update(position - self._bar.n)
            if postfix:
                self._bar.set_postfix({k: round(v, 4) if isinstance(v, float) else v for k, v in self.postfix.items()})
        self.position = position
        if self.mode is ProgressMode.LINES and self.total and position < self.total:
            now = time.perf_counter()
            crossed = 5 * position >= self._next_fifth * self.total
            if crossed or now - self._last_line >= self.line_seconds:
                while 5 * position >= self._next_fifth * self.total:
                    self._next_fifth += 1
                self._last_line = now
                self._print(self._line())

    def close(self) -> None:
        """End the display (a final line in line mode)."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        elif self.mode is ProgressMode.LINES:
            self._print(self._line())


def _mean(values) -> float:
    values = [v for v in values if v == v]
    return sum(values) / len(values) if values else float("nan")


class ProgressHook:
    """Engine hook: the chain's steps with, at log points, the teacher ensemble's test NLL and
    the teacher's minibatch NLL (averaged over the batch's chains)."""

    def __init__(self, engine: Any, description: str = "GPED", mode: bool | str | ProgressMode = True) -> None:
        label = description if engine.K == 1 else f"{description} x{engine.K}"
        self.progress = Progress(engine.config.num_iterations, label, "it", engine.t, mode)

    def on_log(self, engine: Any, rows: list[list[dict]]) -> None:
        firsts = [r[0] for r in rows]
        self.progress.update(engine.t, teacher_nll=_mean(r.get("teacher_nll", float("nan")) for r in firsts),
                             train_nll=_mean(r["teacher_train_nll"] for r in firsts))

    def on_checkpoint(self, engine: Any) -> None:
        pass

    def on_end(self, engine: Any) -> None:
        self.progress.update(engine.t)
        self.progress.close()
