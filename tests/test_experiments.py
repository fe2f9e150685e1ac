import pandas as pd
import pytest

from gped_kit.distill import GPEDConfig, StudentConfig
from gped_kit.experiments import (QUICKSTART_PROFILES, GridCell, distillation_cell, experiment2_cells,
                                  experiment2_trends, load_results, resolve_parameters, run_grid, run_stored)
from gped_kit.samplers import SGLDConfig


def test_profiles_resolve_with_single_overrides():
    p = resolve_parameters(QUICKSTART_PROFILES, "paper", {"num_iterations": None, "burn_in": 5})
    assert p["num_iterations"] == 1_000_000 and p["burn_in"] == 5 and p["predictive_thinning"] == 100
    with pytest.raises(ValueError, match="profile='gpu'.*allowed"):
        resolve_parameters(QUICKSTART_PROFILES, "gpu", {})
    with pytest.raises(ValueError, match="unknown parameter"):
        resolve_parameters(QUICKSTART_PROFILES, "default", {"num_iteration": 3})


def test_results_store_reuses_resumes_and_never_loses_runs(digits_data, tmp_path):
    cfg = GPEDConfig(sgld=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=150, burn_in=50,
                     eval_thinning=10, log_every=50, checkpoint_every=50, progress=False, device="cpu")
    students = [StudentConfig("predictive", thinning=5)]
    first = run_stored(digits_data, cfg, students, tmp_path)
    (run_dir,) = [d for d in tmp_path.iterdir()]
    assert {"checkpoint.pt", "config.json", "summary.csv", "history.csv"} <= {f.name for f in run_dir.iterdir()}
    again = run_stored(digits_data, cfg, students, tmp_path)  # finished: reloaded, not recomputed
    assert again.summary["elapsed_s"].iloc[0] == first.summary["elapsed_s"].iloc[0]
    other = run_stored(digits_data, GPEDConfig(**{**cfg.__dict__, "seed": 1}), students, tmp_path)
    table = load_results(tmp_path)
    assert len(table) == 2 and table["run_key"].nunique() == 2 and set(table["seed"]) == {0, 1}
    assert other.summary["seed"].iloc[0] == 1
    run_stored(digits_data, cfg, students, tmp_path, recompute=True)
    assert len([d for d in tmp_path.iterdir() if ".old-" in d.name]) == 1  # set aside, not deleted
    assert len(load_results(tmp_path)) == 2 and len(load_results(tmp_path, "history")) > 2
    with pytest.raises(ValueError, match="table="):
        load_results(tmp_path, "runs")


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
    trends = experiment2_trends(_cells_table()).set_index("trend")
    assert trends["holds"].all(), trends
    assert trends.loc["U_o at least as good as U_s", "count"] == "16 of 16"
    bad = experiment2_trends(_cells_table(gap_peak_at=25, uo_better=False)).set_index("trend")
    assert not bad.loc["NLL gap peaks at moderate masking", "holds"]
    assert not bad.loc["U_o at least as good as U_s", "holds"]
    assert bad.loc["teacher NLL rises with masking", "holds"]


