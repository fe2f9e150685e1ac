"""The teacher samplers beyond SGLD (SGHMC, SGNHT, BAOA): known answers, equality with the
``posteriors`` library's update, per-chain coefficients under vmap, and the engine around them
(batched = sequential, resume, warm-up, the recent-window ensemble, validation)."""

import dataclasses
import warnings

import numpy as np
import pytest
import torch
from torch.func import vmap

from gped_kit.core.baoa import BAOAConfig
from gped_kit.core.sampler import FLAT_MOMENTA, SamplerName, StateKey, StateKind, momentum_key
from gped_kit.core.samplers import SAMPLERS, sampler_config
from gped_kit.core.sghmc import SGHMCConfig
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.sgnht import THERMOSTAT_KEY, SGNHTConfig
from gped_kit.engine import GPEDConfig, GPEDEngine, check_batchable
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import flat
from gped_kit.engine.window import RecentWindow

MOMENTUM = [SGHMCConfig, SGNHTConfig, BAOAConfig]


# ------------------------------------------------------------------ exact discrete stationary laws
def linear_step(config, a, temperature, friction=None):
    """(A, B) of one step on the quadratic mean NLL a theta^2 / 2 (tau = 0), per coordinate:
    x_{t+1} = A x_t + B xi_t with x = (theta, m)."""
    eps, p = config.step_size, config.sigma ** -2
    if isinstance(config, BAOAConfig):
        gamma = config.alpha * p
        d, h = np.exp(-gamma * eps), eps * p / 2
        s = config.sigma * np.sqrt(temperature * (1 - np.exp(-2 * gamma * eps)))
        return (np.array([[1 - h * eps * a * (1 + d), h * (1 + d)], [-d * eps * a, d]]), np.array([h * s, s]))
    alpha = config.alpha if friction is None else friction
    s = np.sqrt(eps * temperature * (2 * config.alpha - eps * config.beta * temperature))
    return np.array([[1.0, eps * p], [-eps * a, 1 - eps * p * alpha]]), np.array([0.0, s])


def stationary_covariance(A, B):
    """The solution of Sigma = A Sigma A^T + B B^T (discrete Lyapunov), exactly."""
    n = A.shape[0]
    vec = np.linalg.solve(np.eye(n * n) - np.kron(A, A), np.outer(B, B).ravel())
    return vec.reshape(n, n)


def sgnht_fixed_point(config, a, temperature):
    """The thermostat value xi* at which the linear chain's momentum variance is sigma^2 T (the
    thermostat's equilibrium for many coordinates), and the chain's covariance there."""
    lo, hi = 1e-6, 2.0 / (config.step_size * config.sigma ** -2)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        cov = stationary_covariance(*linear_step(config, a, temperature, friction=mid))
        lo, hi = (mid, hi) if cov[1, 1] > config.sigma ** 2 * temperature else (lo, mid)
    return mid, stationary_covariance(*linear_step(config, a, temperature, friction=mid))


def run_quadratic(config, a, temperature, n=20_000, steps=3_000, keep_from=1_000, seed=0):
    """Iterate ``config.update_`` on n independent coordinates of the mean NLL a theta^2 / 2."""
    gen = torch.Generator().manual_seed(seed)
    params = {"w": torch.zeros(n, dtype=torch.float64)}
    state = {k: v.to(torch.float64) for k, v in config.init_state(params).items()}
    coefficients = torch.tensor([0.0, temperature], dtype=torch.float64)
    second, xis = [], []
    for t in range(steps):
        grads = {"w": a * params["w"].clone()}
        noise = {"w": torch.randn(n, generator=gen, dtype=torch.float64)}
        config.update_(params, state, grads, noise, coefficients, config.scales(t))
        if t >= keep_from:
            w, m = params["w"], state[momentum_key("w")]
            second.append(torch.stack([(w * w).mean(), (w * m).mean(), (m * m).mean(), w.mean()]))
            if THERMOSTAT_KEY in state:
                xis.append(float(state[THERMOSTAT_KEY]))
    return torch.stack(second).mean(0).tolist(), (float(np.mean(xis)) if xis else None)


@pytest.mark.parametrize("config", [SGHMCConfig(step_size=0.3, alpha=1.0, beta=0.5),
                                    BAOAConfig(step_size=0.6, alpha=1.0, sigma=0.8)], ids=["sghmc", "baoa"])
