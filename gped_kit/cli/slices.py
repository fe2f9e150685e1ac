"""Resumable slices of a notebook's chains: run for at most so many minutes, pack what changed,
unpack it on the next (fresh) node and go on.

A paper-profile chain of 10^6 steps may not fit in one job: a batch system's wall-time limit ends it,
a preemptible instance is stopped, and the next job may start on a node without the previous job's
files (node-local scratch, a fresh instance). A *slice* is one job's share of the work that

1. unpacks the packs given with ``--resume`` (the previous slices' results) into the store;
2. runs the notebook's chains (:func:`notebook_chain_tasks`: the chain tasks the notebook would
   run for the profile and parameters) through the store with a
   :class:`~gped_kit.experiments.budget.Budget` of ``--minutes`` (or ``--max-steps``): every chain
   checkpoints every ``checkpoint_every`` steps and the slice stops at a checkpoint before the
   deadline, so the next slice resumes it bit for bit;
3. packs every store file the slice made or changed (and everything it unpacked, so the newest
   pack alone holds the whole state) into compressed tar parts and a manifest with SHA-256
   checksums (:func:`~gped_kit.cli.packs.pack`): parts of at most ``--part-mib`` each, and, where the files must fit a
   limit of your own (a transfer or a quota), at most ``--max-files`` files and ``--max-mib`` MiB in all.

``unpack`` (:func:`~gped_kit.cli.packs.unpack`) verifies and extracts such packs into a store: on the next node
before its slice (``run --resume``), or into ``results/`` when the notebook is to be executed
from them (it then reuses every complete chain and recomputes nothing). Each entry is placed under
its lock (the one the store's writers hold); an entry the store has complete is kept whole, and
``--overwrite`` sets it aside whole (``<key>.old-<time>-<id>``) before placing the pack's.

Checkpoints of chains that finished are left out of a pack unless the notebook needs the chains'
full state (Experiments 3, 4 and the comparison derive their results from it) or
``--keep-final-checkpoints`` is given.

Usage (see docs/gpu.md, which also has a SLURM job script and a loop for preemptible instances)::

    python -m gped_kit.cli.slices run 01_experiment1 --profile paper --minutes 55 \\
        --results .device-slices/store --resume .device-slices/in --out .device-slices/out
    python -m gped_kit.cli.slices unpack .device-slices/out --results results
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import math
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..core.status import FINISHED, Status
from ..experiments import registry
from ..experiments.budget import Budget
from ..experiments.chains import ChainTask, run_chains
from ..experiments.numerics import numerics_code
from ..experiments.store import ResultsStore
from .packs import (
    MAX_BYTES,
    MAX_FILES,
    PART_BYTES,
    SET_ASIDE,
    PackError,
    action_summary,
    add_pack_arguments,
    changed_files,
    check_pack_options,
    next_sequence,
    pack,
    pack_limits,
    read_manifests,
    resume_sources,
    store_state,
    unpack,
)
from .parameters import parse_override
from .plan import DEFAULT_NOTEBOOK_DIR, select_notebooks


# ------------------------------------------------------------------------------ a notebook's chains
@dataclass(frozen=True)
class ChainGroup:
    """Chain tasks a notebook runs with one :func:`~gped_kit.experiments.chains.run_chains` call."""

    tasks: tuple[ChainTask, ...]
    chains_per_batch: int | str = 1


@dataclass(frozen=True)
class NotebookChains:
    """A notebook's chains for a profile: its groups of tasks, and whether the notebook needs the
    finished chains' full state (their final checkpoints) to derive its results."""

    notebook: str
    groups: tuple[ChainGroup, ...]
    needs_state: bool = False

    @property
    def tasks(self) -> list[ChainTask]:
        return [t for g in self.groups for t in g.tasks]


def notebook_parameters(path: Path) -> dict[str, Any]:
    """The defaults of a notebook's ``parameters`` cell (``name = <literal>`` lines; None for a value
    that is not a literal, such as the ``Overrides()`` of a composed setting)."""
    cells = json.loads(Path(path).read_text())["cells"]
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise ValueError(f"{path}: no cell tagged 'parameters'")
    out = {}
    for node in ast.parse("".join(cell["source"])).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:  # e.g. ``hydra = Overrides()``: a composed setting, overridden by dotted names
                out[node.targets[0].id] = None
    return out