def test_grid_runs_cifar10_cells_on_tiny_data_and_records_missing_and_failing_cells(tmp_path, write_tiny_cifar10):
    write_tiny_cifar10(tmp_path / "data", per_batch=8, n_test=6)
    params = dict(num_iterations=30, burn_in=10, predictive_thinning=2, entropy_thinning=2, eval_thinning=5,
                  log_every=10, checkpoint_every=10)
    cifar = distillation_cell("cnn_cifar10", 20, 0, params, device="cpu", data_root=str(tmp_path / "data"),
                              verify_checksums=False)
    assert cifar.config.sgld.step_size == 2e-6 and cifar.config.burn_in == 10  # paper eta; profile's B
    missing = distillation_cell("cnn_cifar10", 20, 0, params, device="cpu", data_root=str(tmp_path / "empty"))
    diverging = GridCell(cifar.data, GPEDConfig(**{**cifar.config.__dict__, "sgld": SGLDConfig(step_size=1e3)}),
                         cifar.students)
    grid = run_grid([cifar, missing, diverging], tmp_path / "results", progress=False)
    status = grid.cells.set_index("cell")["status"]
    assert list(status) == ["ran", "missing data", "failed"]
    assert str(tmp_path / "empty") in grid.cells.loc[1, "error"]  # says where it looked
    assert "step size" in grid.cells.loc[2, "error"]
    assert len(grid.table) == 4 and set(grid.table["target"]) == {"predictive", "entropy"}
    assert set(grid.table["model"]) == {"cnn_cifar10"} and (grid.table["labelled_size"] == 20).all()
    with pytest.raises(RuntimeError, match="1 grid cell"):
        grid.raise_if_failed()
    again = run_grid([cifar], tmp_path / "results", progress=False)
    assert list(again.cells["status"]) == ["reused"]
    cells = experiment2_cells(grid.table)
    assert len(cells) == 2 and set(cells["estimator"]) == {"U_o", "U_s"}
    with pytest.raises(ValueError, match="model='resnet'"):
        distillation_cell("resnet", 100, 0, params)


def test_experiment4_cell_evaluate_and_comparisons(digits_data, tmp_path):
    import dataclasses

    import torch

    from gped_kit.data import OOD_SETS
    from gped_kit.distill import GPEDRun
    from gped_kit.experiments import (EXPERIMENT4_PROFILES, OOD_FOR, experiment4_cell, experiment4_claims,
                                      experiment4_comparison, experiment4_evaluate)

    p = dict(EXPERIMENT4_PROFILES["default"], num_iterations=300, burn_in=100, eval_thinning=10, log_every=100,
             largest_k=[0.5, 0.5])
    cell = experiment4_cell("fcnn", p, device="cpu", data_root=str(tmp_path))
    names = [s.label for s in cell.students]
    assert len(names) == 8 and "GPED-U_s-largest_width_multiplier" in names and "EnD2-U_o-base" in names
    by_name = {s.label: s for s in cell.students}
    assert by_name["GPED-U_s-base"].estimator == "U_s+U_o" and by_name["EnD2-U_s-base"].estimator == "U_s"
    assert by_name["EnD2-U_o-base"].arch.dropout == 0.5 and by_name["GPED-U_o-largest_width_multiplier"].arch.k1 == 0.5
    assert (cell.data.labelled_size, cell.data.mask_size) == (60_000, 15)
    assert set(cell.data.ood_datasets) <= set(OOD_FOR["mnist"]) and set(OOD_FOR["mnist"]) <= set(OOD_SETS)
    # run the cell's students on the digits, with the test set itself as the "OOD" set: every model's
    # uncertainties are then the same on both sides (up to round-off) and every AUROC must be 1/2
    data = dataclasses.replace(digits_data, ood_x={"noise": digits_data.test_x.clone()})
    result = GPEDRun(data, dataclasses.replace(cell.config, progress=False), cell.students).run()
    down = experiment4_evaluate(cell, result, ndcg_trials=20)["downstream"]
    assert set(down["method"]) == {"Ensemble", "GPED", "EnD2"}
    auroc = down[down["metric"] == "auroc"]
    assert len(auroc) == 9 * 2 and set(auroc["ood_dataset"]) == {"noise"}
    assert auroc["value"].sub(0.5).abs().max() < 0.02
    ndcg = down[down["metric"] == "ndcg@20"]
    assert len(ndcg) == 8 * 2 and ndcg["value"].between(0, 1).all() and (ndcg["std"] >= 0).all()
    teacher_nll = down[(down["metric"] == "nll") & (down["method"] == "Ensemble")]["value"].item()
    assert teacher_nll == pytest.approx(result.summary["teacher_nll"].iloc[0])
    table = experiment4_comparison(down.assign(model="fcnn"), "in_distribution")
    assert {"value", "value_paper", "table", "source"} <= set(table.columns)
    assert set(table.loc[table["model"] != "fcnn", "source"]) == {"paper only"}  # the paper's other models
    table = table[table["model"] == "fcnn"]
    assert set(table["source"]) == {"ours"}  # every fcnn cell of the paper is matched by one of ours
    row = table[(table["method"] == "GPED") & (table["estimator"] == "U_s") & (table["metric"] == "nll")
                & (table["student"] == "largest_width_multiplier")]
    assert row["value_paper"].item() == 0.408 and row["table"].item() == "Table 2"
    ens_rows = table[(table["method"] == "Ensemble") & (table["metric"] == "nll")]
    assert len(ens_rows) == 4 and set(ens_rows["value_paper"]) == {0.362}  # repeated per estimator x size
    assert experiment4_comparison(down, "ndcg")["method"].isin(["GPED", "EnD2"]).all()
    claims = experiment4_claims(down)
    assert list(claims["claim"].str.split().str[2]) == ["nll", "entropy_mae", "auroc", "ndcg@20"]
    assert claims["fraction"].between(0, 1).all()
    with pytest.raises(ValueError, match="kind='table2'"):
        experiment4_comparison(down, "table2")
    # our "noise" OOD set has no paper counterpart: the paper's rows are all kept after ours
    ood = experiment4_comparison(down, "ood")
    assert (ood["source"] == "ours").sum() == 8 * 2 + 4 * 2 and ood["value_paper"][ood["source"] == "ours"].isna().all()
    assert (ood["source"] == "paper only").sum() == 4 * 6 * 2 * 3


