"""The cyclical step-size schedule (cyclical SG-MCMC, Zhang et al., ICLR 2020) for every sampler:
step sizes at chosen steps exactly, exploration and sampling phases, which steps keep samples
(ensemble, distillation, snapshots), batching and resume exact, validation naming the field,
keys of existing configurations unchanged."""

import math

import pytest
import torch
from test_batching import STUDENTS, assert_engines_match, assert_results_match, chain_tensors, make_data

from gped_kit.core.baoa import BAOAConfig
from gped_kit.core.options import StepSchedule
from gped_kit.core.samplers import SAMPLERS
from gped_kit.core.sghmc import SGHMCConfig
from gped_kit.core.sgld import SGLDConfig, sgld_update_, stationary_variance
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.engine.config import kept_phases, snapshot_steps, student_updates
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain


def cyclical(cls=SGLDConfig, **kw):
    options = dict(schedule="cyclical", cycles=4, explore_fraction=0.5, horizon=400)
    options.update(kw)
    return cls(**options)


# ------------------------------------------------------------------ the schedule itself
@pytest.mark.parametrize("cls", list(SAMPLERS.values()), ids=lambda c: c.name.value)
def test_step_sizes_at_chosen_steps_are_the_papers_cosine(cls):
    """eta_t = eta_0 / 2 (cos(pi (t mod L) / L) + 1) with L = T / cycles = 100, for every sampler."""
    eta0 = 0.2 if cls is not SGLDConfig else 1e-3
    config = cyclical(cls, step_size=eta0)
    assert config.step_size_at(0) == eta0 == config.step_size_at(100) == config.step_size_at(300)  # cycle starts
    assert config.step_size_at(50) == eta0 / 2 == config.step_size_at(250)  # cos(pi/2) + 1 rounds to 1 exactly
    for t in (1, 25, 49, 75, 99, 137, 399):
        assert config.step_size_at(t) == eta0 * (0.5 * (math.cos(math.pi * (t % 100) / 100) + 1.0)), t
    assert config.step_size_at(99) < 3e-4 * eta0  # (pi / L)^2 / 4 of eta_0 at a cycle's last step
    assert config.varies
    if cls is SGLDConfig:  # SGLD's factors: (1, eta_t / eta_0, sqrt(eta_t / eta_0)); the others' derive from eta_t
        ratio = 0.5 * (math.cos(math.pi * 0.25) + 1.0)
        assert config.scales(25) == (1.0, ratio, math.sqrt(ratio))
    else:
        assert config.scales(25) == config.factors(config.step_size_at(25))
        assert config.scales(25)[:2] == (config.step_size_at(25), -config.step_size_at(25))


def test_warm_up_and_floor_combine_with_the_cycles():
    config = cyclical(step_size=1e-3, warmup_steps=20, warmup_factor=4.0)
    cos = 0.5 * (math.cos(math.pi * 0.1) + 1.0)
    assert config.step_ratio(10) == cos * 4.0 ** 0.5  # schedule times the warm-up, as for the other schedules
    assert config.step_ratio(20) == 0.5 * (math.cos(math.pi * 0.2) + 1.0)
    floored = cyclical(step_size=1e-3, cycle_floor=0.01)
    assert floored.step_ratio(99) == 0.01 and floored.step_ratio(50) == 0.5 and floored.step_ratio(0) == 1.0
    assert min(floored.step_ratio(t) for t in range(400)) == 0.01


