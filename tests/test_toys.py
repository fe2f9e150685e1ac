"""Known-answer tests of the thesis toys (paper 001, Chapter 3): the numerics
(gped_kit.toys), their stored runs and analysis (gped_kit.experiments.thesis) and
their figures (gped_kit.experiments.thesis.figures)."""

import dataclasses

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from scipy.special import expit  # noqa: E402
from sklearn.mixture import GaussianMixture  # noqa: E402

from gped_kit import toys  # noqa: E402
from gped_kit.core.status import Status  # noqa: E402
from gped_kit.core.targets import SKILL_FLOOR  # noqa: E402
from gped_kit.experiments import numerics, thesis  # noqa: E402
from gped_kit.experiments.settings import Overrides, resolve_settings  # noqa: E402
from gped_kit.experiments.store import ResultsStore  # noqa: E402
from gped_kit.experiments.thesis import figures as thesis_plots  # noqa: E402

# ----------------------------------------------------------------------------- Bayesian MoG


def test_mog_dataset_is_nested_and_seeded():
    small, large = toys.mog_dataset(10, seed=3), toys.mog_dataset(500, seed=3)
    assert np.array_equal(small, large[:10])
    assert not np.array_equal(small, toys.mog_dataset(10, seed=4))
    # the true model's mean and variance: mean(m) and mean(s^2) + var(m)
    big = toys.mog_dataset(200_000, seed=0)
    assert abs(big.mean() - np.mean(toys.MOG_TRUE_MEANS)) < 0.02
    assert abs(big.var() - (np.mean(toys.MOG_VARIANCES) + np.var(toys.MOG_TRUE_MEANS))) < 0.05


def test_gibbs_with_one_component_samples_the_conjugate_gaussian_posterior():
    """K = 1: the assignment is known and m | D is N(b / a, 1 / a), a = 1/100 + N/s^2, b = sum x / s^2."""
    data = np.random.default_rng(0).normal(1.7, np.sqrt(2.0), size=20)
    a = 1 / 100 + len(data) / 2.0
    mean, var = data.sum() / 2.0 / a, 1 / a
    samples = np.array(list(toys.mog_gibbs(data, np.random.default_rng(1), 5_000, burn_in=10,
                                           variances=(2.0,), weights=(1.0,))))[:, 0]
    assert abs(samples.mean() - mean) < 4 * np.sqrt(var / len(samples))
    assert abs(samples.var() / var - 1) < 0.08


def test_gibbs_matches_the_exact_posterior_and_predictive_for_three_points():
    """N = 3: the exact posterior is a mixture of 3^3 = 27 Gaussians (Section 3.2.3)."""
    data = toys.mog_dataset(3, seed=0)
    exact = toys.mog_exact_posterior(data)
    log_w, means, _ = exact
    assert np.isclose(np.exp(log_w).sum(), 1.0)
    exact_mean = (np.exp(log_w)[:, None] * means).sum(0)
    samples = np.array(list(toys.mog_gibbs(data, np.random.default_rng(0), 20_000, burn_in=500)))
    assert np.allclose(samples.mean(0), exact_mean, atol=0.35)   # posterior sd of an empty component is ~10
    grid = np.linspace(-50, 50, 4001)
    p_exact = toys.mog_exact_predictive_pdf(grid, exact)
    p_mc = toys.mog_predictive_pdf(grid, samples)
    assert abs(np.trapezoid(p_exact, grid) - 1) < 1e-6
    kl, tv = toys.grid_kl_tv(p_exact, p_mc, grid)
    assert tv < 0.02 and kl < 0.002
    with pytest.raises(ValueError, match="max_terms"):
        toys.mog_exact_posterior(toys.mog_dataset(20))


SEPARATED = toys.MoGParams(np.array([0.2, 0.5, 0.3]), np.array([-5.0, 0.0, 4.0]), np.array([0.5, 1.0, 0.25]))


def _sample(params, n, seed):
    rng = np.random.default_rng(seed)
    k = rng.choice(3, size=n, p=params.weights)
    return params.means[k] + np.sqrt(params.variances[k]) * rng.standard_normal(n)


def test_batch_em_recovers_a_known_mixture_and_matches_scikit_learn():
    x = _sample(SEPARATED, 20_000, 0)
    fitted, iterations, loglik = toys.batch_em(x, toys.mog_init(x, 3))
    order = np.argsort(fitted.means)
    assert np.allclose(fitted.means[order], SEPARATED.means, atol=0.05)
    assert np.allclose(fitted.variances[order], SEPARATED.variances, rtol=0.06)
    assert np.allclose(fitted.weights[order], SEPARATED.weights, atol=0.01)
    sk = GaussianMixture(3, tol=1e-10, max_iter=1000, random_state=0).fit(x[:, None])
    assert loglik >= sk.score(x[:, None]) - 1e-6          # sklearn's score is the mean log-likelihood
    assert np.allclose(np.sort(sk.means_.ravel()), fitted.means[order], atol=1e-3)
    assert 1 < iterations < 10_000