def _experiment4_downstream(model: str = "fcnn", ood_set: str = "fashion_mnist") -> pd.DataFrame:
    """A hand-made ``experiment4_evaluate`` downstream table for one model (values are arbitrary)."""
    rows = [dict(method="Ensemble", estimator=None, student=None, metric="nll", value=0.4),
            dict(method="Ensemble", estimator=None, student=None, metric="accuracy", value=0.9)]
    for kind in ("total", "knowledge"):
        rows.append(dict(method="Ensemble", estimator=None, student=None, metric="auroc", value=0.8,
                         uncertainty=kind, ood_dataset=ood_set))
    for method in ("GPED", "EnD2"):
        for est in ("U_s", "U_o"):
            for size in ("base", "largest_width_multiplier"):
                who = dict(method=method, estimator=est, student=size)
                rows += [dict(who, metric="nll", value=0.5), dict(who, metric="accuracy", value=0.85),
                         dict(who, metric="entropy_mae", value=0.1)]
                for kind in ("total", "knowledge"):
                    rows += [dict(who, metric="ndcg@20", value=0.9, std=0.03, uncertainty=kind),
                             dict(who, metric="auroc", value=0.7, uncertainty=kind, ood_dataset=ood_set)]
    return pd.DataFrame(rows).assign(model=model)


