"""Checkpoints of single chains: tensors and plain data, written atomically, read with ``weights_only``.

A checkpoint holds everything a chain needs to continue exactly where it stopped: the step,
the teacher's and students' state (:mod:`gped_kit.engine.state`, this chain's slice), the
ensemble sums, the random generators' states, the global random state that drives dropout,
snapshots and the history so far, plus a *fingerprint* (the JSON record of the chain's data,
configuration and students) so that a checkpoint only ever resumes the run that made it.
Resuming gives the same numbers as an uninterrupted run, bit for bit.

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
import os
import pickle
import uuid
from pathlib import Path
from typing import Sequence

import torch

from .engine import GPEDEngine

FORMAT = 2


class CheckpointError(RuntimeError):
    """A checkpoint cannot be used: unreadable, of another format, or of another configuration."""


def fingerprint(engine: GPEDEngine, r: int) -> str:
    """The JSON record of run ``r`` (data identity, configuration, students)."""
    return json.dumps(engine.chains[r].record(), sort_keys=True)


def _own(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()  # a view would save the whole stacked storage


def _chains_of(engine: GPEDEngine, r: int) -> int | slice:
    """The index of run ``r``'s teacher chains in the chain axis: its own chain (the axis dropped),
    or all K of a pooled teacher (the axis kept)."""
    return slice(None) if engine.pooled else r


def _generators(engine: GPEDEngine, r: int) -> dict:
    if not engine.pooled:
        return engine.streams.state_dict(r)
    return {"chains": [engine.streams.chain_state_dict(k) for k in range(engine.K)],
            "groups": engine.streams.groups_state_dict(r)}


def chain_checkpoint(engine: GPEDEngine, r: int) -> dict:
    """Run ``r``'s checkpoint contents (see the module docstring): chain r's, or a pooled teacher's."""
    chain = engine.chain
    k = _chains_of(engine, r)
    return {
        "format": FORMAT,
        "fingerprint": fingerprint(engine, r),
        "t": engine.t,
        "elapsed": engine.elapsed,
        "history": engine.history[r],
        "chain": {"params": {n: _own(v[k]) for n, v in chain.params.items()},
                  "buffers": {n: _own(v[k]) for n, v in chain.buffers.items()},
                  "sampler": {n: _own(v[k]) for n, v in chain.sampler.items()},
                  "train_nll_sum": _own(chain.train_nll_sum[k]), "steps_in_nll_sum": engine.steps_in_nll_sum},
        "students": [{"params": {n: _own(v[r]) for n, v in s.params.items()},
                      "buffers": {n: _own(v[r]) for n, v in s.buffers.items()},
                      "exp_avg": {n: _own(v[r]) for n, v in s.adam.exp_avg.items()},
                      "exp_avg_sq": {n: _own(v[r]) for n, v in s.adam.exp_avg_sq.items()},
                      "lr": engine.lr_values[j][r], "store_sums": _own(s.store.sums[r]),
                      "store_counts": _own(s.store.counts[r]), "loss_sum": _own(s.loss_sum[r]),
                      "steps_since_log": engine.steps_since_log[j], "adam_steps": engine.adam_steps[j]}
                     for j, s in enumerate(engine.students)],
        "ensemble": {"sums": {n: _own(v[k]) for n, v in engine.ensemble.sums.items()}, "count": engine.ensemble_count,
                     "recent": engine.recent.state_dict(r)},
        "generators": _generators(engine, r),
        "dropout_rng": {n: v.clone() for n, v in engine._dropout_state.items()},
        "snapshots": _own(engine.snapshots[k]),
        "snapshots_taken": engine.snapshots_taken,
    }


