"""Counter-based random numbers (``GPEDConfig(random_numbers="counter")``): Philox-4x32-10's known answers, the
normals' and the indices' distribution and independence, Eq. 7's exact stationary variance with them, and the
engine's use of them (keys, batches, resuming, every sampler, the compiled draws against the eager ones)."""

import math
import random
import types
import warnings

import pytest
import scipy.stats
import torch
from torch.utils.flop_counter import FlopCounterMode

import gped_kit.core.fused
from gped_kit.core import philox as philox_module
from gped_kit.core.fused import Fused, exact_options
from gped_kit.core.options import RandomNumbers
from gped_kit.core.philox import (
    _mul_hi_lo,
    counter_indices,
    counter_indices_,
    counter_normal,
    key_words,
    philox4x32,
    uniform,
)
from gped_kit.core.samplers import sampler_config
from gped_kit.core.schema import key_of
from gped_kit.core.sgld import SGLDConfig, sgld_counter_update_, stationary_variance
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.engine.sets import ChainSets
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import flat
from gped_kit.engine.streams import counter_minibatch_

#: Random123's known answers for Philox-4x32-10 (kat_vectors): counter, key, output.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def words(*values: int) -> tuple[torch.Tensor, ...]:
    return tuple(torch.tensor([v], dtype=torch.int64) for v in values)


@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_philox_gives_random123s_known_answers(counter, key, expected):
    out = philox4x32(words(*counter), key)  # type: ignore[arg-type]
    assert tuple(int(w) for w in out) == expected


def test_the_modules_docstring_cites_this_file_for_the_known_answers():
    doc = philox_module.__doc__
    assert "(``tests/test_counter_random.py``)" in doc and "test_philox.py" not in doc
    assert __file__.endswith("tests/test_counter_random.py")


def test_the_32_bit_products_are_exact_at_the_extremes():
    rng = random.Random(0)
    values = [0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x80000000] + [rng.getrandbits(32) for _ in range(200)]
    a = torch.tensor(values, dtype=torch.int64)
    for m in (0xD2511F53, 0xCD9E8D57, 0xFFFFFFFF, 1):
        hi, lo = _mul_hi_lo(a, m)
        assert [(int(high) << 32) | int(low) for high, low in zip(hi, lo)] == [v * m for v in values]


def keys_of(*seeds: int) -> torch.Tensor:
    return torch.stack(key_words(torch.tensor(seeds, dtype=torch.int64)), dim=1)


def test_a_draw_depends_on_its_key_step_and_element_only():
    keys, t = keys_of(2, 6, 10, 2 ** 40 + 2), torch.tensor([7])
    x = counter_normal(keys, t, 1_001)
    assert x.shape == (4, 1_001) and x.dtype == torch.float32
    assert torch.equal(counter_normal(keys[1:2], t, 1_001), x[1:2])  # a chain alone draws what it draws in a batch
    assert torch.equal(counter_normal(keys, t, 10), x[:, :10])  # element e's draw does not depend on P
    assert torch.equal(counter_normal(keys, torch.tensor([7]), 1_001), x)  # a pure function: no state
    assert not torch.isclose(counter_normal(keys, torch.tensor([8]), 1_001), x).any()
    assert not torch.isclose(x[0], x[3]).any()  # keys differing only in their high word differ everywhere
    with pytest.raises(ValueError, match="keys must be"):
        counter_normal(torch.zeros(3, dtype=torch.int64), t, 5)


def test_counter_indices_are_uniform_per_row_and_the_same_alone_or_in_a_batch():
    keys, t, n = keys_of(1, 5, 9), torch.tensor([3]), 200_000
    sizes = torch.tensor([[7], [60_000], [1]])
    idx = counter_indices(keys, t, n, sizes)
    assert idx.dtype == torch.int64 and idx.shape == (3, n)
    assert int(idx[0].min()) == 0 and int(idx[0].max()) == 6 and int(idx[1].max()) < 60_000
    assert bool((idx[2] == 0).all())  # a set of one element
    counts = torch.bincount(idx[0], minlength=7).double()
    assert scipy.stats.chisquare(counts.numpy()).pvalue > 1e-3
    assert scipy.stats.kstest(idx[1].double().numpy() / 60_000, "uniform").pvalue > 1e-3
    assert torch.equal(counter_indices(keys[1:2], t, 100, sizes[1:2]), idx[1:2, :100])
    assert not torch.equal(counter_indices(keys, torch.tensor([4]), 100, sizes)[1], idx[1, :100])


