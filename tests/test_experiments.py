"""Profiles, Experiments 1-2 as chain tasks through the results store, and the trend/table logic
checked on small hand-built tables with known answers."""

import dataclasses
import warnings
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.engine import GPEDConfig, StudentConfig
from gped_kit.experiments import experiment1 as E1
from gped_kit.experiments import experiment2 as E2
from gped_kit.experiments import quickstart
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.claims import trend_cells
from gped_kit.experiments.experiment1.analysis import table1_display, table1_result
from gped_kit.experiments.paper import (
    BAOA_SAMPLER,
    ChainSettings,
    distillation_task,
    long_sampler,
    paper_shaped_lr_scale,
    teacher_caption,
)
from gped_kit.experiments.settings import resolve_settings
from gped_kit.experiments.store import ResultsStore


def test_profiles_resolve_from_a_notebook_namespace():
    namespace = {"num_iterations": None, "burn_in": 5, "seed": 3, "results_dir": "x", "profile": "paper"}
    p = resolve_settings(quickstart.PROFILES, "paper", namespace)
    assert p.num_iterations == 1_000_000 and p.burn_in == 5 and p.predictive_thinning == 100
    with pytest.raises(ValueError, match="profile='gpu'.*allowed"):
        resolve_settings(quickstart.PROFILES, "gpu", {})
    with pytest.raises(ValueError, match="log_every=0"):
        resolve_settings(quickstart.PROFILES, "default", {"log_every": 0})
    p = resolve_settings(E2.PROFILES, "default", {"mask_sizes": [0, 25]})
    assert p.mask_sizes == (0, 25) and p.labelled_sizes == (10_000, 60_000)


def _cells_table(gap_peak_at=15, uo_better=True):
    """A synthetic experiment2_cells-shaped table with the paper's trends built in (test-only)."""
    rows = []
    for n, base in ((10_000, 0.2), (60_000, 0.1)):
        for m, rate in ((0, 0.0), (10, 0.128), (15, 0.287), (25, 0.797)):
            teacher = base + rate * 2
            for est, extra in (("U_o", 0.0), ("U_s", 0.01 if uo_better else -0.01)):
                gap = (0.3 if m == gap_peak_at else 0.1) * base * 10 + extra
                rows.append(dict(model="fcnn", labelled_size=n, mask_size=m, masking_rate=rate, estimator=est,
                                 teacher_nll=teacher, nll_gap=gap, entropy_mae=gap / 3 + extra))
    return pd.DataFrame(rows)


def test_experiment2_trends_detect_the_papers_trends_and_their_absence():
    trends = E2.experiment2_trends(_cells_table()).set_index("trend")
    assert trends["holds"].all(), trends
    assert trends.loc["U_o at least as good as U_s", "count"] == "16 of 16"
    bad = E2.experiment2_trends(_cells_table(gap_peak_at=25, uo_better=False)).set_index("trend")
    assert not bad.loc["NLL gap peaks at moderate masking", "holds"]
    assert not bad.loc["U_o at least as good as U_s", "holds"]
    assert bad.loc["teacher NLL rises with masking", "holds"]
    assert bad.loc["NLL gap peaks at moderate masking", "count"] == "0 of 4"


def test_experiment2_trends_count_only_comparisons_whose_students_count():
    """A comparison that reads a student below the skill floor is no evidence: left out of ``count`` (and named)
    and of ``holds``, which is NaN where every comparison of a trend is left out (not True by default)."""
    cells = _cells_table(uo_better=False).assign(nll_gap_skill=0.9, entropy_mae_skill=0.0)  # entropy learnt nothing
    trends = E2.experiment2_trends(cells).set_index("trend")
    assert pd.isna(trends.loc["entropy MAE peaks at moderate masking", "holds"])
    assert trends.loc["entropy MAE peaks at moderate masking", "count"] == "0 of 0 (4 no evidence)"
    assert trends.loc["U_o at least as good as U_s", "count"] == "0 of 8 (8 no evidence)"  # the NLL cells judged
    assert not trends.loc["U_o at least as good as U_s", "holds"]
    assert trends.loc["NLL gap peaks at moderate masking", "holds"]
    # notebook 03's result line: a trend with nothing judged (CIFAR-10 has no masking) is named apart, not failed
    judged = int(trends["holds"].notna().sum())
    held = int(trends["holds"].dropna().astype(bool).sum())
    assert E2.trends_held_text(trends.reset_index()) == (
        f"{held} of {judged} of the paper's trends judged here hold on ours (each: in most of its comparisons "
        f"judged); {len(trends) - judged} cannot be judged on these cells (too few labelled-set sizes or masks, or "
        "every comparison no evidence)")
    unmasked = E2.experiment2_trends(_cells_table()[lambda d: d["mask_size"] == 0])
    assert E2.trends_held_text(unmasked).startswith("3 of 3 of the paper's trends judged here hold") and \
        "; 3 cannot be judged" in E2.trends_held_text(unmasked)


