import pytest

from gped_kit.distill import GPEDConfig, StudentConfig
from gped_kit.experiments import QUICKSTART_PROFILES, load_results, resolve_parameters, run_stored
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