def test_the_draws_are_independent_standard_normals():
    n = 1 << 18
    x = counter_normal(keys_of(2, 6), torch.tensor([0]), n).double()
    y = counter_normal(keys_of(2), torch.tensor([1]), n).double()[0]
    bound = 5 / math.sqrt(n)  # five standard errors
    for row in x:
        assert abs(float(row.mean())) < bound and abs(float(row.var()) - 1) < 5 * math.sqrt(2 / n)
        assert scipy.stats.kstest(row.numpy(), "norm").pvalue > 1e-3
        assert abs(float((row[:-1] * row[1:]).mean())) < bound  # neighbouring elements (the same Philox call)
        assert abs(float((row[:-4] * row[4:]).mean())) < bound  # the next call's
    assert abs(float((x[0] * x[1]).mean())) < bound  # two chains' keys (seeds 2 and 6)
    assert abs(float((x[0] * y).mean())) < bound  # two steps
    assert float((x[0] ** 4).mean()) == pytest.approx(3.0, abs=0.05)  # a normal's fourth moment


def test_counter_sgld_has_eq_7s_exact_stationary_variance():
    # 20,000 independent coordinates under the prior alone: the exact stationary variance of Eq. 7
    tau, eta = 2.0, 0.1
    config = SGLDConfig(step_size=eta, prior_precision=tau)
    coefficients = torch.tensor(config.coefficients(1)).reshape(3, 1, 1)
    theta, zero = torch.zeros(1, 20_000), torch.zeros(1, 20_000)
    keys, kept = keys_of(2), []
    for t in range(400):
        sgld_counter_update_(theta, zero, coefficients, None, keys, torch.tensor([t]))
        if t >= 200:
            kept.append(theta.clone())
    draws = torch.stack(kept)
    assert draws.mean().abs() < 0.01
    assert draws.var() == pytest.approx(stationary_variance(tau, eta), rel=0.03)  # 0.526; a wrong factor moves it


def test_the_schedules_factors_scale_the_step_and_the_noise():
    config = SGLDConfig(step_size=0.1, prior_precision=2.0)
    coefficients = torch.tensor(config.coefficients(3)).reshape(3, 1, 1)
    theta0, grad, keys, t = torch.randn(1, 50), torch.randn(1, 50), keys_of(2), torch.tensor([3])
    ratio = 0.25
    a = theta0.clone()
    sgld_counter_update_(a, grad, coefficients, torch.tensor([1.0, ratio, math.sqrt(ratio)]), keys, t)
    b = theta0.clone()
    scaled = torch.tensor(SGLDConfig(step_size=0.1 * ratio, prior_precision=2.0).coefficients(3)).reshape(3, 1, 1)
    sgld_counter_update_(b, grad, scaled, None, keys, t)
    assert torch.allclose(a, b, rtol=1e-6, atol=1e-7)


def test_the_option_is_checked_and_keyed():
    base = dict(model="fcnn", num_iterations=10, burn_in=1, progress=False)
    default, counter = GPEDConfig(**base), GPEDConfig(**base, random_numbers="counter")
    assert default.random_numbers is RandomNumbers.GENERATORS and counter.random_numbers is RandomNumbers.COUNTER
    allowed = r"allowed: \['generators', 'counter'\]"
    with pytest.raises(ValueError, match=r"GPEDConfig.random_numbers='philox' is not known; " + allowed):
        GPEDConfig(**base, random_numbers="philox")
    assert "random_numbers" not in default.record() and counter.record()["random_numbers"] == "counter"
    assert key_of(default.record()) != key_of(counter.record())
    assert key_of(default.record()) == key_of(GPEDConfig(**base, random_numbers="generators").record())


def engine(data, seeds=(0,), **kw) -> GPEDEngine:
    students = (StudentConfig("predictive", thinning=3), StudentConfig("entropy", "U_o", thinning=5))
    cfg = dict(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=40,
               burn_in=10, eval_thinning=5, log_every=20, progress=False, device="cpu", random_numbers="counter")
    cfg.update(kw)
    return GPEDEngine([build_chain(data, GPEDConfig(**cfg, seed=s), students) for s in seeds])


def generator_states(e: GPEDEngine) -> list[torch.Tensor]:
    streams = e.state.streams
    return [g.get_state() for g in (*streams.data, *streams.noise, *(g for gs in streams.groups.values() for g in gs))]


