"""A pooled teacher's chain that collapsed to chance level (gped_kit.experiments.collapse): the rule on
known cases, the message, the hook that stops a run and the check that refuses a stored result."""

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from gped_kit.core.likelihoods import Categorical, Gaussian
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.engine import GPEDConfig, StudentConfig, evaluate
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.collapse import ChainCollapsed, CollapseHook, chain_nlls, check_history, collapsed_chains
from gped_kit.experiments.frame import failed_lines
from gped_kit.experiments.store import ResultsStore

LOG10 = math.log(10)


def test_the_rule_on_known_cases():
    # the cpu30 CNN seed-2 pool: chain 2 at log 10 while its peers are near 0.05
    assert collapsed_chains({0: 0.0434, 1: 0.0515, 2: 2.3011, 3: 0.0457}, LOG10) == {2: 2.3011}
    # every chain near chance (the paper's own teacher at masking 0.8 has NLL 2.298): not a collapse
    assert collapsed_chains({0: 2.29, 1: 2.30, 2: 2.298}, LOG10) == {}
    # one chain alone cannot be compared; two classes still can
    assert collapsed_chains({0: 2.3026}, LOG10) == {}
    assert collapsed_chains({0: 0.69, 1: 0.05}, math.log(2)) == {0: 0.69}
    # a poor chain that is not at chance is not collapsed (0.9 x log 10 = 2.07)
    assert collapsed_chains({0: 0.05, 1: 2.07}, LOG10) == {}
    # a likelihood without a chance level (Gaussian) is never checked
    assert collapsed_chains({0: 0.05, 1: 9.0}, None) == {}


def test_history_rows_are_read_per_chain_and_nan_is_left_out():
    assert chain_nlls({"teacher_nll": 0.3, "teacher_nll_chain0": 0.1, "teacher_nll_chain1": float("nan"),
                       "teacher_nll_chain12": 2.3, "step": 5}) == {0: 0.1, 12: 2.3}


def test_a_stored_history_with_a_collapse_raises_naming_the_chain_step_and_cause():
    history = pd.DataFrame({"step": [2000, 4000, 4000, 8000],
                            "student": ["a", "a", "b", "a"],
                            "teacher_nll_chain0": [None, 0.0588, 0.0588, 0.0485],
                            "teacher_nll_chain1": [None, 2.3011, 2.3011, 2.3011]})
    with pytest.raises(ChainCollapsed) as info:
        check_history(history, LOG10, "cnn_mnist N=60000 m=0 seed=2", "BAOAConfig step_size=0.6, schedule='cyclical'")
    text = str(info.value)
    assert "cnn_mnist N=60000 m=0 seed=2" in text and "chain 1 at 2.3011" in text and "step 4,000" in text
    assert "chain 0 reached 0.0588" in text and "BAOAConfig step_size=0.6" in text
    assert "Lower the sampler's step" in text
    check_history(history.drop(columns="teacher_nll_chain1"), LOG10, "one chain")  # nothing to compare: no error
    check_history(history.assign(teacher_nll_chain1=history["teacher_nll_chain0"]), LOG10, "healthy")


def test_the_hook_stops_a_pooled_categorical_run_and_leaves_others_alone():
    hook = CollapseHook(["pool"], ["SGLD"])
    categorical = SimpleNamespace(pooled=True, chains=[SimpleNamespace(likelihood=Categorical())],
                                  num_outputs=10, t=100)
    rows = [[{"step": 100, "teacher_nll_chain0": 0.1, "teacher_nll_chain1": LOG10}]]
    with pytest.raises(ChainCollapsed, match="pool: the pooled teacher's chain 1"):
        hook.on_log(categorical, rows)
    hook.on_log(SimpleNamespace(**{**vars(categorical), "pooled": False}), rows)  # single chains: not checked
    gaussian = SimpleNamespace(**{**vars(categorical), "chains": [SimpleNamespace(likelihood=Gaussian(1.0))]})
    hook.on_log(gaussian, rows)
    hook.on_log(categorical, [[]])  # no rows yet


def _pooled_task(digits_data):
    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=40, burn_in=10,
                     eval_thinning=5, log_every=20, checkpoint_every=20, progress=False, device="cpu", num_chains=2)
    return ChainTask(digits_data, cfg, (StudentConfig("predictive", "U_s", thinning=2),), keep_outputs=("test",),
                     name="pool")


def test_run_chains_fails_a_chain_that_collapses_and_refuses_a_stored_one(digits_data, tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    healthy = run_chains([_pooled_task(digits_data)], store, progress=False)
    assert list(healthy.cells["status"]) == [Status.RAN]
    # a stored pooled result whose history shows a collapsed chain (made before the check) is not used
    entry = healthy.outcomes[0].entry
    history = entry.table("history")
    logged = history["teacher_nll_chain1"].notna()  # a tiny chain is far from healthy: set both chains' NLLs
    history.loc[logged, "teacher_nll_chain0"], history.loc[logged, "teacher_nll_chain1"] = 0.1, LOG10
    entry.write_table("history", history)
    again = run_chains([_pooled_task(digits_data)], store, progress=False)
    assert list(again.cells["status"]) == [Status.FAILED] and "ChainCollapsed" in again.outcomes[0].error
    assert "chain 1 at 2.3026" in again.outcomes[0].error
    stored = run_chains([_pooled_task(digits_data)], store, progress=False, executor="stored")
    assert list(stored.cells["status"]) == [Status.FAILED]
    # while computing: the run stops at the first log point that shows it, recorded as failed
    original = evaluate.chain_metrics
    monkeypatch.setattr(evaluate, "chain_metrics", lambda state, setup: {
        k: (LOG10 if k == "teacher_nll_chain1" else 0.1) for k in original(state, setup)})
    fresh = run_chains([_pooled_task(digits_data)], ResultsStore(tmp_path / "fresh"), progress=False)
    assert list(fresh.cells["status"]) == [Status.FAILED] and "ChainCollapsed" in fresh.outcomes[0].error
    assert "at step 20" in fresh.outcomes[0].error


def test_a_profile_shown_beside_names_its_failed_chains_in_one_line_each():
    error = ("ChainCollapsed: cnn_mnist seed=2: the pooled teacher's chain 2 at 2.3011 predicts at chance level "
             "(2.3026) at step 4,000, while chain 0 reached 0.0434 on the same data: the collapsed chain's "
             "samples would pull the pooled ensemble towards the uniform distribution. Likely cause: ...")
    grid = SimpleNamespace(failed=pd.DataFrame({"cell": ["cnn_mnist seed=2"], "error": [error]}))
    (line,) = failed_lines(SimpleNamespace(profile="cpu30", run=grid))
    assert line.startswith("Profile 'cpu30': cnn_mnist seed=2 failed and is left out of its tables: cnn_mnist")
    assert "chain 2 at 2.3011" in line and line.endswith("uniform distribution.") and "Likely" not in line
    assert failed_lines(SimpleNamespace(profile="x", run=SimpleNamespace(failed=pd.DataFrame()))) == []
    assert failed_lines(SimpleNamespace(profile="x", run=None)) == []