def test_online_em_ends_near_batch_em_on_the_same_stream():
    x = _sample(SEPARATED, 10_000, 1)
    batch, _, _ = toys.batch_em(x, toys.mog_init(x, 3))
    blocks = x.reshape(100, 100)
    online = toys.OnlineEM(toys.mog_init(blocks[0], 3))
    for t, block in enumerate(blocks):
        online.step(block, toys.linear_decay(t, len(blocks)))
    o, b = np.argsort(online.params.means), np.argsort(batch.means)
    assert np.allclose(online.params.means[o], batch.means[b], atol=0.1)
    assert np.allclose(online.params.weights[o], batch.weights[b], atol=0.03)
    assert online.peak_bytes < 10_000                       # a minibatch and statistics, not the stream
    with pytest.raises(ValueError, match="alpha"):
        online.step(blocks[0], 1.5)


def test_linear_decay_goes_from_one_to_zero():
    assert toys.linear_decay(0, 100) == 1.0 and toys.linear_decay(99, 100) == 0.0
    assert toys.linear_decay(0, 1) == 1.0
    assert np.isclose(toys.linear_decay(50, 101, start=2.0), 1.0)


SMALL_MOG = toys.MoGConfig(num_data=50, num_samples=3_000, burn_in=300, num_distill_samples=1_000,
                           minibatch_size=100, grid_size=4_001)


@pytest.fixture(scope="module")
def mog_result():
    return toys.run_mog(SMALL_MOG)


def test_online_mog_distillation_is_close_to_batch_at_a_fraction_of_the_memory(mog_result):
    result = mog_result
    table = result.table.set_index("mode")
    assert list(result.table["mode"]) == ["batch", "online"]
    kl_b, kl_o = table.loc["batch", "kl_mc_to_student"], table.loc["online", "kl_mc_to_student"]
    assert kl_b < 0.02 and kl_o < 0.02 and kl_o < 3 * kl_b + 0.005
    # memory from the arrays: batch holds 3,000 x 3 means + 1,000 data samples (+ EM work arrays)
    assert table.loc["batch", "memory_bytes"] >= 3_000 * 3 * 8 + 1_000 * 8
    assert table.loc["online", "memory_bytes"] < table.loc["batch", "memory_bytes"] / 10
    assert np.isclose(np.trapezoid(result.arrays["p_mc"], result.arrays["grid"]), 1.0, atol=1e-4)
    again = toys.run_mog(SMALL_MOG)
    timing = ["chain_seconds", "distill_seconds"]
    pd.testing.assert_frame_equal(result.table.drop(columns=timing), again.table.drop(columns=timing))


def test_mog_skill_is_against_the_constant_density_on_the_grid(mog_result):
    """The best constant prediction of a density on [-L, L] is 1 / (2L): it integrates to 1, a student equal to
    it has skill 0, one equal to p_MC skill 1, and every reported skill is 1 - distance / the constant's."""
    grid, p_mc = mog_result.arrays["grid"], mog_result.arrays["p_mc"]
    flat = toys.constant_density(grid)
    assert np.isclose(np.trapezoid(flat, grid), 1.0)
    kl_flat, tv_flat = toys.grid_kl_tv(p_mc, flat, grid)
    assert np.isclose(toys.grid_kl_tv(p_mc, p_mc, grid)[0], 0.0)
    table = mog_result.table
    assert np.allclose(table["constant_kl"], kl_flat) and np.allclose(table["constant_tv"], tv_flat)
    assert np.allclose(table["kl_mc_to_student_skill"], 1 - table["kl_mc_to_student"] / kl_flat)
    assert np.allclose(table["tv_mc_student_skill"], 1 - table["tv_mc_student"] / tv_flat)
    assert np.allclose(table["skill"], table[["kl_mc_to_student_skill", "tv_mc_student_skill"]].min(axis=1))
    assert (table["skill"] > 0.5).all()   # EM fits p_MC far better than a flat density


# ----------------------------------------------------------------------------- logistic regression


def test_slice_sampler_samples_a_correlated_gaussian():
    cov = np.array([[2.0, 1.2], [1.2, 1.0]])
    prec = np.linalg.inv(cov)
    chain = toys.slice_sampler(lambda w: -0.5 * (w - 1) @ prec @ (w - 1), np.zeros(2), np.random.default_rng(0),
                               width=2.0)
    samples = np.array([next(chain) for _ in range(8_000)])[500:]
    assert np.allclose(samples.mean(0), [1, 1], atol=0.1)
    assert np.allclose(np.cov(samples.T), cov, atol=0.15)