def test_an_engine_with_counter_draws_no_generator_resumes_bit_for_bit_and_batches(digits_data):
    a = engine(digits_data)
    before = generator_states(a)
    a.run(stop=20)
    assert all(torch.equal(x, y) for x, y in zip(generator_states(a), before))  # no generator ever drew
    state = a.run_state(0)
    b = engine(digits_data)  # a fresh engine, as in a new process
    b.load_run_states({0: state})
    a.run()
    b.run()
    for x, y in zip([flat(a.chain.params), *(flat(s.params) for s in a.students)],
                    [flat(b.chain.params), *(flat(s.params) for s in b.students)]):
        assert torch.equal(x, y)
    # chain 1 of a batch takes the steps it takes alone (the same draws; the batched products' round-off aside)
    batch, alone = engine(digits_data, seeds=(0, 1)), engine(digits_data, seeds=(1,))
    batch.run()
    alone.run()
    assert torch.allclose(flat(batch.chain.params)[1], flat(alone.chain.params)[0], atol=1e-5)
    other = engine(digits_data, random_numbers="generators")
    other.run()
    # the generator's draws are other numbers
    assert (flat(other.chain.params)[0] - flat(a.chain.params)[0]).abs().max() > 1e-4


def test_a_momentum_sampler_draws_counter_based_noise_too(digits_data):
    sampler = sampler_config("sghmc", step_size=1e-3, alpha=0.5, batch_size=50)
    batch, alone = engine(digits_data, seeds=(0, 1), sampler=sampler), engine(digits_data, seeds=(1,), sampler=sampler)
    before = generator_states(batch)
    batch.run()
    alone.run()
    assert all(torch.equal(x, y) for x, y in zip(generator_states(batch), before))
    assert batch.setup.fused_update is None  # only SGLD fuses its noise into the update
    assert torch.allclose(flat(batch.chain.params)[1], flat(alone.chain.params)[0], atol=1e-5)
    assert bool(torch.isfinite(flat(batch.chain.params)).all())


def test_the_compiled_update_agrees_with_the_eager_one_and_falls_back_with_a_warning():
    config = SGLDConfig(step_size=1e-3, prior_precision=2.0)
    coefficients = torch.tensor([config.coefficients(7), config.coefficients(11)]).T.unsqueeze(-1)
    theta, grad, keys = torch.randn(2, 3_001), torch.randn(2, 3_001), keys_of(2, 6)
    eager, compiled = theta.clone(), theta.clone()
    for t in range(3):
        step = torch.tensor([t])
        sgld_counter_update_(eager, grad, coefficients, None, keys, step)
        Fused(sgld_counter_update_, "the SGLD update")(compiled, grad, coefficients, None, keys, step)
    assert torch.allclose(compiled, eager, rtol=1e-6, atol=1e-7)
    failing = Fused(sgld_counter_update_, "the fused SGLD update")

    def broken(*args):
        raise RuntimeError("no C++ compiler")

    failing._fn = broken
    fallback = theta.clone()
    with pytest.warns(RuntimeWarning, match="the fused SGLD update could not be compiled.*no C\\+\\+ compiler"):
        failing(fallback, grad, coefficients, None, keys, torch.tensor([0]))
    expected = theta.clone()
    sgld_counter_update_(expected, grad, coefficients, None, keys, torch.tensor([0]))
    assert torch.equal(fallback, expected) and not failing.compiled