def test_linear_chain_has_the_exact_discrete_stationary_law(config):
    a, temperature = 2.0, 0.5
    cov = stationary_covariance(*linear_step(config, a, temperature))
    continuum = np.diag([temperature / a, config.sigma ** 2 * temperature])  # the epsilon -> 0 law
    # the discretisation's own law differs from the continuum's, so a wrong update would show (BAOA's
    # theta- and m-variances are exact for a Gaussian, a known property, but theta and m correlate)
    assert np.abs(cov - continuum).max() / np.sqrt(cov[0, 0] * cov[1, 1]) > 0.1
    (ww, wm, mm, mean), _ = run_quadratic(config, a, temperature)
    assert abs(mean) < 0.01
    assert ww == pytest.approx(cov[0, 0], rel=0.025)
    assert mm == pytest.approx(cov[1, 1], rel=0.025)
    assert wm == pytest.approx(cov[0, 1], abs=0.025 * np.sqrt(cov[0, 0] * cov[1, 1]))


def test_sgnht_thermostat_settles_where_the_kinetic_energy_matches_the_temperature():
    config = SGNHTConfig(step_size=0.3, alpha=0.3)
    a, temperature = 2.0, 0.5
    xi_star, cov = sgnht_fixed_point(config, a, temperature)
    (ww, _, mm, _), xi = run_quadratic(config, a, temperature, steps=4_000, keep_from=2_000)
    assert xi == pytest.approx(xi_star, rel=0.05)
    assert mm == pytest.approx(config.sigma ** 2 * temperature, rel=0.03)
    assert ww == pytest.approx(cov[0, 0], rel=0.03)
    assert abs(xi_star - config.alpha) > 0.1  # the thermostat moved away from its start


def test_small_steps_sample_the_posterior():
    """As epsilon -> 0 every sampler's theta-variance tends to the posterior's T / a."""
    a, temperature = 1.0, 1.0
    for cls in MOMENTUM:
        config = cls(step_size=0.01, alpha=1.0)
        if cls is SGNHTConfig:
            _, cov = sgnht_fixed_point(config, a, temperature)
        else:
            cov = stationary_covariance(*linear_step(config, a, temperature))
        assert cov[0, 0] == pytest.approx(temperature / a, rel=0.02), cls.__name__