def notebook_chain_tasks(notebook: str | Path, profile: str, overrides: Mapping[str, Any],
                         notebook_dir: Path = DEFAULT_NOTEBOOK_DIR) -> NotebookChains:
    """The chain tasks ``notebook`` runs with ``profile`` and the parameter ``overrides`` (as
    papermill would inject them: names of the notebook's parameters cell, dotted names for composed
    settings), from the notebook registry (:mod:`gped_kit.experiments.registry`), which builds them as
    the notebook's cells do, so their store keys are the notebook's. Notebooks that run no chain of
    the store (04, 08, 09) are refused, naming those that do."""
    (path,) = select_notebooks([str(notebook)], Path(notebook_dir))
    entry = registry.notebook(path.stem)
    if entry.tasks is None:
        allowed = [name for name, e in registry.NOTEBOOKS.items() if e.tasks is not None]
        raise ValueError(f"notebook {entry.name!r} has no chains to slice; allowed: {', '.join(allowed)}")
    defaults = notebook_parameters(path)
    unknown = sorted(k for k in overrides if k.split(".", 1)[0] not in defaults)
    if unknown:
        raise ValueError(f"{path.name}: no parameter(s) {unknown}; its parameters are {sorted(defaults)}")
    ns = {**{k: v for k, v in defaults.items() if k in entry.parameters}, **overrides, "profile": profile}
    settings = entry.settings(profile, ns)
    tasks = entry.chain_tasks(settings, seed=ns.get("seed", defaults.get("seed", 0)),
                              device=ns.get("device", defaults.get("device", "auto")),
                              data_root=ns.get("data_root", defaults.get("data_root")),
                              **{k: v for k, v in ns.items() if k in entry.parameters})
    return NotebookChains(entry.name, (ChainGroup(tuple(tasks), entry.chains_per_batch(settings)),),
                          needs_state=entry.needs_chain_state)


# ------------------------------------------------------------------------------ a slice
@dataclass
class SliceReport:
    """What a slice did: every chain's status row, the manifest it wrote, and whether every chain
    of the notebook is now done (finished: a chain whose data set is missing is not)."""

    cells: pd.DataFrame
    manifest: Path | None
    complete: bool
    unpacked: list[tuple[str, str]] = field(default_factory=list)


@contextlib.contextmanager
def deterministic_convolutions(enabled: bool) -> Iterator[None]:
    """cuDNN's deterministic convolution kernels while the block runs (``enabled``), the previous
    setting restored after. cuDNN's default backward kernels accumulate with atomics in no fixed order, so
    on CUDA a CNN chain's numbers differ run to run from its first steps (two H200 runs: teacher NLL
    0.03823 against 0.03795 at step 10,000; docs/device-runs/2026-11-26-nvidia-h200-3), and a resumed
    slice is not bit-identical to an uninterrupted run. The CPU and fully connected chains are unaffected."""
    cudnn = torch.backends.cudnn
    saved = cudnn.deterministic, cudnn.benchmark
    if enabled:
        cudnn.deterministic, cudnn.benchmark = True, False
    try:
        yield
    finally:
        cudnn.deterministic, cudnn.benchmark = saved


def with_graph(task: ChainTask, graph: bool | None) -> ChainTask:
    """``task`` with its configuration's ``graph`` set (a field outside the chain's key)."""
    return dataclasses.replace(task, config=dataclasses.replace(task.config, graph=graph))


