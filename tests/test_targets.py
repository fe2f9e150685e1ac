"""Targets g, estimators U_s / U_o (Eqs. 9-10), likelihoods and Adam against closed forms,
batch Monte Carlo and torch's own implementations."""

import dataclasses
import math

import pytest
import torch
from torch.func import grad_and_value, vmap

from gped_kit.baselines import endd
from gped_kit.core import likelihoods, metrics
from gped_kit.core import targets as T
from gped_kit.core.adam import adam_init, adam_update_, bias_corrections
from gped_kit.core.estimators import estimates, estimator_init, estimator_update_
from gped_kit.core.options import Estimator, parse_option
from gped_kit.core.sgld import SGLDConfig
from gped_kit.engine import GPEDConfig, StudentConfig, distill


def dirichlet_draws(alpha, n, seed=0):
    gen = torch.Generator().manual_seed(seed)
    gam = torch._standard_gamma(alpha.expand(n, -1).contiguous(), generator=gen)
    return gam / gam.sum(-1, keepdim=True)


def test_entropy_target_is_positive_entropy_with_zero_convention():
    p = torch.tensor([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    h = T.entropy_g(p.log())
    third = -(0.2 * torch.tensor(0.2).log() + 0.3 * torch.tensor(0.3).log() + 0.5 * torch.tensor(0.5).log())
    assert h.shape == (3, 1)
    assert torch.allclose(h.squeeze(1), torch.stack([torch.tensor(0.6931472), torch.tensor(0.0), third]), atol=1e-6)
    assert (h >= 0).all()


def test_marginal_variance_and_combined_targets():
    logp = torch.log_softmax(torch.randn(4, 5), -1)
    p = logp.exp()
    assert torch.allclose(T.marginal_variance_g(logp), p * (1 - p))
    both = T.PREDICTIVE_ENTROPY.g(logp)
    assert both.shape == (4, 6) and T.PREDICTIVE_ENTROPY.out_dim(5) == 6
    assert torch.allclose(both[:, :5], p) and torch.allclose(both[:, 5:], T.entropy_g(logp))
    pred = T.PREDICTIVE_ENTROPY.link(torch.randn(4, 6))
    assert torch.allclose(pred[:, :5].sum(-1), torch.ones(4)) and (pred[:, 5] > 0).all()


def test_u_o_equals_batch_monte_carlo_average_with_repeated_indices():
    gen = torch.Generator().manual_seed(0)
    n, dim = 7, 3
    store = estimator_init(Estimator.U_O, n, dim)
    seen = {i: [] for i in range(n)}
    for _ in range(50):
        idx = torch.randint(0, n, (5,), generator=gen)  # with replacement: duplicates happen
        values = torch.rand(5, dim, generator=gen)
        out = estimator_update_(Estimator.U_O, store, idx, values)
        for i, v in zip(idx.tolist(), values):
            seen[i].append(v)
        for k, i in enumerate(idx.tolist()):
            assert torch.allclose(out[k], torch.stack(seen[i]).mean(0), atol=1e-6)
    assert store.counts.sum() == 250
    visited = torch.tensor([i for i in range(n) if seen[i]])
    expected = torch.stack([torch.stack(seen[i]).mean(0) for i in visited.tolist()])
    assert torch.allclose(estimates(store, visited), expected)


def test_u_o_store_adds_in_index_adds_order():
    """The store's sums and counts are index_add_'s, bit for bit, with many repeated indices (the order
    of the additions is the same), so writing the update as scatter_add_ moved no stored number."""
    gen = torch.Generator().manual_seed(5)
    store = estimator_init(Estimator.U_O, 4, 3)
    sums, counts = store.sums.clone(), store.counts.clone()
    for _ in range(20):
        idx, values = torch.randint(0, 4, (300,), generator=gen), torch.randn(300, 3, generator=gen) * 1e3
        estimator_update_(Estimator.U_O, store, idx, values)
        sums.index_add_(0, idx, values)
        counts.index_add_(0, idx, torch.ones(300))
    assert torch.equal(store.sums, sums) and torch.equal(store.counts, counts)


def test_u_o_matches_eq10_recursion():
    store = estimator_init(Estimator.U_O, 1, 1)
    g_hat, m = torch.zeros(1), 0
    for v in [0.3, 1.0, -2.0, 0.5]:
        g_hat = (m * g_hat + v) / (m + 1)  # Eq. 10
        m += 1
        out = estimator_update_(Estimator.U_O, store, torch.tensor([0]), torch.tensor([[v]]))
        assert torch.allclose(out.squeeze(), g_hat)


def test_estimator_update_under_vmap_equals_separate_chains():
    gen = torch.Generator().manual_seed(3)
    K, n, dim, m = 3, 10, 2, 6
    stacked = estimator_init(Estimator.U_O, n, dim)
    stacked = type(stacked)(stacked.sums.expand(K, -1, -1).clone(), stacked.counts.expand(K, -1).clone())
    separate = [estimator_init(Estimator.U_O, n, dim) for _ in range(K)]
    for _ in range(4):
        idx, val = torch.randint(n, (K, m), generator=gen), torch.randn(K, m, dim, generator=gen)
        out = vmap(lambda s, i, v: estimator_update_(Estimator.U_O, s, i, v))(stacked, idx, val)
        for k in range(K):
            assert torch.allclose(out[k], estimator_update_(Estimator.U_O, separate[k], idx[k], val[k]))
    for k in range(K):
        assert torch.equal(stacked.sums[k], separate[k].sums) and torch.equal(stacked.counts[k], separate[k].counts)


@pytest.mark.parametrize("target", [T.PREDICTIVE, T.ENTROPY])
def test_estimators_are_unbiased_for_dirichlet_posterior(target):
    """With p ~ Dir(alpha) as 'posterior samples', E[p] = alpha/alpha0 and
    E[H(p)] = psi(alpha0+1) - sum_c alpha_c/alpha0 psi(alpha_c+1) are known exactly."""
    alpha = torch.tensor([2.0, 1.0, 0.5, 4.0], dtype=torch.float64)
    a0 = alpha.sum()
    exact = {"predictive": alpha / a0,
             "entropy": (torch.digamma(a0 + 1) - (alpha / a0 * torch.digamma(alpha + 1)).sum()).reshape(1)}[target.name]
    logp = dirichlet_draws(alpha, 40_000).log()
    u_s = estimator_init(Estimator.U_S, 1, target.out_dim(4))
    u_o = estimator_init(Estimator.U_O, 1, target.out_dim(4), dtype=torch.float64)
    singles = []
    for chunk in logp.split(1000):
        g = target.g(chunk)
        zero = torch.zeros(len(chunk), dtype=torch.long)
        singles.append(estimator_update_(Estimator.U_S, u_s, zero, g))
        last = estimator_update_(Estimator.U_O, u_o, zero, g)
    singles = torch.cat(singles)
    se = singles.std(0) / len(singles) ** 0.5
    assert ((singles.mean(0) - exact).abs() < 4 * se + 1e-9).all()  # U_s unbiased
    assert ((last[-1] - exact).abs() < 4 * se + 1e-9).all()  # U_o converges to the same value
    assert torch.allclose(last[-1], singles.mean(0))  # and equals the batch MC mean
    assert u_s.nbytes == 0


def test_split_estimator_is_u_s_on_predictive_columns_and_u_o_on_the_last():
    store = estimator_init(Estimator.U_S_U_O, 6, 3)
    idx = torch.tensor([1, 1, 4])
    first = torch.tensor([[0.2, 0.8, 1.0], [0.4, 0.6, 3.0], [0.5, 0.5, 2.0]])
    out = estimator_update_(Estimator.U_S_U_O, store, idx, first)
    assert torch.equal(out[:, :2], first[:, :2])  # U_s: the current sample only
    assert torch.allclose(out[:, 2], torch.tensor([2.0, 2.0, 2.0]))  # U_o: mean of visits (1+3)/2 and 2
    second = torch.tensor([[0.1, 0.9, 5.0]])
    out = estimator_update_(Estimator.U_S_U_O, store, torch.tensor([1]), second)
    assert torch.equal(out[:, :2], second[:, :2]) and torch.allclose(out[:, 2], torch.tensor([3.0]))
    assert store.nbytes == 6 * 4 * 2
    with pytest.raises(ValueError, match="at least 2"):
        estimator_init(Estimator.U_S_U_O, 6, 1)


def test_custom_target_and_resolution_errors():
    tgt = T.custom_target("max_prob", lambda lp: lp.exp().max(-1, keepdim=True).values, out_dim=1)
    assert tgt.out_dim(10) == 1
    # the default loss is the squared error (it fits E[g]; the absolute error would fit g's median)
    assert torch.allclose(tgt.loss(2 * torch.ones(2, 1), torch.zeros(2, 1)), 4 * torch.ones(2))
    assert T.resolve_target(tgt) is tgt and T.resolve_target("entropy") is T.ENTROPY
    with pytest.raises(ValueError, match="target='varience'.*allowed"):
        T.resolve_target("varience")
    with pytest.raises(ValueError, match="estimator='U_x'.*allowed"):
        parse_option(Estimator, "U_x", "estimator")
    with pytest.raises(TypeError):
        T.custom_target("bad", g=3, out_dim=1)
    with pytest.raises(ValueError, match="built-in"):
        T.custom_target("entropy", g=T.entropy_g, out_dim=1)


def test_endd_target_tempers_smooths_and_links_to_the_dirichlet_mean():
    log_p = torch.log_softmax(torch.randn(5, 4), -1)
    g = endd.ENDD.g(log_p)
    pi = torch.softmax(log_p / endd.ENDD_TEMPERATURE, -1) * (1 - endd.ENDD_SMOOTHING) + endd.ENDD_SMOOTHING / 4
    assert torch.allclose(g, pi.log(), atol=1e-6) and torch.allclose(g.exp().sum(-1), torch.ones(5))
    assert (T.entropy_g(g) > T.entropy_g(log_p)).all()  # tempering flattens
    raw = torch.randn(5, 4)
    out = endd.ENDD.link(raw)
    assert out.shape == (5, 5) and torch.allclose(out[:, :4], torch.softmax(raw, -1), atol=1e-6)
    assert torch.allclose(out[:, 4], raw.exp().sum(-1))
    assert endd.ENDD.predictive_classes and not endd.ENDD.estimates_g
    assert endd.ENDD.metric_names == ("student_nll", "student_accuracy", "student_ece", "student_nll_constant",
                                      "student_nll_skill", "nll_gap")  # no target_mae
    assert endd.ENDD.has_uncertainties and endd.ENDD.marginal_variance is endd.dirichlet_marginal_variance
    assert endd.endd_target(1.0).name == "endd-T1-s0.001"
    # the target carries its temperature: experiments read it at T without asking for the target's name
    assert endd.ENDD.has_temperature and endd.ENDD.training_temperature == endd.ENDD_TEMPERATURE
    assert endd.endd_target(1.0).training_temperature == 1.0 and not T.TARGETS["predictive"].has_temperature
    heated = endd.ENDD.at_temperature(out, 4, 2.5)
    assert torch.allclose(heated, endd.endd_output_at_temperature(out, 4, 2.5))
    with pytest.raises(ValueError, match="together"):
        T.Target("half", T.TARGETS["predictive"].g, out_dim=lambda c: c, link=T.softmax_head,
                 loss=T.TARGETS["predictive"].loss, at_temperature=endd.endd_output_at_temperature)
    with pytest.raises(ValueError, match="temperature"):
        endd.endd_target(0.0)
    # closed-form marginal variance of the Dirichlet against Monte Carlo
    alpha = torch.tensor([[2.0, 1.0, 0.5, 4.0]])
    mv = endd.dirichlet_marginal_variance(torch.cat([alpha / alpha.sum(), alpha.sum(-1, keepdim=True)], -1), 4)
    draws = dirichlet_draws(alpha[0].double(), 200_000)
    assert torch.allclose(mv[0].double(), (draws * (1 - draws)).mean(0), atol=2e-3)


@pytest.mark.parametrize(("offset", "rtol"), [(0.0, 1e-6), (300.0, 1e-6), (1e5, 1e-2)])
def test_regression_targets_split_predictive_variance_exactly(offset, rtol):
    """predictive_variance g = (mu, mu^2, sigma^2): averaged over 'samples' it gives E[mu],
    Var[mu] (epistemic) and E[sigma^2] (aleatoric) exactly, also where E[mu] is large beside sd(mu) (the
    offsets; in float32, E[mu^2] - E[mu]^2 lost Var[mu] = 0.01 entirely at E[mu] = 300); and the student's
    head gives its e back where float32 rounded it to 0 (e = 1e-3 at m = 300). ``rtol``: float64's own
    limit, a relative error of about 1e-16 (E[mu] / sd(mu))^2, 1e-4 at E[mu] = 10^5 and sd 0.1."""
    gen = torch.Generator().manual_seed(0)
    mu = offset + 0.1 * torch.randn(50, 4, 2, generator=gen)
    var = torch.rand(50, 4, 2, generator=gen) + 0.1
    g = torch.stack([T.PREDICTIVE_VARIANCE.g(torch.cat([m, v], -1)) for m, v in zip(mu, var)]).mean(0)
    assert g.dtype == T.PREDICTIVE_VARIANCE.dtype == torch.float64
    moments = T.regression_moments(g)
    exact = mu.double()
    assert torch.allclose(moments.mean, exact.mean(0), rtol=1e-12, atol=1e-12)
    assert torch.allclose(moments.epistemic, exact.var(0, unbiased=False), rtol=rtol, atol=1e-12)
    assert torch.allclose(moments.aleatoric, var.double().mean(0), atol=1e-12)
    assert torch.allclose(moments.total, moments.aleatoric + moments.epistemic)
    raw = torch.randn(4, 6, generator=gen)
    raw[:, :2] += offset
    raw[:, 2:4] = math.log(1e-3) + 0.1 * raw[:, 2:4]
    back = T.regression_moments(T.PREDICTIVE_VARIANCE.link(raw))
    e = raw[:, 2:4].double().exp()
    assert torch.equal(back.mean, raw[:, :2].double())
    assert torch.allclose(back.epistemic, e, rtol=rtol, atol=0)
    assert torch.allclose(back.aleatoric, raw[:, 4:].double().exp())


def test_regression_losses_train_in_the_outputs_precision():
    """The regression targets' float64 values leave the student's loss (and so its gradients) in the output's
    float32; the centred second moment is formed in float64 first."""
    gen = torch.Generator().manual_seed(1)
    stats = torch.cat([300 + 0.1 * torch.randn(8, 1, generator=gen), torch.full((8, 1), 0.5)], -1)
    raw = torch.cat([300 + torch.randn(8, 1, generator=gen), torch.randn(8, 2, generator=gen)], -1).requires_grad_()
    for target, out in ((T.PREDICTIVE_VARIANCE, raw), (T.PREDICTIVE_MEAN, raw[:, :1])):
        loss = target.loss(target.g(stats), out)
        assert loss.dtype == torch.float32 and loss.shape == (8,)
    # E[(mu - m)^2] = (g2 - 2 m g1 + m^2) for one sample: (mu - m)^2 exactly, not float32's rounding at 9e4
    m = raw[:, :1].detach()
    raw_at_m = torch.cat([m, torch.zeros(8, 1), torch.full((8, 1), math.log(0.5))], -1)
    centered = T.centered_moments_loss(T.PREDICTIVE_VARIANCE.g(stats), raw_at_m)
    d = stats[:, :1].double() - m.double()
    expected = (d ** 2 + (d ** 2 - 1) ** 2).sum(-1)  # (m - g1)^2 + (e - centred)^2, e = 1; a = sigma^2 adds 0
    assert torch.allclose(centered.double(), expected, rtol=1e-5)


def test_a_target_refuses_a_precision_it_cannot_sum_in():
    with pytest.raises(ValueError, match=r"dtype=torch.float16 is not allowed; allowed: torch.float32, torch.float64"):
        dataclasses.replace(T.PREDICTIVE, dtype=torch.float16)


def test_each_target_names_the_metrics_it_reports():
    nll_skill = ("student_nll_constant", "student_nll_skill")
    entropy_skill = ("entropy_mae_constant", "entropy_mae_zero", "entropy_mae_skill")
    assert T.PREDICTIVE.metric_names == ("student_nll", "student_accuracy", "student_ece", "target_mae",
                                         "constant_mae", "skill", *nll_skill, "nll_gap")
    assert T.ENTROPY.metric_names == ("target_mae", "entropy_mae", "constant_mae", "skill", *entropy_skill)
    assert T.MARGINAL_VARIANCE.metric_names == ("target_mae", "constant_mae", "skill")
    assert T.PREDICTIVE_ENTROPY.metric_names == ("student_nll", "student_accuracy", "student_ece", "target_mae",
                                                 "entropy_mae", "constant_mae", "skill", *entropy_skill, *nll_skill,
                                                 "nll_gap")
    assert T.PREDICTIVE_MEAN.metric_names == ("student_rmse", "mean_mae", "constant_mae", "skill")
    assert T.PREDICTIVE_VARIANCE.metric_names == (
        "student_rmse", "student_nll", "mean_mae", "epistemic_mae", "aleatoric_mae", "constant_mae", "skill",
        "epistemic_mae_constant", "epistemic_mae_zero", "epistemic_mae_skill", "aleatoric_mae_constant",
        "aleatoric_mae_skill", "nll_gap")
    # every built-in target reports a skill over the best constant for each error it reports
    for target in [*T.TARGETS.values(), endd.ENDD]:
        assert metrics.skill_columns(target.metric_names), target.name
    everything = [*T.TARGETS.values(), endd.ENDD]
    assert sorted(t.name for t in everything if t.reports("entropy_mae")) == [
        "entropy", "entropy-sq", "predictive+entropy", "predictive+entropy-sq"]
    assert sorted(t.name for t in everything if t.has_uncertainties) == [
        "endd", "predictive+entropy", "predictive+entropy-sq"]


def test_classification_metrics_known_answers_and_missing_inputs():
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]])
    entropy = torch.tensor([[0.5], [0.9]])
    output = torch.cat([probs, entropy], -1)
    reference = torch.tensor([[0.6, 0.3, 0.1, 0.4], [0.2, 0.2, 0.6, 1.2]])
    labels = torch.tensor([0, 1])
    got = T.PREDICTIVE_ENTROPY.evaluate(output, labels, 3, reference, teacher_nll=0.5)
    nll = -(torch.tensor(0.7).log() + torch.tensor(0.3).log()) / 2
    assert list(got) == list(T.PREDICTIVE_ENTROPY.metric_names)
    assert got["student_nll"] == pytest.approx(float(nll)) and got["student_accuracy"] == 0.5
    assert got["target_mae"] == pytest.approx(float((output - reference).abs().mean()))
    assert got["entropy_mae"] == pytest.approx(0.2) and got["nll_gap"] == pytest.approx(float(nll) - 0.5)
    # ECE: two bins of one input each, right at confidence 0.7 and wrong at 0.6: (|1 - 0.7| + |0 - 0.6|) / 2
    assert got["student_ece"] == pytest.approx(0.45, abs=1e-6)
    # skill: the entropy column's best constant is its median (0.8, between 0.4 and 1.2): error 0.4; predicting
    # zero errs by its mean 0.8; the predictive's best constant is the labels' frequencies (1/2, 1/2): log 2
    assert got["entropy_mae_constant"] == pytest.approx(0.4) and got["entropy_mae_zero"] == pytest.approx(0.8)
    assert got["entropy_mae_skill"] == pytest.approx(1 - 0.2 / 0.4)
    assert got["student_nll_constant"] == pytest.approx(math.log(2))
    assert got["student_nll_skill"] == pytest.approx(1 - float(nll) / math.log(2))
    assert got["skill"] == pytest.approx(1 - got["target_mae"] / metrics.constant_mae(reference))
    # before the ensemble has a sample: only what the labels give
    assert list(T.PREDICTIVE_ENTROPY.evaluate(output, labels, 3)) == ["student_nll", "student_accuracy", "student_ece",
                                                                      "student_nll_constant", "student_nll_skill"]
    assert T.ENTROPY.evaluate(entropy, labels, 3) == {}


