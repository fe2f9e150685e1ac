"""The momentum samplers' step-size factors read from device tables give the CPU's numbers as before, bit for bit.

A varying step size's factors are rows of a :class:`~gped_kit.engine.values.ValueTable` (what a captured CUDA
graph reads), for the momentum samplers as for SGLD. Their updates used to take the step size as a host float and
to scale addends with ``add_(x, alpha=...)``, one fused multiply-add per element on the CPU; with a 0-d tensor
they use ``addcmul_`` (:func:`gped_kit.core.sampler.add_scaled_`), which the CPU computes the same way. The
oracle here is the updates as they were (:func:`legacy_sghmc_update_`, :func:`legacy_sgnht_update_`,
:func:`legacy_baoa_update_`, verbatim but for names): every state tensor of an engine that reads the factors from
its device table equals that of an engine running the legacy updates on host floats, over hundreds of steps of
polynomial (with a warm-up) and cyclical schedules, one chain, a batch and a pooled teacher; and the updates
alone agree under every CPU capability PyTorch dispatches to on this machine (default, AVX2, AVX-512), on buffers
whose sizes leave scalar tails after the vector loops.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from test_batching import STUDENTS, make_data

from gped_kit.core.baoa import BAOAConfig
from gped_kit.core.flat import FlatLayout, FlatTensors, sum_per_chain, units
from gped_kit.core.sampler import FLAT_MOMENTA, add_scaled_, momenta
from gped_kit.core.sghmc import SGHMCConfig
from gped_kit.core.sgnht import THERMOSTAT_KEY, SGNHTConfig
from gped_kit.engine import GPEDConfig, GPEDEngine
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import tree_leaves


# ---------------------------------------------------------------------- the updates as they were (the oracle)
def legacy_sghmc_update_(params, state, nll_grads, noise, coefficients, epsilon, alpha, beta, sigma, friction=None):
    prior, temperature = coefficients[0], coefficients[1]
    precision = sigma ** -2
    noise_scale = (temperature * epsilon * (2.0 * alpha - temperature * (epsilon * beta))).sqrt()
    decay = 1.0 - epsilon * precision * (alpha if friction is None else friction)
    with torch.no_grad():
        for theta, grad, m, xi in units(params, nll_grads, momenta(params, state), noise):
            grad.add_(theta * prior)
            theta.add_(m, alpha=epsilon * precision)
            m.mul_(decay).add_(grad, alpha=-epsilon).add_(xi.mul_(noise_scale))


def legacy_sgnht_update_(config, params, state, nll_grads, noise, coefficients, epsilon):
    xi = state[THERMOSTAT_KEY]
    with torch.no_grad():
        moms = momenta(params, state)
        chain_axis = isinstance(moms, FlatTensors)
        kinetic = (sum(sum_per_chain(m * m, chain_axis) for m in moms.values())
                   / sum(m[0].numel() if chain_axis else m.numel() for m in moms.values()))
        xi_next = xi + epsilon * (kinetic * config.sigma ** -2 - coefficients[1])
    legacy_sghmc_update_(params, state, nll_grads, noise, coefficients, epsilon, config.alpha, config.beta,
                         config.sigma, friction=xi)
    with torch.no_grad():
        xi.copy_(xi_next)


def legacy_baoa_update_(config, params, state, nll_grads, noise, coefficients, epsilon):
    prior, temperature = coefficients[0], coefficients[1]
    gamma = config.alpha * config.sigma ** -2
    decay = math.exp(-gamma * epsilon)
    noise_scale = (temperature * -math.expm1(-2.0 * gamma * epsilon)).sqrt() * config.sigma
    drift = 0.5 * epsilon * config.sigma ** -2
    with torch.no_grad():
        for theta, grad, m, xi in units(params, nll_grads, momenta(params, state), noise):
            grad.add_(theta * prior)
            m.add_(grad, alpha=-epsilon)
            theta.add_(m, alpha=drift)
            m.mul_(decay).add_(xi.mul_(noise_scale))
            theta.add_(m, alpha=drift)


def legacy_update_(config, params, state, nll_grads, noise, coefficients, epsilon: float) -> None:
    """The pre-device-table update of ``config``'s algorithm at step size ``epsilon`` (a host float)."""
    if isinstance(config, SGNHTConfig):
        legacy_sgnht_update_(config, params, state, nll_grads, noise, coefficients, epsilon)
    elif isinstance(config, BAOAConfig):
        legacy_baoa_update_(config, params, state, nll_grads, noise, coefficients, epsilon)
    else:
        legacy_sghmc_update_(params, state, nll_grads, noise, coefficients, epsilon, config.alpha, config.beta,
                             config.sigma)