def run_slice(notebook: str | Path, profile: str, overrides: Mapping[str, Any], results: Path, out: Path,
              minutes: float | None = None, max_steps: int | None = None, resume: Sequence[Path] = (),
              keep_final_checkpoints: bool | None = None, notebook_dir: Path = DEFAULT_NOTEBOOK_DIR,
              clock=time.monotonic, progress: bool = True, part_bytes: int = PART_BYTES,
              max_files: int | None = MAX_FILES, max_bytes: int | None = MAX_BYTES, deterministic: bool = False,
              graph: bool | None = None) -> SliceReport:
    """One slice (see the module docstring): unpack ``resume``, run the notebook's chains within
    ``minutes`` / ``max_steps`` (with cuDNN's deterministic kernels if ``deterministic``: see
    :func:`deterministic_convolutions`), pack what changed into ``out``. ``graph`` is every chain's
    :attr:`GPEDConfig.graph <gped_kit.engine.GPEDConfig>` (None: CUDA graphs on CUDA); it changes how
    a chain executes, not its key, so a slice may resume another slice's chains with graphs on or off."""
    budget = Budget(seconds=None if minutes is None else 60.0 * minutes, steps=max_steps, clock=clock)
    chains = notebook_chain_tasks(notebook, profile, overrides, notebook_dir)  # bad input fails before any work
    sources = resume_sources(resume)
    store = ResultsStore(results)
    store.root.mkdir(parents=True, exist_ok=True)
    before = store_state(store.root)
    previous = read_manifests(sources)
    unpacked = unpack(sources, store.root) if sources else []
    with deterministic_convolutions(deterministic):
        grids = [run_chains([with_graph(t, graph) for t in g.tasks], store, chains_per_batch=g.chains_per_batch,
                            progress=progress, budget=budget) for g in chains.groups if g.tasks]
    cells = pd.concat([g.cells for g in grids], ignore_index=True) if grids else pd.DataFrame()
    complete = bool(len(cells)) and bool(cells["status"].isin(FINISHED).all())  # chains missing data are not done
    keep = chains.needs_state if keep_final_checkpoints is None else keep_final_checkpoints
    files = changed_files(store.root, before, keep)
    info = {"sequence": next_sequence(previous), "notebook": chains.notebook, "profile": profile,
            "overrides": dict(overrides), "code": numerics_code("chain"),
            "budget": {"minutes": minutes, "max_steps": max_steps, "steps_done": budget.steps_done,
                       "seconds": round(budget.elapsed(), 1)},
            "deterministic": deterministic, "complete": complete,
            "cells": cells.astype(object).where(cells.notna(), None).to_dict("records")}
    manifest = pack(store.root, files, out, info, part_bytes, max_files, max_bytes) if files else None
    return SliceReport(cells, manifest, complete, unpacked)


GRAPH_CHOICES: dict[str, bool | None] = {"auto": None, "on": True, "off": False}

#: ``slices run``'s exit status when no chain failed but some were not run because their data set is missing.
MISSING_DATA_EXIT = 3

RUN_EPILOG = ("exit status: 0 when every chain ran or was stopped by the budget (the log then says "
              "'every chain of the notebook is done' or 'N chain(s) left'); 1 when a chain failed or a pack could "
              f"not be written; 2 for bad input; {MISSING_DATA_EXIT} when no chain failed but some were not run "
              "because their data set is missing (named in the log): such chains never finish, so put the data "
              "under the data root before the next slice.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.slices",
                                     description="Resumable slices of a notebook's chains (docs/gpu.md).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a notebook's chains for a while, then pack what changed", epilog=RUN_EPILOG)
    run.add_argument("notebook", help="notebook name or path, e.g. 01_experiment1")
    run.add_argument("--profile", default="default", help="the notebook's profile (default: %(default)s)")
    run.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                     help="a notebook parameter, as for python -m gped_kit.cli.batch (repeatable)")
    run.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    run.add_argument("--out", type=Path, required=True, help="folder for the pack (parts and manifest)")
    run.add_argument("--minutes", type=float, default=None, help="stop at a checkpoint before this many minutes")
    run.add_argument("--max-steps", type=int, default=None,
                     help="stop at the first checkpoint after this many iterations (tests, dry runs)")
    add_pack_arguments(run)
    run.add_argument("--deterministic", action="store_true",
                     help="cuDNN's deterministic convolution kernels (CUDA CNN chains reproducible run to run)")
    run.add_argument("--graph", choices=sorted(GRAPH_CHOICES), default="auto",
                     help="CUDA graphs: auto (on for CUDA), on or off (default: %(default)s)")
    run.add_argument("--notebook-dir", type=Path, default=DEFAULT_NOTEBOOK_DIR, help="default: %(default)s")
    unp = sub.add_parser("unpack", help="verify and extract packs into a store")
    unp.add_argument("sources", type=Path, nargs="+", help="folders or manifests of packs")
    unp.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    unp.add_argument("--overwrite", action="store_true",
                     help="replace complete entries and further checkpoints, the store's entry set aside whole as "
                          "<key>.old-<time>-<id>")
    unp.add_argument("--lock-timeout", type=float, default=None, metavar="SECONDS",
                     help="wait at most this long for an entry another process is computing (default: as long "
                          "as it takes)")
    return parser


