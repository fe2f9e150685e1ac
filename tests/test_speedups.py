"""The check that decides whether a profile takes a faster numerics option (gped_kit.experiments.speedups,
gped_kit.cli.speedups): the verdict rule on tables with known answers (paired and unpaired differences, the
default's spread, students without skill), the chains' options reaching their configuration and key, a tiny run
on the CPU where TF32 does not exist (so both sets agree bit for bit), read back from the store, packed, and bad
input refused before any work."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from gped_kit.cli import packs as P
from gped_kit.cli import speedups as cli
from gped_kit.core.options import RandomNumbers
from gped_kit.experiments import speedups as SP
from gped_kit.experiments.experiment1.settings import PROFILES
from gped_kit.experiments.paper import ChainSettings, teacher_config
from gped_kit.experiments.store import ResultsStore
from gped_kit.experiments.verdicts import NOT_SEPARABLE

#: A shortened paper profile for the CPU: the check's flow, not its numbers.
TINY = {"burn_in": 20, "predictive_thinning": 5, "entropy_thinning": 5, "eval_thinning": 20, "log_every": 20,
        "checkpoint_every": 20, "test_size": 200}
STEPS = 60


def measures(*rows: tuple[int, str, float, float]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["seed", "measure", "value", "skill"])


def test_a_paired_difference_is_the_seeds_largest_against_the_defaults_spread():
    default = measures((0, "teacher NLL", 0.050, math.nan), (1, "teacher NLL", 0.054, math.nan),
                       (2, "teacher NLL", 0.052, math.nan),
                       (0, "U_s NLL", 0.060, 0.5), (1, "U_s NLL", 0.061, 0.5), (2, "U_s NLL", 0.062, 0.5))
    option = measures((0, "teacher NLL", 0.051, math.nan), (1, "teacher NLL", 0.055, math.nan),
                      (2, "teacher NLL", 0.053, math.nan),
                      (0, "U_s NLL", 0.065, 0.5), (1, "U_s NLL", 0.066, 0.5), (2, "U_s NLL", 0.067, 0.5))
    table = SP.compare_measures(default, option, paired=True).set_index("measure")
    assert table.loc["teacher NLL", "difference"] == pytest.approx(0.001)  # every seed 0.001 above
    assert table.loc["teacher NLL", "spread"] == pytest.approx(0.004)
    assert table.loc["teacher NLL", "verdict"] == NOT_SEPARABLE  # 0.001 < 0.004
    assert table.loc["U_s NLL", "difference"] == pytest.approx(0.005)
    assert table.loc["U_s NLL", "verdict"] == "worse"  # 0.005 >= the spread 0.002
    assert table.loc["U_s NLL", "lowest_skill"] == 0.5 and table.loc["U_s NLL", "seeds"] == 3


def test_pairs_are_taken_by_seed_and_an_unpaired_difference_is_of_the_means():
    default = measures((0, "m", 1.0, 0.5), (1, "m", 1.1, 0.5))
    option = measures((1, "m", 0.8, 0.5), (0, "m", 1.05, 0.5))  # rows in another order than the default's
    paired = SP.compare_measures(default, option, paired=True).iloc[0]
    assert paired["difference"] == pytest.approx(0.8 - 1.1)  # seed 1's; paired by row it would be -0.2
    assert paired["verdict"] == "better"  # |-0.3| >= the spread 0.1
    unpaired = SP.compare_measures(default, measures((5, "m", 1.02, 0.5), (6, "m", 1.1, 0.5)), paired=False).iloc[0]
    assert unpaired["difference"] == pytest.approx(1.06 - 1.05) and unpaired["verdict"] == NOT_SEPARABLE
    assert unpaired["seeds"] == 2


def test_identical_numbers_and_students_without_skill_have_verdicts_of_their_own():
    default = measures((0, "a", 0.3, 0.5), (1, "a", 0.4, 0.5), (0, "b", 0.3, 0.01), (1, "b", 0.4, 0.5))
    option = measures((0, "a", 0.3, 0.5), (1, "a", 0.4, 0.5), (0, "b", 0.3, 0.01), (1, "b", 0.4, 0.5))
    table = SP.compare_measures(default, option, paired=True).set_index("measure")
    assert table.loc["a", "verdict"] == "identical"
    assert table.loc["b", "verdict"] == "no skill"  # below the skill floor in one chain: no evidence either way


def test_the_verdict_rule_with_known_answers():
    assert SP._verdict(0.0, 0.1, 0.5, True) == "identical"
    assert SP._verdict(0.05, 0.1, 0.5, True) == NOT_SEPARABLE and SP._verdict(-0.05, 0.1, 0.5, True) == NOT_SEPARABLE
    assert SP._verdict(0.1, 0.1, 0.5, True) == "worse" and SP._verdict(-0.1, 0.1, 0.5, True) == "better"
    assert SP._verdict(0.05, 0.0, 0.5, True) == "worse"  # no spread measured: every difference counts
    assert SP._verdict(-0.05, 0.1, 0.04, True) == "no skill"
    assert SP._verdict(-0.1, 0.1, math.nan, True) == "no skill"  # a student whose skill is not known
    assert SP._verdict(-0.1, 0.1, math.nan, False) == "better"  # the teacher needs none
    assert SP._verdict(math.nan, 0.1, 0.5, True) == "missing"


def test_the_options_reach_the_chains_and_their_keys_only_when_set():
    default, tf32 = SP.speedup_tasks("tf32", 2000, (0, 1), device="cpu")
    assert [t.config.seed for t in default] == [0, 1] and [t.config.seed for t in tf32] == [0, 1]
    assert all(t.config.matmul_precision == "highest" for t in default)
    assert all(t.config.matmul_precision == "tf32" for t in tf32)
    assert "matmul_precision" not in default[0].config.record()
    assert tf32[0].config.record()["matmul_precision"] == "tf32"
    # the default's chain is Table 1's paper chain shortened: the same configuration but for T
    paper = teacher_config("fcnn", 60_000, PROFILES["paper"], 0, "cpu")
    assert default[0].config.record() == {**paper.record(), "num_iterations": 2000}
    assert len(default[0].students) == 4
    _, counter = SP.speedup_tasks("counter", 2000, (0, 1), device="cpu")
    assert counter[0].config.random_numbers is RandomNumbers.COUNTER
    assert counter[0].config.record()["random_numbers"] == "counter"
    assert SP.Speedup.TF32.paired and not SP.Speedup.COUNTER.paired


def test_chain_settings_check_the_options_and_leave_the_default_key_as_it_was():
    base = dict(num_iterations=10, burn_in=1, predictive_thinning=1, entropy_thinning=1, eval_thinning=1,
                log_every=1, checkpoint_every=1)
    with pytest.raises(ValueError, match="matmul_precision='bf16' is not known"):
        ChainSettings(**base, matmul_precision="bf16")
    with pytest.raises(ValueError, match="random_numbers='philox' is not known"):
        ChainSettings(**base, random_numbers="philox")
    record = teacher_config("fcnn", 100, ChainSettings(**base), 0, "cpu").record()
    assert "matmul_precision" not in record and "random_numbers" not in record


@pytest.mark.parametrize("kwargs, message", [
    ({"speedup": "bf16"}, "speedup='bf16' is not known"),
    ({"seeds": (0,)}, "at least two different seeds"),
    ({"seeds": (0, 0)}, "at least two different seeds"),
    ({"seeds": (0, -1)}, "seeds\\[1\\]"),
    ({"steps": 0}, "steps"),
    ({"model": "resnet"}, "model='resnet' is not known"),
    ({"overrides": {"random_numbers": "counter"}}, "'random_numbers' is set by the check itself"),
    ({"overrides": {"burn_in": -1}}, "burn_in"),
])
def test_bad_input_is_refused_before_any_work(kwargs, message):
    args = {"speedup": "tf32", "steps": 100, "seeds": (0, 1), **kwargs}
    with pytest.raises(ValueError, match=message):
        SP.speedup_tasks(args.pop("speedup"), device="cpu", **args)


def test_tf32_on_a_cpu_gives_both_sets_the_same_numbers_read_back_from_the_store(tmp_path):
    store = ResultsStore(tmp_path / "results")
    check = SP.speedup_check("tf32", store, steps=STEPS, seeds=(0, 1), overrides=TINY, device="cpu",
                             progress=False)
    assert check.complete and len(check.default.outcomes) == len(check.option.outcomes) == 2
    # the CPU has no TF32: the option's chains are the default's bit for bit, under keys of their own
    assert set(check.table["verdict"]) <= {"identical", "no skill"}
    assert (check.table["difference"] == 0).all() and len(check.table) == 5  # the teacher and four students
    keys = {o.entry.key for o in check.default.outcomes} | {o.entry.key for o in check.option.outcomes}
    assert len(keys) == 4
    assert set(check.rates["chains"]) == {"default", "option"} and not check.rates["reused"].any()
    assert math.isfinite(check.speed_ratio) and check.speed_ratio > 0
    again = SP.speedup_check("tf32", store, steps=STEPS, seeds=(0, 1), overrides=TINY, device="cpu",
                             progress=False, executor="stored")
    assert again.rates["reused"].all()
    pd.testing.assert_frame_equal(again.table, check.table)
    assert "tf32 against the default (2 seeds, device cpu)" in again.text()


def test_the_command_runs_packs_and_reads_back(tmp_path, capsys):
    results, pack = tmp_path / "results", tmp_path / "pack"
    params = [f"-p{k}={v}" for k, v in TINY.items()]
    argv = ["tf32", "--steps", str(STEPS), "--seeds", "0", "1", "--device", "cpu", "--results", str(results),
            "--lock-dir", str(tmp_path), *params]
    assert cli.main([*argv, "--pack", str(pack)]) == 0
    out = capsys.readouterr().out
    assert "| teacher NLL" in out and "packed" in out
    fresh = tmp_path / "fresh"
    P.unpack([pack], fresh)
    assert len([p for p in (fresh / "chain").iterdir() if p.is_dir()]) == 4  # beside them, the locks unpack held
    stored = ["tf32", "--seeds", "0", "1", "--device", "cpu", "--results", str(fresh), *params, "--stored"]
    assert cli.main([*stored, "--steps", str(STEPS)]) == 0
    assert "| teacher NLL" in capsys.readouterr().out
    assert cli.main([*stored, "--steps", str(STEPS + 20)]) == 1  # nothing stored at that length: incomplete


@pytest.mark.parametrize("extra, message", [
    (["--seeds", "3"], "at least two different seeds"),
    (["--chains-per-batch", "0"], "--chains-per-batch='0'"),
    (["--budget-s", "0"], "--budget-s=0"),
    (["-p", "table1_seeds=0"], "set by the check itself"),
    (["--part-mib", "0.5"], "--part-mib"),
    (["--stored", "--pack", "x"], "--stored computes nothing"),
])
def test_the_command_refuses_bad_input_before_any_work(tmp_path, capsys, extra, message):
    assert cli.main(["counter", "--results", str(tmp_path / "r"), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
