"""A teacher pooled from K chains (GPEDConfig.num_chains): one ensemble and one set of students fed
by K batched chains. Known answer on Bayesian linear regression; exact pooling arithmetic (U_s the
mean over the K current samples, U_o all K samples per visit); K = 1 through the pooled code equals
the single chain exactly; each chain equals the single chain of its seed; bit-identical resume;
no host synchronisation in the step; refusals with clear messages."""

import dataclasses

import pytest
import torch
from test_batching import STUDENTS, assert_steps_read_nothing_back, assert_steps_without_host_sync, make_data
from test_regression import MomentsStudent, linear_regression_data
from torch import nn
from torch.func import functional_call

from gped_kit.core.baoa import BAOAConfig
from gped_kit.core.estimators import EstimatorState, estimator_init, pooled_estimator_update_
from gped_kit.core.likelihoods import Gaussian
from gped_kit.core.options import Estimator
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.targets import regression_moments
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, check_batchable, distill, distill_many, evaluate
from gped_kit.engine import steps as engine_steps
from gped_kit.engine.checkpoint import CheckpointError
from gped_kit.engine.config import CHAIN_SEED_STRIDE, chain_seeds
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import flat
from gped_kit.experiments.paper import ChainSettings, teacher_config
from gped_kit.models.presets import ArchSpec


def pooled_spec(k=3, students=STUDENTS, n=300, **kw):
    base = dict(model="fcnn", sampler=SGLDConfig(step_size=5e-5, prior_precision=10.0, batch_size=25),
                num_iterations=40, burn_in=10, eval_thinning=3, log_every=10, checkpoint_every=20, progress=False,
                device="cpu", seed=0, eval_batch_size=32, num_chains=k)
    base.update(kw)
    return build_chain(make_data(n), GPEDConfig(**base), list(students))


def state_tensors(engine: GPEDEngine) -> dict[str, torch.Tensor]:
    """Everything a run computes: every chain's teacher and sampler state, the students, stores, ensemble sums."""
    out = {"teacher": flat(engine.chain.params), **{f"sampler:{n}": v for n, v in engine.chain.sampler.items()}}
    for j, s in enumerate(engine.students):
        out[f"student{j}"] = flat(s.params)
        out[f"sums{j}"], out[f"counts{j}"] = s.store.sums, s.store.counts
    out.update({f"ensemble:{n}": v for n, v in engine.ensemble.sums.items()})
    out["snapshots"] = engine.snapshots
    return out


# ------------------------------------------------------------------ the estimators over pooled samples
def test_pooled_estimators_average_over_the_chains_and_count_every_sample():
    values = torch.tensor([[[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]],
                           [[3.0, 50.0], [4.0, 60.0], [5.0, 70.0]]])  # K = 2 samples, M' = 3 inputs, D = 2
    index = torch.tensor([0, 2, 0])  # input 0 visited twice in one minibatch
    assert torch.equal(pooled_estimator_update_(Estimator.U_S, estimator_init(Estimator.U_S, 4, 2), index, values),
                       torch.tensor([[2.0, 30.0], [3.0, 40.0], [4.0, 50.0]]))
    store = estimator_init(Estimator.U_O, 4, 2)
    first = pooled_estimator_update_(Estimator.U_O, store, index, values)
    assert torch.equal(store.counts, torch.tensor([4.0, 0.0, 2.0, 0.0]))  # K = 2 samples per occurrence
    assert torch.equal(store.sums[0], torch.tensor([1 + 3 + 3 + 5, 10 + 50 + 30 + 70.0]))
    assert torch.equal(first[0], first[2]) and torch.equal(first[0], torch.tensor([3.0, 40.0]))
    zeros = torch.zeros(2, 1, 2)  # K = 2 samples of g = 0 at input 2
    second = pooled_estimator_update_(Estimator.U_O, store, torch.tensor([2]), zeros)
    assert torch.equal(second, torch.tensor([[3.0 / 2, 40.0 / 2]])) and store.counts[2] == 4  # (2+4+0+0) / 4
    split = estimator_init(Estimator.U_S_U_O, 4, 2)
    out = pooled_estimator_update_(Estimator.U_S_U_O, split, index, values)
    assert torch.equal(out[:, 0], torch.tensor([2.0, 3.0, 4.0]))  # U_s column: the mean over K
    assert torch.equal(out[:, 1], torch.tensor([40.0, 40.0, 40.0])) and torch.equal(split.counts, first.new_tensor(
        [4.0, 0.0, 2.0, 0.0]))
    # K = 1 is Eqs. 9 and 10 exactly
    one = EstimatorState(torch.zeros(4, 2), torch.zeros(4))
    assert torch.equal(pooled_estimator_update_(Estimator.U_O, one, index, values[:1]),
                       torch.tensor([[2.0, 20.0], [2.0, 20.0], [2.0, 20.0]]))


