"""``chains_per_batch="auto"``: the batch size from one chain's measured memory and the device's free memory."""

from __future__ import annotations

import dataclasses

import pytest
from test_batching import chains

from gped_kit.core.status import Status
from gped_kit.engine import GPEDEngine
from gped_kit.engine.spec import build_chain
from gped_kit.experiments import batching
from gped_kit.experiments.batching import MAX_CHAINS, BatchPlan, chain_bytes, check_chains_per_batch, plan_batch
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.experiment2.settings import PROFILES as E2
from gped_kit.experiments.store import ResultsStore


def test_one_chain_is_measured_without_the_data():
    spec = chains(1)[0]
    usage = GPEDEngine([spec]).memory_bytes()
    assert chain_bytes(spec) == usage["total"] - usage["data"] > 0


def test_the_batch_is_the_smallest_of_cap_budget_and_pending(monkeypatch):
    spec = chains(1)[0]
    each = chain_bytes(spec)
    monkeypatch.setattr(batching, "free_bytes", lambda device: int(each * 2 * 3.5))  # budget: 3.5 chains
    plan = plan_batch(spec, pending=10)
    assert (plan.chains, plan.chain_bytes, plan.cap) == (min(3, MAX_CHAINS["cpu"]), each, MAX_CHAINS["cpu"])
    assert plan.limited_by == "the memory budget"
    monkeypatch.setattr(batching, "free_bytes", lambda device: 10 ** 15)
    assert plan_batch(spec, pending=100).chains == MAX_CHAINS["cpu"]
    assert "the cap" in plan_batch(spec, pending=100).describe()
    assert plan_batch(spec, pending=2).chains == 2 and plan_batch(spec, pending=2).limited_by == "every chain pending"
    monkeypatch.setattr(batching, "free_bytes", lambda device: 0)
    assert plan_batch(spec, pending=10).chains == 1  # never fewer than one
    pooled = build_chain(spec.data, dataclasses.replace(spec.config, num_chains=2), [s.config for s in spec.students])
    monkeypatch.setattr(batching, "free_bytes", lambda device: 10 ** 15)
    assert plan_batch(pooled, pending=10).chains == 1


def test_describe_says_what_was_measured():
    text = BatchPlan(chains=3, chain_bytes=3 * 2 ** 20, budget_bytes=10 * 2 ** 20, cap=4, device="cpu",
                     pending=8).describe()
    assert text.startswith("batches of up to 3 chains on cpu (the memory budget)") and "3.0 MiB" in text


def test_auto_runs_the_grid_in_batches_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(batching, "free_bytes", lambda device: 10 ** 15)
    specs = chains(3)
    tasks = [ChainTask(s.data, s.config, tuple(st.config for st in s.students)) for s in specs]
    grid = run_chains(tasks, ResultsStore(tmp_path), chains_per_batch="auto", progress=True)
    assert list(grid.cells["status"]) == [Status.RAN] * 3 and grid.cells["batched"].all()
    assert "batches of up to 3 chains on cpu" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"chains_per_batch='many': must be an integer >= 1 or 'auto'"):
        run_chains(tasks, ResultsStore(tmp_path), chains_per_batch="many")


def test_settings_take_auto_and_reject_other_words():
    assert E2["paper"].chains_per_batch == "auto"
    assert check_chains_per_batch("chains_per_batch", 3) == 3
    for bad in (0, True, "all", 2.0):
        with pytest.raises(ValueError, match="chains_per_batch"):
            dataclasses.replace(E2["default"], chains_per_batch=bad)