def test_logistic_regression_chain_matches_quadrature_and_its_predictive_is_antisymmetric():
    x, y = toys.logreg_dataset(12, seed=0)
    assert x.shape == (24, 2) and y.sum() == 12
    chain = toys.slice_sampler(toys.logreg_log_posterior(x, y), np.zeros(2), np.random.default_rng(0), width=5.0)
    samples = np.array([next(chain) for _ in range(6_000)])[1_000:]
    points, weights = toys.logreg_posterior_quadrature(x, y, limit=60.0, size=601)
    mean = weights @ points
    cov = (points - mean).T @ ((points - mean) * weights[:, None])
    assert np.allclose(samples.mean(0), mean, atol=0.1 * np.sqrt(np.diag(cov)).max())
    assert np.allclose(np.cov(samples.T), cov, rtol=0.2, atol=0.1 * np.abs(cov).max())
    test = np.random.default_rng(1).normal(scale=3.0, size=(200, 2))
    bag = torch.tensor(samples)
    p_mc = toys.sigmoid_mixture_log_outputs(bag, torch.tensor(test))[:, 1].exp().numpy()
    p_quad = expit(test @ points.T) @ weights
    assert np.abs(p_mc - p_quad).max() < 0.03
    p_neg = toys.sigmoid_mixture_log_outputs(bag, torch.tensor(-test))[:, 1].exp().numpy()
    assert np.allclose(p_mc + p_neg, 1.0)          # no bias: p(y=1|-x) = 1 - p(y=1|x)


SMALL_LOGREG = toys.LogRegConfig(num_samples=2_000, burn_in=300, num_iterations=600, lr=3.0, grid_size=31, num_test=500)


@pytest.fixture(scope="module")
def logreg_result():
    return toys.run_logreg(SMALL_LOGREG)


def test_logreg_leaves_the_torch_thread_count_as_it_was(logreg_result):
    before = torch.get_num_threads()
    toys.run_logreg(TINY_LOGREG)
    assert torch.get_num_threads() == before


def test_logreg_table_has_one_row_per_student_and_memory_from_the_arrays(logreg_result):
    table = logreg_result.table
    assert len(table) == 2 * 2 * 3
    assert set(table["generator"]) == set(toys.INPUT_GENERATORS)
    batch = table[table["mode"] == "batch"]["memory_bytes"]
    online = table[table["mode"] == "online"]["memory_bytes"]
    # bag of 2,000 x 2 float64 (+ one input minibatch and the 10 x 2 weights) vs 10 x 2 samples
    assert (batch == 2_000 * 2 * 8 + 10 * 2 * 8 + 10 * 2 * 8).all()
    assert (online == 10 * 2 * 8 + 10 * 2 * 8 + 10 * 2 * 8).all()
    grid = logreg_result.arrays["mc_grid"]
    assert np.allclose(grid + grid[::-1, ::-1], 1.0)     # antisymmetric about the origin


def test_online_cross_entropy_distillation_matches_batch(logreg_result):
    """Eq. 3.40: with cross-entropy, online and batch minimise the same loss."""
    t = logreg_result.table.set_index(["mode", "loss", "generator"])
    for g in toys.INPUT_GENERATORS:
        batch, online = t.loc[("batch", "cross_entropy", g)], t.loc[("online", "cross_entropy", g)]
        assert abs(online["mean_abs_test"] - batch["mean_abs_test"]) < 0.03
    grids = logreg_result.arrays["student_grids"]
    rows = logreg_result.table.reset_index(drop=True)
    ce_resample = (rows["loss"] == "cross_entropy") & (rows["generator"] == "resample")
    i_b = rows.index[(rows["mode"] == "batch") & ce_resample][0]
    i_o = rows.index[(rows["mode"] == "online") & ce_resample][0]
    assert np.abs(grids[i_b] - grids[i_o]).mean() < 0.05
    # the same comparison through experiments.thesis.logreg_agreement, for every generator
    agreement = thesis.logreg_agreement(logreg_result).set_index(["loss", "generator"])
    assert len(agreement) == 2 * 3
    assert np.isclose(agreement.loc[("cross_entropy", "resample"), "mean_abs_grid_online_batch"],
                      np.abs(grids[i_b] - grids[i_o]).mean())
    assert (agreement.loc["cross_entropy", "mean_abs_grid_online_batch"] < 0.05).all()


def test_pure_noise_inputs_distil_worse_than_the_data(logreg_result):
    """Near the data (test points from the data distribution), pure noise N(0, 10^2 I) inputs give
    every student a worse distance than the better of the data-based generators."""
    t = logreg_result.table.set_index(["mode", "loss", "generator"])["mean_kl_test"]
    for mode in ("batch", "online"):
        for loss in toys.LOSSES:
            best_data = min(t[(mode, loss, "resample")], t[(mode, loss, "perturb")])
            assert t[(mode, loss, "noise")] > 2 * best_data


def test_constant_distances_are_the_best_constants_known_answers():
    p = np.array([0.1, 0.2, 0.9])
    found = toys.constant_distances(p)
    assert np.isclose(found["abs"], (0.1 + 0.0 + 0.7) / 3)          # the median, 0.2
    c = p.mean()
    kl = p * np.log(p / c) + (1 - p) * np.log((1 - p) / (1 - c))
    assert np.isclose(found["kl"], kl.mean())
    for other in (c - 0.05, c + 0.05, 0.5):                          # the mean minimises the mean KL
        q = np.full_like(p, other)
        assert (p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))).mean() > found["kl"]
    assert toys.constant_distances(np.full(4, 0.3)) == {"abs": 0.0, "kl": pytest.approx(0.0, abs=1e-12)}