def test_a_fused_function_compiles_more_shapes_than_dynamos_default_without_falling_back():
    draw = Fused(counter_indices_, "the draw")
    keys, sizes = keys_of(*range(3)), torch.tensor([[5], [6], [7]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for m in range(1, 11):  # ten shapes; Dynamo's default allows eight compilations of one function
            out = torch.empty(3, m, dtype=torch.int64)
            draw(out, keys, torch.tensor([m]), sizes)
            assert torch.equal(out, counter_indices(keys, torch.tensor([m]), m, sizes))
    assert draw.compiled


def test_a_fused_function_runs_eagerly_under_a_flop_counter_and_stays_compiled():
    """Under FlopCounterMode (a dispatch mode torch.compile cannot trace) a fused function runs its eager operators,
    which the counter counts, with no warning and no fallback; outside it, it runs compiled again."""
    matmul = Fused(lambda a, b, out: out.copy_(a @ b + 1.0), "the product")
    a, b, out = torch.randn(6, 5), torch.randn(5, 4), torch.empty(6, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with FlopCounterMode(display=False) as counter:
            matmul(a, b, out)
        assert counter.get_total_flops() == 2 * 6 * 5 * 4
        matmul(a, b, out)
    assert matmul.compiled and torch.allclose(out, a @ b + 1.0)


def test_an_exact_function_runs_eagerly_with_a_warning_where_torch_cannot_compile_it_exactly(monkeypatch):
    """Where this torch's Inductor has no option against contracting a multiply and an add (an older torch whose
    C++ flag is a bool), an exact fused function is not compiled: it warns, naming the reason, and runs eagerly."""
    assert exact_options() == {"emulate_precision_casts": True, "cpp.enable_floating_point_contract_flag": "off"}
    # an older torch's Inductor configuration, in place of this one's (torch's own is left alone: patching its
    # configuration module with monkeypatch removes the option when undone)
    older = types.SimpleNamespace(cpp=types.SimpleNamespace(enable_floating_point_contract_flag=False),
                                  emulate_precision_casts=False)
    monkeypatch.setattr(gped_kit.core.fused, "inductor_config", older)
    assert exact_options() is None
    with pytest.warns(RuntimeWarning, match="the update runs eagerly .*without contracting a multiply and an add"):
        update = Fused(lambda a, b: a * b + 1.0, "the update", exact=True)
    assert not update.compiled and torch.equal(update(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))


def test_a_compiled_minibatch_draw_picks_the_rows_its_indices_name_in_shared_and_separate_sets():
    """The teacher's and the groups' minibatch (counter_minibatch_): its indices equal the counter draw's, and
    the rows it returns equal ChainSets.gather's of those indices, bit for bit, with every chain's own set
    (offsets into the concatenation) and with one shared set."""
    gen = torch.Generator().manual_seed(0)
    own = [(torch.randn(n, 3, 2, generator=gen), torch.randint(10, (n,), generator=gen)) for n in (40, 57, 40)]
    keys, step = keys_of(3, 4, 5), torch.tensor([9])
    draw = Fused(counter_minibatch_, "the minibatch draw")
    for sets in (ChainSets(own), ChainSets([own[0]] * 3)):
        out = torch.empty(3, 25, dtype=torch.int64)
        x, y = draw(out, keys, step, sets.size_column, sets.chain_offsets, sets.tensors)
        assert torch.equal(out, counter_indices(keys, step, 25, sets.size_column))
        expected_x, expected_y = sets.gather(out)
        assert torch.equal(x, expected_x) and torch.equal(y, expected_y) and x.shape == (3, 25, 3, 2)
        assert torch.equal(x[1, 0], (own[1] if not sets.shared else own[0])[0][out[1, 0]])
    assert draw.compiled


def test_the_update_concatenates_the_gradients_parts_itself():
    """sgld_counter_update_ given the gradient as its parts (per parameter, K = 1 without a chain axis) moves
    theta exactly as given their concatenation."""
    config = SGLDConfig(step_size=1e-3, prior_precision=2.0)
    coefficients = torch.tensor([config.coefficients(7)]).T.unsqueeze(-1)
    parts = [torch.randn(4, 5), torch.randn(5), torch.randn(2, 4)]
    theta, keys, step = torch.randn(1, 33), keys_of(8), torch.tensor([3])
    whole, in_parts = theta.clone(), theta.clone()
    sgld_counter_update_(whole, torch.cat([p.reshape(1, -1) for p in parts], 1), coefficients, None, keys, step)
    sgld_counter_update_(in_parts, parts, coefficients, None, keys, step)
    assert torch.equal(whole, in_parts) and not torch.equal(whole, theta)


def test_the_uniforms_lie_in_the_half_open_interval_the_docstring_states():
    """(k + 1/2) / 2^24 in float32: exact below 1/2, the half rounded to even above, 1 for the largest words;
    never 0, so Box-Muller's logarithm stays finite."""
    k = torch.tensor([0, 1, 2**23 - 1, 2**23, 2**23 + 1, 2**24 - 2, 2**24 - 1], dtype=torch.int64)
    u = uniform(k << 8)
    exact = (k.double() + 0.5) / 2**24
    assert torch.equal(u[:3].double(), exact[:3])  # below 1/2: exact
    assert u.min() > 0 and u.max() == 1.0 and u[-1] == 1.0
    assert ((u.double() - exact).abs() <= 2.0**-25).all()  # above: within half of float32's spacing 2^-24