def test_regression_metrics_use_the_one_moments_split():
    # student (m, m^2 + e, a) with e = 0.25, a = 1; teacher with E[mu^2] < E[mu]^2 (round-off): epistemic 0
    output = torch.tensor([[1.0, 1.25, 1.0], [-1.0, 1.25, 1.0]])
    reference = torch.tensor([[1.5, 2.0, 0.5], [-1.0, 0.5, 1.0]])
    y = torch.tensor([2.0, -1.0])
    got = T.PREDICTIVE_VARIANCE.evaluate(output, y, 1, reference, teacher_nll=1.0)
    teacher = T.regression_moments(reference)
    assert torch.equal(teacher.epistemic, torch.tensor([[0.0], [0.0]]))  # floored at 0
    assert got["student_rmse"] == pytest.approx(0.5 ** 0.5)
    assert got["student_nll"] == pytest.approx(metrics.gaussian_nll(output[:, :1], torch.full((2, 1), 1.25),
                                                                    y.view(2, 1)))
    assert got["mean_mae"] == pytest.approx(0.25) and got["epistemic_mae"] == pytest.approx(0.25)
    assert got["aleatoric_mae"] == pytest.approx(0.25) and got["nll_gap"] == pytest.approx(got["student_nll"] - 1.0)
    # skill: the teacher's epistemic variance is 0 everywhere, so every constant but 0 errs and 0 is exact: NaN
    assert got["epistemic_mae_constant"] == 0.0 and got["epistemic_mae_zero"] == 0.0
    assert math.isnan(got["epistemic_mae_skill"])
    assert got["aleatoric_mae_constant"] == pytest.approx(0.25)  # median of (0.5, 1.0) is 0.5 (torch: the lower)
    assert T.PREDICTIVE_MEAN.evaluate(output[:, :1], y, 1, reference[:, :1]) == {
        "student_rmse": pytest.approx(0.5 ** 0.5), "mean_mae": pytest.approx(0.25),
        "constant_mae": pytest.approx(1.25), "skill": pytest.approx(0.8)}
    # the Gaussian likelihood's predictive metrics use the same split
    assert likelihoods.Gaussian().predictive_metrics({"predictive_variance": output}, y)["nll"] == got["student_nll"]
    assert T.regression_moments is likelihoods.regression_moments