def _per_student_rows(bump_seed1: float = 0.0, bump_seed0: float = 0.0) -> pd.DataFrame:
    """The paper's own FCNN numbers (Table 6) on the default grid as a grid's per-student table, twice
    (seeds 0 and 1); seed 1 adds ``bump_seed1`` to U_o's NLL gap at (N = 60k, m = 0), seed 0 ``bump_seed0``."""
    from gped_kit.experiments import paper_tables  # noqa: PLC0415

    long = paper_tables.experiment2_long("fcnn")
    long = long[long["labelled_size"].isin([10_000, 60_000]) & long["mask_size"].isin([0, 15, 25])]
    rows = []
    for seed in (0, 1):
        for r in long.itertuples():
            base = dict(model="fcnn", labelled_size=r.labelled_size, mask_size=r.mask_size, masking_rate=r.masking_rate,
                        estimator=r.estimator, teacher_nll=r.teacher_nll, seed=seed,
                        run_key=f"{r.labelled_size}-{r.mask_size}-{seed}", skill=0.9)  # students that learnt
            bump = ((bump_seed0, bump_seed1)[seed] if (r.estimator, r.labelled_size, r.mask_size) == ("U_o", 60_000, 0)
                    else 0.0)
            rows.append(dict(base, target="predictive", student_nll=r.teacher_nll + r.nll_gap + bump,
                             nll_gap=r.nll_gap + bump))
            rows.append(dict(base, target="entropy", entropy_mae=r.entropy_mae))
    return pd.DataFrame(rows)


def test_trend_comparison_sets_each_comparison_beside_the_papers_over_seeds():
    same = E2.experiment2_trend_comparison(_per_student_rows()).set_index("trend")
    # ours = the paper's numbers: every comparison agrees, every seed alike
    assert same.loc["U_o at least as good as U_s", "ours"] == same.loc["U_o at least as good as U_s", "paper"] == \
        "11 of 12"  # Table 6, N = 10k, r = 0.8: U_o's MAE 0.023 > U_s's 0.019
    assert same["agree"].str.startswith("agree in").all() and (same["unstable_cells"] == 0).all()
    assert same.loc["NLL gap falls with more labelled data", "agree"] == "agree in 6 of 6 cells compared"
    assert same.loc["teacher NLL rises with masking", "seeds"] == "2 of 2 in 2 of 2 seeds"
    # seed 1's U_o gap at (60k, m = 0) far up: on the mean over seeds (+0.25) the gap no longer falls there,
    # no longer peaks at a moderate mask at 60k, and U_o is worse than U_s there; but the two seeds disagree by
    # more than that margin, so the three outcomes are not separable: named, neither agreement nor disagreement
    bumped = E2.experiment2_trend_comparison(_per_student_rows(bump_seed1=0.5)).set_index("trend")
    falls = bumped.loc["NLL gap falls with more labelled data"]
    assert (falls["ours"], falls["paper"], falls["agree"]) == (
        "5 of 5 (1 not separable)", "5 of 5", "agree in 5 of 5 cells compared; 1 not separable")
    assert falls["seeds"] == "5 of 5 in 2 of 2 seeds" and falls["unstable_cells"] == 1
    assert bumped.loc["NLL gap peaks at moderate masking", "ours"] == "3 of 3 (1 not separable)"
    assert bumped.loc["U_o at least as good as U_s", "agree"] == "agree in 11 of 11 cells compared; 1 not separable"
    assert bumped.loc["U_o at least as good as U_s", "ours"] == "10 of 11 (1 not separable)"
    cells = E2.experiment2_trend_cells_compared(_per_student_rows(bump_seed1=0.5))
    near = cells[cells["comparison"] == "not separable"]
    assert set(near["setting"]) == {"U_o, m=0, N 10000 -> 60000", "U_o, N=60000, m 0 -> 15 -> 25",
                                    "N=60000, m=0, nll_gap"}
    assert set(near["holds_by_seed"]) == {"True, False"} and not near["seed_stable"].any()
    assert (near["margin"].abs() < near["margin_spread"]).all()
    # both seeds bumped alike: the outcome is the same in every seed, so the three cells disagree with the paper
    both = E2.experiment2_trend_cells_compared(_per_student_rows(bump_seed1=0.5, bump_seed0=0.5))
    flipped = both[both["comparison"] == "disagree"]
    assert set(flipped["setting"]) == set(near["setting"]) and (flipped["margin"] < 0).all()
    assert "not separable" not in set(both["comparison"])
    both_rows = E2.experiment2_trend_comparison(_per_student_rows(bump_seed1=0.5, bump_seed0=0.5)).set_index("trend")
    assert both_rows.loc["NLL gap falls with more labelled data", "agree"] == "agree in 5 of 6 cells compared"
    # a cell the paper did not print is ours only, never agreement
    odd = _per_student_rows()
    odd = odd[odd["seed"] == 0].assign(mask_size=lambda d: d["mask_size"].replace({25: 7}))
    odd_cells = E2.experiment2_trend_cells_compared(odd)
    assert "ours only" in set(odd_cells["comparison"])
    assert set(odd_cells.loc[odd_cells["setting"].str.contains("m=7"), "comparison"]) == {"ours only"}
    # the same counts as experiment2_trends where every outcome is separable
    trends = E2.experiment2_trends(E2.experiment2_cells(_per_student_rows(bump_seed1=0.5, bump_seed0=0.5)))
    assert (trends.set_index("trend")["count"] == both_rows["ours"]).all()
    assert E2.experiment2_trend_comparison(pd.DataFrame()).empty


