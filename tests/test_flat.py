"""Flat (K, P) buffers compute what the per-tensor updates computed, bit for bit.

The engine applies the sampler's step and Adam's once over each flat buffer
(:mod:`gped_kit.core.flat`). :class:`PerTensorEngine` is the engine as it was before: each update
tensor by tensor, inside ``vmap`` for a batch (:func:`per_tensor_teacher_step` and its Adam step).
Both run the same chains from the same state; every tensor of the
state must be *equal*, not close: FCNN and CNN (channels-last weights on the CPU, a layout that is
not the concatenation of the flattened parameters), one chain and a batch, SGLD and the momentum
samplers (SGNHT's thermostat sums the kinetic energy parameter by parameter), U_s and U_o, a
pooled teacher.
"""

from __future__ import annotations

import functools

import pytest
import torch
from test_batching import STUDENTS, chains, make_data
from torch.func import vmap

from gped_kit.core.adam import AdamState, adam_update_, bias_corrections
from gped_kit.core.flat import FlatLayout, FlatTensors, units
from gped_kit.core.samplers import sampler_config
from gped_kit.engine import GPEDConfig, GPEDEngine, steps
from gped_kit.engine import engine as engine_module
from gped_kit.engine.distill import one, student_views, teacher_map, teacher_views
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import tree_leaves
from gped_kit.engine.values import ValueTable


def per_tensor_teacher_step(state, x, y, noise, *, fns, scales, autodiff):
    """One step of the teacher's sampler tensor by tensor: the engine's gradient, then the sampler's update on
    each parameter tensor (the oracle of the flat update)."""
    grads = steps.teacher_gradients(state, x, y, fns=fns, autodiff=autodiff)
    fns.sampler.update_(state.params, state.sampler, grads, noise, state.coefficients, scales)
    return state


class PerTensorEngine(GPEDEngine):
    """The engine's updates tensor by tensor, as before the flat buffers (the oracle): its teacher step here, its
    Adam step :func:`per_tensor_adam_step` (in place of the engine's while it runs: :func:`assert_bit_identical`)."""

    def teacher_step(self, t: int | None = None) -> None:
        t = self.t if t is None else t
        state, setup = self.state, self.setup
        chain, buffers = teacher_views(state)[0], state.buffers
        state.streams.teacher_indices(buffers.idx, setup.train_sets)
        state.streams.sgld_noise(buffers.noise)
        x, y = setup.train_sets.gather(buffers.idx)
        noise, offset = {}, 0
        for name in self.chains[0].teacher.param_names:  # each parameter's draws, in the logical order
            p = state.chain.params[name]
            noise[name] = one(setup, buffers.noise[:, offset:offset + p[0].numel()].view(p.shape))
            offset += p[0].numel()
        step = functools.partial(per_tensor_teacher_step, fns=setup.teacher_fns, scales=self.config.sampler.scales(t),
                                 autodiff=self.autodiff)
        teacher_map(setup, step, (0, 0, 0, 0))(chain, one(setup, x), one(setup, y), noise)


def per_tensor_adam_step(state, setup, j: int, grads: dict[str, torch.Tensor], chain_axis: bool) -> None:
    corrections = bias_corrections(state.host.adam_steps[j] + 1)
    s = student_views(state)[j]

    def update(params, grads, exp_avg, exp_avg_sq, lr):
        adam_update_(params, grads, AdamState(exp_avg, exp_avg_sq), lr, *corrections)
        return lr

    if chain_axis:
        vmap(update, randomness="different")(s.params, grads, s.adam.exp_avg, s.adam.exp_avg_sq, s.lr)
    else:
        update(s.params, grads, s.adam.exp_avg, s.adam.exp_avg_sq, s.lr)


def state_tensors(engine: GPEDEngine) -> list[torch.Tensor]:
    return (tree_leaves(engine.chain) + [t for s in engine.students for t in tree_leaves(s)]
            + tree_leaves(engine.ensemble) + [engine.snapshots])


def assert_bit_identical(make_specs) -> None:
    flat_engine, oracle = GPEDEngine(make_specs()), PerTensorEngine(make_specs())
    run_engine(flat_engine)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module, "adam_step", per_tensor_adam_step)
        run_engine(oracle)
    a, b = state_tensors(flat_engine), state_tensors(oracle)
    assert len(a) == len(b)
    different = [i for i, (x, y) in enumerate(zip(a, b)) if not torch.equal(x, y)]
    assert not different, f"{len(different)} of {len(a)} state tensors differ"


@pytest.mark.parametrize("k", [1, 3])
def test_fcnn_chains_equal_the_per_tensor_updates(k):
    assert_bit_identical(lambda: chains(k))


@pytest.mark.parametrize("k", [1, 2])
def test_cnn_chains_with_channels_last_weights_equal_the_per_tensor_updates(k):
    specs = chains(k, model="cnn_mnist", size=16, students=STUDENTS[:2], num_iterations=16, burn_in=4,
                   log_every=8, checkpoint_every=8, num_snapshots=2)
    engine = GPEDEngine(specs)
    layout = engine.state.buffers.teacher.params.layout
    assert not layout.logical  # channels-last conv weights: the views keep their strides
    convs = [v[0] for v in engine.chain.params.values() if v.dim() == 5]
    assert convs and all(v.is_contiguous(memory_format=torch.channels_last) for v in convs)
    assert_bit_identical(lambda: chains(k, model="cnn_mnist", size=16, students=STUDENTS[:2], num_iterations=16,
                                        burn_in=4, log_every=8, checkpoint_every=8, num_snapshots=2))


