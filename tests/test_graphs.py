"""Graph mode (gped_kit.engine.graphs): which periods replay, and, on CUDA, that a replayed period
equals the same period stepped eagerly, bit for bit.

On the CPU: the host-side rules that decide whether a period may be replayed (log, checkpoint and
snapshot points, learning-rate changes, the run's stop, a sampler whose varying step size is read on
the host; the kit's momentum samplers with a varying step size replay) and the error for
``graph=True`` without CUDA. On CUDA (skipped without): graph == eager over several periods with
U_s and U_o students, a dropout student and a learning-rate halving; momentum samplers with
polynomial and cyclical step sizes (one chain, a batch, a pooled teacher); counter-based random numbers and
SGLD's fused update (the same numbers as its element-wise one); TF32 products; a run checkpointed after
replays resumes bit-identically; no host synchronisation inside a period.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import ClassVar

import pytest
import torch
from test_batching import STUDENTS, make_data

from gped_kit.core.baoa import BAOAConfig
from gped_kit.core.samplers import sampler_config
from gped_kit.core.sgld import FUSED_MIN_ELEMENTS, SGLDConfig
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.engine.graphs import (
    MAX_GRAPHS,
    GraphFallbackWarning,
    PeriodGraphs,
    period_pattern,
    sampler_fallback,
)
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import tree_leaves
from gped_kit.engine.values import ValueTable
from gped_kit.models.presets import ArchSpec

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def spec(device="cpu", graph=None, seed=0, sampler=None, students=STUDENTS, **kw):
    base = dict(model="fcnn", sampler=sampler or sampler_config("sgld", step_size=5e-5, batch_size=25),
                num_iterations=120, burn_in=12, eval_thinning=3, log_every=60, checkpoint_every=60,
                progress=False, device=device, seed=seed, eval_batch_size=32, graph=graph)
    base.update(kw)
    return build_chain(make_data(300).to(device), GPEDConfig(**base), students)


def test_periods_replay_only_between_boundaries():
    engine = GPEDEngine([spec()])
    assert engine.graphs is None and engine.period == 6  # lcm(3, 2, 3); no graphs on the CPU by default
    stop = engine.config.num_iterations
    def pattern(e: GPEDEngine, t0: int, stop: int) -> tuple | None:
        return period_pattern(e.setup, e.state, t0, stop)

    burn_in = pattern(engine, 0, stop)
    assert burn_in is not None and not any(acc or groups for acc, groups in burn_in[:2])  # steps 0, 1: nothing kept
    assert pattern(engine, 3, stop) is None  # not at a period's start
    after = pattern(engine, 18, stop)
    assert after is not None and after == pattern(engine, 24, stop)  # the same pattern every period
    assert pattern(engine, 114, 118) is None  # the stop falls inside
    # a log point strictly inside the period stops it
    inside = GPEDEngine([spec(log_every=20, checkpoint_every=60)])
    assert pattern(inside, 18, 120) is None and pattern(inside, 24, 120) is not None
    # snapshots are taken eagerly
    snaps = GPEDEngine([spec(num_snapshots=4)])
    steps_with = sorted(snaps.chains[0].snapshot_at)
    first = steps_with[0] - steps_with[0] % snaps.period
    assert pattern(snaps, first, 120) is None


def test_period_ending_at_a_log_point_is_replayable():
    engine = GPEDEngine([spec()])
    # steps 54..59, logged after step 59 (t = 60)
    assert period_pattern(engine.setup, engine.state, 54, 120) is not None


@dataclasses.dataclass(frozen=True)
class HostScalesBAOA(BAOAConfig):
    """BAOA as a sampler whose update reads its factors as host floats only (``device_scales`` False)."""

    device_scales: ClassVar[bool] = False


def test_learning_rate_changes_and_host_side_step_sizes_are_stepped_eagerly():
    halving = [dataclasses.replace(s, lr_halving_epochs=0.25) for s in STUDENTS]  # N = 300, M = 25: every 3 steps
    engine = GPEDEngine([spec(students=halving)])
    assert all(period_pattern(engine.setup, engine.state, t0, 120) is None for t0 in range(18, 114, 6))
    engine.run()  # eager, with its halvings
    host = HostScalesBAOA(step_size=1e-3, batch_size=25, schedule="polynomial", decay_steps=10.0)
    host_engine = GPEDEngine([spec(sampler=host)])
    assert host_engine.values.scales is None and period_pattern(host_engine.setup, host_engine.state, 18, 120) is None
    constant_baoa = sampler_config("baoa", step_size=1e-3, batch_size=25)
    constant = GPEDEngine([spec(sampler=constant_baoa)])
    assert period_pattern(constant.setup, constant.state, 18, 120) is not None


@pytest.mark.parametrize("name", ["sghmc", "sgnht", "baoa"])
@pytest.mark.parametrize("schedule", [dict(schedule="polynomial", decay_steps=10.0),
                                      dict(schedule="cyclical", cycles=4, explore_fraction=0.5)],
                         ids=["polynomial", "cyclical"])
def test_momentum_samplers_with_a_varying_step_size_replay(name, schedule):
    sampler = sampler_config(name, step_size=1e-3, batch_size=25, **schedule)
    engine = GPEDEngine([spec(sampler=sampler)])
    assert sampler_fallback(engine.config) is None
    table = engine.values.scales  # the factors, a device table read by the update (gped_kit.engine.values)
    assert table is not None and table.table.shape == (engine.period, len(engine.config.sampler.scales(0)))
    assert period_pattern(engine.setup, engine.state, 18, 120) is not None


def test_fallbacks_a_user_did_not_ask_for_are_warned_once():
    host = HostScalesBAOA(step_size=1e-3, batch_size=25, schedule="polynomial", decay_steps=10.0)
    assert "every step runs eagerly" in sampler_fallback(spec(sampler=host).config)
    assert sampler_fallback(spec().config) is None  # SGLD: its varying factors are device tables
    varying = sampler_config("baoa", step_size=1e-3, batch_size=25, schedule="polynomial", decay_steps=10.0)
    assert sampler_fallback(spec(sampler=varying).config) is None  # so are the momentum samplers'
    assert sampler_fallback(spec(sampler=sampler_config("baoa", step_size=1e-3, batch_size=25)).config) is None
    # more patterns than MAX_GRAPHS: the new one runs eagerly, with one warning however often it recurs
    # (PeriodGraphs needs CUDA to be built; its bookkeeping is host-side, so it is exercised here without)
    engine = GPEDEngine([spec()])
    for _ in range(18):
        engine.step()
    graphs = PeriodGraphs.__new__(PeriodGraphs)
    graphs.setup, graphs.graphs, graphs.warmed, graphs.pool, graphs.replays, graphs.fallbacks = (
        engine.setup, {("full", i): None for i in range(MAX_GRAPHS)}, set(), None, 0, [])
    with pytest.warns(GraphFallbackWarning, match=f"{MAX_GRAPHS} event patterns are captured"):
        assert graphs.run_period(engine.state, 120, lambda state: engine.step()) is False
    assert engine.t == 18 and len(graphs.fallbacks) == 1
    graphs.fallbacks = list(graphs.fallbacks)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GraphFallbackWarning)
        graphs._fall_back(graphs.fallbacks[0])  # the same reason again: no second warning


def test_the_host_state_advances_by_a_period_and_back():
    engine = GPEDEngine([spec()])
    before = engine.host.copy()
    for _ in range(engine.period * 4):
        engine.step()
    delta = engine.host.minus(before)
    assert delta.t == 24 and delta.steps_in_nll_sum == 24 and delta.ensemble_count > 0
    assert before.plus(delta) == engine.host and before.t == 0  # the copy is its own value
    assert engine.t == 24 and engine.adam_steps == [a + d for a, d in zip(before.adam_steps, delta.adam_steps)]
    engine.t = 30  # the engine's names are the host state's fields
    assert engine.host.t == 30


def test_graph_true_without_cuda_is_refused_before_any_work():
    with pytest.raises(ValueError, match="graph=True needs a CUDA device"):
        GPEDEngine([spec(graph=True)])
    with pytest.raises(ValueError, match="GPEDConfig.graph"):
        GPEDConfig(graph="yes")


def test_graph_is_not_part_of_the_key():
    assert spec(graph=False).record() == spec(graph=None).record()


# ------------------------------------------------------------------------------ CUDA
CUDA_STUDENTS = (*STUDENTS, StudentConfig("predictive", "U_s", thinning=2, batch_size=20,
                                          arch=ArchSpec("fcnn", dropout=0.5), lr_halving_epochs=2.0))


def state(engine: GPEDEngine) -> list[torch.Tensor]:
    return (tree_leaves(engine.chain) + [t for s in engine.students for t in tree_leaves(s)]
            + tree_leaves(engine.ensemble))


@needs_cuda
def test_replayed_periods_equal_eager_steps_bit_for_bit():
    graph, eager = GPEDEngine([spec("cuda", graph=True, students=CUDA_STUDENTS)]), GPEDEngine(
        [spec("cuda", graph=False, students=CUDA_STUDENTS)])
    results_g, results_e = run_engine(graph)[0], run_engine(eager)[0]
    assert graph.graphs.replays >= 5, "too few periods replayed for the test to say anything"
    assert all(torch.equal(a, b) for a, b in zip(state(graph), state(eager)))
    assert results_g.history.drop(columns="elapsed_s").equals(results_e.history.drop(columns="elapsed_s"))


@needs_cuda
def test_a_run_checkpointed_after_replays_resumes_bit_identically(tmp_path):
    path = tmp_path / "chain.pt"
    whole = GPEDEngine([spec("cuda", graph=True)])
    run_engine(whole)
    first = GPEDEngine([spec("cuda", graph=True)])
    run_engine(first, [path], max_steps=60)
    assert first.graphs.replays > 0 and first.t == 60
    resumed = GPEDEngine([spec("cuda", graph=True)])
    run_engine(resumed, [path])
    assert all(torch.equal(a, b) for a, b in zip(state(whole), state(resumed)))


@needs_cuda
def test_no_host_synchronisation_inside_a_period():
    engine = GPEDEngine([spec("cuda", graph=True)])
    engine.run(stop=36)  # warmed up and captured
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        assert engine.graphs.run_period(engine.state, 120, lambda state: engine.step())
    finally:
        torch.cuda.set_sync_debug_mode("default")


@needs_cuda
def test_a_batch_of_24_with_dropout_students_replays_as_it_steps():
    def batch(graph: bool) -> GPEDEngine:
        return GPEDEngine([spec("cuda", graph=graph, seed=k, students=CUDA_STUDENTS) for k in range(24)])

    graph, eager = batch(True), batch(False)
    run_engine(graph), run_engine(eager)
    assert graph.graphs.replays >= 5, "too few periods replayed for the test to say anything"
    assert all(torch.equal(a, b) for a, b in zip(state(graph), state(eager)))


@needs_cuda
def test_a_dropout_run_checkpointed_after_replays_resumes_bit_identically(tmp_path):
    path = tmp_path / "chain.pt"
    whole = GPEDEngine([spec("cuda", graph=True, students=CUDA_STUDENTS)])
    run_engine(whole)
    first = GPEDEngine([spec("cuda", graph=True, students=CUDA_STUDENTS)])
    run_engine(first, [path], max_steps=60)
    assert first.graphs.replays > 0 and first.t == 60
    resumed = GPEDEngine([spec("cuda", graph=True, students=CUDA_STUDENTS)])
    run_engine(resumed, [path])
    assert all(torch.equal(a, b) for a, b in zip(state(whole), state(resumed)))


@needs_cuda
def test_a_capture_never_uploads_host_values():
    table = ValueTable(lambda i: (float(i), 2.0 * i), 2, 4, torch.device("cuda"))
    table.fill(0)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="inside a CUDA graph capture"), torch.cuda.graph(graph):
        table.fill(4)  # a copy from pinned host memory freed after the capture: refused
    assert table.start == 0 and table.row(3).tolist() == [3.0, 6.0]


def batch_of(sampler, graph: bool, k: int, **kw) -> GPEDEngine:
    """K = ``k`` chains (seeds 0 .. k - 1) of ``sampler`` on CUDA with the dropout student, in graph mode or eager
    (``kw``: further configuration fields)."""
    return GPEDEngine([spec("cuda", graph=graph, seed=seed, sampler=sampler, students=CUDA_STUDENTS, **kw)
                       for seed in range(k)])


def assert_replays_as_it_steps(sampler, **kw) -> None:
    """One chain and a batch of three replay their periods (no fallback warned about) and equal eager steps bit
    for bit."""
    for k in (1, 3):
        with warnings.catch_warnings():
            warnings.simplefilter("error", GraphFallbackWarning)
            graph = batch_of(sampler, True, k, **kw)
            run_engine(graph)
        eager = batch_of(sampler, False, k, **kw)
        run_engine(eager)
        assert graph.graphs.replays >= 5 and not graph.graphs.fallbacks
        assert all(torch.equal(a, b) for a, b in zip(state(graph), state(eager)))


@needs_cuda
@pytest.mark.parametrize("name", ["sghmc", "sgnht", "baoa"])
@pytest.mark.parametrize("schedule", [dict(schedule="polynomial", decay_steps=10.0, warmup_steps=9, warmup_factor=3.0),
                                      dict(schedule="cyclical", cycles=4, explore_fraction=0.5)],
                         ids=["polynomial+warmup", "cyclical"])
def test_momentum_samplers_with_a_varying_step_size_replay_as_they_step(name, schedule):
    """A momentum sampler's varying factors are device tables: its periods replay and equal eager steps bit for
    bit, one chain and a batch of three (different seeds), with a dropout student; no fallback is warned about."""
    sampler = sampler_config(name, step_size=1e-3, batch_size=25, **schedule)

    assert_replays_as_it_steps(sampler)


@needs_cuda
def test_a_pooled_cyclical_baoa_teacher_replays_as_it_steps():
    """The ``long`` profile's teacher: BAOA with a cyclical step size, pooled over chains."""
    sampler = sampler_config("baoa", step_size=1e-3, batch_size=25, schedule="cyclical", cycles=4, explore_fraction=0.5)
    graph = GPEDEngine([spec("cuda", graph=True, sampler=sampler, num_chains=3)])
    eager = GPEDEngine([spec("cuda", graph=False, sampler=sampler, num_chains=3)])
    run_engine(graph), run_engine(eager)
    assert graph.graphs.replays >= 5
    assert all(torch.equal(a, b) for a, b in zip(state(graph), state(eager)))