def test_experiment4_comparison_keeps_the_papers_rows_after_ours():
    from gped_kit import paper_results
    from gped_kit.experiments import experiment4_comparison

    down = _experiment4_downstream()
    for kind, paper, tables in (("in_distribution", paper_results.experiment4_in_distribution(), "2 8 9 10"),
                                ("ood", paper_results.experiment4_ood(), "3 11 12 13"),
                                ("ndcg", paper_results.experiment4_ndcg(), "4 14 15 16")):
        table = experiment4_comparison(down, kind)
        assert list(table.columns[-2:]) == ["table", "source"]
        ours = table["source"] == "ours"
        assert set(table["source"]) == {"ours", "paper only"}
        assert ours.iloc[:ours.sum()].all()  # ours first, then the paper's
        assert table.loc[ours, "value"].notna().all() and table.loc[~ours, "value"].isna().all()
        assert table.loc[~ours, "value_paper"].notna().all()
        # every printed cell of the paper appears exactly once, ours or not
        printed = table[table["value_paper"].notna()]
        assert len(printed) == len(paper)
        assert set(printed["table"]) == {f"Table {n}" for n in tables.split()}
        assert sorted(printed["value_paper"]) == sorted(paper["value"])
        # the CIFAR-10 rows, which we did not run, are all there as the paper's only
        cifar = table[table["model"] == "cnn_cifar10"]
        assert len(cifar) == (paper["model"] == "cnn_cifar10").sum() and (cifar["source"] == "paper only").all()
    ood = experiment4_comparison(down, "ood")
    assert set(ood.loc[ood["source"] == "ours", "ood_dataset"]) == {"fashion_mnist"}
    assert ood.loc[ood["source"] == "ours", "value_paper"].isna().all()  # no paper counterpart
    r = ood[(ood["model"] == "fcnn") & (ood["ood_dataset"] == "kmnist") & (ood["uncertainty"] == "total")
            & (ood["method"] == "GPED") & (ood["estimator"] == "U_s") & (ood["student"] == "base")]
    assert (r["value_paper"].item(), r["table"].item(), r["source"].item()) == (0.875, "Table 11", "paper only")
    ndcg = experiment4_comparison(down, "ndcg")
    r = ndcg[(ndcg["model"] == "cnn_cifar10") & (ndcg["uncertainty"] == "knowledge") & (ndcg["method"] == "EnD2")
             & (ndcg["estimator"] == "U_o") & (ndcg["student"] == "base")]
    assert (r["value_paper"].item(), r["std_paper"].item(), r["table"].item()) == (0.785, 0.082, "Table 15")
    assert r["value"].isna().item() and r["std"].isna().item()
    # matched cells: ours with the paper's value beside it
    ind = experiment4_comparison(down, "in_distribution")
    r = ind[(ind["model"] == "fcnn") & (ind["method"] == "EnD2") & (ind["estimator"] == "U_o")
            & (ind["student"] == "base") & (ind["metric"] == "entropy_mae")]
    assert (r["value"].item(), r["value_paper"].item(), r["source"].item()) == (0.1, 0.110, "ours")


def test_experiment4_comparison_without_runs_or_ood_sets_is_the_papers_tables():
    from gped_kit import paper_results
    from gped_kit.experiments import experiment4_comparison

    empty = pd.DataFrame(columns=["model", "method", "estimator", "student", "metric", "value", "std",
                                  "uncertainty", "ood_dataset"])
    for kind, paper in (("in_distribution", paper_results.experiment4_in_distribution()),
                        ("ood", paper_results.experiment4_ood()), ("ndcg", paper_results.experiment4_ndcg())):
        table = experiment4_comparison(empty, kind)
        assert len(table) == len(paper) and set(table["source"]) == {"paper only"}
        assert list(table["value_paper"]) == list(paper["value"])  # in the paper's order
    # no OOD set ran: downstream has no ood_dataset column at all
    no_ood = _experiment4_downstream().query("metric != 'auroc'").drop(columns="ood_dataset")
    ood = experiment4_comparison(no_ood, "ood")
    assert len(ood) == len(paper_results.experiment4_ood()) and set(ood["source"]) == {"paper only"}