# ------------------------------------------------------------------ configuration
def test_configuration_seeds_keys_and_refusals():
    config = GPEDConfig(num_chains=4, seed=7)
    assert chain_seeds(config) == [7, 7 + CHAIN_SEED_STRIDE, 7 + 2 * CHAIN_SEED_STRIDE, 7 + 3 * CHAIN_SEED_STRIDE]
    assert chain_seeds(GPEDConfig(seed=7)) == [7]
    assert "num_chains" not in GPEDConfig().record() and config.record()["num_chains"] == 4
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match=r"GPEDConfig.num_chains \(K\)="):
            GPEDConfig(num_chains=bad)
    with pytest.raises(ValueError, match="num_chains=2 needs a model the kit initialises per chain"):
        GPEDConfig(model=nn.Linear(64, 10), num_chains=2)
    pooled, single = pooled_spec(2), pooled_spec(1)
    with pytest.raises(ValueError, match=r"chain 0 is a pooled teacher \(GPEDConfig.num_chains=2\).*not supported"):
        check_batchable([pooled, single])
    with pytest.raises(ValueError, match="chain 1 is a pooled teacher"):
        check_batchable([single, pooled])
    check_batchable([pooled])
    with pytest.raises(ValueError, match="pooled teacher"):
        distill_many([(make_data(300), pooled.config, []), (make_data(300), single.config, [])])
    with pytest.raises(ValueError, match="use_vmap=False needs one chain, got 2"):
        GPEDEngine([pooled], use_vmap=False)
    with pytest.raises(ValueError, match="pooled=False: the spec pools num_chains=2"):
        GPEDEngine([pooled], pooled=False)
    with pytest.raises(ValueError, match="pooled=True needs one spec"):
        GPEDEngine([single, pooled_spec(1)], pooled=True)


def test_a_profile_asks_for_a_pooled_cyclical_teacher():
    sampler = BAOAConfig(step_size=0.4, alpha=0.5, schedule="cyclical", cycles=8, explore_fraction=0.5)
    chain = ChainSettings(48_000, None, 100, 10, 100, 1_000, 10_000, sampler=sampler, num_chains=4)
    config = teacher_config("fcnn", 60_000, chain, seed=2)
    assert config.num_chains == 4 and chain_seeds(config) == [2 + k * CHAIN_SEED_STRIDE for k in range(4)]
    assert config.sampler.horizon == 48_000 and config.sampler.in_sampling_phase(3_000)
    assert not config.sampler.in_sampling_phase(2_999) and config.burn_in == 1_000  # within the first exploration
    assert "num_chains" not in teacher_config("fcnn", 60_000, dataclasses.replace(chain, num_chains=1)).record()
    with pytest.raises(ValueError, match="num_chains=0"):
        dataclasses.replace(chain, num_chains=0)