def test_phases_divide_each_cycle_at_the_exploration_fraction():
    config = cyclical(explore_fraction=0.3)
    assert [t for t in range(400) if config.in_sampling_phase(t)] == [t for t in range(400) if t % 100 >= 30]
    assert config.sampling_phases() == [range(30, 100), range(130, 200), range(230, 300), range(330, 400)]
    # T not a multiple of the cycles: cycle c starts at ceil(c T / cycles); the ranges are the predicate's steps
    odd = cyclical(explore_fraction=0.37, cycles=3, horizon=103)
    brute = [t for t in range(103) if odd.in_sampling_phase(t)]
    assert [t for phase in odd.sampling_phases() for t in phase] == brute
    starts = [t for t in range(1, 103) if odd.step_ratio(t) > odd.step_ratio(t - 1)]
    assert starts == [math.ceil(103 / 3), math.ceil(2 * 103 / 3)] == [35, 69]
    # the cycles are 103 / 3 steps long as a real number: step 35 is 2/103 of a cycle past its start
    assert odd.cycle_position(35) == 2 / 103 and odd.step_ratio(35) == 0.5 * (math.cos(math.pi * 2 / 103) + 1.0)
    assert odd.cycle_position(34) == 102 / 103 and odd.step_ratio(34) < 0.01
    # other schedules keep every step
    assert all(SGLDConfig().in_sampling_phase(t) for t in (0, 1, 10**6))
    # explore_fraction 0: every step samples (cosine annealing with restarts)
    assert all(cyclical(explore_fraction=0.0).in_sampling_phase(t) for t in range(400))


def test_sgld_sampling_phases_draw_from_the_posterior():
    """Prior-only SGLD (precision tau, 20,000 independent coordinates) under the cyclical schedule:
    the samples of the sampling phases have the posterior's variance 1 / tau (to the discretisation
    bias of the largest step, 5%). Noise not scaled with the step (sqrt(eta_t)) would give a variance
    of ~eta_0 / eta_t, i.e. 10-1000 times too large, and a gradient step not scaled would diverge."""
    tau, eta0 = 1.0, 0.2
    config = SGLDConfig(step_size=eta0, prior_precision=tau, schedule="cyclical", cycles=3, explore_fraction=0.5,
                        horizon=600)
    gen = torch.Generator().manual_seed(0)
    theta = torch.zeros(20_000, dtype=torch.float64)
    coefficients = torch.tensor(config.coefficients(1), dtype=torch.float64)
    kept = []
    for t in range(600):
        sgld_update_([theta], [torch.zeros_like(theta)], [torch.randn(theta.shape, generator=gen, dtype=theta.dtype)],
                     coefficients, config.scales(t))
        if t >= 200 and config.in_sampling_phase(t):  # the first cycle starts from theta = 0: left out
            kept.append(theta.var().item())
    assert len(kept) == 200
    largest = stationary_variance(tau, eta0 / 2)  # the sampling phase's largest step
    assert 1 / tau * 0.98 < sum(kept) / len(kept) < largest * 1.02


# ------------------------------------------------------------------ validation and keys
def test_bad_values_are_rejected_naming_the_field():
    for bad, field in ((dict(cycles=0), "SGLDConfig.cycles=0"), (dict(cycles=2.5), "SGLDConfig.cycles=2.5"),
                       (dict(explore_fraction=1.0), "SGLDConfig.explore_fraction=1.0"),
                       (dict(explore_fraction=-0.1), "SGLDConfig.explore_fraction=-0.1"),
                       (dict(explore_fraction=float("nan")), "SGLDConfig.explore_fraction=nan"),
                       (dict(cycle_floor=1.0), "SGLDConfig.cycle_floor=1.0"),
                       (dict(horizon=0), r"SGLDConfig.horizon \(T\)=0")):
        with pytest.raises(ValueError, match=field):
            cyclical(**bad)
    with pytest.raises(ValueError, match=r"BAOAConfig.cycles=4 is read only by schedule='cyclical', but "
                                         r"schedule='constant'"):
        BAOAConfig(cycles=4)
    with pytest.raises(ValueError, match=r"SGLDConfig.explore_fraction=0.8 is read only by schedule='cyclical'"):
        SGLDConfig(schedule="polynomial", explore_fraction=0.8)
    with pytest.raises(ValueError, match=r"SGLDConfig.schedule='cosine' is not known; allowed: \['constant', "
                                         r"'polynomial', 'cyclical'\]"):
        SGLDConfig(schedule="cosine")
    with pytest.raises(ValueError, match=r"needs the run's length T"):
        SGLDConfig(schedule="cyclical").scales(0)
    with pytest.raises(ValueError, match=r"SGHMCConfig.cycles=30 over T=50 steps: each cycle needs at least 2 steps"):
        GPEDConfig(sampler=SGHMCConfig(schedule="cyclical", cycles=30), num_iterations=50, burn_in=5)
    with pytest.raises(ValueError, match=r"GPEDConfig.burn_in=10 leaves no step to keep"):
        GPEDConfig(sampler=SGLDConfig(schedule="cyclical", cycles=2, explore_fraction=0.99), num_iterations=100,
                   burn_in=10)  # a sampling phase of half a step: none
    with pytest.raises(ValueError, match=r"num_snapshots=11 exceeds the 10 kept steps"):
        GPEDConfig(sampler=SGLDConfig(schedule="cyclical", cycles=2, explore_fraction=0.9), num_iterations=100,
                   burn_in=5, num_snapshots=11)
    with pytest.raises(ValueError, match=r"warmup_steps=50 must be <= burn_in=10"):
        GPEDConfig(sampler=SGLDConfig(schedule="cyclical", warmup_steps=50, warmup_factor=2.0), num_iterations=100,
                   burn_in=10)