def write_atomically(obj: object, path: str | Path) -> None:
    """``torch.save(obj)`` to a uniquely named temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def save_checkpoints(engine: GPEDEngine, paths: Sequence[str | Path | None]) -> None:
    """Write each run's checkpoint to its path (None: not saved)."""
    if len(paths) != engine.num_runs:
        raise ValueError(f"{len(paths)} checkpoint paths for {engine.num_runs} runs")
    for k, path in enumerate(paths):
        if path is not None:
            write_atomically(chain_checkpoint(engine, k), path)


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
    before anything is changed.
    """
    if len(paths) != engine.num_runs:
        raise ValueError(f"{len(paths)} checkpoint paths for {engine.num_runs} runs")
    states: dict[int, dict] = {}
    for k, path in enumerate(paths):
        if path is None or not Path(path).exists():
            continue
        state = read_checkpoint(path, engine.device)
        if state["fingerprint"] != fingerprint(engine, k):
            raise CheckpointError(f"checkpoint {path} was made by a run with another configuration; it is left "
                                  "untouched. Use another checkpoint path, or the configuration it was made with.")
        if engine.pooled != ("chains" in state["generators"]):
            raise CheckpointError(f"checkpoint {path} was made by a {'pooled' if not engine.pooled else 'single'} run "
                                  f"of this configuration, this engine is a {'pooled' if engine.pooled else 'single'} "
                                  "one; it is left untouched. Use another checkpoint path.")
        states[k] = state
    if not states:
        return [False] * engine.num_runs
    steps = sorted({s["t"] for s in states.values()} | ({engine.t} if len(states) < engine.num_runs else set()))
    if len(steps) != 1:
        raise ValueError(f"the chains would resume at different steps {steps}; all chains of a batch must be at the "
                         "same step (run them separately, or start afresh)")
    first = next(iter(states.values()))
    for k, state in states.items():
        _load_chain(engine, k, state)
    engine.t = first["t"]
    engine.resumed_from = engine.t
    engine.elapsed = max(s["elapsed"] for s in states.values())
    engine.steps_in_nll_sum = first["chain"]["steps_in_nll_sum"]
    engine.ensemble_count = first["ensemble"]["count"]
    engine.snapshots_taken = first["snapshots_taken"]
    engine.adam_steps = [s["adam_steps"] for s in first["students"]]
    engine.steps_since_log = [s["steps_since_log"] for s in first["students"]]
    engine._dropout_state = {n: v.cpu() for n, v in first["dropout_rng"].items()}
    return [k in states for k in range(engine.num_runs)]


def _load_chain(engine: GPEDEngine, r: int, state: dict) -> None:
    chain = engine.chain
    k = _chains_of(engine, r)
    for part, values in (("params", chain.params), ("buffers", chain.buffers), ("sampler", chain.sampler)):
        for n, v in values.items():
            v[k].copy_(state["chain"][part][n])
    chain.train_nll_sum[k].copy_(state["chain"]["train_nll_sum"])
    for j, (s, saved) in enumerate(zip(engine.students, state["students"])):
        for part, values in (("params", s.params), ("buffers", s.buffers), ("exp_avg", s.adam.exp_avg),
                             ("exp_avg_sq", s.adam.exp_avg_sq)):
            for n, v in values.items():
                v[r].copy_(saved[part][n])
        s.store.sums[r].copy_(saved["store_sums"])
        s.store.counts[r].copy_(saved["store_counts"])
        s.loss_sum[r].copy_(saved["loss_sum"])
        s.lr[r].fill_(saved["lr"])
        engine.lr_values[j][r] = saved["lr"]
    for n, v in engine.ensemble.sums.items():
        v[k].copy_(state["ensemble"]["sums"][n])
    engine.recent.load_state_dict(r, state["ensemble"]["recent"], engine.test_sums())
    if engine.pooled:
        for i, saved in enumerate(state["generators"]["chains"]):
            engine.streams.load_chain_state_dict(i, saved)
        engine.streams.load_groups_state_dict(r, state["generators"]["groups"])
    else:
        engine.streams.load_state_dict(r, state["generators"])
    engine.snapshots[k].copy_(state["snapshots"])
    engine.history[r] = list(state["history"])