# ------------------------------------------------------------------ K = 1 and the chains one by one
def test_one_chain_through_the_pooled_code_equals_the_single_chain_exactly():
    students = STUDENTS + (StudentConfig("predictive+entropy", "U_s+U_o", thinning=2, batch_size=20),
                           StudentConfig("predictive", "U_s", thinning=2, batch_size=20, derivative_weight=0.5,
                                         name="dm"))
    single = GPEDEngine([pooled_spec(1, students, num_snapshots=2)])
    forced = GPEDEngine([pooled_spec(1, students, num_snapshots=2)], pooled=True)
    assert forced.pooled and not single.pooled and not forced.setup.layout.batched
    rs, rf = run_engine(single)[0], run_engine(forced)[0]
    a, b = state_tensors(single), state_tensors(forced)
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert rf.history["teacher_nll_chain0"].equals(rf.history["teacher_nll"].rename("teacher_nll_chain0"))
    history = rf.history.drop(columns=["teacher_nll_chain0"])
    assert list(history.columns) == list(rs.history.columns)
    cols = [c for c in rs.history if c != "elapsed_s"]
    assert rs.history[cols].equals(history[cols])
    for name in rs.teacher_outputs:
        for target in rs.teacher_outputs[name]:
            assert torch.equal(rs.teacher_outputs[name][target], rf.teacher_outputs[name][target])
        for label in rs.student_outputs[name]:
            assert torch.equal(rs.student_outputs[name][label], rf.student_outputs[name][label])
    assert torch.equal(rs.snapshots, rf.snapshots)