def test_experiment2_grid_runs_once_per_seed():
    p = dataclasses.replace(E2.PROFILES["default"], seeds=(0, 1, 2))
    tasks = E2.experiment2_tasks(["fcnn"], p, seed=10, device="cpu")
    assert len(tasks) == 3 * 2 * 3 and sorted({t.config.seed for t in tasks}) == [10, 11, 12]
    assert [t.config.seed for t in E2.experiment2_tasks(["fcnn"], E2.PROFILES["default"], device="cpu")] == [0] * 6
    # every profile keeps one seed, but the one named for three (notebook 02 with profile="seeds")
    assert all(p.seeds == (0,) for name, p in E2.PROFILES.items() if name != "seeds")
    assert E2.PROFILES["seeds"].seeds == (0, 1, 2)
    with pytest.raises(ValueError, match="seeds="):
        dataclasses.replace(p, seeds=(1, 1))


def _tiny(settings_kw=None):
    return dataclasses.replace(E2.PROFILES["default"], num_iterations=30, burn_in=10, eval_thinning=5, log_every=10,
                               checkpoint_every=10, **(settings_kw or {}))


def test_grid_runs_cifar10_cells_on_tiny_data_and_records_missing_and_failing_cells(tmp_path, write_tiny_cifar10):
    write_tiny_cifar10(tmp_path / "data", per_batch=8, n_test=6)
    root = str(tmp_path / "data")
    cifar = distillation_task("cnn_cifar10", 20, 0, _tiny(), device="cpu", data_root=root, verify_checksums=False)
    # the paper's eta, scaled in the default profile
    assert cifar.config.sampler.step_size == pytest.approx(2e-6 * 50_000 / 20)
    assert cifar.config.burn_in == 10  # the profile's B
    missing = distillation_task("cnn_cifar10", 20, 0, _tiny(), device="cpu", data_root=str(tmp_path / "empty"))
    diverging = ChainTask(cifar.data, dataclasses.replace(cifar.config, sampler=SGLDConfig(step_size=1e3)),
                          cifar.students, name="diverging")
    store = ResultsStore(tmp_path / "results")
    grid = run_chains([cifar, missing, diverging], store, progress=False)
    assert list(grid.cells["status"]) == [Status.RAN, Status.MISSING_DATA, Status.FAILED]
    assert str(tmp_path / "empty") in grid.cells.loc[1, "error"]  # says where it looked
    assert "step size" in grid.cells.loc[2, "error"]
    assert len(grid.table) == 4 and set(grid.table["target"]) == {"predictive", "entropy"}
    assert set(grid.table["model"]) == {"cnn_cifar10"} and (grid.table["labelled_size"] == 20).all()
    with pytest.raises(RuntimeError, match="1 chain"):
        grid.raise_if_failed()
    assert list(run_chains([cifar], store, progress=False).cells["status"]) == [Status.REUSED]
    cells = E2.experiment2_cells(grid.table)
    assert len(cells) == 2 and set(cells["estimator"]) == {"U_o", "U_s"}
    with pytest.raises(ValueError, match="model='resnet'"):
        distillation_task("resnet", 100, 0, _tiny())


@pytest.mark.slow  # about 25 s: in make test-slow
def test_grid_batches_compatible_cells_and_matches_one_by_one(tmp_path, write_tiny_cifar10):
    write_tiny_cifar10(tmp_path / "data", per_batch=8, n_test=6)
    root = str(tmp_path / "data")
    kw = dict(device="cpu", data_root=root, verify_checksums=False)
    # the paper's eta (not scaled up for N = 20): with eta * N / 2 = 0.05 on 20 random images, round-off in
    # batched products flips max-pool choices and the chains part ways; at the paper's step they agree
    settings = _tiny({"scale_step_size": False})
    a = distillation_task("cnn_cifar10", 20, 0, settings, **kw)
    b = distillation_task("cnn_cifar10", 16, 0, settings, seed=1, **kw)
    missing = distillation_task("cnn_cifar10", 20, 0, settings, device="cpu", data_root=str(tmp_path / "empty"))
    longer = dataclasses.replace(a, config=dataclasses.replace(a.config, num_iterations=40))  # other T: not with a, b
    tasks = [a, missing, b, longer]
    one_by_one = run_chains(tasks, ResultsStore(tmp_path / "seq"), progress=False)
    batched = run_chains(tasks, ResultsStore(tmp_path / "bat"), progress=False, chains_per_batch=4)
    assert list(batched.cells["status"]) == [Status.RAN, Status.MISSING_DATA, Status.RAN, Status.RAN]
    assert list(batched.cells["batched"]) == [True, False, True, False]  # a and b together; T differs for the last
    cols = ["run_key", "student", "teacher_nll", "student_nll", "entropy_mae"]
    pd.testing.assert_frame_equal(batched.table[cols], one_by_one.table[cols], rtol=1e-4)  # same keys, same numbers
    again = run_chains(tasks, ResultsStore(tmp_path / "bat"), progress=False, chains_per_batch=4)
    assert list(again.cells["status"]) == [Status.REUSED, Status.MISSING_DATA, Status.REUSED, Status.REUSED]
    with pytest.raises(ValueError, match="chains_per_batch=0"):
        run_chains(tasks, ResultsStore(tmp_path / "bat"), chains_per_batch=0)