def test_keys_of_existing_configurations_are_unchanged():
    assert SGLDConfig().record() == {} and BAOAConfig().record() == {"sampler": "baoa"}
    assert GPEDConfig().record() == {"model": {"family": "fcnn", "k1": 1.0, "k2": 1.0, "dropout": 0.0}}
    config = GPEDConfig(sampler=BAOAConfig(schedule="cyclical", cycles=8), num_iterations=800, burn_in=100)
    # the horizon is the run's T (recorded by the GPEDConfig), not a key field of the sampler
    assert config.sampler.horizon == 800 and config.record()["sampler"] == {"schedule": "cyclical", "cycles": 8,
                                                                            "sampler": "baoa"}
    assert StepSchedule.CYCLICAL == "cyclical"
    # a sampler given with another horizon is bound to this run's T
    assert GPEDConfig(sampler=cyclical(), num_iterations=2000).sampler.horizon == 2000


# ------------------------------------------------------------------ through the engine
def cyclical_chain(seed=0, n=300, sampler_cls=SGLDConfig, students=STUDENTS, **kw):
    options = dict(step_size=5e-5, prior_precision=10.0, batch_size=25) if sampler_cls is SGLDConfig else dict(
        step_size=0.05, alpha=0.3, batch_size=25)
    options.update(schedule="cyclical", cycles=3, explore_fraction=0.6)
    options.update(kw.pop("sampler", {}))
    base = dict(model="fcnn", sampler=sampler_cls(**options), num_iterations=60, burn_in=5, eval_thinning=3,
                log_every=10, checkpoint_every=20, progress=False, device="cpu", seed=seed, eval_batch_size=32)
    base.update(kw)
    return build_chain(make_data(n), GPEDConfig(**base), list(students))


def test_only_sampling_phase_steps_accumulate_distil_and_snapshot(monkeypatch):
    spec = cyclical_chain(num_snapshots=4)
    engine = GPEDEngine([spec])
    config = spec.config
    # T = 60, 3 cycles of 20 steps, explore 0.6: steps 12-19, 32-39, 52-59 sample (all after B = 5)
    kept = [t for t in range(60) if t % 20 >= 12]
    assert [t for phase in kept_phases(config) for t in phase] == kept
    assert [t for t in range(60) if engine.events(t).accumulate] == [t for t in kept if t % 3 == 0]
    for key in spec.groups:
        assert [t for t in range(60) if key in engine.events(t).groups] == [t for t in kept if t % key.thinning == 0]
    assert snapshot_steps(config) == sorted(spec.snapshot_at) == [17, 35, 53, 59]  # every 6th of the 24 kept steps
    assert set(snapshot_steps(config)) <= set(kept)
    # the teacher's step gets the schedule's factors at every t
    seen = []
    original = type(config.sampler).update_

    def recording(self, params, state, grads, noise, coefficients, scales):
        seen.append(scales.tolist())  # a row of the device-side table (gped_kit.engine.values)
        return original(self, params, state, grads, noise, coefficients, scales)

    monkeypatch.setattr(type(config.sampler), "update_", recording)
    run_engine(engine)
    assert seen == [torch.tensor(config.sampler.scales(t), dtype=torch.float32).tolist() for t in range(60)]
    assert engine.ensemble_count == len([t for t in kept if t % 3 == 0])
    for j, s in enumerate(spec.students):
        assert engine.adam_steps[j] == len([t for t in kept if t % s.group.thinning == 0])
        # the count that budget tables report is the engine's own (not T - B over H: the exploration keeps none)
        assert student_updates(config, s.group.thinning) == engine.adam_steps[j] < (60 - 5) // s.group.thinning