def test_logreg_students_report_skill_over_the_constant(logreg_result):
    """Each distance's skill is 1 - distance / the best constant's on the same points, ``skill`` the lowest;
    every data-based student beats the constant, the cross-entropy ones by far (the short run's derivative
    matching students less: 0.4-0.5)."""
    table = logreg_result.table
    for distance in ("mean_kl_test", "mean_abs_test", "mean_kl_grid", "mean_abs_grid"):
        constant = table[distance.replace("mean_", "constant_")]
        assert constant.nunique() == 1 and (constant > 0).all()     # one constant per run and set of points
        assert np.allclose(table[f"{distance}_skill"], 1 - table[distance] / constant)
    skills = table[[c for c in table if c.endswith("_skill")]]
    assert np.allclose(table["skill"], skills.min(axis=1))
    data_based = table[table["generator"] != "noise"]
    assert (data_based["mean_kl_test_skill"] > SKILL_FLOOR).all()
    assert (data_based.loc[data_based["loss"] == "cross_entropy", "mean_kl_test_skill"] > 0.9).all()


# ----------------------------------------------------------------------------- stored runs (experiments.thesis)

TINY_LOGREG = toys.LogRegConfig(num_samples=200, burn_in=50, num_iterations=30, grid_size=5, num_test=20,
                                generators=("resample",), losses=("cross_entropy",))
TIMING = ["chain_seconds", "train_seconds"]


def _assert_arrays_match(stored: dict, computed: dict) -> None:
    """Stored arrays equal the computed ones up to the stored precision (float16: 2^-11 relative)."""
    assert set(stored) == set(computed)
    for name, value in computed.items():
        kept = stored[name]
        assert kept.shape == np.shape(value), name
        if kept.dtype.kind == "f":
            expected_dtype = np.float32 if name in thesis.FLOAT32_ARRAYS else np.float16
            assert kept.dtype == expected_dtype, name
            rtol = 1e-6 if kept.dtype == np.float32 else 1e-3
            np.testing.assert_allclose(kept.astype(float), value, rtol=rtol, atol=1e-7, err_msg=name)
        else:
            assert np.array_equal(kept, value), name


def test_a_stored_run_reads_back_as_the_computed_one(tmp_path, mog_result, logreg_result):
    """Tables exactly (the MoG students' parameter lists included), arrays up to the stored precision."""
    store = ResultsStore(tmp_path)
    for config, result in ((SMALL_MOG, mog_result), (SMALL_LOGREG, logreg_result)):
        entry = store.entry("toy", thesis.toy_record(config), "test-code")
        thesis.store_toy(entry, result)
        back = thesis.load_toy(entry, config)
        pd.testing.assert_frame_equal(back.table, result.table)
        _assert_arrays_match(back.arrays, result.arrays)
        assert back.config == result.config and back.key == entry.key
    files = sorted(p.stat().st_size for p in tmp_path.rglob("arrays.npz"))
    assert files[-1] < 200_000                               # compact: MoG densities on a 4,001-point grid
    # the float32 grid keeps the MoG grid's points apart (float16 would merge neighbours beyond |x| = 32)
    assert np.all(np.diff(thesis.load_toy(store.entry("toy", thesis.toy_record(SMALL_MOG), "test-code"),
                                          SMALL_MOG).arrays["grid"]) > 0)