def test_paper_shaped_lr_schedule_tasks_keep_the_papers_number_of_halvings():
    p = E2.PROFILES["default"]
    scale = paper_shaped_lr_scale("fcnn", p)
    assert scale == pytest.approx((5_000 - 3_000) / (1_000_000 - 1_000))
    tasks = E2.lr_schedule_tasks("fcnn", p, device="cpu")
    assert [(t.data.labelled_size, t.data.mask_size) for t in tasks] == [(10_000, 15), (60_000, 15)]
    for task in tasks:
        assert {s.resolved_target.name for s in task.students} == {"predictive"}
        (epochs,) = {s.lr_halving_epochs for s in task.students}
        steps_per_halving = epochs * task.data.labelled_size / task.config.sampler.batch_size
        halvings = (task.config.num_iterations - task.config.burn_in) / steps_per_halving
        paper = (1_000_000 - 1_000) / (200 * task.data.labelled_size / 100)
        assert halvings == pytest.approx(paper)  # 50 at N = 10k, 8.3 at N = 60k, as over the paper's T
    assert E2.lr_schedule_tasks("fcnn", E2.PROFILES["paper"]) == []
    with pytest.raises(ValueError, match="lr_halving_scale"):
        distillation_task("fcnn", 10_000, 0, p, lr_halving_scale=0.0)


def test_gap_by_schedule_compares_the_smallest_and_largest_labelled_set():
    def rows(gaps, epochs, skill=None):
        out = []
        for (n, m, est), gap in gaps.items():
            for target in ("predictive", "entropy"):
                out.append(dict(model="fcnn", labelled_size=n, mask_size=m, masking_rate=m * m / 784,
                                estimator=est, target=target, teacher_nll=0.1, student_nll=0.1 + gap,
                                nll_gap=gap if target == "predictive" else float("nan"),
                                entropy_mae=0.05 if target == "entropy" else float("nan"),
                                skill=(skill or {}).get((n, m, est), 0.5),
                                lr_halving_epochs=epochs, num_iterations=5_000, burn_in=3_000,
                                batch_size=100, run_key=f"{n}-{m}"))
        return pd.DataFrame(out)

    constant = rows({(10_000, 0, "U_s"): -0.02, (60_000, 0, "U_s"): 0.03,
                     (10_000, 25, "U_s"): 0.5, (60_000, 25, "U_s"): 0.1}, 200.0)
    shaped = rows({(10_000, 0, "U_s"): 0.30, (60_000, 0, "U_s"): 0.09}, 0.4)
    out = E2.gap_by_schedule({"constant": constant, "paper-shaped": shaped}).set_index("schedule")
    assert len(out) == 2  # m = 25 is only in one table: not compared
    assert not out.loc["constant", "gap_falls_with_more_data"]
    assert out.loc["paper-shaped", "gap_falls_with_more_data"]
    assert out["outcome"].tolist() == ["does not fall", "falls"] and out["skill"].tolist() == [0.5, 0.5]
    assert E2.schedule_counts(out.reset_index()) == {"constant": "0 of 1", "paper-shaped": "1 of 1"}
    # a student no better than a constant at either end tells nothing about its schedule (the paper-shaped
    # student at N = 10,000 whose rate halved 49 times); one whose skill was not stored neither
    crippled = rows({(10_000, 0, "U_s"): 0.30, (60_000, 0, "U_s"): 0.09}, 0.4, skill={(10_000, 0, "U_s"): -0.45})
    out = E2.gap_by_schedule({"constant": constant, "paper-shaped": crippled}).set_index("schedule")
    assert out.loc["paper-shaped", "gap_falls_with_more_data"] and out.loc["paper-shaped", "skill"] == -0.45
    assert out.loc["paper-shaped", "outcome"] == "no evidence"
    assert E2.schedule_counts(out.reset_index()) == {"constant": "0 of 1", "paper-shaped": "0 of 0; 1 no evidence"}
    unknown = rows({(10_000, 0, "U_s"): 0.30, (60_000, 0, "U_s"): 0.09}, 0.4, skill={(60_000, 0, "U_s"): None})
    assert E2.gap_by_schedule({"s": unknown})["outcome"].tolist() == ["no evidence"]
    assert out.loc["constant", "gap_at_10000"] == pytest.approx(-0.02)
    assert out.loc["paper-shaped", "halvings_at_10000"] == 50
    assert out.loc["paper-shaped", "halvings_at_60000"] == 8
    assert out.loc["constant", "halvings_at_60000"] == 0