def test_a_learning_rate_warm_up_counts_each_students_own_updates():
    """``StudentConfig.lr_warmup`` W: a student's update u takes min(1, u / W) of its rate. A cyclical chain's
    students first update in the first sampling phase (t = 12 here, B = 5): a warm-up counted in steps since B
    (floor(t / H) - floor(B / H), 4 at t = 12 for H = 2) would be over before the first update."""
    students = [StudentConfig("predictive", "U_s", thinning=2, batch_size=20, lr_halving_epochs=None, lr_warmup=4),
                StudentConfig("entropy", "U_o", thinning=3, batch_size=20, lr_halving_epochs=None, lr_warmup=4)]
    spec = cyclical_chain(students=students)
    engine = GPEDEngine([spec])
    seen: list[list[float]] = [[] for _ in students]
    while engine.t < 60:
        t = engine.t
        engine.step()
        for j, s in enumerate(spec.students):
            if s.group in engine.events(t).groups:
                seen[j].append(float(engine.state.students[j].lr[0]))
                assert student_updates(spec.config, s.group.thinning, t) == len(seen[j])
    for j, s in enumerate(students):
        count = student_updates(spec.config, s.thinning)
        assert len(seen[j]) == count == engine.adam_steps[j]
        assert seen[j] == pytest.approx([1e-3 * min(1.0, u / 4) for u in range(1, count + 1)])
    # keyed apart from a warm-up that counted steps since B (a constant step size's keys stay: test_engine)
    assert [r.get("lr_warmup_counts") for r in spec.record()["students"]] == ["updates", "updates"]


@pytest.mark.parametrize("sampler_cls", [SGLDConfig, BAOAConfig], ids=["sgld", "baoa"])
def test_batched_cyclical_chains_equal_separate_chains(sampler_cls):
    def specs():
        return [cyclical_chain(seed=k, n=n, sampler_cls=sampler_cls, sampler=dict(prior_precision=tau))
                for k, (n, tau) in enumerate(((300, 10.0), (500, 1.0)))]

    batched = GPEDEngine(specs())
    singles = [GPEDEngine([s]) for s in specs()]
    results_b = run_engine(batched)
    results_s = [run_engine(e)[0] for e in singles]
    assert_engines_match(batched, singles, atol=1e-6, student_atol=5e-4)
    for rb, rs in zip(results_b, results_s):
        assert_results_match(rb, rs, rtol=1e-3)
    assert results_s[0].summary["schedule"].eq("cyclical").all() and results_s[0].summary["cycles"].eq(3).all()


@pytest.mark.parametrize("stop", [21, 35], ids=["exploring", "sampling"])
def test_resume_in_either_phase_equals_the_uninterrupted_run(tmp_path, stop):
    full = GPEDEngine([cyclical_chain(sampler_cls=BAOAConfig)])
    full_result = run_engine(full)[0]
    ckpt = tmp_path / "run.pt"
    run_engine(GPEDEngine([cyclical_chain(sampler_cls=BAOAConfig)]), [ckpt], max_steps=stop)
    resumed = GPEDEngine([cyclical_chain(sampler_cls=BAOAConfig)])
    result = run_engine(resumed, [ckpt])[0]
    assert resumed.resumed_from == stop
    a, b = chain_tensors(full, 0), chain_tensors(resumed, 0)
    assert all(torch.equal(a[name], b[name]) for name in a)
    for name, value in full.chain.sampler.items():
        assert torch.equal(value, resumed.chain.sampler[name]), name
    assert full.teacher_metrics(0) == resumed.teacher_metrics(0)
    regular = result.history[result.history["step"] % 10 == 0].reset_index(drop=True)
    evaluation = [c for c in full_result.history if c != "elapsed_s" and "train" not in c]
    assert full_result.history[evaluation].equals(regular[evaluation])