@dataclasses.dataclass(frozen=True)
class LegacySGHMC(SGHMCConfig):
    """The engine with the legacy update: host floats (``device_scales`` False), epsilon_t the first factor."""

    device_scales: ClassVar[bool] = False

    def update_(self, params, state, nll_grads, noise, coefficients, scales) -> None:
        assert not isinstance(scales, torch.Tensor)
        legacy_update_(self, params, state, nll_grads, noise, coefficients, scales[0])


@dataclasses.dataclass(frozen=True)
class LegacySGNHT(SGNHTConfig):
    device_scales: ClassVar[bool] = False
    update_ = LegacySGHMC.update_


@dataclasses.dataclass(frozen=True)
class LegacyBAOA(BAOAConfig):
    device_scales: ClassVar[bool] = False
    update_ = LegacySGHMC.update_


LEGACY = {"sghmc": LegacySGHMC, "sgnht": LegacySGNHT, "baoa": LegacyBAOA}
CURRENT = {"sghmc": SGHMCConfig, "sgnht": SGNHTConfig, "baoa": BAOAConfig}
SCHEDULES = {"polynomial+warmup": dict(schedule="polynomial", decay_steps=40.0, warmup_steps=30, warmup_factor=3.0),
             "cyclical": dict(schedule="cyclical", cycles=3, explore_fraction=0.4, cycle_floor=1e-3)}


def beta_of(sampler_cls: type) -> dict[str, float]:
    """The tests' gradient-noise estimate beta for the samplers that read it (BAOA refuses one)."""
    return {} if issubclass(sampler_cls, BAOAConfig) else {"beta": 0.1}


# ---------------------------------------------------------------------- the engine, hundreds of steps
def specs(sampler_cls, schedule, k: int, num_chains: int = 1, steps: int = 300):
    return [build_chain(make_data(n), GPEDConfig(
        model="fcnn", sampler=sampler_cls(step_size=0.05, alpha=0.5, batch_size=25, prior_precision=tau,
                                          **beta_of(sampler_cls), **schedule),
        num_iterations=steps, burn_in=60, eval_thinning=3, log_every=100, progress=False, device="cpu", seed=seed,
        eval_batch_size=32, num_chains=num_chains), STUDENTS[:1])
        for seed, (n, tau) in enumerate(((300, 10.0), (500, 1.0))[:k])]


def state_tensors(engine: GPEDEngine) -> list[torch.Tensor]:
    return (tree_leaves(engine.chain) + [t for s in engine.students for t in tree_leaves(s)]
            + tree_leaves(engine.ensemble) + [engine.snapshots])


def assert_equal_to_legacy(make) -> None:
    table, legacy = GPEDEngine(make(CURRENT)), GPEDEngine(make(LEGACY))
    assert table.values.scales is not None and legacy.values.scales is None  # device rows against host floats
    run_engine(table), run_engine(legacy)
    a, b = state_tensors(table), state_tensors(legacy)
    assert len(a) == len(b)
    different = [i for i, (x, y) in enumerate(zip(a, b)) if not torch.equal(x, y)]
    assert not different, f"{len(different)} of {len(a)} state tensors differ"
    assert table.t == legacy.t == 300 and table.ensemble_count > 0 and table.adam_steps[0] > 0


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("name", ["sghmc", "sgnht", "baoa"])
def test_device_factors_equal_the_legacy_host_float_updates(name, schedule):
    """300 steps, a batch of two chains (different N and tau, under vmap) and one chain alone."""
    assert_equal_to_legacy(lambda classes: specs(classes[name], SCHEDULES[schedule], k=2))
    assert_equal_to_legacy(lambda classes: specs(classes[name], SCHEDULES[schedule], k=1))


def test_a_pooled_cyclical_baoa_teacher_equals_the_legacy_updates():
    """The ``long`` profile's kind of teacher: cyclical BAOA pooled over three chains."""
    assert_equal_to_legacy(lambda classes: specs(classes["baoa"], SCHEDULES["cyclical"], k=1, num_chains=3))