def test_experiment1_table_averages_seeds_and_judges_the_mean_in_the_readmes_verdict_words():
    rows = []
    for seed, (t, st, m) in enumerate([(0.050, 0.124, 0.084), (0.054, 0.121, 0.081), (0.052, 0.119, 0.082)]):
        rows.append(dict(model="fcnn", seed=seed, target="predictive", estimator="U_s", teacher_nll=t, student_nll=st,
                         teacher_accuracy=0.97, student_accuracy=0.96, skill=0.9))
        rows.append(dict(model="fcnn", seed=seed, target="entropy", estimator="U_o", teacher_nll=t, entropy_mae=m,
                         teacher_accuracy=0.97, student_accuracy=float("nan"), skill=0.9))
    rows.append(dict(model="cnn_mnist", seed=0, target="predictive", estimator="U_s", teacher_nll=0.04,
                     student_nll=0.07, teacher_accuracy=0.99, student_accuracy=0.98, skill=0.9))
    t1 = E1.experiment1_table(pd.DataFrame(rows)).set_index("model")
    assert t1.loc["fcnn", "seeds"] == 3 and t1.loc["fcnn", "teacher_nll"] == pytest.approx(0.052)
    assert t1.loc["fcnn", "teacher_nll_std"] == pytest.approx(0.002)
    # the gap per seed, then over seeds: 0.074, 0.067, 0.067 (its spread is not the two NLLs' spreads combined)
    assert t1.loc["fcnn", "nll_gap"] == pytest.approx(0.208 / 3)
    assert t1.loc["fcnn", "nll_gap_std"] == pytest.approx(pd.Series([0.074, 0.067, 0.067]).std())
    assert pd.isna(t1.loc["cnn_mnist", "nll_gap_std"]) and t1.loc["cnn_mnist", "nll_gap"] == pytest.approx(0.03)
    assert t1.loc["fcnn", "student_nll_paper"] == 0.082 and t1.loc["fcnn", "entropy_mae_paper"] == 0.016
    # the README's verdict words: 0.052 against 0.052, 0.0052 from either 10% bound, more than the spread 0.002
    assert t1.loc["fcnn", "teacher_nll_vs_paper"] == "within 10%"
    assert t1.loc["fcnn", "student_nll_vs_paper"] == "worse" and t1.loc["fcnn", "entropy_mae_vs_paper"] == "worse"
    assert t1.loc["cnn_mnist", "teacher_nll_vs_paper"] == "worse"  # 0.04 against 0.022, one seed: no spread known
    assert E1.versus_paper(0.0565, 0.002, 3, 0.052) == "not separable"  # 0.0007 from the bound 0.0572
    assert E1.versus_paper(0.0565, 0.002, 1, 0.052) == "within 10%"  # one seed: no spread to separate by
    assert E1.versus_paper(0.040, 0.001, 3, 0.052) == "better"
    assert pd.isna(t1.loc["cnn_cifar10", "teacher_nll"]) and t1.loc["cnn_cifar10", "teacher_nll_vs_paper"] == "—"
    # one seed's entropy student stored without its skill: the lowest over the seeds is unknown, no evidence
    rows[3] = {k: v for k, v in rows[3].items() if k != "skill"}
    unknown = E1.experiment1_table(pd.DataFrame(rows)).set_index("model")
    assert pd.isna(unknown.loc["fcnn", "entropy_mae_skill"]) and unknown.loc["fcnn", "student_nll_skill"] == 0.9
    assert unknown.loc["fcnn", "entropy_mae_vs_paper"] == "no evidence"
    assert unknown.loc["fcnn", "teacher_nll_vs_paper"] == "within 10%"  # the teacher needs no skill
    tasks = E1.experiment1_tasks(["fcnn", "cnn_mnist"], E1.PROFILES["default"], seed=10)
    assert [(t.config.model_name, t.config.seed) for t in tasks] == [
        ("fcnn", 10), ("cnn_mnist", 10), ("fcnn", 11), ("cnn_mnist", 11), ("fcnn", 12), ("cnn_mnist", 12)]


