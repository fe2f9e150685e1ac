"""What became of a unit of work: a chain, a result derived from one (a search, an evaluation), a toy run or a
notebook the batch runner started.

:class:`Status` names each outcome. Its value is the word the kit has always stored and printed (``"ran"``,
``"missing data"``): like an :class:`~gped_kit.core.options.Option`, a member subclasses ``str``, compares equal
to its word and prints as it (its ``repr`` too), so tables, CSV files and messages read exactly as before.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """The outcome of a unit of work; the value is the word written into tables and messages."""

    #: computed here, now
    RAN = "ran"
    #: continued from a checkpoint to its end
    RESUMED = "resumed"
    #: read back from the results store
    REUSED = "reused"
    #: stopped by a time budget at a checkpoint (:mod:`gped_kit.experiments.budget`); the next run resumes it
    STOPPED = "stopped"
    #: not started: a time budget was spent before its batch began
    NOT_STARTED = "not started"
    #: raised an error (the error is recorded beside the status)
    FAILED = "failed"
    #: its data set is absent on this machine
    MISSING_DATA = "missing data"
    #: ``executor="stored"`` found no entry in the store, and nothing was run
    NOT_STORED = "not stored"
    #: a notebook the batch runner did not start (``--fail-fast`` after a failure)
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        """The word's own repr (``'failed'``), as messages that quote a status (``{status!r}``) always printed it."""
        return repr(self.value)


#: The outcomes of a unit whose result is complete and in the store.
FINISHED = (Status.RAN, Status.RESUMED, Status.REUSED)