@needs_cuda
@pytest.mark.parametrize("sampler", [SGLDConfig(step_size=1e-3, batch_size=25),
                                     SGLDConfig(step_size=1e-3, batch_size=25, schedule="polynomial", decay_steps=10.0),
                                     sampler_config("sghmc", step_size=1e-3, batch_size=25)],
                         ids=["sgld", "sgld-polynomial", "sghmc"])
def test_counter_random_numbers_replay_as_they_step_and_resume(sampler, tmp_path):
    """Counter-based random numbers (compiled draws keyed by the device-side step index; SGLD's noise inside its
    update): periods replay and equal eager steps bit for bit, one chain and a batch of three with a dropout
    student, and a run checkpointed after replays resumes bit-identically."""
    counter = dict(random_numbers="counter")
    assert_replays_as_it_steps(sampler, **counter)
    path = tmp_path / "chain.pt"
    whole, first, resumed = (batch_of(sampler, True, 1, **counter) for _ in range(3))
    run_engine(whole)
    run_engine(first, [path], max_steps=60)
    assert first.graphs.replays > 0 and first.t == 60
    run_engine(resumed, [path])
    assert all(torch.equal(a, b) for a, b in zip(state(whole), state(resumed)))


@needs_cuda
@pytest.mark.parametrize("schedule", [{}, dict(schedule="polynomial", decay_steps=10.0)], ids=["sgld", "polynomial"])
def test_the_fused_sgld_update_replays_as_it_steps_and_moves_no_number(schedule, monkeypatch):
    """SGLD with the generators' noise updated by the compiled loop (sgld_fused_update_, Triton without contracted
    multiply-adds; here for every buffer, FUSED_MIN_ELEMENTS lowered to 0): periods replay and equal eager steps bit
    for bit, one chain and a batch of three with a dropout student; and eager, the chains take the element-wise
    update's steps bit for bit."""
    sampler = SGLDConfig(step_size=1e-3, batch_size=25, **schedule)
    monkeypatch.setitem(FUSED_MIN_ELEMENTS, "cuda", 0)
    assert_replays_as_it_steps(sampler)
    fused = batch_of(sampler, False, 3)
    run_engine(fused)
    monkeypatch.setitem(FUSED_MIN_ELEMENTS, "cuda", 10 ** 12)
    element_wise = batch_of(sampler, False, 3)
    run_engine(element_wise)
    assert fused.setup.fused_update is not None and fused.setup.fused_update.update.compiled
    assert element_wise.setup.fused_update is None
    assert all(torch.equal(a, b) for a, b in zip(state(fused), state(element_wise)))


@needs_cuda
def test_tf32_replays_as_it_steps_and_changes_the_teachers_numbers():
    """``matmul_precision="tf32"``: the teacher's products are captured with their precision (periods replay and
    equal eager TF32 steps bit for bit, one chain and a batch of three with a dropout student), and on a GPU with
    TF32 tensor cores (compute capability 8 and up) they change the chain's numbers: else the option would be a
    no-op that the speedup check (gped_kit.experiments.speedups) reports as "identical"."""
    sampler = SGLDConfig(step_size=1e-3, batch_size=25)
    assert_replays_as_it_steps(sampler, matmul_precision="tf32")
    if torch.cuda.get_device_capability()[0] >= 8:
        tf32, fp32 = batch_of(sampler, False, 1, matmul_precision="tf32"), batch_of(sampler, False, 1)
        run_engine(tf32)
        run_engine(fp32)
        assert not all(torch.equal(a, b) for a, b in zip(state(tf32), state(fp32)))