def test_a_likelihoods_predictive_nll_is_its_predictive_metrics_nll_alone():
    """The NLL a log point takes for the NLL gap and a pooled run's chains, without the accuracy and ECE."""
    probs = torch.softmax(torch.randn(50, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    labels = torch.arange(50) % 4
    categorical = likelihoods.Categorical()
    ensemble = {categorical.ensemble_target: probs}
    assert categorical.predictive_nll(ensemble, labels) == categorical.predictive_metrics(ensemble, labels)["nll"]
    picked = probs[torch.arange(50), labels]
    assert categorical.predictive_nll(ensemble, labels) == pytest.approx(float(-picked.log().mean()))
    moments = torch.tensor([[1.5, 2.0, 0.5], [-1.0, 0.5, 1.0]])  # E[mu], E[mu^2], E[sigma^2]
    y = torch.tensor([2.0, -1.0])
    gaussian = likelihoods.Gaussian()
    ensemble = {gaussian.ensemble_target: moments}
    assert gaussian.predictive_nll(ensemble, y) == gaussian.predictive_metrics(ensemble, y)["nll"]
    variance = torch.tensor([[0.5], [1.0]])  # E[sigma^2] + Var[mu], Var[mu] = E[mu^2] - E[mu]^2 floored at 0
    assert gaussian.predictive_nll(ensemble, y) == pytest.approx(metrics.gaussian_nll(moments[:, :1], variance,
                                                                                      y.view(2, 1)))


def test_target_metrics_and_decomposition_errors():
    with pytest.raises(ValueError, match="likelihood='poisson'"):
        T.custom_target("counts", T.predictive_g, out_dim=1, likelihood="poisson")
    with pytest.raises(ValueError, match="names"):
        T.CustomMetrics((), lambda inputs: {})
    with pytest.raises(TypeError, match="callable"):
        T.CustomMetrics(("a",), fn=None)
    with pytest.raises(ValueError, match="'entropy' carries no uncertainty decomposition"):
        T.ENTROPY.uncertainties(torch.rand(3, 1), 10)


def test_categorical_vmapped_nll_is_cross_entropys_batching_rule_bit_for_bit():
    """Under vmap the categorical NLL is taken from gathered log-probabilities (fewer kernels than
    cross_entropy's batching rule): the same values and gradients, bit for bit, for a batch of chains."""
    gen = torch.Generator().manual_seed(3)
    w, x = torch.randn(5, 10, 40, generator=gen), torch.randn(5, 100, 40, generator=gen)
    y = torch.randint(10, (5, 100), generator=gen)
    cat = likelihoods.CATEGORICAL

    def step(vmapped):
        return vmap(grad_and_value(lambda w_, x_, y_: cat.mean_nll(x_ @ w_.T, y_, vmapped)))(w, x, y)

    (g_rule, v_rule), (g_gather, v_gather) = step(False), step(True)
    assert torch.equal(g_rule, g_gather) and torch.equal(v_rule, v_gather)
    torch.testing.assert_close(v_gather[0], torch.nn.functional.cross_entropy(x[0] @ w[0].T, y[0]))


def test_likelihoods_mean_nll_and_statistics():
    raw, y = torch.randn(6, 3), torch.tensor([0, 2, 1, 1, 0, 2])
    cat = likelihoods.CATEGORICAL
    assert torch.allclose(cat.mean_nll(raw, y), torch.nn.functional.cross_entropy(raw, y))
    assert torch.allclose(cat.statistics(raw).exp().sum(-1), torch.ones(6))
    hetero, fixed = likelihoods.Gaussian(), likelihoods.Gaussian(noise_variance=0.25)
    target = torch.randn(6, 2)
    mean, log_var = torch.randn(6, 2), torch.randn(6, 2)
    expected = -torch.distributions.Normal(mean, log_var.exp().sqrt()).log_prob(target).sum(-1).mean()
    assert torch.allclose(hetero.mean_nll(torch.cat([mean, log_var], -1), target), expected, atol=1e-5)
    expected = -torch.distributions.Normal(mean, 0.5).log_prob(target).sum(-1).mean()
    assert torch.allclose(fixed.mean_nll(mean, target), expected, atol=1e-5)
    assert hetero.raw_outputs(2) == 4 and fixed.raw_outputs(2) == 2
    assert torch.allclose(fixed.statistics(mean), torch.cat([mean, torch.full_like(mean, 0.25)], -1))
    with pytest.raises(ValueError, match="noise_variance"):
        likelihoods.Gaussian(noise_variance=0.0)
    with pytest.raises(ValueError, match="likelihood='poisson'"):
        likelihoods.resolve_likelihood("poisson")


def test_adam_update_equals_torch_adam_for_one_and_many_chains():
    torch.manual_seed(0)
    shapes = {"w": (4, 3), "b": (4,)}
    params = {k: torch.randn(s) for k, s in shapes.items()}
    reference = [torch.nn.Parameter(v.clone()) for v in params.values()]
    optimizer = torch.optim.Adam(reference, lr=3e-3)
    state = adam_init(params)
    lr = torch.tensor(3e-3)
    for step in range(1, 30):
        grads = {k: torch.randn(s) for k, s in shapes.items()}
        for p, g in zip(reference, grads.values()):
            p.grad = g.clone()
        optimizer.step()
        adam_update_(params, {k: g.clone() for k, g in grads.items()}, state, lr, *bias_corrections(step))
    for p, q in zip(reference, params.values()):
        torch.testing.assert_close(p.detach(), q, rtol=1e-5, atol=1e-7)
    # K chains with their own learning rates under vmap = K separate updates
    K = 3
    lrs = torch.tensor([1e-3, 5e-3, 2e-2])
    stacked = {k: torch.randn(K, *s) for k, s in shapes.items()}
    separate = [{k: v[i].clone() for k, v in stacked.items()} for i in range(K)]
    st_state, sep_states = adam_init(stacked), [adam_init(p) for p in separate]
    for step in range(1, 6):
        grads = {k: torch.randn(K, *s) for k, s in shapes.items()}

        def update(p, g, s, lr, step=step):
            adam_update_(p, g, s, lr, *bias_corrections(step))
            return p

        vmap(update)(stacked, {k: g.clone() for k, g in grads.items()}, st_state, lrs)
        for i in range(K):
            adam_update_(separate[i], {k: g[i].clone() for k, g in grads.items()}, sep_states[i], lrs[i],
                         *bias_corrections(step))
    for i in range(K):
        for k in shapes:
            torch.testing.assert_close(stacked[k][i], separate[i][k])


def test_skill_over_the_best_constant_is_exact_on_known_inputs():
    reference = torch.tensor([[0.0, 1.0], [0.0, 3.0], [1.0, 2.0]])  # per-column medians 0 and 2
    assert metrics.constant_mae(reference) == pytest.approx((0 + 0 + 1 + 1 + 1 + 0) / 6)
    assert metrics.skill(0.25, 0.5) == pytest.approx(0.5) and metrics.skill(0.5, 0.5) == 0.0
    assert metrics.skill(0.6, 0.5) < 0 and metrics.skill(0.1, 0.0) != metrics.skill(0.1, 0.0)  # NaN: nothing to learn
    probs = T.custom_target("probs", T.predictive_g, out_dim=lambda c: c)
    assert probs.metric_names == ("target_mae", "constant_mae", "skill")
    got = probs.evaluate(reference + 0.1, torch.zeros(3, dtype=torch.long), 2, reference)
    assert got["target_mae"] == pytest.approx(0.1) and got["skill"] == pytest.approx(1 - 0.1 / 0.5)
    assert T.check_skill("s", got) is None
    flagged = T.check_skill("s", {"target_mae": 0.5, "constant_mae": 0.5, "skill": 0.0})
    assert flagged is not None and "no better than a constant" in flagged and "(the squared error" in flagged
    assert {"skill", "student_nll_skill"} <= set(T.PREDICTIVE.metric_names)  # the built-in targets report it too


def test_a_custom_target_learns_with_its_defaults_and_a_student_that_cannot_is_flagged(digits_data):
    """A sparse expectation (class probabilities, most near 0) with custom_target's defaults beats the best
    constant by far; a student that cannot learn (a learning rate of 1e-12) is no better than a constant,
    and the run says so with a SkillWarning."""
    probs = T.custom_target("probs", T.predictive_g, out_dim=lambda c: c)
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=200,
                        burn_in=60, eval_thinning=10, log_every=200, progress=False, device="cpu")
    with pytest.warns(T.SkillWarning, match="'frozen' is no better than a constant"):
        result = distill(digits_data, config, [StudentConfig(probs, "U_o", thinning=2),
                                               StudentConfig(probs, "U_o", thinning=2, lr=1e-12, name="frozen")])
    skill = result.summary.set_index("student")["skill"]
    assert skill["probs-U_o"] > 0.5 and skill["frozen"] < T.SKILL_FLOOR


def test_a_students_skill_is_that_of_its_own_target():
    """The lowest skill of what a student is trained to reproduce (``skill``, ``*_mae_skill``); a student whose
    target has no estimate of E[g] (EnD2) by its NLL's, also in a row of a table of several students, where
    the other students' columns are NaN; a predictive student's NLL skill against the labels does not count."""
    nan = float("nan")
    assert metrics.lowest_skill({"skill": 0.9, "entropy_mae_skill": 0.3, "student_nll_skill": 0.01}) == (
        "entropy_mae_skill", 0.3)
    assert metrics.lowest_skill({"skill": nan, "entropy_mae_skill": nan, "student_nll_skill": 0.4}) == (
        "student_nll_skill", 0.4)
    assert metrics.lowest_skill({"student_nll": 1.0, "skill": nan}) is None
