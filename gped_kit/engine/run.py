"""Running chains: one call for one chain or a batch, with checkpoints, resume and progress.

* :func:`distill` -- one chain of Algorithm 1 from ``(data, GPEDConfig, students)`` (or one
  pooled teacher of ``GPEDConfig.num_chains`` chains, with one result like a chain's);
* :func:`distill_many` -- K chains as one batched computation (:class:`GPEDEngine`);
* :class:`CheckpointHook` -- the loop's hook for saving (progress is :class:`gped_kit.progress.ProgressHook`).

``checkpoint=path`` saves every ``checkpoint_every`` steps and at the end; calling again with
the same path (in a new process too) continues from the checkpoint and gives the same result
as an uninterrupted run (a run that stopped by a crash or at a checkpoint point). ``max_steps`` that stops
a run between log points logs there too: the history gains that row, and the next row's running training
averages (``teacher_train_nll``, ``student_train_loss``; the summary's when it is the last) cover the steps
since it, while the networks, stores, ensemble and evaluations are those of the uninterrupted run
(:mod:`gped_kit.experiments.budget` stops only at checkpoint points, so its slices are bit-identical). A
checkpoint made by another configuration is never overwritten: it raises
:class:`~gped_kit.engine.checkpoint.CheckpointError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..data.container import GPEDData
from ..progress import ProgressHook
from .checkpoint import load_checkpoints, save_checkpoints
from .config import GPEDConfig, StudentConfig
from .engine import GPEDEngine, Hook
from .result import GPEDResult
from .spec import build_chain

Chain = tuple[GPEDData, GPEDConfig, Sequence[StudentConfig]]


class CheckpointHook:
    """Saves each chain's checkpoint at the loop's checkpoint points (``checkpoint_every`` and the
    last step)."""

    def __init__(self, paths: Sequence[str | Path | None]) -> None:
        self.paths = list(paths)

    def on_log(self, engine: GPEDEngine, rows: list[list[dict]]) -> None:
        pass

    def on_checkpoint(self, engine: GPEDEngine) -> None:
        save_checkpoints(engine, self.paths)

    def on_end(self, engine: GPEDEngine) -> None:
        pass


def distill_many(chains: Sequence[Chain], checkpoints: Sequence[str | Path | None] | None = None,
                 resume: bool = True, max_steps: int | None = None, hooks: Sequence[Hook] = ()) -> list[GPEDResult]:
    """Run (or continue) K chains as one batched computation up to T, or ``max_steps`` more steps.

    ``chains`` are ``(data, config, students)`` triples that can share one computation
    (:func:`~gped_kit.engine.engine.check_batchable`; a pooled teacher runs alone); ``checkpoints``
    one path or None per chain. With one chain this is :func:`distill`. Returns one
    :class:`GPEDResult` per chain.
    """
    engine = GPEDEngine([build_chain(*chain) for chain in chains])
    return run_engine(engine, checkpoints, resume, max_steps, hooks)


def run_engine(engine: GPEDEngine, checkpoints: Sequence[str | Path | None] | None = None, resume: bool = True,
               max_steps: int | None = None, hooks: Sequence[Hook] = ()) -> list[GPEDResult]:
    """Resume ``engine`` from existing checkpoints, run it (saving them) and return its results."""
    paths = [None if p is None else Path(p) for p in (checkpoints or [None] * engine.num_runs)]
    existing = [p for p in paths if p is not None and p.exists()]
    if existing and not resume:
        raise FileExistsError(f"checkpoint {existing[0]} exists; pass resume=True to continue it, or another path")
    load_checkpoints(engine, paths)
    stop = engine.config.num_iterations if max_steps is None else engine.t + max_steps
    all_hooks = list(hooks)
    if any(p is not None for p in paths):
        all_hooks.append(CheckpointHook(paths))
    if engine.config.progress and engine.t < min(stop, engine.config.num_iterations):
        all_hooks.append(ProgressHook(engine, mode=engine.config.progress))
    engine.run(stop, all_hooks)
    return engine.results()


def distill(data: GPEDData, config: GPEDConfig, students: Sequence[StudentConfig],
            checkpoint: str | Path | None = None, resume: bool = True, max_steps: int | None = None,
            hooks: Sequence[Hook] = ()) -> GPEDResult:
    """Run (or continue, from ``checkpoint``) one chain of Algorithm 1; see the module docstring."""
    return distill_many([(data, config, students)], [checkpoint], resume, max_steps, hooks)[0]