def test_each_chain_is_the_single_chain_of_its_seed_and_the_ensemble_pools_them():
    spec = pooled_spec(3, num_snapshots=2)
    pooled = GPEDEngine([spec])
    singles = [GPEDEngine([pooled_spec(1, seed=s, num_snapshots=2)]) for s in chain_seeds(spec.config)]
    # the students start from the values the single chain of the run's seed starts from
    assert all(torch.equal(flat(p.params), flat(s.params)) for p, s in zip(pooled.students, singles[0].students))
    result = run_engine(pooled)[0]
    single_results = [run_engine(e)[0] for e in singles]
    for k, e in enumerate(singles):  # batched (vmap) vs one chain: equal up to round-off
        torch.testing.assert_close(flat(pooled.chain.params)[k], flat(e.chain.params)[0], rtol=0, atol=1e-5)
        for name, sums in pooled.ensemble.sums.items():
            torch.testing.assert_close(sums[k], e.ensemble.sums[name][0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(result.snapshots[2 * k:2 * k + 2], single_results[k].snapshots, rtol=0, atol=1e-5)
        chain_nll = result.history[f"teacher_nll_chain{k}"].to_numpy()
        torch.testing.assert_close(torch.tensor(chain_nll), torch.tensor(single_results[k].history["teacher_nll"]
                                                                         .to_numpy()), rtol=1e-4, atol=1e-6,
                                   equal_nan=True)  # NaN before the first sample
    assert pooled.ensemble_count == singles[0].ensemble_count
    for target, value in result.teacher_outputs["test"].items():
        mean = sum(r.teacher_outputs["test"][target] for r in single_results) / 3
        torch.testing.assert_close(value, mean, rtol=1e-4, atol=1e-6)
    # the pooled ensemble's NLL is not any single chain's
    last = result.history.iloc[-1]
    assert all(abs(last["teacher_nll"] - last[f"teacher_nll_chain{k}"]) > 1e-4 for k in range(3))
    assert result.history["teacher_samples"].iloc[-1] == 3 * pooled.ensemble_count
    assert result.summary["num_chains"].eq(3).all() and len(result.summary) == len(STUDENTS)
    assert result.snapshots.shape == (6, spec.teacher.num_params)


def test_students_learn_from_every_chain_at_each_distillation_step(monkeypatch):
    """Recompute each distillation step's targets by hand from the K chains' parameters at that step:
    the statistics are each chain's own on the run's one S'; U_s's targets are their mean over K; the
    U_o store holds every chain's g at every visit, with K counts per visit."""
    spec = pooled_spec(3)
    engine = GPEDEngine([spec])
    calls = []
    distill, update = engine_steps.pooled_distill_gradients, engine_steps.student_gradients

    def recording_distill(state, x, index, stats, *args, fns, **kwargs):
        calls.append(dict(x=x.clone(), index=index.clone(), stats=stats.clone(), fns=fns,
                          params={n: v.clone() for n, v in engine.chain.params.items()}))
        return distill(state, x, index, stats, *args, fns=fns, **kwargs)

    def recording_update(state, x, target_hat, *args, **kwargs):
        calls[-1]["target_hat"] = target_hat.clone()
        return update(state, x, target_hat, *args, **kwargs)

    monkeypatch.setattr(engine_steps, "pooled_distill_gradients", recording_distill)
    monkeypatch.setattr(engine_steps, "student_gradients", recording_update)
    run_engine(engine)
    assert len(calls) == sum(engine.adam_steps)
    sums = [torch.zeros_like(s.store.sums) for s in engine.students]
    counts = [torch.zeros_like(s.store.counts) for s in engine.students]
    for call in calls:
        j = next(j for j, f in enumerate(engine.setup.student_fns) if f is call["fns"])
        target = spec.students[j].target
        for k in range(3):
            params = {n: v[k] for n, v in call["params"].items()}
            buffers = {n: v[k] for n, v in engine.chain.buffers.items()}
            logits = functional_call(spec.teacher.eval, (params, buffers), (call["x"],))
            torch.testing.assert_close(call["stats"][k], torch.log_softmax(logits, -1), rtol=0, atol=1e-5)
        g = torch.stack([target.g(call["stats"][k]) for k in range(3)])
        if spec.students[j].estimator is Estimator.U_S:
            torch.testing.assert_close(call["target_hat"], g.mean(0), rtol=0, atol=1e-6)
        else:
            for i, index in enumerate(call["index"].tolist()):
                sums[j][0, index] += g[:, i].sum(0)
                counts[j][0, index] += 3
            torch.testing.assert_close(call["target_hat"], sums[j][0, call["index"]] / counts[j][0, call["index"],
                                                                                               None])
    for j, s in enumerate(engine.students):
        if spec.students[j].estimator.uses_store:
            assert torch.equal(s.store.counts, counts[j])
            torch.testing.assert_close(s.store.sums, sums[j], rtol=1e-5, atol=1e-5)
            assert s.store.counts.sum() == 3 * engine.adam_steps[j] * spec.students[j].config.batch_size


# ------------------------------------------------------------------ known answer
def sgld_stationary_moments(phi: torch.Tensor, y: torch.Tensor, sigma2: float, tau: float, eta: float,
                            batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact stationary mean and covariance of the engine's SGLD (Eq. 7) on Bayesian linear
    regression with known noise variance: minibatches of ``batch_size`` drawn *with replacement*
    (multinomial counts c), so the step ``z' = G(c) z + sqrt(eta) (xi, 0)`` on z = (theta, 1) is affine
    in c and the second moments Z = E[z z^T] solve ``Z = E[G Z G^T] + eta diag(1, 1, 0)`` with
    E[c_i] = M / N, E[c_i c_j] = M (M - 1) / N^2 + [i = j] M / N. The mean is the posterior's; the
    minibatch noise adds 2-5% to the epistemic variance here over the full-batch law
    (A (I - eta A / 4))^-1, and ~1% of variance is what this test resolves."""
    n, m = phi.shape[0], batch_size
    scale = eta * n / (2 * m * sigma2)
    g0 = torch.eye(3, dtype=torch.float64)
    g0[:2, :2] *= 1 - eta * tau / 2
    gs = torch.zeros(n, 3, 3, dtype=torch.float64)
    gs[:, :2, :2] = -scale * phi[:, :, None] * phi[:, None, :]
    gs[:, :2, 2] = scale * phi * y[:, None]
    total = gs.sum(0)
    # row-major vec: vec(A Z B^T) = kron(A, B) vec(Z)
    step = (torch.kron(g0, g0) + m / n * (torch.kron(total, g0) + torch.kron(g0, total))
            + m * (m - 1) / n ** 2 * torch.kron(total, total) + m / n * sum(torch.kron(g, g) for g in gs))
    system, rhs = torch.eye(9, dtype=torch.float64) - step, torch.diag(torch.tensor([eta, eta, 0.0])).double().ravel()
    system[8], rhs[8] = 0.0, 1.0  # z_3 = 1: E[z_3^2] = 1 (its own equation is 1 = 1)
    system[8, 8] = 1.0
    second = torch.linalg.solve(system, rhs).reshape(3, 3)
    mean = second[:2, 2]
    return mean, second[:2, :2] - torch.outer(mean, mean)


def test_sgld_stationary_moments_include_the_minibatch_noise():
    """The reference law above against its limits: batch noise vanishes for identical data points
    (the full-batch law then holds exactly), and it inflates the variance otherwise."""
    gen = torch.Generator().manual_seed(0)
    phi, y = torch.randn(20, 2, generator=gen).double(), torch.randn(20, generator=gen).double()
    sigma2, tau, eta = 0.25, 1.0, 3e-3
    same_phi, same_y = phi[:1].repeat(20, 1), y[:1].repeat(20)
    mean, cov = sgld_stationary_moments(same_phi, same_y, sigma2, tau, eta, batch_size=20)
    a = tau * torch.eye(2, dtype=torch.float64) + same_phi.T @ same_phi / sigma2
    evals, evecs = torch.linalg.eigh(a)
    torch.testing.assert_close(cov, evecs @ torch.diag(1 / (evals * (1 - eta * evals / 4))) @ evecs.T)
    torch.testing.assert_close(mean, torch.linalg.solve(a, same_phi.T @ same_y / sigma2))
    mean, cov = sgld_stationary_moments(phi, y, sigma2, tau, eta, batch_size=20)
    a = tau * torch.eye(2, dtype=torch.float64) + phi.T @ phi / sigma2
    evals, evecs = torch.linalg.eigh(a)
    full = evecs @ torch.diag(1 / (evals * (1 - eta * evals / 4))) @ evecs.T
    torch.testing.assert_close(mean, torch.linalg.solve(a, phi.T @ y / sigma2))
    assert (torch.linalg.eigvalsh(cov - full) > 0).all()  # the batch noise only adds variance


@pytest.mark.slow  # about 35 s: in make test-slow
def test_pooled_teacher_and_students_recover_the_bayesian_linear_regression_posterior():
    """Bayesian linear regression (as tests/test_regression.py): K = 64 chains of 4,000 SGLD steps
    pooled into one teacher, against the chain's exact stationary law (:func:`sgld_stationary_moments`,
    minibatch noise included).

    * The pooled ensemble's predictive mean and epistemic variance match it to < 1% (0.5% of a
      posterior sd and 0.7% of the variance here); the tolerances (1.5% sd, 2%) are ~3 times that, and
      a pooling that used one chain's samples fails them: every chain's own ensemble, with 1/64 of the
      samples, misses one (their errors are ~8 times the pool's).
    * U_o's store counts K samples per visit (counts += 1 would make every estimate 64 times too
      large), and the U_o students' predictive means are as close as the pooled ensemble's.
    * The U_s student's targets are the mean of the 64 current samples, which wander by ~sd / 8 around
      E[mu] (the chains' samples are correlated over ~30 steps), so it tracks the mean to ~0.15 sd
      (one chain's current sample alone: ~1 sd).
    * The variance student's epistemic variance (a quadratic form fitted by Adam) is within 15% of the
      largest variance: its optimisation, not the Monte Carlo error, limits it."""
    n, sigma2, tau, eta, K = 20, 0.25, 1.0, 3e-3, 64
    x, y, x_test, data = linear_regression_data(n, sigma2)
    config = GPEDConfig(model=lambda out: nn.Linear(1, out), likelihood=Gaussian(noise_variance=sigma2),
                        sampler=SGLDConfig(step_size=eta, prior_precision=tau, batch_size=n),
                        num_iterations=4_000, burn_in=200, eval_thinning=1, log_every=2_000, progress=False,
                        device="cpu", num_chains=K)
    common = dict(thinning=1, batch_size=30, lr=1e-2, lr_halving_epochs=2_000)  # an epoch is one step here
    students = [StudentConfig("predictive_variance", "U_o", arch=lambda out: MomentsStudent(), **common),
                StudentConfig("predictive_mean", "U_o", arch=lambda out: nn.Linear(1, out), **common),
                StudentConfig("predictive_mean", "U_s", arch=lambda out: nn.Linear(1, out), **common)]
    engine = GPEDEngine([build_chain(data, config, students)])
    result = run_engine(engine)[0]

    mean, chain_cov = sgld_stationary_moments(torch.cat([x, torch.ones(n, 1)], 1).double(), y.double(), sigma2, tau,
                                              eta, batch_size=n)
    phi_test = torch.cat([x_test, torch.ones(41, 1)], 1).double()
    exact_mean, exact_epistemic = phi_test @ mean, ((phi_test @ chain_cov) * phi_test).sum(1)
    sd = exact_epistemic.sqrt()

    def mean_error(values: torch.Tensor) -> float:
        """The largest error of a predictive mean over the test inputs, in posterior sds."""
        return float(((values.double() - exact_mean) / sd).abs().max())

    def errors(values: torch.Tensor) -> tuple[float, float]:
        """Largest errors of the predictive mean (in sds) and of the epistemic variance (relative)."""
        moments = regression_moments(values.double())
        return (mean_error(moments.mean[:, 0]),
                float(((moments.epistemic[:, 0] - exact_epistemic) / exact_epistemic).abs().max()))

    mean_tol, var_tol = 0.015, 0.02
    pooled_mean_error, pooled_var_error = errors(result.teacher_outputs["test"]["predictive_variance"])
    assert pooled_mean_error < mean_tol and pooled_var_error < var_tol, (pooled_mean_error, pooled_var_error)
    chain_errors = [errors(evaluate.chain_ensemble_means(engine.state, engine.setup, k)["predictive_variance"])
                    for k in range(K)]
    assert all(m > mean_tol or v > var_tol for m, v in chain_errors), chain_errors
    assert sum(m for m, _ in chain_errors) / K > 5 * pooled_mean_error
    assert sum(v for _, v in chain_errors) / K > 5 * pooled_var_error

    store = engine.students[0].store
    assert store.counts.sum() == K * 30 * engine.adam_steps[0] and torch.equal(store.counts % K, 0 * store.counts)
    moments = regression_moments(result.student_outputs["test"]["predictive_variance-U_o"].double())
    assert mean_error(moments.mean[:, 0]) < mean_tol
    assert mean_error(result.student_outputs["test"]["predictive_mean-U_o"][:, 0]) < mean_tol
    assert mean_error(result.student_outputs["test"]["predictive_mean-U_s"][:, 0]) < 0.3
    assert (moments.epistemic[:, 0] - exact_epistemic).abs().max() < 0.15 * exact_epistemic.max()
    assert (moments.aleatoric[:, 0] - sigma2).abs().max() < 0.01 * sigma2


# ------------------------------------------------------------------ resume, memory, synchronisation
@pytest.mark.parametrize("sampler", [None, BAOAConfig(step_size=0.05, alpha=0.3, batch_size=25, schedule="cyclical",
                                                      cycles=2, explore_fraction=0.4)], ids=["sgld", "baoa-cyclical"])
def test_pooled_run_resumes_bit_identically(tmp_path, sampler):
    students = STUDENTS + (StudentConfig("predictive", "U_s", thinning=2, batch_size=20,
                                         arch=ArchSpec("fcnn", dropout=0.5), name="dropout"),)
    kw = dict(num_snapshots=2) if sampler is None else dict(sampler=sampler, num_snapshots=2)
    full = GPEDEngine([pooled_spec(3, students, **kw)])
    full_result = run_engine(full)[0]
    ckpt = tmp_path / "pooled.pt"
    partial = run_engine(GPEDEngine([pooled_spec(3, students, **kw)]), [ckpt], max_steps=23)[0]
    assert not partial.finished and ckpt.exists()
    resumed = GPEDEngine([pooled_spec(3, students, **kw)])  # a fresh engine, as in a new process
    result = run_engine(resumed, [ckpt])[0]
    assert resumed.resumed_from == 23 and result.finished
    a, b = state_tensors(full), state_tensors(resumed)
    assert all(torch.equal(a[name], b[name]) for name in a), [n for n in a if not torch.equal(a[n], b[n])]
    assert full.teacher_metrics(0) == resumed.teacher_metrics(0)
    assert evaluate.chain_metrics(full.state, full.setup) == evaluate.chain_metrics(resumed.state, resumed.setup)
    regular = result.history[result.history["step"] != 23].reset_index(drop=True)
    evaluation = [c for c in full_result.history if c != "elapsed_s" and "train" not in c]
    assert full_result.history[evaluation].equals(regular[evaluation])
    # a pooled checkpoint resumes only a pooled run of the same configuration
    with pytest.raises(CheckpointError, match="another configuration"):
        run_engine(GPEDEngine([pooled_spec(2, students, **kw)]), [ckpt])
    single = tmp_path / "single.pt"
    run_engine(GPEDEngine([pooled_spec(1, students, **kw)]), [single], max_steps=5)
    with pytest.raises(CheckpointError, match="made by a single run"):
        run_engine(GPEDEngine([pooled_spec(1, students, **kw)], pooled=True), [single])


def test_memory_holds_k_chains_and_one_set_of_students():
    single, pooled = GPEDEngine([pooled_spec(1)]), GPEDEngine([pooled_spec(4)])
    a, b = single.memory_bytes(), pooled.memory_bytes()
    assert b["students"] == a["students"] and b["u_o_stores"] == a["u_o_stores"]
    assert b["teacher"] == 4 * a["teacher"] and b["ensemble"] == 4 * a["ensemble"]
    assert pooled.setup.train_sets.unique_count == 1 and pooled.eval_sets.unique_count == 1  # the data once


def test_pooled_step_reads_nothing_back_from_the_device(monkeypatch):
    students = STUDENTS + (StudentConfig("predictive", "U_s", thinning=2, batch_size=20, derivative_weight=0.5,
                                         name="dm"),)
    engine = GPEDEngine([pooled_spec(3, students)])
    assert_steps_read_nothing_back(engine, monkeypatch)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_pooled_loop_has_no_host_synchronisation():
    students = STUDENTS + (StudentConfig("predictive", "U_s", thinning=2, batch_size=20, derivative_weight=0.5,
                                         name="dm"),)
    assert_steps_without_host_sync(GPEDEngine([pooled_spec(3, students, device="cuda")]))


def test_distill_runs_a_pooled_teacher_like_a_single_chain():
    result = distill(make_data(300), pooled_spec(2).config, [StudentConfig("predictive", "U_s", thinning=2,
                                                                           batch_size=20)])
    assert result.finished and list(result.summary["student"]) == ["predictive-U_s"]
    assert {"teacher_nll", "teacher_nll_chain0", "teacher_nll_chain1", "student_nll"} <= set(result.summary)
    assert result.target("predictive-U_s").name == "predictive" and result.spec.config.num_chains == 2