# ------------------------------------------------------------------ the posteriors library's update
def posteriors_module(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import posteriors.sgmcmc as sgmcmc  # noqa: PLC0415 -- heavy optional import, only here
    return getattr(sgmcmc, name)


@pytest.mark.parametrize("name", ["sghmc", "sgnht", "baoa"])
def test_two_steps_equal_the_posteriors_update(name, monkeypatch):
    """Two steps on a minibatch of a logistic model equal ``posteriors``' update with the same
    draws, in its per-datum convention (log_post = -(L + tau |theta|^2 / 2N), T = 1 / N)."""
    torch.manual_seed(0)
    x, y = torch.randn(16, 3), torch.randint(0, 2, (16,)).float()
    num_data, tau = 50, 3.0
    params = {"w": torch.randn(3), "b": torch.randn(())}

    def mean_nll(p):
        return torch.nn.functional.binary_cross_entropy_with_logits(x @ p["w"] + p["b"], y)

    config = sampler_config(name, step_size=0.05, alpha=0.7, sigma=1.3, prior_precision=tau,
                            **({} if name == "baoa" else {"beta": 0.2}))
    draws = [{"w": torch.randn(3), "b": torch.randn(())} for _ in range(2)]
    momenta = {"w": torch.randn(3), "b": torch.randn(())}  # both start from the same non-zero momenta

    # ours
    ours = {k: v.clone() for k, v in params.items()}
    state = config.init_state(ours)
    for k, m in momenta.items():
        state[momentum_key(k)].copy_(m)
    coefficients = torch.tensor(config.coefficients(num_data))
    for t, d in enumerate(draws):
        leaf = {k: v.detach().requires_grad_(True) for k, v in ours.items()}
        grads = dict(zip(leaf, torch.autograd.grad(mean_nll(leaf), list(leaf.values()))))
        config.update_(ours, state, grads, {k: v.clone() for k, v in d.items()}, coefficients, config.scales(t))

    # posteriors, with torch.randn_like returning the same draws (matched by shape)
    module = posteriors_module(name)
    queue = list(draws)

    def fake_randn_like(m, *args, **kwargs):
        return queue[0]["w" if m.dim() == 1 else "b"].clone()

    monkeypatch.setattr(torch, "randn_like", fake_randn_like)

    def log_posterior(p, batch):
        value = -(mean_nll(p) + tau * sum((v ** 2).sum() for v in p.values()) / (2 * num_data))
        return value, value

    options = dict(lr=0.05, alpha=0.7, sigma=1.3, temperature=1.0 / num_data,
                   momenta={k: m.clone() for k, m in momenta.items()})
    if name != "baoa":
        options["beta"] = 0.2
    transform = module.build(log_posterior, **options)
    theirs = transform.init({k: v.clone() for k, v in params.items()})
    for _ in draws:
        theirs, _ = transform.update(theirs, None)
        queue.pop(0)
    for k in params:
        torch.testing.assert_close(ours[k], theirs.params[k], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(state[momentum_key(k)], theirs.momenta[k], rtol=1e-5, atol=1e-6)
    if name == "sgnht":
        torch.testing.assert_close(state[THERMOSTAT_KEY], torch.as_tensor(theirs.xi, dtype=torch.float32),
                                   rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cls", MOMENTUM, ids=lambda c: c.name.value)
def test_update_under_vmap_gives_each_chain_its_own_coefficients(cls):
    """Chains with different N and tau in one vmapped update equal separate updates."""
    config = cls(step_size=0.05, alpha=0.5)
    torch.manual_seed(1)
    K = 3
    params = {"w": torch.randn(K, 4, 2), "b": torch.randn(K, 2)}
    per_chain = [config.init_state({n: v[k] for n, v in params.items()}) for k in range(K)]
    state = {n: torch.stack([s[n] for s in per_chain]) for n in per_chain[0]}
    for v in state.values():
        v.normal_()
    grads = {k: torch.randn_like(v) for k, v in params.items()}
    noise = {k: torch.randn_like(v) for k, v in params.items()}
    coefficients = torch.tensor([cls(prior_precision=tau).coefficients(n) for tau, n in ((1.0, 10), (5.0, 100),
                                                                                          (0.0, 1000))])
    separate = []
    for k in range(K):
        p = {n: v[k].clone() for n, v in params.items()}
        s = {n: v[k].clone() for n, v in state.items()}
        config.update_(p, s, {n: v[k].clone() for n, v in grads.items()}, {n: v[k].clone() for n, v in noise.items()},
                       coefficients[k], config.scales(0))
        separate.append((p, s))

    def one(p, s, g, z, c):
        config.update_(p, s, g, z, c, config.scales(0))
        return p, s

    batched_p, batched_s = vmap(one)(params, state, grads, noise, coefficients)
    for k, (p, s) in enumerate(separate):
        for n in p:
            torch.testing.assert_close(batched_p[n][k], p[n])
        for n in s:
            torch.testing.assert_close(batched_s[n][k], s[n])


# ------------------------------------------------------------------ configuration
def test_factory_names_options_and_errors():
    assert set(SAMPLERS) == set(SamplerName)
    assert isinstance(sampler_config("sgld"), SGLDConfig)
    assert sampler_config("baoa", alpha=0.1).alpha == 0.1
    with pytest.raises(ValueError, match=r"sampler='hmc' is not known; allowed: \['sgld', 'sghmc', 'sgnht', 'baoa'\]"):
        sampler_config("hmc")
    with pytest.raises(ValueError, match=r"'sgld' has no option\(s\) \['alpha'\]"):
        sampler_config("sgld", alpha=0.1)
    with pytest.raises(ValueError, match=r"SGHMCConfig.alpha=-1"):
        SGHMCConfig(alpha=-1)
    with pytest.raises(ValueError, match=r"warmup_factor=0.5: must be >= 1"):
        SGLDConfig(warmup_steps=10, warmup_factor=0.5)
    # keys: SGLD records only its non-default fields (old keys stay); others add their name
    assert SGLDConfig().record() == {} and SGLDConfig(step_size=1e-5).record() == {"step_size": 1e-5}
    assert SGHMCConfig().record() == {"sampler": "sghmc"} != SGNHTConfig().record()


def test_baoa_refuses_the_beta_it_does_not_read():
    """BAOA ignores beta: a non-default one is refused at construction (it would only change the result key);
    the default keeps working and its key is unchanged."""
    assert BAOAConfig().record() == BAOAConfig(beta=0.0).record() == {"sampler": "baoa"}
    assert sampler_config("baoa").record() == {"sampler": "baoa"}
    for beta in (0.7, 1e-9):
        with pytest.raises(ValueError, match=rf"BAOAConfig.beta={beta!r} is not read by BAOA .*allowed: the default "
                                             r"0.0 \(leave beta out\)"):
            BAOAConfig(beta=beta)
    with pytest.raises(ValueError, match=r"BAOAConfig.beta=0.7 is not read"):
        sampler_config("baoa", beta=0.7)
    assert SGHMCConfig(beta=0.7).record() == {"beta": 0.7, "sampler": "sghmc"}  # the samplers that read it keep it


@pytest.mark.parametrize("name", list(SamplerName))
def test_every_state_key_is_a_typed_key_whose_text_is_the_checkpoint_format(name):
    params = {"fc1.weight": torch.zeros(2, 3), "fc1.bias": torch.zeros(2)}
    state = sampler_config(name).init_state(params)
    keys = {StateKey.parse(k) for k in state}
    assert {str(k) for k in keys} == set(state)  # the text round-trips: checkpoints keep their keys
    momenta = {k.param for k in keys if k.kind is StateKind.MOMENTUM}
    assert momenta == (set() if name == SamplerName.SGLD else set(params))
    assert (StateKey(StateKind.THERMOSTAT) in keys) == (name == SamplerName.SGNHT)
    assert momentum_key("fc1.weight") == "m:fc1.weight" and FLAT_MOMENTA == "m:*" and THERMOSTAT_KEY == "xi"
    assert StateKey.parse("m:*").param == "*"


def test_state_keys_refuse_what_no_sampler_writes():
    with pytest.raises(ValueError, match=r"sampler state key 'v:fc1.weight': .*allowed: 'm':<parameter>, 'xi'"):
        StateKey.parse("v:fc1.weight")
    with pytest.raises(ValueError, match="names its parameter"):
        StateKey(StateKind.MOMENTUM)
    with pytest.raises(ValueError, match="has no parameter"):
        StateKey(StateKind.THERMOSTAT, "fc1.weight")


def test_warm_up_starts_larger_and_ends_at_the_step_size():
    config = SGLDConfig(step_size=1e-6, warmup_steps=100, warmup_factor=8.0)
    assert config.step_size_at(0) == pytest.approx(8e-6)
    assert config.step_size_at(50) == pytest.approx(8e-6 ** 0.5 * 1e-6 ** 0.5)  # geometric midpoint
    assert config.step_size_at(100) == config.step_size_at(10_000) == 1e-6
    assert config.scales(0) == pytest.approx((1.0, 8.0, 8.0 ** 0.5))
    warm = SGHMCConfig(step_size=0.1, warmup_steps=10, warmup_factor=2.0)
    assert warm.scales(0) == warm.factors(0.2) and warm.scales(0)[:2] == pytest.approx((0.2, -0.2))
    assert SGLDConfig(warmup_steps=10).varies is False  # factor 1: nothing changes


# ------------------------------------------------------------------ the recent-window ensemble
def test_recent_window_covers_the_latest_half_to_three_quarters_exactly():
    window = RecentWindow()
    sums = {"p": torch.zeros(1, 1, 1)}
    for count in range(1, 41):
        sums["p"] += count  # sample number `count` contributes its own index
        window.advance(count, sums)
        start = window.start_count
        assert (count == 1 or count / 4 < start) and start <= count / 2, (count, start)
        expected = np.mean(np.arange(start + 1, count + 1))
        assert float(window.means(0, count, sums)["p"]) == pytest.approx(expected)


# ------------------------------------------------------------------ through the engine
def engine_chains(sampler_cls, k=3, **sampler_options):
    """k chains differing in N, prior precision and seed, one momentum sampler for all."""
    from test_batching import STUDENTS, make_data  # noqa: PLC0415 -- the batching tests' tiny real data

    out = []
    for i, (n, tau) in enumerate(((300, 10.0), (500, 1.0), (800, 0.0))[:k]):
        sampler = sampler_cls(prior_precision=tau, batch_size=25, **sampler_options)
        cfg = GPEDConfig(model="fcnn", sampler=sampler, num_iterations=40, burn_in=10, eval_thinning=3, log_every=10,
                         checkpoint_every=20, progress=False, device="cpu", seed=i, eval_batch_size=32)
        out.append(build_chain(make_data(n), cfg, list(STUDENTS)))
    return out


@pytest.mark.parametrize("cls", MOMENTUM, ids=lambda c: c.name.value)
def test_batched_chains_equal_separate_chains(cls):
    from test_batching import assert_engines_match, assert_results_match  # noqa: PLC0415

    options = dict(step_size=0.05, alpha=0.3, warmup_steps=8, warmup_factor=2.0)
    batched = GPEDEngine(engine_chains(cls, **options))
    singles = [GPEDEngine([s]) for s in engine_chains(cls, **options)]
    results_b = run_engine(batched)
    results_s = [run_engine(e)[0] for e in singles]
    # the teachers agree to round-off; a student's Adam step can turn round-off in a near-zero
    # gradient element into a fraction of its lr (1e-3), as in the SGLD batching tests
    assert_engines_match(batched, singles, atol=1e-6, student_atol=5e-4)
    for k, (rb, rs) in enumerate(zip(results_b, results_s)):
        assert_results_match(rb, rs, rtol=1e-3)
        for name, value in singles[k].chain.sampler.items():
            torch.testing.assert_close(batched.chain.sampler[name][k], value[0], atol=1e-5, rtol=0)
    h = results_s[0].history
    assert {"teacher_nll", "teacher_recent_nll", "teacher_recent_from_sample"} <= set(h.columns)
    assert results_s[0].summary["sampler"].eq(cls.name.value).all()


def test_sgnht_resume_equals_uninterrupted_run(tmp_path):
    full = GPEDEngine(engine_chains(SGNHTConfig, k=1, step_size=0.05, alpha=0.3))
    run_engine(full)
    ckpt = tmp_path / "run.pt"
    run_engine(GPEDEngine(engine_chains(SGNHTConfig, k=1, step_size=0.05, alpha=0.3)), [ckpt], max_steps=23)
    resumed = GPEDEngine(engine_chains(SGNHTConfig, k=1, step_size=0.05, alpha=0.3))
    run_engine(resumed, [ckpt])
    assert resumed.resumed_from == 23
    assert torch.equal(flat(full.chain.params), flat(resumed.chain.params))
    for name, value in full.chain.sampler.items():
        assert torch.equal(value, resumed.chain.sampler[name]), name
    assert full.teacher_metrics(0) == resumed.teacher_metrics(0)


def test_engine_validation_names_the_field():
    from test_batching import make_data  # noqa: PLC0415

    with pytest.raises(ValueError, match=r"warmup_steps=50 must be <= burn_in=10"):
        GPEDConfig(sampler=SGLDConfig(warmup_steps=50, warmup_factor=2.0), num_iterations=40, burn_in=10)
    assert isinstance(GPEDConfig(sampler="baoa").sampler, BAOAConfig)
    with pytest.raises(ValueError, match=r"chain 1 differs from chain 0 in sampler"):
        a = engine_chains(SGHMCConfig, k=1, step_size=0.05)
        b = engine_chains(SGHMCConfig, k=1, step_size=0.06)
        check_batchable(a + b)
    # SGLD chains may differ in step size (a per-chain coefficient), momentum samplers may not
    cfgs = [GPEDConfig(sampler=SGLDConfig(step_size=s, batch_size=25), num_iterations=40, burn_in=10,
                       progress=False, device="cpu") for s in (1e-5, 2e-5)]
    check_batchable([build_chain(make_data(300), c, []) for c in cfgs])
    with pytest.raises(FloatingPointError, match=r"SGHMC diverged before step \d+.*SGHMCConfig.*lower its step_size"):
        run_engine(GPEDEngine(engine_chains(SGHMCConfig, k=1, step_size=50.0, alpha=0.01)))


# ------------------------------------------------------------------ the study's tables (notebook 10)
def test_study_table_known_answer_and_tasks():
    import pandas as pd  # noqa: PLC0415

    from gped_kit.experiments import samplers  # noqa: PLC0415
    from gped_kit.experiments.paper import ChainSettings, teacher_config  # noqa: PLC0415

    rows = []
    for candidate, base in (("A", 0.10), ("B", 0.20)):
        for seed in (0, 1):
            for step in (100, 200):
                common = dict(candidate=candidate, seed=seed, step=step, elapsed_s=step / 10 + seed,
                              teacher_nll=base + seed * 0.01 + (0.5 if step == 100 else 0.0),
                              teacher_recent_nll=base - 0.01)
                rows.append(dict(common, student=samplers.STUDENT_LABELS[0], student_nll=2 * base + seed * 0.02,
                                 entropy_mae=float("nan")))
                rows.append(dict(common, student=samplers.STUDENT_LABELS[1], student_nll=float("nan"),
                                 entropy_mae=base / 10))
    table = samplers.study_table(pd.DataFrame(rows)).set_index("candidate")
    assert list(table.index) == ["A", "B"] and (table["seeds"] == 2).all()
    assert table.loc["A", "teacher NLL"] == pytest.approx(0.105)  # last step only, mean over the seeds
    assert table.loc["B", "student NLL"] == pytest.approx(0.41)
    assert table.loc["A", "seconds"] == pytest.approx(20.5)
    assert table.loc["A", "teacher NLL: ours / paper"] == pytest.approx(0.105 / 0.052)
    assert table.loc["B", "entropy MAE: ours / paper"] == pytest.approx(0.02 / 0.016)
    with pytest.raises(ValueError, match="no finished run"):
        samplers.study_table(pd.DataFrame())
    # one task per (seed, candidate), each with its own sampler; names resolve through the factory
    settings = samplers.PROFILES["default"]
    tasks = samplers.sampler_study_tasks(settings, device="cpu")
    assert [t.config.sampler for t in tasks] == [s for _, s, _ in settings.candidates] * len(settings.seeds)
    assert [t.config.seed for t in tasks] == [seed for seed in settings.seeds for _ in settings.candidates]
    assert tasks[1].config.sampler.warmup_steps == 1_000 <= tasks[1].config.burn_in
    # pooled candidates at equal work: K chains of T / K steps each; T must be a multiple of K
    pooling = samplers.sampler_study_tasks(samplers.PROFILES["pooling"], device="cpu")
    assert {(t.config.num_chains, t.config.num_iterations) for t in pooling} == {
        (1, 48_000), (2, 24_000), (4, 12_000), (8, 6_000)}
    with pytest.raises(ValueError, match="must be a multiple of its num_chains=7"):
        dataclasses.replace(samplers.PROFILES["pooling"], candidates=(("odd", BAOAConfig(), 7),))
    chain = ChainSettings(100, 10, 1, 1, 1, 10, 10, sampler="baoa")
    assert isinstance(teacher_config("fcnn", 60_000, chain).sampler, BAOAConfig)
    with pytest.raises(ValueError, match="exceeds the profile's burn_in"):
        samplers.SamplerStudySettings(num_iterations=100, burn_in=10, predictive_thinning=1, entropy_thinning=1,
                                      eval_thinning=1, log_every=10, checkpoint_every=10)


def test_study_winners_name_the_lowest_candidate_and_whether_seeds_separate_it():
    import pandas as pd  # noqa: PLC0415

    from gped_kit.experiments import samplers  # noqa: PLC0415

    def history(teacher: dict[str, list[float]]) -> pd.DataFrame:
        rows = []
        for candidate, values in teacher.items():
            for seed, value in enumerate(values):
                common = dict(candidate=candidate, seed=seed, step=100, elapsed_s=1.0, teacher_nll=value,
                              teacher_recent_nll=value)
                rows.append(dict(common, student=samplers.STUDENT_LABELS[0], student_nll=2 * value,
                                 entropy_mae=float("nan"), skill=skills.get(candidate, 0.5)))
                rows.append(dict(common, student=samplers.STUDENT_LABELS[1], student_nll=float("nan"),
                                 entropy_mae=0.1 - value, skill=skills.get(candidate, 0.5)))
        return pd.DataFrame(rows)

    skills: dict[str, float] = {}

    # A is lowest by 0.0001 but its seeds scatter by 0.002: not separated; A wins 2 of 3 seeds
    close = samplers.study_winners(history({"A": [0.0900, 0.0920, 0.0910], "B": [0.0911, 0.0908, 0.0914],
                                            "C": [0.2, 0.2, 0.2]})).set_index("quantity")
    row = close.loc["teacher NLL"]
    assert (row["winner"], row["runner_up"], row["seeds"], row["separated"]) == ("A", "B", 3, "no")
    assert row["winner_mean"] == pytest.approx(0.0910) and row["gap"] == pytest.approx(0.0001)
    assert row["winner_std"] == pytest.approx(0.001)
    assert row["seed_winners"] == "A 2, B 1 (of 3 seeds)"
    assert row["gap_std"] == pytest.approx(float(np.std([0.0011, -0.0012, 0.0004], ddof=1)))
    # the seeds pair the candidates: B behind A by 0.001 in every seed is separated, though each candidate's
    # seeds scatter by 0.005 (their mean +- std intervals overlap); the same gap in one seed only, 0 in the
    # others, is not
    paired = samplers.study_winners(history({"A": [0.090, 0.095, 0.100], "B": [0.091, 0.096, 0.101]}))
    row = paired.set_index("quantity").loc["teacher NLL"]
    assert (row["winner"], row["separated"]) == ("A", "yes") and row["gap"] == pytest.approx(0.001)
    assert row["gap_std"] == pytest.approx(0.0, abs=1e-12)
    once = samplers.study_winners(history({"A": [0.090, 0.095, 0.100], "B": [0.093, 0.095, 0.100]}))
    assert once.set_index("quantity").loc["teacher NLL", "separated"] == "no"
    # entropy MAE = 0.1 - teacher NLL: the order reverses, C is lowest by far and separated
    assert close.loc["entropy MAE", "winner"] == "C" and close.loc["entropy MAE", "separated"] == "yes"
    # C's students not known to beat the best constant (skill not stored), then below the floor: no evidence
    for skill in (float("nan"), 0.01):
        skills["C"] = skill
        weak = samplers.study_winners(history({"A": [0.0900, 0.0920, 0.0910], "B": [0.0911, 0.0908, 0.0914],
                                               "C": [0.2, 0.2, 0.2]})).set_index("quantity")
        assert weak.loc["entropy MAE", "separated"] == "no evidence"
        assert weak.loc["teacher NLL", "separated"] == "no"  # the teacher needs no skill; A and B are not C
    skills.clear()
    # the entropy MAE is an error against each candidate's own teacher: its skill ranks on one scale, higher first
    sharp = pd.DataFrame([dict(candidate=c, seed=seed, step=100, elapsed_s=1.0, teacher_nll=0.1, teacher_recent_nll=0.1,
                               student=label, student_updates=u, **values)
                          for c, mae, skill, u in (("sharp teacher", 0.068, 0.076, 40), ("SGLD", 0.093, 0.25, 80))
                          for seed, jitter in enumerate((0.0, 0.002, -0.002))
                          for label, values in ((samplers.STUDENT_LABELS[0], dict(student_nll=0.2, skill=0.9)),
                                                (samplers.STUDENT_LABELS[1], dict(entropy_mae=mae + jitter,
                                                                                  skill=skill + jitter)))])
    ranked = samplers.study_winners(sharp).set_index("quantity")
    assert ranked.loc["entropy MAE", "winner"] == "sharp teacher"
    skill_row = ranked.loc["entropy MAE skill"]
    assert (skill_row["winner"], skill_row["runner_up"], skill_row["separated"]) == ("SGLD", "sharp teacher", "yes")
    assert skill_row["gap"] == pytest.approx(0.174) and skill_row["seed_winners"] == "SGLD 3 (of 3 seeds)"
    assert samplers.study_table(sharp).set_index("candidate")["student updates"].to_dict() == {
        "sharp teacher": 40, "SGLD": 80}
    one = samplers.study_winners(history({"A": [0.0910], "B": [0.0911]})).set_index("quantity")
    assert one.loc["teacher NLL", "separated"] == "one seed" and pd.isna(one.loc["teacher NLL", "winner_std"])
    with pytest.raises(ValueError, match="quantity='loss'"):
        samplers.study_winners(history({"A": [0.1]}), quantities=("loss",))