def test_comparison_table_on_one_chain_with_hydra(digits_data, tmp_path):
    """KD / GPED / EnD2 / Hydra from one short chain: every method on every set, the references
    at zero distance from themselves, KD without MU, costs from the networks."""
    import dataclasses

    import torch

    from gped_kit import hydra
    from gped_kit.experiments import (COMPARISON_PROFILES, comparison_costs, comparison_students, comparison_table,
                                      stored_hydra)
    from gped_kit.models import build_network, count_parameters

    data = dataclasses.replace(digits_data, ood_x={"mnist_rotated60": digits_data.test_x.flip(3)})
    params = {**COMPARISON_PROFILES["default"], "thinning": 2}
    students = comparison_students("fcnn", params)
    cfg = GPEDConfig(sgld=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=600, burn_in=100,
                     eval_thinning=10, log_every=300, checkpoint_every=300, progress=False, device="cpu",
                     num_snapshots=4)
    result = run_stored(data, cfg, students, tmp_path)
    hcfg = hydra.HydraConfig(head_hidden=(16,), phase1_steps=30, phase2_steps=60)
    trained = stored_hydra(result, data, "fcnn", hcfg, tmp_path, progress=False)
    assert list(tmp_path.glob("*/hydra-*.pt"))
    again = stored_hydra(result, data, "fcnn", hcfg, tmp_path, progress=False)  # reloaded from the store
    x = data.test_x[:5]
    torch.testing.assert_close(again.net.head_probs(x), trained.net.head_probs(x))
    costs = comparison_costs("fcnn", data, 4, trained.net, students)
    table = comparison_table(result, data, "fcnn", trained.net, costs).set_index(["eval_set", "method"])
    methods = {"Long-chain teacher", "Snapshot ensemble", "Hydra", *(s.label for s in students)}
    assert set(table.index) == {(e, m) for e in ("test", "mnist_rotated60") for m in methods}
    assert table.loc[("test", "Snapshot ensemble"), "mu_mae_snapshots"] == 0
    assert table.loc[("test", "Long-chain teacher"), "mu_mae_teacher"] == 0
    assert pd.isna(table.loc[("test", "KD"), "mu_mean"]) and table.loc[("test", "GPED"), "mu_mean"] == table.loc[
        ("test", "GPED"), "mu_mean"]
    assert ((table["brier"] >= 0) & (table["brier"] <= 2)).all() and (table["accuracy"] > 0.3).all()
    teacher_params = count_parameters(build_network("fcnn", (1, 8, 8), 10))
    c = costs.set_index("method")
    assert c.loc["Snapshot ensemble", "params"] == 4 * teacher_params
    assert c.loc["Hydra", "params"] == count_parameters(trained.net) and c.loc["KD", "flops"] > 0


def test_spiral_run_maps_every_uncertainty_method(tmp_path):
    from gped_kit.experiments import COMPARISON_PROFILES, spiral_run

    params = {**COMPARISON_PROFILES["default"], "spiral_size": 300, "spiral_iterations": 400, "spiral_burn_in": 100,
              "spiral_snapshots": 3, "spiral_hydra_phase1_steps": 20, "spiral_hydra_phase2_steps": 40}
    out = spiral_run(params, tmp_path, device="cpu")
    assert set(out["maps"]) == {"Long-chain teacher", "Snapshot ensemble", "GPED", "EnD2", "Hydra"}
    grid = out["data"].ood_x["grid"].shape[0]
    assert all(u.total.shape == (grid,) for u in out["maps"].values())
    assert set(out["table"]["eval_set"]) == {"test", "grid"}
    assert out["table"].loc[out["table"]["eval_set"] == "grid", "accuracy"].isna().all()
    assert spiral_run(params, tmp_path, device="cpu")["result"].summary["store_status"].iloc[0] == "reused"


def test_paper_shaped_lr_schedule_cells_keep_the_papers_number_of_halvings():
    from gped_kit.experiments import EXPERIMENT2_PROFILES, lr_schedule_cells, paper_shaped_lr_scale

    p = resolve_parameters(EXPERIMENT2_PROFILES, "default", {})
    scale = paper_shaped_lr_scale("fcnn", p)
    assert scale == pytest.approx((5_000 - 3_000) / (1_000_000 - 1_000))
    cells = lr_schedule_cells("fcnn", p, device="cpu")
    assert [(c.data.labelled_size, c.data.mask_size) for c in cells] == [(10_000, 15), (60_000, 15)]
    for cell in cells:
        assert {s.target for s in cell.students} == {"predictive"}
        (epochs,) = {s.lr_halving_epochs for s in cell.students}
        steps_per_halving = epochs * cell.data.labelled_size / cell.config.sgld.batch_size
        halvings = (cell.config.num_iterations - cell.config.burn_in) / steps_per_halving
        paper = (1_000_000 - 1_000) / (200 * cell.data.labelled_size / 100)
        assert halvings == pytest.approx(paper)  # 50 at N = 10k, 8.3 at N = 60k, as over the paper's T
    assert lr_schedule_cells("fcnn", resolve_parameters(EXPERIMENT2_PROFILES, "paper", {})) == []
    with pytest.raises(ValueError, match="lr_halving_scale"):
        distillation_cell("fcnn", 10_000, 0, p, lr_halving_scale=0.0)


