"""The comparison of notebook 07 (KD / GPED / EnD2 / Hydra on one chain, and the 2-D spiral): settings,
students, the tables' invariants, memory against the engine's own stores, and tiny end-to-end runs
through a results store that a second call reuses without computing."""

import dataclasses

import pandas as pd
import pytest
import torch

from gped_kit.baselines import hydra as H
from gped_kit.core import uncertainty
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.engine import GPEDConfig, GPEDEngine, student_updates
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.experiments import chains as chains_module
from gped_kit.experiments import comparison as C
from gped_kit.experiments.chains import ChainTask
from gped_kit.experiments.settings import Overrides, resolve_settings
from gped_kit.experiments.store import ResultsStore
from gped_kit.models.presets import build_network, count_parameters

SGLD = SGLDConfig(step_size=5e-5, batch_size=50)


def no_chains(*args, **kwargs):
    raise AssertionError("run_chains called although the derived entry is stored")


def test_profiles_keep_the_old_values():
    d, p = C.PROFILES["default"], C.PROFILES["paper"]
    assert (d.num_iterations, d.burn_in, d.thinning, d.eval_thinning, d.log_every, d.checkpoint_every,
            d.num_snapshots) == (4_000, 1_000, 2, 50, 500, 1_000, 20)
    assert (p.num_iterations, p.burn_in, p.thinning, p.eval_thinning, p.log_every, p.checkpoint_every,
            p.num_snapshots) == (1_000_000, None, 10, 100, 10_000, 50_000, 50)
    assert (d.hydra.phase1_steps, d.hydra.phase2_steps, p.hydra.phase1_steps, p.hydra.phase2_steps) == (
        1_000, 2_000, 20_000, 60_000)
    assert (d.spiral.num_iterations, d.spiral.burn_in, p.spiral.num_iterations, p.spiral.burn_in) == (
        6_000, 2_000, 100_000, 10_000)
    assert (d.spiral.hydra.phase1_steps, d.spiral.hydra.phase2_steps, p.spiral.hydra.phase1_steps,
            p.spiral.hydra.phase2_steps) == (1_000, 2_000, 5_000, 20_000)
    for s in (d, p):
        assert (s.model, s.labelled_size, s.mask_size, s.perturb_std, s.derivative_weight, s.hydra.head_hidden,
                s.hydra.temperature, s.hydra.lr) == ("fcnn", 60_000, 0, 0.3, 1.0, (100, 100), 2.0, 1e-3)
        assert (s.spiral.data.labelled_size, s.spiral.step_size, s.spiral.num_snapshots, s.spiral.thinning) == (
            1_000, 2e-4, 10, 2)
        assert (s.spiral.hydra.head_hidden, s.spiral.hydra.temperature, s.spiral.hydra.lr) == ((100, 100), 2.0, 1e-3)
        assert s.predictive_thinning == s.entropy_thinning == s.thinning
    s = resolve_settings(C.PROFILES, "default", {"model": "cnn_mnist", "hydra.head_hidden": [32], "thinning": 3,
                                                 "spiral.hydra.phase1_steps": 7})
    assert (s.model, s.hydra.head_hidden, s.entropy_thinning, s.spiral.hydra.phase1_steps) == ("cnn_mnist", (32,), 3, 7)
    hydra, spiral = Overrides(), Overrides()
    hydra.phase2_steps, spiral.num_iterations, spiral.hydra.lr = 11, 500, 3e-3
    s = resolve_settings(C.PROFILES, "paper", {"hydra": hydra, "spiral": spiral, "hydra_phase1_steps": 1})
    assert (s.hydra.phase1_steps, s.hydra.phase2_steps, s.spiral.num_iterations, s.spiral.hydra.lr) == (
        20_000, 11, 500, 3e-3)
    with pytest.raises(ValueError, match=r"hydra\.phase3_steps is not a setting of HydraConfig; allowed: "):
        resolve_settings(C.PROFILES, "default", {"hydra.phase3_steps": 1})
    with pytest.raises(ValueError, match=r"HydraConfig\.phase1_steps=True"):
        resolve_settings(C.PROFILES, "default", {"hydra.phase1_steps": True})
    with pytest.raises(ValueError, match=r"spiral\.num_snapshots=1"):
        resolve_settings(C.PROFILES, "default", {"spiral.num_snapshots": 1})
    with pytest.raises(ValueError, match="model='cnn_cifar10'.*MNIST"):
        dataclasses.replace(d, model="cnn_cifar10")
    with pytest.raises(ValueError, match="num_snapshots"):
        dataclasses.replace(d, num_snapshots=1)


