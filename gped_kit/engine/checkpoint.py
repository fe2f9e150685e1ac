"""Checkpoints of single chains: tensors and plain data, written atomically, read with ``weights_only``.

A checkpoint holds everything a chain needs to continue exactly where it stopped -- one
:class:`~gped_kit.engine.state.RunState` (the step, the teacher's and students' state of this
chain's slice, the ensemble sums, the random generators' states, the global random state that
drives dropout, snapshots and the history so far) as a dict (:meth:`RunState.to_dict
<gped_kit.engine.state.RunState.to_dict>`) -- plus its ``format`` and a *fingerprint* (the JSON
record of the chain's data, configuration and students) so that a checkpoint only ever resumes
the run that made it. The engine makes and applies the state (:func:`gped_kit.engine.resume.run_state`,
:func:`~gped_kit.engine.resume.load_run_states`);
this module only writes, reads and checks files. Resuming gives the same numbers as an
uninterrupted run, bit for bit.

Each chain of a batch has its own file in the same format, so a chain computed in a batch can
be resumed alone and vice versa. A pooled teacher (``GPEDConfig.num_chains`` K > 1) is one run
with one file: its teacher parts (state, ensemble sums, snapshots) keep the chain axis of its K
chains, its generators are ``{"chains": [K chains' teacher generators], "groups": {...}}``, and its
students are the run's one set. Files are written under a unique temporary name next to the
target and renamed over it, so a crash never leaves a half-written checkpoint in its place;
they contain only tensors, numbers, strings, lists and dicts and are read with
``torch.load(weights_only=True)``. An unreadable (truncated, corrupt) file raises
:class:`CheckpointError` naming the file and what to do, and is left in place for inspection.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Sequence

import torch

from ..files import atomic_path
from .engine import GPEDEngine
from .state import RunState

FORMAT = 2


class CheckpointError(RuntimeError):
    """A checkpoint cannot be used: unreadable, of another format, or of another configuration."""


def fingerprint(engine: GPEDEngine, r: int) -> str:
    """The JSON record of run ``r`` (data identity, configuration, students)."""
    return json.dumps(engine.chains[r].record(), sort_keys=True)


def chain_checkpoint(engine: GPEDEngine, r: int) -> dict:
    """Run ``r``'s checkpoint contents (see the module docstring): its format and fingerprint, then
    its :class:`~gped_kit.engine.state.RunState` as a dict (:meth:`~gped_kit.engine.state.RunState.to_dict`)."""
    return {"format": FORMAT, "fingerprint": fingerprint(engine, r), **engine.run_state(r).to_dict()}


def save_checkpoints(engine: GPEDEngine, paths: Sequence[str | Path | None]) -> None:
    """Write each run's checkpoint to its path (None: not saved)."""
    if len(paths) != engine.num_runs:
        raise ValueError(f"{len(paths)} checkpoint paths for {engine.num_runs} runs")
    for k, path in enumerate(paths):
        if path is not None:
            with atomic_path(path) as tmp:
                torch.save(chain_checkpoint(engine, k), tmp)


def read_checkpoint(path: str | Path, device: torch.device | str = "cpu") -> dict:
    """A checkpoint's contents; :class:`CheckpointError` if the file cannot be read (it is kept)."""
    path = Path(path)
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # noqa: BLE001 -- truncated zip, unpickling errors, foreign objects: all unusable
        raise CheckpointError(
            f"checkpoint {path} cannot be read: {unreadable_reason(exc)}. It is left in place for inspection; to "
            "start this run afresh, move or delete the file (or recompute the result: e.g. recompute=True). "
            "torch's own message is chained as the cause."
        ) from exc
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"checkpoint {path} has format {found!r}, this version writes {FORMAT}; it is left in "
                              "place. Move or delete it to recompute the run.")
    return state


def unreadable_reason(exc: BaseException) -> str:
    """What is wrong with a file that ``torch.load(weights_only=True)`` failed on, in a few words
    (torch's own message, often a paragraph about ``weights_only``, stays the chained cause)."""
    if isinstance(exc, EOFError):
        return "it is empty or cut short"
    if isinstance(exc, pickle.UnpicklingError):
        return ("its contents are not tensors and plain data, so the safe reader (weights_only) refused them: it is "
                "damaged or was not written by gped-kit")
    if isinstance(exc, OSError):
        return f"it cannot be opened ({exc.strerror or type(exc).__name__})"
    if isinstance(exc, RuntimeError) and "zip archive" in str(exc):
        return "it is not a complete torch archive (truncated or corrupt, e.g. by a full disk or an interrupted copy)"
    return f"torch could not read it ({type(exc).__name__})"


def load_checkpoints(engine: GPEDEngine, paths: Sequence[str | Path | None]) -> list[bool]:
    """Resume each chain from its checkpoint where one exists; returns which chains were loaded.

    Every checkpoint must have been made by the same chain (fingerprint) and all chains of a
    batch must resume at the same step; otherwise :class:`CheckpointError` / ``ValueError``
    before anything is changed. The engine applies the states itself
    (:func:`~gped_kit.engine.resume.load_run_states`).
    """
    if len(paths) != engine.num_runs:
        raise ValueError(f"{len(paths)} checkpoint paths for {engine.num_runs} runs")
    states: dict[int, RunState] = {}
    for k, path in enumerate(paths):
        if path is None or not Path(path).exists():
            continue
        contents = read_checkpoint(path, engine.device)
        if contents["fingerprint"] != fingerprint(engine, k):
            raise CheckpointError(f"checkpoint {path} was made by a run with another configuration; it is left "
                                  "untouched. Use another checkpoint path, or the configuration it was made with.")
        try:
            state = RunState.from_dict(contents)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {path} is incomplete (its entry {exc} is missing or malformed): it is "
                                  "damaged or was not written by gped-kit. It is left in place; move or delete it to "
                                  "recompute the run.") from exc
        if engine.pooled != state.pooled:
            raise CheckpointError(f"checkpoint {path} was made by a {'pooled' if not engine.pooled else 'single'} run "
                                  f"of this configuration, this engine is a {'pooled' if engine.pooled else 'single'} "
                                  "one; it is left untouched. Use another checkpoint path.")
        states[k] = state
    engine.load_run_states(states)
    return [k in states for k in range(engine.num_runs)]