def test_gap_by_schedule_compares_the_smallest_and_largest_labelled_set():
    from gped_kit.experiments import gap_by_schedule

    def rows(gaps, epochs):
        out = []
        for (n, m, est), gap in gaps.items():
            for target in ("predictive", "entropy"):
                out.append(dict(model="fcnn", labelled_size=n, mask_size=m, masking_rate=m * m / 784,
                                estimator=est, target=target, teacher_nll=0.1, student_nll=0.1 + gap,
                                nll_gap=gap if target == "predictive" else float("nan"),
                                entropy_mae=0.05 if target == "entropy" else float("nan"),
                                lr_halving_epochs=epochs, num_iterations=5_000, burn_in=3_000,
                                batch_size=100, run_key=f"{n}-{m}"))
        return pd.DataFrame(out)

    constant = rows({(10_000, 0, "U_s"): -0.02, (60_000, 0, "U_s"): 0.03,
                     (10_000, 25, "U_s"): 0.5, (60_000, 25, "U_s"): 0.1}, 200.0)
    shaped = rows({(10_000, 0, "U_s"): 0.30, (60_000, 0, "U_s"): 0.09}, 0.4)
    out = gap_by_schedule({"constant": constant, "paper-shaped": shaped}).set_index("schedule")
    assert len(out) == 2  # m = 25 is only in one table: not compared
    assert not out.loc["constant", "gap_falls_with_more_data"]
    assert out.loc["paper-shaped", "gap_falls_with_more_data"]
    assert out.loc["constant", "gap_at_10000"] == pytest.approx(-0.02)
    assert out.loc["paper-shaped", "halvings_at_10000"] == 50
    assert out.loc["paper-shaped", "halvings_at_60000"] == 8
    assert out.loc["constant", "halvings_at_60000"] == 0


def test_grid_batches_compatible_cells_and_matches_one_by_one(tmp_path, write_tiny_cifar10):
    import dataclasses

    write_tiny_cifar10(tmp_path / "data", per_batch=8, n_test=6)
    params = dict(num_iterations=24, burn_in=8, predictive_thinning=2, entropy_thinning=2, eval_thinning=4,
                  log_every=8, checkpoint_every=8)
    root = str(tmp_path / "data")
    a = distillation_cell("cnn_cifar10", 20, 0, params, device="cpu", data_root=root, verify_checksums=False)
    b = distillation_cell("cnn_cifar10", 16, 0, params, seed=1, device="cpu", data_root=root, verify_checksums=False)
    missing = distillation_cell("cnn_cifar10", 20, 0, params, device="cpu", data_root=str(tmp_path / "empty"))
    longer = dataclasses.replace(a, config=dataclasses.replace(a.config, num_iterations=32))  # other T: not with a, b
    cells = [a, missing, b, longer]
    one_by_one = run_grid(cells, tmp_path / "seq", progress=False)
    batched = run_grid(cells, tmp_path / "bat", progress=False, chains_per_batch=4)
    assert list(batched.cells["status"]) == ["ran", "missing data", "ran", "ran"]
    assert list(batched.cells["batched"]) == [True, False, True, False]  # a and b together; T differs for the last
    cols = ["run_key", "student", "teacher_nll", "student_nll", "entropy_mae"]
    pd.testing.assert_frame_equal(batched.table[cols], one_by_one.table[cols], rtol=1e-4)  # same keys, same numbers
    again = run_grid(cells, tmp_path / "bat", progress=False, chains_per_batch=4)
    assert list(again.cells["status"]) == ["reused", "missing data", "reused", "reused"]
    with pytest.raises(ValueError, match="chains_per_batch=0"):
        run_grid(cells, tmp_path / "bat", chains_per_batch=0)