def test_students_and_task(tmp_path):
    s = C.PROFILES["default"]
    students = {st.label: st for st in C.comparison_students("fcnn", s)}
    assert list(students) == ["KD", "GPED", "EnD2", "GPED (squared error)", "GPED (every step)",
                              "KD (perturbed inputs)", "KD (noise inputs)", "KD + derivative matching"]
    assert students["GPED"].resolved_target.name == "predictive+entropy"  # the paper's absolute error
    assert students["GPED (squared error)"].resolved_target.name == "predictive+entropy-sq"
    assert students["GPED (every step)"].thinning == 1 and students["GPED"].thinning == s.thinning
    assert students["GPED"].estimator.value == "U_s+U_o" and students["EnD2"].resolved_target.name == "endd"
    assert students["EnD2"].arch.dropout == 0.5 and students["KD"].arch.dropout == 0.5
    assert students["KD (perturbed inputs)"].input_noise_std == 0.3
    assert students["KD (noise inputs)"].input_generator.value == "noise"
    assert students["KD + derivative matching"].derivative_weight == 1.0
    assert {st.thinning for label, st in students.items() if label != "GPED (every step)"} == {2}
    assert [st.label for st in C.comparison_students("cnn_mnist", s, variants=False)] == ["KD", "GPED", "EnD2"]
    task = C.comparison_task(s, seed=1, device="cpu", data_root=str(tmp_path))
    assert task.data.ood_datasets[0] == "mnist_rotated60" and set(task.data.ood_datasets) <= {"mnist_rotated60",
                                                                                              "fashion_mnist"}
    assert (task.config.num_snapshots, task.config.seed, task.data.labelled_size, task.data.mask_size) == (20, 1,
                                                                                                          60_000, 0)
    spiral = C.spiral_task(s, device="cpu")
    assert (spiral.config.num_snapshots, spiral.config.sampler.prior_precision, spiral.data.labelled_size) == (10, 1.0,
                                                                                                              1_000)
    assert [st.label for st in spiral.students] == ["KD", "GPED", "EnD2"]
    assert {(st.arch.dropout, st.thinning, st.lr_halving_epochs) for st in spiral.students} == {(0.0, 2, None)}