# ---------------------------------------------------------------------- the updates alone, every CPU capability
def compare_updates(steps: int = 40) -> list[str]:
    """Run each momentum sampler's update with device factors and the legacy update with host floats side by side
    on flat (K, P) buffers of awkward sizes (scalar tails after the vector loops), ``steps`` times each with a
    different step size; the names of the cases whose buffers differ (empty: all bit-identical)."""
    gen = torch.Generator().manual_seed(0)
    failures = []
    for name in ("sghmc", "sgnht", "baoa"):
        config = CURRENT[name](step_size=0.05, alpha=0.5, schedule="polynomial", decay_steps=7.0,
                               warmup_steps=5, warmup_factor=3.0, **beta_of(CURRENT[name]))
        for size in (1, 7, 17, 33, 1001):
            layout = FlatLayout.of({"w": torch.zeros(2, size)})

            def buffers():
                params = layout.flatten({"w": torch.randn(2, size, generator=gen)})
                moms = layout.flatten({"w": torch.randn(2, size, generator=gen)})
                state = {FLAT_MOMENTA: moms, "m:w": moms["w"]}
                if name == "sgnht":
                    state[THERMOSTAT_KEY] = torch.full((2, 1), 0.5)
                return params, state

            params, state = buffers()
            old_params = FlatTensors(params.flat.clone(), layout)
            old_moms = FlatTensors(state[FLAT_MOMENTA].flat.clone(), layout)
            old_state = {FLAT_MOMENTA: old_moms, "m:w": old_moms["w"]}
            if name == "sgnht":
                old_state[THERMOSTAT_KEY] = state[THERMOSTAT_KEY].clone()
            coefficients = torch.tensor([[[0.01], [0.02]], [[1 / 300], [1 / 500]]])
            for t in range(steps):
                grads = FlatTensors(torch.randn(2, size, generator=gen) * 10, layout)
                noise = FlatTensors(torch.randn(2, size, generator=gen), layout)
                row = torch.tensor([config.scales(t)], dtype=torch.float32)[0]  # as a ValueTable's row
                config.update_(params, state, FlatTensors(grads.flat.clone(), layout),
                               FlatTensors(noise.flat.clone(), layout), coefficients, row)
                legacy_update_(config, old_params, old_state, grads, noise, coefficients, config.step_size_at(t))
            if not (torch.equal(params.flat, old_params.flat) and torch.equal(state[FLAT_MOMENTA].flat, old_moms.flat)
                    and (name != "sgnht" or torch.equal(state[THERMOSTAT_KEY], old_state[THERMOSTAT_KEY]))):
                failures.append(f"{name}, P={size}")
    x, y = torch.randn(3, 1001, generator=gen), torch.randn(3, 1001, generator=gen)
    for a in (1.2345678901e-3, -0.3, 7.0 / 3.0):
        if not torch.equal(add_scaled_(x.clone(), y, a), add_scaled_(x.clone(), y, torch.tensor(a))):
            failures.append(f"add_scaled_ a={a}")
    return failures


#: The CPU capabilities PyTorch dispatches to on x86, lowest first (``ATEN_CPU_CAPABILITY``'s values).
CAPABILITIES = ("default", "avx2", "avx512")


def capabilities_here() -> tuple[str, ...]:
    """The capabilities of :data:`CAPABILITIES` up to the one PyTorch picks on this CPU: forcing a higher one runs
    instructions the CPU lacks (an older torch dies of SIGILL where a newer one falls back)."""
    best = torch.backends.cpu.get_cpu_capability().lower()
    return CAPABILITIES[: CAPABILITIES.index(best) + 1] if best in CAPABILITIES else CAPABILITIES[:1]


def test_device_factors_equal_host_floats_under_every_cpu_capability():
    """Each capability PyTorch can dispatch to here, in a fresh process (``ATEN_CPU_CAPABILITY`` is read once)."""
    here = Path(__file__).parent
    script = (f"import sys; sys.path.insert(0, {str(here)!r}); import torch, test_device_scales as m; "
              "print(torch.backends.cpu.get_cpu_capability()); print(m.compare_updates())")
    seen = {}
    for capability in capabilities_here():
        env = {**os.environ, "ATEN_CPU_CAPABILITY": capability, "OMP_NUM_THREADS": "1"}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        used, failures = out.stdout.strip().splitlines()[-2:]
        seen[used] = failures
    default = {"DEFAULT", "NO AVX"} & seen.keys()  # the default capability's name: "NO AVX" in older torch (2.8)
    assert default and all(failures == "[]" for failures in seen.values()), seen
