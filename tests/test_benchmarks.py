"""The benchmarks (``benchmarks/``), run as the slow proofs run them: Table 1's paper chain meets the kernel-count
goals of docs/benchmarks.md with counter-based random numbers on the CPU (counts do not depend on the machine's
speed, so they can be asserted, unlike rates); SGLD's fused update takes the element-wise update's cat and six
kernels off a step; ``bench_engine.py``'s smoke run prints every row without a compiler's fallback warning; and
``chain_work.py`` (docs/paper_profile.md's counts) measures an engine's events and leaves the engine as it was.
Rates and ratios are printed by the benchmarks, never asserted."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch

from gped_kit.core.sgld import FUSED_MIN_ELEMENTS
from gped_kit.data.experiment import DataConfig
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.experiments.chains import ChainTask

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_engine  # noqa: E402  (benchmarks/ is a folder of scripts, not a package)
import bench_kernels  # noqa: E402
import chain_work  # noqa: E402

CPU = torch.device("cpu")


@pytest.mark.slow
@pytest.mark.parametrize(("chains", "goal"), [(1, 35.0), (24, 60.0)])
def test_counter_random_numbers_meet_the_kernel_goals(chains, goal):
    rows = bench_kernels.kernels_by_event(CPU, chains, "counter")
    assert bench_kernels.per_step(rows) <= goal, rows


@pytest.mark.slow
def test_the_fused_update_takes_the_cat_and_six_kernels_off_a_step(monkeypatch):
    """One paper chain with the default random numbers, its SGLD update element-wise and fused: the teacher's step
    loses exactly six kernels (a cat and six element-wise kernels become one compiled loop); nothing else moves."""
    counts = {}
    for name, threshold in (("element-wise", 10 ** 12), ("fused", 0)):
        monkeypatch.setitem(FUSED_MIN_ELEMENTS, "cpu", threshold)
        counts[name] = bench_kernels.kernels_by_event(CPU, 1, "generators")
    (_, _, element_wise), *others = counts["element-wise"]
    (_, _, fused), *others_fused = counts["fused"]
    assert element_wise - fused == 6 and others == others_fused


@pytest.mark.slow
def test_the_engine_benchmark_runs_and_prints_its_rows(capsys, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # e.g. a fused function that could not be compiled
        bench_engine.main(["--quick", "--synthetic", "--trace-out", str(tmp_path / "profile.txt")])
    out = capsys.readouterr().out
    for row in ("plain loop", "engine, 1 chain, eager", "engine, 2 chains, eager", "2 engines, one after another",
                "K = 2: batched / one after another", "paper configuration", "Table 1's paper chain"):
        assert row in out, row
    assert (tmp_path / "profile.txt").read_text().strip()


def test_the_paper_profile_work_measures_an_engine_and_gives_it_back_as_it_was():
    """``benchmarks/chain_work.py`` (docs/paper_profile.md's counts) measures one chain's events on a real engine,
    its evaluation limited to one chunk for the measurement: the chunk's work is counted, the teacher step's kernels
    are there, and the engine keeps its own set-up afterwards (the set-up is frozen: it is swapped, not written)."""
    config = GPEDConfig(model="fcnn", num_iterations=20, burn_in=5, eval_thinning=5, log_every=10,
                        checkpoint_every=10, progress=False, device="cpu", seed=0)
    task = ChainTask(DataConfig("mnist", labelled_size=1_000, test_size=1_000), config,
                     (StudentConfig("predictive", thinning=5),))
    spec, real = chain_work.spec_of(task)
    engine = GPEDEngine([spec])
    setup = engine.setup
    teacher, groups, accumulate, outputs = chain_work._measure_engine(engine)
    assert engine.setup is setup and engine.num_eval == 1_000
    assert real and teacher.names and len(groups) == 1 and sum(accumulate.flops) > 0 and sum(outputs.flops) > 0