def test_memory_and_marginal_variance_from_the_run(digits_data):
    """The comparison's stores are the engine's own (estimators, teacher sums per set at its real size)
    and every method with a marginal variance gets one, Hydra's from its heads."""
    data = dataclasses.replace(digits_data, ood_x={"mnist_rotated60": digits_data.test_x[:150].flip(3)})
    students = C.comparison_students("fcnn", C.PROFILES["default"], variants=False)
    cfg = GPEDConfig(model="fcnn", sampler=SGLD, num_iterations=120, burn_in=20, eval_thinning=10, log_every=60,
                     checkpoint_every=120, progress=False, device="cpu", num_snapshots=3)
    engine = GPEDEngine([build_chain(data, cfg, students)])
    result = run_engine(engine)[0]
    trained = C.train_hydra_on_chain(result, data, "fcnn", H.HydraConfig(head_hidden=(16,), phase1_steps=10,
                                                                         phase2_steps=20), progress=False)
    memory = C.comparison_memory(result, data, trained, students)
    by_method = memory.groupby("method")["bytes"].sum()
    engine_bytes = engine.memory_bytes()
    assert sum(by_method[s.label] for s in students) == engine_bytes["u_o_stores"]
    n = data.distill_x.shape[0]
    assert by_method["GPED"] == n * 2 * 4 and by_method["KD"] == 0 and by_method["EnD2"] == 0
    assert by_method["Long-chain teacher"] == engine_bytes["ensemble"]
    teacher_rows = memory[memory["method"] == "Long-chain teacher"]["what"].tolist()
    assert "(150 inputs" in teacher_rows[1] and f"({data.test_x.shape[0]} inputs" in teacher_rows[0]
    assert by_method["Hydra"] == result.snapshots.numel() * 4 + 3 * n * 10 * 4

    mv = C.comparison_marginal_variance(result, data, "fcnn", trained.net, "mnist_rotated60")
    assert set(mv) == {"Snapshot ensemble", "EnD2", "EnD2 (tau = 2.5)", "Hydra"}  # the chain does not accumulate it
    x = data.ood_x["mnist_rotated60"]
    torch.testing.assert_close(mv["Hydra"], H.hydra_marginal_variance(trained.net, x))
    snap = H.snapshot_logits(result.snapshots, "fcnn", (1, 8, 8), 10, x).softmax(-1)
    torch.testing.assert_close(mv["Snapshot ensemble"], (snap * (1 - snap)).mean(0))
    assert all(bool((v >= 0).all() and (v <= 0.25).all()) and v.shape == (150, 10) for v in mv.values())

    # the budgets: a student's updates are the engine's own distillation steps
    for s in students:
        key = next(k for k in engine.chains[0].groups if k.thinning == s.thinning)
        updates = sum(key in engine.events(t).groups for t in range(cfg.num_iterations))
        assert student_updates(cfg, s.thinning) == updates
    constant = GPEDConfig(num_iterations=4_000, burn_in=1_000)
    assert student_updates(constant, 2) == 1_499 and student_updates(constant, 1) == 2_999
    assert student_updates(GPEDConfig(num_iterations=101, burn_in=100), 3) == 0
    with pytest.raises(ValueError, match="thinning"):
        student_updates(constant, 0)

    table = C.comparison_table(result, data, "fcnn", trained.net).set_index(["eval_set", "method"])
    assert table.loc[("test", "Snapshot ensemble"), "mv_mae_snapshots"] == 0
    assert table.loc[("test", "Snapshot ensemble"), "entropy_mae_snapshots"] == 0
    assert table.loc[("test", "Long-chain teacher"), "entropy_mae_teacher"] == 0
    assert table.loc[("test", "Hydra"), "mv_mae_snapshots"] > 0 and pd.isna(table.loc[("test", "GPED"), "mv_mean"])
    assert "mv_mae_teacher" not in table


def test_method_skill_known_answers():
    """Skill over the best constant: 1 for a method that reproduces the teacher, 0 for one that predicts the
    teacher's median everywhere, negative for a worse one; the entropy head counts, MU is reported apart."""
    g = torch.Generator().manual_seed(0)
    teacher_pred = torch.softmax(3 * torch.randn(200, 5, generator=g), -1)
    data = 0.5 * torch.rand(200, generator=g)
    teacher = uncertainty.Uncertainties(teacher_pred, torch.special.entr(teacher_pred).sum(-1), data)
    exact = C.method_skill(teacher_pred, teacher, teacher_pred, teacher)
    assert set(exact) == set(C.SKILL_COLUMNS)
    assert exact["predictive_mae_teacher"] == 0 and exact["skill"] == exact["mu_skill"] == 1.0
    median = teacher_pred.median(dim=0).values.expand(200, 5)
    const = C.method_skill(median, None, teacher_pred, teacher)
    assert const["skill"] == const["predictive_skill"] == pytest.approx(0.0, abs=1e-6)
    assert "entropy_skill" not in const and "mu_skill" not in const  # a predictive-only method (KD)
    # a perfect predictive head with an entropy head that predicts the median: its skill is the lowest, 0
    flat = uncertainty.Uncertainties(teacher_pred, teacher.total, data.median().expand(200))
    half = C.method_skill(teacher_pred, flat, teacher_pred, teacher)
    assert half["predictive_skill"] == 1.0 and half["entropy_skill"] == pytest.approx(0.0, abs=1e-6)
    assert half["skill"] == half["entropy_skill"] and half["mu_skill"] < 1.0
    worse = C.method_skill(teacher_pred.roll(1, dims=0), None, teacher_pred, teacher)
    assert worse["skill"] < 0