def test_the_entropy_skill_finding_passes_only_students_known_to_beat_the_best_constant():
    def table(*skills: float) -> pd.DataFrame:
        return pd.DataFrame({"model": ["fcnn", "cnn_mnist", "cnn_cifar10"][:len(skills)],
                             "entropy_mae": [0.07] * len(skills), "entropy_mae_skill": list(skills)})

    assert E1.entropy_skill_finding(table(0.07, 0.06)) is True
    assert E1.entropy_skill_finding(table(0.07, 0.0024)) is False  # a CNN student that learned next to nothing
    assert E1.entropy_skill_finding(table(0.07, 0.06, 0.0)) is True  # CIFAR-10 is not an MNIST model
    assert E1.entropy_skill_finding(table(0.07, float("nan"))) == "skill not stored for cnn_mnist"
    assert E1.entropy_skill_finding(table(0.07).drop(columns="entropy_mae_skill")) == "skill not stored for fcnn"
    assert E1.entropy_skill_finding(table(0.07).assign(entropy_mae=float("nan"))) == "no entropy student stored"


def test_teacher_caption_reads_the_sampler_chains_and_length_from_the_settings():
    base = ChainSettings(num_iterations=5_000, burn_in=None, predictive_thinning=2, entropy_thinning=2,
                         eval_thinning=50, log_every=500, checkpoint_every=1_000)
    assert teacher_caption(base) == "one SGLD chain, T = 5,000"
    pooled = dataclasses.replace(base, num_iterations=24_000, sampler=BAOA_SAMPLER, num_chains=2)
    assert teacher_caption(pooled) == "2 pooled BAOA chains, T = 24,000 each"
    cyclical = dataclasses.replace(base, num_iterations=12_000, sampler=long_sampler(12_000), num_chains=4)
    assert teacher_caption(cyclical) == "4 pooled cyclical BAOA chains, T = 12,000 each"
    assert teacher_caption(E1.PROFILES["cpu30"]) == "2 pooled BAOA chains, T = 20,000 each"


def test_notebook01_result_and_table_read_table1_as_the_readme_does():
    """The result paragraph counts Table 1's values within 10% (two-sided), better and worse; the display
    table puts FCNN before CNN-MNIST, seeds as integers, and the models without a run apart."""
    t = pd.DataFrame({"model": ["cnn_cifar10", "cnn_mnist", "fcnn"], "seeds": [float("nan"), 3.0, 3.0],
                      "teacher_nll": [float("nan"), 0.023, 0.095], "teacher_nll_std": [float("nan"), 0.001, 0.001],
                      "teacher_nll_paper": [0.671, 0.022, 0.052], "teacher_nll_vs_paper": ["—", "x", "x"],
                      "student_nll": [float("nan"), 0.040, 0.121], "student_nll_std": [float("nan"), 0.002, 0.002],
                      "student_nll_paper": [0.932, 0.053, 0.082], "student_nll_vs_paper": ["—", "x", "x"],
                      "entropy_mae": [float("nan"), 0.0165, 0.083], "entropy_mae_std": [float("nan"), 0.001, 0.001],
                      "entropy_mae_paper": [0.245, 0.016, 0.016], "entropy_mae_vs_paper": ["—", "x", "x"],
                      "student_nll_skill": [float("nan"), 0.9, 0.9], "entropy_mae_skill": [float("nan"), 0.9, 0.9]})
    unknown = table1_result(t.drop(columns=["student_nll_skill", "entropy_mae_skill"]), "default")
    assert ("Of the 6 Table 1 values, 1 is within 10% of the paper's, 0 better and 1 worse; 4 are no evidence, "
            "their students stored without their skill over the best constant prediction") in unknown
    text = table1_result(t, "default")
    # CNN teacher 0.023 / 0.022 within, student 0.040 / 0.053 better (-25%), entropy 0.0165 / 0.016 within;
    # FCNN all three worse
    assert "Of the 6 Table 1 values, 2 are within 10% of the paper's, 1 better and 3 worse" in text
    # the gaps as measured, without a word for their size; the spread only where the table has it
    assert ("the predictive student's (U_s) NLL less its teacher's (mean ± std over the seeds): FCNN +0.0260 (the "
            "paper's +0.030), CNN-MNIST +0.0170 (the paper's +0.031)") in text and "close" not in text
    spread = t.assign(nll_gap=[float("nan"), 0.017, 0.026], nll_gap_std=[float("nan"), 0.004, 0.003])
    assert "FCNN +0.0260 ± 0.0030 (the paper's +0.030), CNN-MNIST +0.0170 ± 0.0040" in table1_result(spread, "default")
    assert "± 0.0030" not in table1_result(spread.assign(seeds=1), "default")  # one seed: no spread shown
    # a predictive student not known to beat the best constant: its gap is marked as no evidence
    weak = table1_result(t.assign(student_nll_skill=[float("nan"), 0.9, 0.01]), "default")
    assert "FCNN +0.0260 (the paper's +0.030; no evidence, its student not known to beat" in weak
    assert "CNN-MNIST +0.0170 (the paper's +0.031). Of" in weak
    ours, paper_only = table1_display(t)
    assert list(ours["model"]) == ["FCNN", "CNN-MNIST"] and ours["seeds"].dtype.kind == "i"
    assert ours.loc[0, "teacher NLL"] == "0.0950 ± 0.0010" and list(paper_only["model"]) == ["CNN-CIFAR-10"]
    assert "no chain of ours" in table1_result(t.assign(teacher_nll=float("nan")), "paper")
    # a mean nearer a bound than the seeds' spread is not separable, in the paragraph as in the table
    near = t.assign(teacher_nll=[float("nan"), 0.023, 0.0575])  # FCNN 0.0003 above 1.1 x 0.052, sd 0.001
    assert ("Of the 6 Table 1 values, 2 are within 10% of the paper's, 1 better and 2 worse; 1 is not separable"
            in table1_result(near, "default"))


