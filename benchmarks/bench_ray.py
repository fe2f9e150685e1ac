"""Benchmark: a small Experiment 2 grid run locally and as tasks on a local Ray cluster.

Issue 16 asks for the time of a small grid (4 cells) run in this process (``executor="local"``)
against the same grid on a Ray cluster (``executor="ray"``). Both write to fresh results stores
in a temporary directory, so every cell is computed; the Ray run then reruns the grid to show
that stored cells start no task. Reported: wall seconds of each run (the Ray one includes
starting the local cluster and each worker's import of torch), the sum of the cells' own
seconds, and whether both stores hold the same entries with the same numbers (up to
round-off: a 1-CPU Ray worker runs torch with one thread, this process with all cores).

The cells are FCNN chains on real MNIST (|D| in ``--sizes`` x m in ``--masks``) with the
default profile's students (U_s and U_o for both targets), ``--iterations`` SGLD steps each.
On a machine with C cores the Ray cluster gets C one-CPU workers, so up to C cells run at
once; locally the cells run one after another, each with C threads. Not a test: run it on a
quiet machine (two torch processes on two cores slow each other ~10x), e.g.
``python benchmarks/bench_ray.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from gped_kit.experiments.chains import run_chains
from gped_kit.experiments.executors import connect_ray
from gped_kit.experiments.experiment2 import PROFILES
from gped_kit.experiments.paper import distillation_task
from gped_kit.experiments.store import ResultsStore

NUMBERS = ["teacher_nll", "student_nll", "entropy_mae", "target_mae"]


def grid(sizes: list[int], masks: list[int], iterations: int) -> list:
    settings = dataclasses.replace(PROFILES["default"], num_iterations=iterations, burn_in=iterations // 2,
                                   log_every=iterations // 4, checkpoint_every=iterations // 4)
    return [distillation_task("fcnn", n, m, settings, seed=0, device="cpu") for n in sizes for m in masks]


def timed(label: str, tasks: list, store: ResultsStore, executor: str) -> tuple[float, pd.DataFrame]:
    started = time.perf_counter()
    result = run_chains(tasks, store, executor=executor, progress=False)
    wall = time.perf_counter() - started
    cells = result.cells
    print(f"{label}: {wall:.1f} s wall for {len(tasks)} cells (statuses {sorted(set(cells['status']))}; "
          f"sum of the cells' own seconds {cells['seconds'].sum():.1f} s)", flush=True)
    return wall, result.table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 60_000])
    parser.add_argument("--masks", type=int, nargs="+", default=[0, 15])
    parser.add_argument("--iterations", type=int, default=2_000)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs of the local Ray cluster")
    parser.add_argument("--local-threads", type=int, default=None,
                        help="torch threads of the local run (1 = as a Ray worker: then the numbers agree exactly)")
    args = parser.parse_args(argv)
    if args.local_threads:
        torch.set_num_threads(args.local_threads)
    tasks = grid(args.sizes, args.masks, args.iterations)
    print(f"{len(tasks)} cells, T = {args.iterations} each; torch {torch.__version__}, {torch.get_num_threads()} "
          f"threads here, {os.cpu_count()} cores; Ray cluster with {args.cpus} one-CPU workers", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        local_wall, local = timed("local", tasks, ResultsStore(Path(tmp) / "local"), "local")
        started = time.perf_counter()
        ray = connect_ray(num_cpus=args.cpus)  # a local cluster of this machine (no RAY_ADDRESS here)
        print(f"local Ray cluster started in {time.perf_counter() - started:.1f} s", flush=True)
        ray_wall, remote = timed("ray", tasks, ResultsStore(Path(tmp) / "ray"), "ray")
        timed("ray, rerun (every cell stored)", tasks, ResultsStore(Path(tmp) / "ray"), "ray")
        ray.shutdown()
    keys = ["cell", "student"]
    numbers = [c for c in NUMBERS if c in local and c in remote]  # a very short chain has no teacher samples
    a = local.set_index(keys)[numbers].sort_index()
    b = remote.set_index(keys)[numbers].sort_index()
    same_keys = list(local["run_key"].unique()) == list(remote["run_key"].unique())
    print(f"same entry keys: {same_keys}; largest |local - ray| over {', '.join(numbers)}: "
          f"{(a - b).abs().max().max():.2e}")
    print(f"ratio ray / local wall: {ray_wall / local_wall:.2f}")


if __name__ == "__main__":
    main()