def test_comparison_on_one_chain_through_the_store(digits_data, tmp_path, monkeypatch):
    """KD / GPED / EnD2 / Hydra from one short chain: every method on every set, the references at zero
    distance from themselves, KD without MU, costs from the networks; stored, then reused."""
    data = dataclasses.replace(digits_data, ood_x={"mnist_rotated60": digits_data.test_x.flip(3)},
                               ood_y={"mnist_rotated60": digits_data.test_y})
    s = dataclasses.replace(C.PROFILES["default"], hydra=H.HydraConfig(head_hidden=(16,), phase1_steps=30,
                                                                       phase2_steps=60))
    students = C.comparison_students("fcnn", s)
    cfg = GPEDConfig(model="fcnn", sampler=SGLD, num_iterations=300, burn_in=50, eval_thinning=10, log_every=150,
                     checkpoint_every=150, progress=False, device="cpu", num_snapshots=4)
    task = ChainTask(data, cfg, students, name="digits")
    store = ResultsStore(tmp_path)
    run = C.run_comparison(s, store, task=task, progress=False)
    assert run.status == Status.RAN and run.chain.status == Status.RAN and run.hydra_path.exists()
    assert run.eval_sets == ["test", "mnist_rotated60"]
    table = run.table.set_index(["eval_set", "method"])
    methods = {"Long-chain teacher", "Snapshot ensemble", "Hydra", C.ZERO_MU, "EnD2 (tau = 2.5)",
               *(st.label for st in students)}
    assert set(table.index) == {(e, m) for e in ("test", "mnist_rotated60") for m in methods}
    # the zero-MU baseline: its mean |Delta MU| is the reference's mean MU (>= 0 for a mixture)
    for e in ("test", "mnist_rotated60"):
        zero, teacher = table.loc[(e, C.ZERO_MU)], table.loc[(e, "Long-chain teacher")]
        assert zero["mu_mean"] == 0 and zero["mu_mae_teacher"] == pytest.approx(teacher["mu_mean"], abs=1e-6)
        assert zero["mu_mae_snapshots"] == pytest.approx(table.loc[(e, "Snapshot ensemble"), "mu_mean"], abs=1e-6)
        assert pd.isna(zero["accuracy"]) and pd.isna(zero["total_mean"])
    # the head split: MU bias = total bias - E[H] bias, and the teacher is at zero from itself
    with_mu = table[table["mu_mean"].notna() & (table.index.get_level_values("method") != C.ZERO_MU)]
    assert (with_mu["mu_bias_teacher"] - (with_mu["total_bias_teacher"] - with_mu["data_bias_teacher"])
            ).abs().max() < 1e-5
    assert table.loc[("test", "Long-chain teacher"), ["total_mae_teacher", "total_bias_teacher",
                                                       "data_bias_teacher"]].abs().max() == 0
    kd = table.loc[("test", "KD")]
    assert kd["total_mae_teacher"] > 0 and pd.isna(kd["data_bias_teacher"])
    # skill over the best constant: every distilled method has one, the references and the baseline none
    refs = table.index.get_level_values("method").isin(["Long-chain teacher", "Snapshot ensemble", C.ZERO_MU])
    assert table.loc[refs, "skill"].isna().all() and table.loc[~refs, "skill"].notna().all()
    assert (table.loc[~refs, "skill"] <= 1).all() and pd.isna(kd["entropy_skill"]) and kd["skill"] == kd[
        "predictive_skill"]
    hydra_row = table.loc[("test", "Hydra")]
    assert hydra_row["skill"] == min(hydra_row["predictive_skill"], hydra_row["entropy_skill"])
    assert set(C.COMPARISON_TEST_COLUMNS) <= set(run.table.columns)
    # |mean bias| <= mean |error|, head by head
    assert ((with_mu["total_bias_teacher"].abs() <= with_mu["total_mae_teacher"] + 1e-7)
            & (with_mu["data_bias_teacher"].abs() <= with_mu["entropy_mae_teacher"] + 1e-7)).all()
    split = C.mu_error_split(run.table)
    assert list(split.columns) == list(C.MU_SPLIT_COLUMNS)
    assert list(split[split["eval_set"] == "test"]["method"]) == [
        m for m in C.MU_METHODS if m in methods]  # teacher first, the baseline last
    assert (split["teacher_mu_mean"] == split["eval_set"].map(
        table.xs("Long-chain teacher", level="method")["mu_mean"])).all()
    # the budgets, stored with the costs: GPED's updates from the chain, Hydra's phases
    assert costs_of(run.table, "GPED", "train_steps") == student_updates(cfg, s.thinning)
    assert costs_of(run.table, "GPED (every step)", "train_steps") == 249
    assert costs_of(run.table, "Hydra", "train_steps") == 90
    assert costs_of(run.table, "Hydra", "inputs_seen") == 90 * 100
    assert pd.isna(costs_of(run.table, "Snapshot ensemble", "train_steps"))
    budgets = C.comparison_budgets(task, s.hydra)
    assert list(budgets.columns) == list(C.BUDGET_COLUMNS) and "S = 4" in budgets.iloc[-1]["targets"]
    equal = C.hydra_config_for_steps(s.hydra, int(budgets.set_index("method").loc["GPED", "train_steps"]))
    assert equal.phase1_steps + equal.phase2_steps == budgets.set_index("method").loc["GPED", "train_steps"]
    assert equal.phase1_steps == round(124 * 30 / 90)
    # the references named by their size, for display; the teacher's lines beside every method
    assert C.reference_names(run.table) == {"Long-chain teacher": "teacher, T = 300",
                                            "Snapshot ensemble": "snapshot ensemble, S = 4"}
    assert "teacher, T = 300" in set(C.named_references(run.table)["method"])
    lines = C.comparison_teacher_lines(run.table)
    gped_nll = lines[(lines["method"] == "GPED") & (lines["eval_set"] == "test") & (lines["quantity"] == "nll")]
    assert gped_nll["minus_teacher"].item() == pytest.approx(table.loc[("test", "GPED"), "nll"]
                                                             - table.loc[("test", "Long-chain teacher"), "nll"])
    assert "Long-chain teacher" not in set(lines["method"])
    assert table.loc[("test", "Snapshot ensemble"), "mu_mae_snapshots"] == 0
    assert table.loc[("test", "Long-chain teacher"), "mu_mae_teacher"] == 0
    assert pd.isna(table.loc[("test", "KD"), "mu_mean"]) and table.loc[("test", "GPED"), "mu_mean"] == pytest.approx(
        table.loc[("test", "GPED"), "total_mean"] - table.loc[("test", "GPED"), "data_mean"])
    scored = table.drop(index=C.ZERO_MU, level="method")  # the baseline predicts MU only
    assert ((scored["brier"] >= 0) & (scored["brier"] <= 2)).all()
    assert (scored.loc["test", "accuracy"] > 0.5).all() and (scored.loc["mnist_rotated60", "accuracy"] > 0.2).all()
    assert (table["num_snapshots"] == 4).all() and (table["hydra_seconds"] >= 0).all()
    teacher_params = count_parameters(build_network("fcnn", (1, 8, 8), 10))
    costs = run.table.drop_duplicates("method").set_index("method")
    assert costs.loc["Snapshot ensemble", "params"] == 4 * teacher_params
    trained = H.load_hydra(run.hydra_path, "fcnn", (1, 8, 8), 10, s.hydra)
    assert costs.loc["Hydra", "params"] == count_parameters(trained.net) and costs.loc["KD", "flops"] > 0
    assert costs.loc["KD", "params"] == teacher_params
    # EnD2 read at its training temperature: the same network and training, another Dirichlet
    assert costs.loc["EnD2 (tau = 2.5)", "params"] == costs.loc["EnD2", "params"]
    assert costs.loc["EnD2 (tau = 2.5)", "train_steps"] == costs.loc["EnD2", "train_steps"]
    assert table.loc[("test", "EnD2 (tau = 2.5)"), "accuracy"] == table.loc[("test", "EnD2"), "accuracy"]
    assert table.loc[("test", "EnD2 (tau = 2.5)"), "nll"] != table.loc[("test", "EnD2"), "nll"]
    assert list(run.kd_variants["student"]) == ["KD", "KD (perturbed inputs)", "KD (noise inputs)",
                                                "KD + derivative matching"]
    assert list(run.kd_variants.columns) == list(C.KD_COLUMNS)
    assert set(run.memory["method"]) >= {"Hydra", "Long-chain teacher", *(st.label for st in students)}
    assert list(run.hydra_history["phase"].unique()) == ["phase1", "phase2"]
    assert list(run.history["step"].unique())[-1] == 300 and len(run.summary) == len(students)
    # the same configuration again: everything from the store, no chain run or loaded
    monkeypatch.setattr(chains_module, "run_chains", no_chains)
    again = C.run_comparison(s, store, task=task, progress=False)
    assert again.status == Status.REUSED and again.chain.status == Status.REUSED
    for name in ("table", "memory", "kd_variants", "hydra_history"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(run, name))
    pd.testing.assert_frame_equal(again.summary, run.summary)