def test_cells_below_the_skill_floor_are_named_and_their_comparisons_are_no_evidence():
    """A cell whose entropy students are no better than the best constant (skill < 0.05) is named, and every
    trend comparison that reads it is "no evidence", left out of our count (issue 52)."""
    rows = []
    for n in (10_000, 60_000):
        for m, r in ((0, 0.0), (15, 0.29), (25, 0.8)):
            for e in ("U_o", "U_s"):
                rows.append({"model": "fcnn", "labelled_size": n, "mask_size": m, "masking_rate": r, "estimator": e,
                             "teacher_nll": 0.1 + m / 10 - n / 1e6, "nll_gap": 0.01, "entropy_mae": 0.05 + m / 100,
                             "entropy_mae_skill": -0.002 if m == 0 else 0.4, "nll_gap_skill": 0.9})
    cells = pd.DataFrame(rows)
    low = E2.below_floor(cells)
    assert list(zip(low["labelled_size"], low["mask_size"], low["metric"])) == [(10_000, 0, "entropy MAE"),
                                                                                 (60_000, 0, "entropy MAE")]
    assert "N = 10,000, m = 0 (U_o -0.002 / U_s -0.002)" in E2.below_floor_text(low)
    assert low["estimators"].tolist() == ["U_o, U_s"] * 2
    # one estimator below the floor: named, and the other's skill shown beside it (its comparisons count)
    one = cells.copy()
    one.loc[(one["estimator"] == "U_o") & (one["mask_size"] == 0), "entropy_mae_skill"] = 0.3
    low_one = E2.below_floor(one)
    assert low_one["estimators"].tolist() == ["U_s"] * 2 and low_one["skill_U_o"].tolist() == [0.3, 0.3]
    assert "N = 10,000, m = 0 (U_s -0.002)" in E2.below_floor_text(low_one)
    per = trend_cells(cells)
    peaks = per[(per["trend"] == "entropy MAE peaks at moderate masking")]
    assert peaks["no_evidence"].all()  # every peak reads m = 0
    uo = per[(per["trend"] == "U_o at least as good as U_s") & (per["metric"] == "entropy_mae")]
    assert uo.set_index("mask_size")["no_evidence"].groupby(level=0).all().to_dict() == {0: True, 15: False, 25: False}
    assert not per.loc[per["metric"] == "nll_gap", "no_evidence"].any()
    # the students of N = 60,000, m = 25 stored without their skill: named apart, their comparisons no evidence
    unknown = (cells["labelled_size"] == 60_000) & (cells["mask_size"] == 25)
    cells.loc[unknown, "nll_gap_skill"] = float("nan")
    low = E2.below_floor(cells)
    assert low.loc[~low["stored"], ["labelled_size", "mask_size", "metric"]].values.tolist() == [
        [60_000, 25, "student NLL"]]
    text = E2.below_floor_text(low)
    assert "N = 10,000, m = 0 (U_o -0.002 / U_s -0.002)" in text
    assert ("No evidence in 1 (cell, metric) pairs stored without their students' skill over the best constant "
            "prediction (FCNN student NLL: 1)") in text
    per = trend_cells(cells)
    gap = per[per["metric"] == "nll_gap"]
    # exactly the comparisons that read (60,000, 25): its N trend at m = 25, its peak at N = 60,000, U_o vs U_s there
    assert sorted(gap.loc[gap["no_evidence"], "setting"]) == [
        "N=60000, m=25, nll_gap", "U_o, N=60000, m 0 -> 15 -> 25", "U_o, m=25, N 10000 -> 60000",
        "U_s, N=60000, m 0 -> 15 -> 25",
        "U_s, m=25, N 10000 -> 60000"]


