"""A run's typed state (RunState): the checkpoint's one object, its on-disk layout, and resuming from it."""

import dataclasses
from typing import Any

import pytest
import torch

from gped_kit.core.sgld import SGLDConfig
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.engine.checkpoint import FORMAT, chain_checkpoint, load_checkpoints, read_checkpoint, save_checkpoints
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import RunState, flat
from gped_kit.models.presets import ArchSpec

STUDENTS = [StudentConfig("predictive", thinning=3, arch=ArchSpec("fcnn", dropout=0.5)),
            StudentConfig("entropy", "U_o", thinning=5)]

#: Format 2's layout, as checkpoints written before RunState existed have it: every entry and its type
#: (a dict: its entries; a list: its first element's layout). Readers (gped_kit.cli.slices,
#: gped_kit.experiments.chains) read ``["t"]``.
STUDENT_LAYOUT = {"params": dict, "buffers": dict, "exp_avg": dict, "exp_avg_sq": dict, "lr": float,
                  "store_sums": torch.Tensor, "store_counts": torch.Tensor, "loss_sum": torch.Tensor,
                  "steps_since_log": int, "adam_steps": int}
FORMAT_2 = {
    "format": int, "fingerprint": str, "t": int, "elapsed": float, "history": list,
    "chain": {"params": dict, "buffers": dict, "sampler": dict, "train_nll_sum": torch.Tensor,
              "steps_in_nll_sum": int},
    "students": [STUDENT_LAYOUT],
    "ensemble": {"sums": dict, "count": int,
                 "recent": {"start_count": int, "start_sums": dict, "pending_count": int, "pending_sums": dict}},
    "generators": {"data": torch.Tensor, "noise": torch.Tensor, "groups": dict},
    "dropout_rng": {"cpu": torch.Tensor},
    "snapshots": torch.Tensor, "snapshots_taken": int,
}


def config(**kw: Any) -> GPEDConfig:
    base = dict(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=60, burn_in=20,
                eval_thinning=5, log_every=20, checkpoint_every=20, num_snapshots=2, progress=False, device="cpu")
    base.update(kw)
    return GPEDConfig(**base)


def make_engine(data, **kw: Any) -> GPEDEngine:
    pooled = kw.pop("pooled", None)
    return GPEDEngine([build_chain(data, config(**kw), STUDENTS)], pooled=pooled)


def layout(value: Any, like: Any) -> Any:
    """``value``'s layout in the terms of ``like`` (see FORMAT_2)."""
    if isinstance(like, dict):
        assert isinstance(value, dict), value
        return {k: layout(value[k], like[k]) for k in value} if set(value) == set(like) else sorted(value)
    if isinstance(like, list):
        return [layout(v, like[0]) for v in value[:1]]
    return like if type(value) is like else type(value)


def assert_same(a: Any, b: Any, where: str = "") -> None:
    """``a`` and ``b`` are the same nested structure with bit-identical tensors and equal plain values."""
    assert type(a) is type(b), where
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b or (a != a and b != b), where  # NaN (a student's loss before its first update) equals NaN


def parameters(e: GPEDEngine) -> list[torch.Tensor]:
    return [flat(e.chain.params), *(flat(s.params) for s in e.students)]


def test_run_state_is_typed_frozen_and_its_dict_is_format_2(digits_data, tmp_path):
    e = make_engine(digits_data)
    e.run(stop=30)
    state = e.run_state(0)
    assert isinstance(state, RunState) and state.t == 30 and not state.pooled
    assert len(state.students) == 2 and state.students[1].adam_steps == len(range(25, 30, 5))
    assert state.ensemble.count == len(range(25, 30, 5)) and state.snapshots.shape[0] == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.t = 0  # type: ignore[misc]
    contents = chain_checkpoint(e, 0)
    assert contents["format"] == FORMAT == 2
    assert layout(contents, FORMAT_2) == FORMAT_2
    # tensors and plain data only: written, read back with weights_only, the same state
    save_checkpoints(e, [tmp_path / "run.pt"])
    back = read_checkpoint(tmp_path / "run.pt")
    assert read_checkpoint(tmp_path / "run.pt")["t"] == 30  # what the store's and the slices' readers read
    assert_same(RunState.from_dict(back).to_dict(), state.to_dict())
    assert_same(RunState.from_dict(contents).to_dict(), state.to_dict())


def test_a_run_state_continues_the_run_bit_for_bit_and_owns_its_tensors(digits_data):
    a = make_engine(digits_data)
    a.run(stop=30)
    state = a.run_state(0)
    kept = state.teacher.params["1.weight"].clone()
    b = make_engine(digits_data)  # a fresh engine, as in a new process
    b.load_run_states({0: state})
    assert b.t == 30 and b.resumed_from == 30 and b.ensemble_count == a.ensemble_count
    a.run()
    b.run()
    assert torch.equal(state.teacher.params["1.weight"], kept)  # a's further steps left the state unchanged
    for x, y in zip(parameters(a), parameters(b)):
        assert torch.equal(x, y)
    assert torch.equal(a.students[1].store.sums, b.students[1].store.sums) and torch.equal(a.snapshots, b.snapshots)
    assert a.teacher_metrics(0) == b.teacher_metrics(0)
    assert_same([{k: v for k, v in row.items() if k != "elapsed_s"} for row in a.history[0]],
                [{k: v for k, v in row.items() if k != "elapsed_s"} for row in b.history[0]])


def test_a_pooled_run_state_holds_every_chain_and_loads_only_into_a_pooled_engine(digits_data):
    pooled = make_engine(digits_data, num_chains=2)
    pooled.run(stop=25)
    state = pooled.run_state(0)
    assert state.pooled and len(state.generators["chains"]) == 2
    assert state.teacher.params["1.weight"].shape[0] == 2 and state.ensemble.sums["predictive"].shape[0] == 2
    again = make_engine(digits_data, num_chains=2)
    again.load_run_states({0: state})
    for x, y in zip(parameters(pooled), parameters(again)):
        assert torch.equal(x, y)
    single = make_engine(digits_data, pooled=False, num_chains=1)
    single_pooled = make_engine(digits_data, pooled=True, num_chains=1)
    single_pooled.run(stop=25)
    with pytest.raises(ValueError, match="pooled run with 2 students, this engine's runs are single"):
        single.load_run_states({0: single_pooled.run_state(0)})
    assert single.t == 0 and single.resumed_from is None


def test_runs_of_a_batch_resume_at_one_step_or_not_at_all(digits_data, tmp_path):
    one = make_engine(digits_data)
    one.run(stop=30)
    state = one.run_state(0)
    batch = GPEDEngine([build_chain(digits_data, config(seed=s), STUDENTS) for s in (0, 1)])
    before = [p.clone() for p in parameters(batch)]
    with pytest.raises(ValueError, match=r"different steps \[0, 30\]"):
        batch.load_run_states({0: state})
    assert batch.t == 0 and all(torch.equal(x, y) for x, y in zip(before, parameters(batch)))  # nothing changed
    # the same through checkpoint files: run 0's file alone cannot resume a batch whose run 1 is at step 0
    save_checkpoints(one, [tmp_path / "a.pt"])
    with pytest.raises(ValueError, match="different steps"):
        load_checkpoints(batch, [tmp_path / "a.pt", tmp_path / "missing.pt"])
    assert load_checkpoints(batch, [None, None]) == [False, False] and batch.resumed_from is None