@pytest.mark.parametrize("sampler", ["sghmc", "sgnht", "baoa"])
def test_momentum_samplers_equal_the_per_tensor_updates(sampler):
    def specs():
        return [build_chain(make_data(n), GPEDConfig(
            model="fcnn", sampler=sampler_config(sampler, step_size=2e-3, batch_size=25, prior_precision=tau),
            num_iterations=30, burn_in=10, eval_thinning=3, log_every=10, progress=False, device="cpu", seed=k,
            eval_batch_size=32), STUDENTS[:1]) for k, (n, tau) in enumerate(((300, 10.0), (500, 1.0)))]

    assert_bit_identical(specs)
    assert_bit_identical(lambda: specs()[:1])


@pytest.mark.parametrize("schedule", [dict(schedule="polynomial", decay_steps=7.0, warmup_steps=5, warmup_factor=3.0),
                                      dict(schedule="cyclical", cycles=3, explore_fraction=0.3)],
                         ids=["polynomial+warmup", "cyclical"])
def test_step_sizes_read_from_the_device_equal_host_floats(schedule):
    """A varying SGLD schedule's factors (and every Adam bias correction) come from device-side tables
    (gped_kit.engine.values); the oracle passes the host floats: the same numbers, bit for bit."""
    def specs():
        return [build_chain(make_data(n), GPEDConfig(
            model="fcnn", sampler=sampler_config("sgld", step_size=5e-5, batch_size=25, prior_precision=tau,
                                                 **schedule),
            num_iterations=60, burn_in=10, eval_thinning=3, log_every=10, progress=False, device="cpu", seed=k,
            eval_batch_size=32), STUDENTS) for k, (n, tau) in enumerate(((300, 10.0), (500, 1.0)))]

    engine = GPEDEngine(specs())
    assert engine.values.scales is not None and engine.period == 6
    assert_bit_identical(specs)
    assert_bit_identical(lambda: specs()[:1])


def test_value_table_rows_are_the_host_values_rounded_to_float32():
    table = ValueTable(bias_corrections, 2, 4, torch.device("cpu"))
    for k in (1, 2, 3, 4, 5, 9, 1000, 3):  # refills when k leaves the block, backwards too
        row = table.row(k)
        assert row.tolist() == torch.tensor(bias_corrections(k), dtype=torch.float32).tolist()
        assert table.covers(k) and row.data_ptr() == table.table[k - table.start].data_ptr()
    with pytest.raises(ValueError, match="size"):
        ValueTable(bias_corrections, 2, 0, torch.device("cpu"))


def test_pooled_teacher_equals_the_per_tensor_updates():
    def specs():
        return [build_chain(make_data(300), GPEDConfig(
            model="fcnn", sampler=sampler_config("sgld", step_size=5e-5, batch_size=25), num_chains=3,
            num_iterations=30, burn_in=10, eval_thinning=3, log_every=10, progress=False, device="cpu", seed=0,
            eval_batch_size=32), STUDENTS)]

    assert_bit_identical(specs)


def test_flat_views_share_the_buffer_and_keep_strides():
    cl = torch.randn(3, 2, 4, 5).to(memory_format=torch.channels_last)
    stacked = {"w": torch.stack([torch.randn(4, 3) for _ in range(2)]), "b": torch.randn(2, 4),
               "conv": torch.empty_strided((2, *cl.shape), (cl.numel(), *cl.stride())).copy_(torch.randn(2, *cl.shape))}
    layout = FlatLayout.of(stacked)
    assert layout.size == 12 + 4 + cl.numel() and not layout.logical
    flat = layout.flatten(stacked)
    for name, value in stacked.items():
        assert torch.equal(flat[name], value) and flat[name].stride()[1:] == value.stride()[1:]
        assert flat[name].untyped_storage().data_ptr() == flat.flat.untyped_storage().data_ptr()
    flat.flat.zero_()
    assert all(v.abs().sum() == 0 for v in flat.values())
    # gradients (logical order, any layout) land where each parameter's element lives
    grads = {n: torch.randn_like(v).contiguous() for n, v in stacked.items()}
    out = layout.zeros(2, torch.device("cpu"))
    layout.gather_(out, grads)
    assert all(torch.equal(out[n], grads[n]) for n in grads)
    logical = FlatLayout.of({n: v.contiguous() for n, v in stacked.items()})
    assert logical.logical
    out = logical.zeros(2, torch.device("cpu"))
    logical.gather_(out, grads)
    assert torch.equal(out.flat, torch.cat([g.reshape(2, -1) for g in grads.values()], dim=1))


def test_units_refuse_a_mix_of_flat_and_per_tensor_operands():
    layout = FlatLayout.of({"a": torch.zeros(2, 3)})
    flat = layout.zeros(2, torch.device("cpu"))
    assert len(units(flat, layout.zeros(2, torch.device("cpu")))) == 1
    assert len(units({"a": torch.zeros(3), "b": torch.zeros(2)}, {"a": torch.ones(3), "b": torch.ones(2)})) == 2
    with pytest.raises(ValueError, match="every operand"):
        units(flat, {"a": torch.zeros(2, 3)})
    other = FlatLayout.of({"b": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match="different layouts"):
        units(flat, other.zeros(2, torch.device("cpu")))
    assert isinstance(flat, FlatTensors) and flat.num_chains == 2