def check_budget_options(args: argparse.Namespace) -> None:
    """``ValueError`` naming ``--minutes`` or ``--max-steps`` when it is out of range, before any work."""
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes >= 0):
        raise ValueError(f"--minutes={args.minutes!r}: must be a finite number of minutes >= 0")
    if args.max_steps is not None and args.max_steps < 0:
        raise ValueError(f"--max-steps={args.max_steps!r}: must be an integer >= 0")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "unpack":
        for source in args.sources:
            if not source.exists():
                parser.error(f"sources: {str(source)!r} does not exist; give folders of packs or their manifests "
                             "(slice-*.json)")
        if args.lock_timeout is not None and not (math.isfinite(args.lock_timeout) and args.lock_timeout >= 0):
            parser.error(f"--lock-timeout={args.lock_timeout!r}: must be a finite number of seconds >= 0")
        try:
            manifests = read_manifests(args.sources)
            if not manifests:
                parser.error(f"no slice manifests (slice-*.json) in {[str(s) for s in args.sources]}")
            code = numerics_code("chain")
            for path, manifest in manifests:
                if manifest.get("code") != code:
                    print(f"note: {path.name} was made by code {manifest.get('code')}, this checkout's is {code}: "
                          "its chains are stored under keys this code does not look up", file=sys.stderr)
            actions = unpack(args.sources, args.results, args.overwrite,
                             -1 if args.lock_timeout is None else args.lock_timeout)
        except PackError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"unpacked {len(manifests)} pack(s) into {args.results}: {action_summary(actions)}")
        for rel, action in actions:
            if action == SET_ASIDE:
                print(f"  the store's entry {rel.split('.old-')[0]} set aside as {rel}")
        return 0
    if args.minutes is None and args.max_steps is None:
        parser.error("give --minutes or --max-steps (or both)")
    try:
        check_budget_options(args)
        check_pack_options(args)
        overrides = {}
        for text in args.param:
            o = parse_override(text)
            if o.notebook is not None:
                parser.error(f"-p {text!r}: a slice runs one notebook; give KEY=VALUE")
            overrides[o.key] = o.value
        report = run_slice(args.notebook, args.profile, overrides, args.results, args.out, args.minutes,
                           args.max_steps, args.resume, args.keep, args.notebook_dir, **pack_limits(args),
                           deterministic=args.deterministic,
                           graph=GRAPH_CHOICES[args.graph])
    except (ValueError, PackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1
    if report.unpacked:
        print(f"resumed from earlier packs: {action_summary(report.unpacked)}")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(report.cells[["cell", "status", "seconds", "error"]].to_string(index=False))
    missing = report.cells[report.cells["status"] == Status.MISSING_DATA]
    left = report.cells[~report.cells["status"].isin([*FINISHED, Status.MISSING_DATA])]
    if report.manifest is not None:
        files = [report.manifest.name] + [p["name"] for p in json.loads(report.manifest.read_text())["parts"]]
        print(f"packed into {args.out}: {', '.join(files)}")
    else:
        print("nothing changed in the store: no pack written")
    if report.complete:
        print("every chain of the notebook is done")
    elif len(left) or not len(missing):
        print(f"{len(left)} chain(s) left: run the next slice with --resume <this pack's folder>")
    if len(missing):
        reasons = "; ".join(sorted({str(error).splitlines()[0].rstrip(".") for error in missing["error"]}))
        print(f"{len(missing)} chain(s) skipped for missing data ({reasons}): put the data set under the data "
              "root (docs/data.md) and run the slice again")
    if (report.cells["status"] == Status.FAILED).any():
        return 1
    return MISSING_DATA_EXIT if len(missing) else 0


if __name__ == "__main__":
    sys.exit(main())