def costs_of(table: pd.DataFrame, method: str, column: str):
    return table.drop_duplicates("method").set_index("method").loc[method, column]


def test_spiral_run_maps_every_uncertainty_method_and_is_reused(tmp_path, monkeypatch):
    s = resolve_settings(C.PROFILES, "default", {
        "spiral.data.labelled_size": 300, "spiral.num_iterations": 300, "spiral.burn_in": 100,
        "spiral.num_snapshots": 3, "spiral.hydra": H.HydraConfig(head_hidden=(16,), phase1_steps=20, phase2_steps=40)})
    store = ResultsStore(tmp_path)
    out = C.spiral_run(s, store, device="cpu", progress=False)
    assert out.status == Status.RAN and list(out.maps) == ["Long-chain teacher", "Snapshot ensemble", "GPED", "EnD2",
                                                      "EnD2 (tau = 2.5)", "Hydra"]
    data = out.data
    grid = data.ood_x["grid"].shape[0]
    assert data.input_shape == (2,) and grid == out.config.grid_size ** 2
    for u in out.maps.values():
        assert u.total.shape == u.data.shape == (grid,) and u.predictive.shape == (grid, 2)
        assert bool((u.total >= -1e-3).all() and (u.total <= torch.log(torch.tensor(2.0)) + 1e-2).all())
    assert set(out.table["eval_set"]) == {"test", "grid"}
    assert out.table.loc[out.table["eval_set"] == "grid", "accuracy"].isna().all()
    methods = out.table[out.table["method"] != C.ZERO_MU]
    assert methods.loc[methods["eval_set"] == "test", "accuracy"].notna().all()
    assert (out.table["method"] == C.ZERO_MU).sum() == 2  # one baseline row per set
    # the stored maps are the table's: the grid's mean model uncertainty per method (up to float16)
    grid_rows = out.table[out.table["eval_set"] == "grid"].set_index("method")
    for method, u in out.maps.items():
        assert float(u.knowledge.mean()) == pytest.approx(grid_rows.loc[method, "mu_mean"], abs=2e-3)
    monkeypatch.setattr(chains_module, "run_chains", no_chains)
    again = C.spiral_run(s, store, device="cpu", progress=False)
    assert again.status == Status.REUSED and again.chain.status == Status.REUSED
    pd.testing.assert_frame_equal(again.table, out.table)
    for method in out.maps:
        torch.testing.assert_close(again.maps[method].total, out.maps[method].total)