def test_the_estimator_gap_table_sets_ours_beside_the_papers():
    """U_s - U_o student NLL per profile at Table 1's cell, with what the profile does differently, the GPU
    chain's and the paper's rows (FCNN: 0.082 - 0.054); the text says the paper's gap is not reproduced when
    none of ours reaches half of it (issue 52, item 5)."""
    rows = [{"model": "fcnn", "target": "predictive", "labelled_size": 60_000, "mask_size": 0, "seed": s,
             "estimator": e, "student_nll": 0.10 + (0.002 * s if e == "U_s" else 0.0), "num_iterations": 5_000,
             "burn_in": 3_000, "thinning": 2, "lr_halving_epochs": 200.0, "lr_warmup": 100,
             "skill": 0.9 - 0.01 * s}
            for s in (0, 1, 2) for e in ("U_s", "U_o")]
    summary = SimpleNamespace(run=SimpleNamespace(table=pd.DataFrame(rows)))
    gaps = E1.estimator_gap({"default": summary}, {"fcnn": {"U_s": 0.0636, "U_o": 0.0630}}).set_index("profile")
    assert gaps.loc["default", "gap"] == pytest.approx(0.002) and gaps.loc["default", "seeds"] == 3
    assert gaps.loc["default", "student_updates"] == 1_000 and gaps.loc["default", "lr_warmup"] == 100
    assert gaps.loc["default", "skill"] == pytest.approx(0.88)
    assert gaps.loc["paper on a GPU", "gap"] == pytest.approx(0.0006)
    assert pd.isna(gaps.loc["paper on a GPU", "skill"])  # stored before its students reported skill
    assert gaps.loc["the paper's (Tables 5, 6)", "gap"] == pytest.approx(0.028)
    text = E1.estimator_gap_text(gaps.reset_index())
    assert "the paper's +0.028" in text and "not reproduced" in text
    # the GPU chain's students are not known to beat a constant: named, and not among the settings that judge it
    assert "over 1,000 to 1,000 student updates" in text and "paper on a GPU (T" not in text
    assert text.endswith("No evidence: paper on a GPU (students not known to beat the best constant prediction), "
                         "left out.")
    summary.run.table.loc[summary.run.table["estimator"] == "U_s", "student_nll"] += 0.03
    assert "At least half the paper's gap in: default" in E1.estimator_gap_text(
        E1.estimator_gap({"default": summary}))
    # a gap nearer half the paper's (0.014) than its seeds' spread: not separable, not "none reaches it"
    summary.run.table.loc[summary.run.table["estimator"] == "U_s", "student_nll"] += -0.03 + 0.011
    near = E1.estimator_gap_text(E1.estimator_gap({"default": summary}))
    assert "Not separable from half the paper's gap within the seeds' spread in: default" in near
    assert "not reproduced" not in near
    summary.run.table["skill"] = 0.01  # below the floor: no row judges it
    assert E1.estimator_gap_text(E1.estimator_gap({"default": summary})) == ""


def test_table1_per_profile_sets_the_gpu_chain_at_the_papers_length_beside_the_profiles():
    """Notebook 01's "other profiles": the paper profile's committed GPU chain (T = 10^6, one seed) has a row of its
    own between the profiles and the paper's (issue 56: the README leads with it, the notebook left it out)."""
    table1 = pd.DataFrame({"model": ["fcnn"], "seeds": [3], "teacher_nll": [0.094], "teacher_nll_std": [0.001],
                           "teacher_nll_paper": [0.052], "student_nll": [0.12], "student_nll_std": [0.001],
                           "student_nll_paper": [0.082], "entropy_mae": [0.07], "entropy_mae_std": [0.002],
                           "entropy_mae_paper": [0.016]})
    summary = SimpleNamespace(tables={"table1": table1, "run_time": pd.DataFrame({"model": ["fcnn"], "seconds": [298.0],
                                                                                  "chains": [3]})})
    gpu = E1.gpu_table1(Path(__file__).resolve().parents[1] / "figures")
    assert gpu["fcnn"]["teacher_nll"] == pytest.approx(0.0539, abs=1e-4)  # the committed H200 run
    t = E1.table1_by_profile({"default": summary}, gpu)
    assert t["profile"].tolist() == ["default", E1.GPU_TABLE1, E1.PAPER_TABLE1]
    row = t.set_index("profile").loc[E1.GPU_TABLE1]
    assert row["seeds"] == 1 and pd.isna(row["teacher_nll_std"]) and pd.isna(row["seconds"])
    assert row["student_nll / paper"] == pytest.approx(gpu["fcnn"]["student_nll"] / 0.082)
    assert E1.table1_by_profile({"default": summary})["profile"].tolist() == ["default", E1.PAPER_TABLE1]


def test_a_chain_whose_student_learnt_nothing_says_so_in_one_line(digits_data, tmp_path, capsys):
    """The experiments' chain runner prints a student below the skill floor as one line naming its chain (a
    notebook shows no library file path), and issues no warning of its own."""
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=200,
                        burn_in=60, eval_thinning=10, log_every=200, checkpoint_every=200, progress=False,
                        device="cpu")
    students = (StudentConfig("predictive", "U_o", thinning=2, lr=1e-12, name="frozen"),)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a SkillWarning escaping the runner would fail here
        grid = run_chains([ChainTask(digits_data, config, students, name="tiny")], ResultsStore(tmp_path),
                          progress=False)
    grid.raise_if_failed()
    err = capsys.readouterr().err
    assert "SkillWarning (tiny): student 'frozen' is no better than a constant" in err and "/" not in err.split(":")[0]