def test_stored_run_is_reused_for_the_same_code_and_recomputed_when_the_code_changes(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    first = thesis.run_toy(TINY_LOGREG, store)
    second = thesis.run_toy(TINY_LOGREG, store)
    assert first.status == Status.RAN and second.status == Status.REUSED and first.key == second.key
    pd.testing.assert_frame_equal(first.table, second.table)       # timings too: both read from the entry
    for name in first.arrays:
        assert np.array_equal(first.arrays[name], second.arrays[name])
    fresh = toys.run_logreg(TINY_LOGREG)                             # deterministic: the stored run is this
    pd.testing.assert_frame_equal(fresh.table.drop(columns=TIMING), first.table.drop(columns=TIMING))
    _assert_arrays_match(first.arrays, fresh.arrays)
    assert len(store.entries("toy")) == 1

    # another configuration: its own entry
    other = thesis.run_toy(dataclasses.replace(TINY_LOGREG, seed=1), store)
    assert other.status == Status.RAN and other.key != first.key and len(store.entries("toy")) == 2

    # the toys' numerics version bumped: a new entry, computed again
    monkeypatch.setattr(numerics, "NUMERICS", {**numerics.NUMERICS, "toy": numerics.NUMERICS["toy"] + 1})
    changed = thesis.run_toy(TINY_LOGREG, store)
    assert changed.status == Status.RAN and changed.key != first.key and len(store.entries("toy")) == 3
    assert thesis.run_toy(TINY_LOGREG, store).status == Status.REUSED
    monkeypatch.undo()
    assert thesis.run_toy(TINY_LOGREG, store).key == first.key       # the first entry is still there

    # recompute sets the stored entry aside and runs again
    third = thesis.run_toy(TINY_LOGREG, store, recompute=True)
    assert third.status == Status.RAN and third.key == first.key
    assert len(list((tmp_path / "toy").glob(f"{first.key}.old-*"))) == 1


def test_toy_records_tell_the_toys_and_configurations_apart():
    records = [thesis.toy_record(c) for c in (toys.MoGConfig(), toys.LogRegConfig(), toys.MoGConfig(num_data=7),
                                              toys.LogRegConfig(noise_std=3.0))]
    assert records[0] == {"toy": "mog", "config": {}} and records[1] == {"toy": "logreg", "config": {}}
    assert records[2]["config"] == {"num_data": 7} and records[3]["config"] == {"noise_std": 3.0}
    # lists are stored as tuples, so a list gives the same record as the default tuple
    assert thesis.toy_record(toys.LogRegConfig(generators=["resample", "perturb", "noise"])) == records[1]


def test_profiles_are_the_old_profile_values_and_resolve_from_a_namespace():
    default, paper = thesis.PROFILES["default"], thesis.PROFILES["paper"]
    assert default.mog_sizes == (2, 10, 100, 1000) and paper.mog_sizes == (2, 5, 10, 20, 50, 100, 200, 500, 1000)
    assert (default.logreg.num_samples, default.logreg.num_iterations, default.logreg.lr) == (5_000, 2_000, 3.0)
    assert (paper.logreg.num_samples, paper.logreg.num_iterations, paper.logreg.lr) == (10_000, 5_000, 1.0)
    for p in (default, paper):
        assert (p.mog.num_samples, p.mog.burn_in, p.mog.num_distill_samples, p.mog.minibatch_size) == (
            10_000, 1_000, 1_000, 100)
        assert (p.logreg.burn_in, p.logreg.batch_size, p.logreg.perturb_std, p.logreg.noise_std) == (
            1_000, 10, 1.0, 10.0)
    assert paper == thesis.ThesisToysSettings()
    logreg = Overrides()
    logreg.lr, logreg.perturb_std, logreg.noise_std = None, 0.5, 3.0
    namespace = dict(profile="default", mog_sizes=[2, 3], logreg=logreg, mog=Overrides(), seed=5, results_dir="x")
    p = resolve_settings(thesis.PROFILES, "default", namespace)
    assert p.mog_sizes == (2, 3) and p.logreg.lr == 3.0 and p.mog == thesis.PROFILES["default"].mog
    configs = thesis.mog_configs(p, seed=5)
    assert [c.num_data for c in configs] == [2, 3] and all(c.seed == 5 and c.num_samples == 10_000 for c in configs)
    lr = thesis.logreg_config(p, seed=5)
    assert (lr.num_samples, lr.num_iterations, lr.lr, lr.perturb_std, lr.noise_std, lr.seed) == (
        5_000, 2_000, 3.0, 0.5, 3.0, 5)
    # the toys' records are those of the configurations the flat settings gave before (stored runs keep their keys)
    assert [thesis.toy_record(c) for c in thesis.mog_configs(default, seed=0)] == [
        {"toy": "mog", "config": {"num_data": n} if n != 100 else {}} for n in (2, 10, 100, 1000)]  # 100: default
    assert thesis.toy_record(thesis.logreg_config(default)) == {
        "toy": "logreg", "config": {"num_samples": 5_000, "num_iterations": 2_000, "lr": 3.0}}


@pytest.mark.parametrize("make, match", [
    (lambda: toys.MoGConfig(num_data=0), "num_data"),
    (lambda: toys.MoGConfig(num_samples=1_000, minibatch_size=300), "minibatch_size"),
    (lambda: toys.MoGConfig(em_tol=-1.0), "em_tol"),
    (lambda: toys.LogRegConfig(generators=("gan",)), "generators"),
    (lambda: toys.LogRegConfig(losses=("hinge",)), "losses"),
    (lambda: toys.LogRegConfig(modes=()), "modes"),
    (lambda: toys.LogRegConfig(lr=0.0), "lr"),
    (lambda: toys.LogRegConfig(num_samples=10_000, num_iterations=100, batch_size=10), "num_iterations"),
    (lambda: thesis.run_toy({"num_data": 3}, ResultsStore("/nonexistent")), "MoGConfig or LogRegConfig"),
    (lambda: toys.mog_dataset(0), "num_data"),
    (lambda: thesis.ThesisToysSettings(mog_sizes=()), "mog_sizes"),
    (lambda: thesis.ThesisToysSettings(mog_sizes=(2, 0)), "mog_sizes"),
    (lambda: resolve_settings(thesis.PROFILES, "default", {"logreg.lr": -1.0}), r"LogRegConfig\.lr"),
    (lambda: resolve_settings(thesis.PROFILES, "default", {"mog.num_samples": True}), r"MoGConfig\.num_samples"),
    (lambda: resolve_settings(thesis.PROFILES, "default", {"mog.sizes": [2]}), r"mog\.sizes is not a setting"),
    (lambda: resolve_settings(thesis.PROFILES, "fast", {}), "profile"),
])
def test_bad_input_is_refused_before_any_work(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ----------------------------------------------------------------------------- analysis and figures


def _claim_tables(mog_skill=0.9, logreg_skill=None, dse_objective=None):
    """A hand-built MoG table (online 5x batch at N = 10) and logistic-regression table (noise worst, DSE half
    of CE), every student with skill 0.9 unless ``mog_skill`` / ``logreg_skill`` ({(mode, loss, generator):
    skill}) say otherwise, and every DSE student's own loss below the CE student's (``dse_objective``
    {(mode, loss, generator): value} says otherwise)."""
    mog = pd.DataFrame({"num_data": [2, 2, 10, 10], "mode": ["batch", "online"] * 2,
                        "kl_mc_to_student": [0.010, 0.012, 0.010, 0.050], "memory_bytes": [1000, 10] * 2,
                        "kl_mc_to_student_skill": mog_skill})
    kl = {"resample": 0.01, "perturb": 0.02, "noise": 0.1}
    rows = [dict(mode=m, loss=loss, generator=g, memory_bytes=1000 if m == "batch" else 10,
                 mean_kl_test=kl[g] * (0.5 if loss != "cross_entropy" else 1),
                 mean_kl_test_skill=(logreg_skill or {}).get((m, loss, g), 0.9),
                 dse_objective=(dse_objective or {}).get((m, loss, g), 0.01 if loss != "cross_entropy" else 0.02))
            for m in toys.MODES for loss in toys.LOSSES for g in toys.INPUT_GENERATORS]
    return mog, pd.DataFrame(rows)


def test_claims_are_computed_from_the_tables_and_can_fail():
    mog, logreg = _claim_tables()
    claims = thesis.thesis_toys_claims(mog, logreg).set_index("claim")
    mog_claim = claims.loc["MoG: online EM as close to p_MC as batch EM"]
    assert not mog_claim["holds"] and (mog_claim["count"], mog_claim["of"]) == (1, 2)   # 0.05 > 2 * 0.01 + 0.002
    assert claims.loc["MoG: online needs a fraction of the memory", "holds"]
    assert claims.loc["Pure-noise inputs distil worse than data-based inputs", "holds"]
    assert claims.loc["Derivative square error closer to p_MC than cross-entropy", "count"] == 6
    assert (claims["no_evidence"] == 0).all()
    # each row names the numbers it rests on: KL on the grid for the mixture, the metric asked for the regression
    assert claims.loc["MoG: online EM as close to p_MC as batch EM", "metric"] == "kl_mc_to_student"
    assert claims.loc["MoG: online needs a fraction of the memory", "metric"] == "memory_ratio"
    assert claims.loc["Derivative square error closer to p_MC than cross-entropy", "metric"] == "mean_kl_test"
    grid = thesis.thesis_toys_claims(mog.iloc[:0], logreg.assign(mean_kl_grid=logreg["mean_kl_test"]),
                                     metric="mean_kl_grid")
    assert set(grid.loc[grid["metric"] != "memory_ratio", "metric"]) == {"mean_kl_grid"}
    assert thesis.thesis_toys_claims(mog.iloc[:0], pd.DataFrame()).empty


def test_a_comparison_counts_only_students_that_beat_the_constant():
    # MoG N = 10's online student below the floor: the failing comparison is left out, the claim holds on N = 2
    mog, logreg = _claim_tables(mog_skill=[0.9, 0.9, 0.9, 0.01])
    claims = thesis.thesis_toys_claims(mog, logreg).set_index("claim")
    mog_claim = claims.loc["MoG: online EM as close to p_MC as batch EM"]
    assert mog_claim["holds"] and (mog_claim["count"], mog_claim["of"], mog_claim["no_evidence"]) == (1, 1, 1)
    assert "1 no evidence" in mog_claim["ours"]
    # the memory finding holds by construction, whatever the students learnt
    assert claims.loc["MoG: online needs a fraction of the memory", "no_evidence"] == 0
    # a noise student below the floor still counts (noise teaching nothing is the claim); a data-based one not
    noise_unskilled = {(m, loss, "noise"): -1.0 for m in toys.MODES for loss in toys.LOSSES}
    _, logreg = _claim_tables(logreg_skill=noise_unskilled)
    claims = thesis.thesis_toys_claims(mog.iloc[:0], logreg).set_index("claim")
    noise = claims.loc["Pure-noise inputs distil worse than data-based inputs"]
    assert noise["holds"] and (noise["of"], noise["no_evidence"]) == (4, 0)
    dse = claims.loc["Derivative square error closer to p_MC than cross-entropy"]
    assert (dse["of"], dse["no_evidence"]) == (4, 2)                 # both losses' noise students are needed
    online = claims.loc["LogReg cross-entropy: online as close to p_MC as batch"]
    assert (online["of"], online["no_evidence"]) == (2, 1)
    best_data_unskilled = {(m, loss, "resample"): 0.0 for m in toys.MODES for loss in toys.LOSSES}
    _, logreg = _claim_tables(logreg_skill=best_data_unskilled)
    noise = thesis.thesis_toys_claims(mog.iloc[:0], logreg).set_index("claim").loc[
        "Pure-noise inputs distil worse than data-based inputs"]
    assert not noise["holds"] and (noise["of"], noise["no_evidence"]) == (0, 4)
    # a table stored without skill counts no comparison; the memory findings still stand
    claims = thesis.thesis_toys_claims(mog.drop(columns="kl_mc_to_student_skill"),
                                       logreg.drop(columns="mean_kl_test_skill")).set_index("claim")
    judged = claims[~claims.index.isin(thesis.toys.BY_CONSTRUCTION)]
    assert (judged["of"] == 0).all() and not judged["holds"].any() and (judged["no_evidence"] > 0).all()
    assert claims.loc[list(thesis.toys.BY_CONSTRUCTION), "holds"].all()


def test_a_claim_judged_in_fewer_comparisons_than_are_no_evidence_does_not_hold():
    """The majority rule of :func:`~gped_kit.experiments.verdicts.judged_verdict`: 1 comparison judged (and holding)
    beside 2 that are no evidence is no evidence, not a claim that holds."""
    claim = "LogReg cross-entropy: online as close to p_MC as batch"
    low = {("online", "cross_entropy", g): 0.0 for g in ("resample", "perturb")}
    mog, logreg = _claim_tables(logreg_skill=low)
    row = thesis.thesis_toys_claims(mog.iloc[:0], logreg).set_index("claim").loc[claim]
    assert (row["count"], row["of"], row["no_evidence"]) == (1, 1, 2) and not row["holds"]
    assert "2 no evidence" in row["ours"]
    # 2 judged beside 1 no evidence: judged by the 2, and it holds
    one = {("online", "cross_entropy", "resample"): 0.0}
    row = thesis.thesis_toys_claims(mog.iloc[:0], _claim_tables(logreg_skill=one)[1]).set_index("claim").loc[claim]
    assert (row["count"], row["of"], row["no_evidence"]) == (2, 2, 1) and row["holds"]


def test_dse_against_ce_counts_only_where_the_dse_student_minimised_its_own_loss():
    """Where SGD left a DSE student's derivative square error (against p_MC) above the CE student's, their
    comparison is of the optimiser, not of the losses: no evidence, named; a table without the objective
    judges none."""
    claim = "Derivative square error closer to p_MC than cross-entropy"
    # the batch noise DSE student did not minimise its loss, and is (here) farther from p_MC than CE
    mog, logreg = _claim_tables(dse_objective={("batch", "derivative_square_error", "noise"): 0.03})
    logreg.loc[(logreg["mode"] == "batch") & (logreg["loss"] != "cross_entropy") & (logreg["generator"] == "noise"),
               "mean_kl_test"] = 1.0
    row = thesis.thesis_toys_claims(mog.iloc[:0], logreg).set_index("claim").loc[claim]
    assert row["holds"] and (row["count"], row["of"], row["no_evidence"]) == (5, 5, 1)
    assert "1 whose DSE student did not minimise its own loss below the CE student's" in row["ours"]
    assert thesis.dse_minimised(logreg).tolist().count(False) == 1
    # the same comparison with the DSE student's loss minimised counts, and the claim fails
    _, minimised = _claim_tables()
    minimised["mean_kl_test"] = logreg["mean_kl_test"]
    row = thesis.thesis_toys_claims(mog.iloc[:0], minimised).set_index("claim").loc[claim]
    assert not row["holds"] and (row["count"], row["of"]) == (5, 6)
    unknown = thesis.thesis_toys_claims(mog.iloc[:0], logreg.drop(columns="dse_objective")).set_index("claim")
    assert (unknown.loc[claim, "of"], unknown.loc[claim, "no_evidence"]) == (0, 6)
    assert not thesis.dse_minimised(logreg.drop(columns="dse_objective")).any()


def test_claims_text_names_claims_without_evidence_and_counts_neither_way():
    mog, logreg = _claim_tables(mog_skill=[0.9, 0.9, 0.01, 0.9])
    claims = thesis.thesis_toys_claims(mog, logreg).assign(metric="mean_kl_test")
    held, failing, by_construction, unjudged = thesis.count_claims(claims)
    assert "MoG: online EM as close to p_MC as batch EM" in set(held["claim"])   # N = 10 left out: N = 2 holds
    mog, logreg = _claim_tables(mog_skill=0.0)
    claims = thesis.thesis_toys_claims(mog, logreg).assign(metric="mean_kl_test")
    held, failing, by_construction, unjudged = thesis.count_claims(claims)
    assert list(unjudged["claim"]) == ["MoG: online EM as close to p_MC as batch EM"]
    text = thesis.claims_text(claims)
    assert text.startswith(f"{len(held)} of {len(held) + len(failing)} claims hold")
    assert ("no evidence: MoG: online EM as close to p_MC as batch EM on mean_kl_test (2 of its 2 comparisons rest "
            "on students that do not beat the best constant prediction)") in text
    assert "2 comparisons left out as no evidence" in text
    # judged in 1 comparison beside 2 left out: no evidence (the majority rule), neither held nor failing
    one = pd.DataFrame({"claim": ["c"], "metric": ["mean_kl_test"], "holds": [False], "count": [0], "of": [1],
                        "no_evidence": [2], "ours": ["0 of 1"]})
    held, failing, _, unjudged = thesis.count_claims(one)
    assert held.empty and failing.empty and list(unjudged["claim"]) == ["c"]
    assert list(thesis.count_claims(one.assign(no_evidence=1))[1]["claim"]) == ["c"]  # 1 judged, 1 left out: counts
    # each claim left out names its own counts: 2 of 3 here, and none at all for a claim that compared nothing
    two = pd.concat([one, one.assign(claim="d", of=0, no_evidence=0)])
    assert thesis.claims_text(two) == ("0 of 0 claims hold; no evidence: c on mean_kl_test (2 of its 3 comparisons "
                                       "rest on students that do not beat the best constant prediction); d on "
                                       "mean_kl_test (no comparison ran); 2 comparisons left out as no evidence")
    assert list(thesis.count_claims(one.drop(columns="no_evidence"))[1]["claim"]) == ["c"]  # stored without it


def test_skill_text_gives_the_ranges_and_names_students_below_the_floor():
    mog = pd.DataFrame({"num_data": [2, 2], "mode": ["batch", "online"], "skill": [0.9, 0.97]})
    logreg = pd.DataFrame({"mode": ["batch", "online"], "loss": ["cross_entropy"] * 2,
                           "generator": ["noise"] * 2, "skill": [0.6, 0.02]})
    text = thesis.skill_text(mog, logreg)
    assert text.startswith("1 student is no evidence") and "LogReg online cross_entropy noise" in text
    assert "0.90 to 0.97 (the mixture of Gaussians) and 0.02 to 0.60 (the logistic regression)" in text
    assert thesis.skill_text(mog, logreg.iloc[:1]).startswith("Every student beats the best constant prediction")
    assert "MoG N=2 batch" in thesis.skill_text(mog.drop(columns="skill"), logreg.iloc[:0])
    assert thesis.skill_text(mog.iloc[:0], logreg.iloc[:0]) == "No toy student has run."


def test_online_vs_batch_pairs_the_modes_and_names_missing_columns():
    table = pd.DataFrame({"num_data": [2, 2, 10, 10], "mode": ["batch", "online"] * 2,
                          "kl_mc_to_student": [0.01, 0.02, 0.04, 0.01], "memory_bytes": [1000, 10] * 2})
    wide = thesis.online_vs_batch(table, "kl_mc_to_student", ["num_data"])
    assert list(wide["kl_mc_to_student_ratio"]) == [2.0, 0.25] and list(wide["memory_ratio"]) == [0.01, 0.01]
    with pytest.raises(ValueError, match="memory_bytes"):
        thesis.online_vs_batch(table.drop(columns="memory_bytes"), "kl_mc_to_student", ["num_data"])


def test_mog_agreement_on_hand_built_students():
    """Two unit-variance Gaussians at 0 and d apart have total variation 2 Phi(d / 2) - 1."""
    grid = np.linspace(-20, 20, 8001)
    pdf = lambda m: np.exp(-0.5 * (grid - m) ** 2) / np.sqrt(2 * np.pi)  # noqa: E731
    table = pd.DataFrame({"num_data": [5, 5], "mode": ["batch", "online"], "kl_mc_to_student": [0.01, 0.02],
                          "student_means": [[2.0, -1.0, 0.0], [0.1, 2.3, -1.0]]})
    result = toys.ToyResult(table, {"grid": grid, "batch": pdf(0.0), "online": pdf(1.0)}, {})
    row = thesis.mog_agreement([result]).iloc[0]
    assert row["num_data"] == 5 and np.isclose(row["mean_difference"], 0.3)       # sorted means compared
    assert np.isclose(row["tv_online_batch"], 0.3829, atol=1e-3)                  # 2 Phi(0.5) - 1
    assert (row["kl_batch"], row["kl_online"]) == (0.01, 0.02)


def test_figures_draw_stored_runs(tmp_path, mog_result, logreg_result):
    store = ResultsStore(tmp_path)
    stored = []
    for config, result in ((SMALL_MOG, mog_result), (SMALL_LOGREG, logreg_result)):
        entry = store.entry("toy", thesis.toy_record(config), "test-code")
        thesis.store_toy(entry, result)
        stored.append(thesis.load_toy(entry, config))
    mog, logreg = stored
    fig = thesis_plots.plot_mog([mog, mog], title="t")
    assert len(fig.axes) == 4 and len(fig.axes[1].lines) == 5      # true, p_MC, batch, online, data
    fig = thesis_plots.plot_online_vs_batch(mog.table, "kl_mc_to_student", "num_data")
    assert [len(ax.lines) for ax in fig.axes] == [2, 2]
    fig = thesis_plots.plot_logreg(logreg, "noise")
    assert len(fig.axes) == 2 * 5 + 1                              # p_MC + 4 students, two rows, a colorbar
    with pytest.raises(ValueError, match="generator"):
        thesis_plots.plot_logreg(logreg, "gan")
    fig = thesis_plots.plot_generators(logreg.table)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list(toys.INPUT_GENERATORS)
    plt.close("all")
