"""Distil a posterior or an ensemble given as samples: Algorithm 1 with a replayed teacher.

A teacher given as S samples theta_0 .. theta_{S-1} -- a deep ensemble's members, the samples of
``posteriors`` or of another MCMC run, draws from a laplace-torch posterior, a run's snapshots --
is distilled by the engine's own code: :class:`OfflineEngine` is a :class:`GPEDEngine` whose
teacher step *loads the next sample* into the chain's parameters instead of taking an SG-MCMC
step. Everything after the teacher's step is unchanged (:meth:`GPEDEngine.step`): the event
schedule, the distillation inputs S' and their random streams, the targets g, the estimators,
the students' Adam steps and learning rates, the teacher ensemble on the evaluation sets, the
history and the result. So distilling the samples an online chain visited, in its order, gives
the online run's numbers (U_o's sums and counts, the students' parameters) bit for bit.

**How the samples are visited.** There is no chain to burn in: the offline run has
``T' = B + 1 + passes * S`` steps (``B`` = ``GPEDConfig.burn_in``; ``GPEDConfig.num_iterations``
is replaced). Steps ``t <= B`` do nothing (no sample is loaded; the learning-rate halving counts
from B as online). Step ``t > B`` is visit ``v = t - B - 1`` and its teacher is

    theta_t = samples[v mod S],        v = 0, 1, ..., passes * S - 1,

i.e. the samples in the given order, ``passes`` times over. Then, as online, after burn-in:

* every distillation group of thinning H with ``t mod H = 0`` draws S' (M' indices into D', or
  its generator's inputs), computes g(x'_i, theta_t) once and updates each of its students: U_s's
  target is ``g_hat_i = g(x'_i, theta_t)`` (Eq. 9), U_o's ``g_hat_i = (m_i g_hat_i + g(x'_i,
  theta_t)) / (m_i + 1)`` (Eq. 10: after the run, for input i visited at steps V_i,
  ``g_hat_i = (1 / |V_i|) sum_{t in V_i} g(x'_i, theta_t)``, a mean over the samples that were
  current when i was drawn), then one Adam step on Eq. 8's loss ``mean_i l(g_hat_i, f(x'_i | phi))
  + lambda R(phi)``. With ``thinning=1`` (the natural choice for given samples) each student takes
  **one update per visit**, ``passes * S`` in all, and each sample serves ``passes`` updates; a
  thinning H > 1 keeps the visits whose step is a multiple of H, as online it keeps those steps;
* every ``eval_thinning`` steps the sample is added to the teacher ensemble on the evaluation
  sets. With ``eval_thinning=1`` every visit is added, so the ensemble's estimate is exactly the
  samples' mean ``(1/S) sum_s g(x, theta_s)`` (each sample counted ``passes`` times).

The history's ``teacher_train_nll`` is NaN (no minibatch of D is drawn: the teacher does not
step), and the summary has the columns ``offline_samples`` (S) and ``offline_passes``. Students
with dropout draw their masks from the global stream as online; an online teacher with dropout
draws from it too, so their masks then differ from the online run's (U_o's numbers do not).

**Samples** are a sequence of state dicts (name -> tensor: every parameter and buffer of the
teacher's network, ``GPEDConfig.model``, with its shapes) or of ``nn.Module`` s of that
architecture (their ``named_parameters()`` and ``named_buffers()``), or a tensor ``(S, P)``: one
flattened parameter vector per row in ``named_parameters()`` order (``parameters_to_vector``,
laplace-torch's ``sample``, :attr:`GPEDResult.snapshots`; only for a teacher without buffers).
They are validated against the teacher before anything runs (``ValueError`` naming the sample,
the key and what was expected), are not copied, and are read at each visit (values of another
floating dtype or device are converted as they are copied into the chain's parameters).

:func:`distill_samples` is the entry point; :func:`offline_engine` builds the engine without
running it (for tools and tests that read its state).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence, Union

import torch
from torch import nn

from ..core.options import StepSchedule, check_int
from ..data.container import GPEDData
from .config import GPEDConfig, StudentConfig, student_updates
from .engine import GPEDEngine, Hook
from .result import GPEDResult
from .run import run_engine
from .spec import ChainSpec, build_chain

#: What :func:`distill_samples` accepts as the teacher's samples (see the module docstring).
Samples = Union[Sequence[Union[Mapping[str, torch.Tensor], nn.Module]], torch.Tensor]


class OfflineEngine(GPEDEngine):
    """A :class:`GPEDEngine` of one chain whose teacher replays ``samples`` (validated name ->
    tensor dicts, every parameter and buffer of the teacher) instead of stepping its sampler:
    :meth:`teacher_step` at step t > B loads ``samples[(t - B - 1) mod S]`` (see the module
    docstring); everything else is the engine's. ``passes`` is recorded in the summary; build it
    with :func:`offline_engine`."""

    def __init__(self, spec: ChainSpec, samples: Sequence[Mapping[str, torch.Tensor]], passes: int) -> None:
        super().__init__([spec])
        self.samples = list(samples)
        self.passes = passes

    def sample_index(self, t: int) -> int | None:
        """The index of the sample that is the teacher at step t: ``(t - B - 1) mod S`` after
        burn-in, None during it."""
        burn_in = self.config.burn_in
        return (t - burn_in - 1) % len(self.samples) if t > burn_in else None

    def teacher_step(self, t: int | None = None) -> None:
        """Load the sample of step ``t`` (default: the current step; :meth:`sample_index`) into the
        chain's parameters and buffers; nothing during burn-in. Does not advance t."""
        t = self.t if t is None else t
        index = self.sample_index(t)
        if index is None:
            return
        chain = self.chain
        with torch.no_grad():
            for name, value in self.samples[index].items():
                target = chain.params[name] if name in chain.params else chain.buffers[name]
                target[0].copy_(value)

    def log(self) -> list[list[dict]]:
        """:meth:`GPEDEngine.log`, with ``teacher_train_nll`` NaN: the replayed teacher draws no
        minibatch of D."""
        rows = super().log()
        for run in rows:
            for row in run:
                row["teacher_train_nll"] = float("nan")
        return rows

    def results(self) -> list[GPEDResult]:
        """:meth:`GPEDEngine.results`, the summary with ``offline_samples`` (S) and ``offline_passes``."""
        results = super().results()
        for result in results:
            result.summary["offline_samples"] = len(self.samples)
            result.summary["offline_passes"] = self.passes
        return results


def offline_engine(samples: Samples, data: GPEDData, config: GPEDConfig, students: Sequence[StudentConfig],
                   passes: int = 1) -> OfflineEngine:
    """The :class:`OfflineEngine` distilling ``samples`` (module docstring) into ``students`` at step
    0, not run. ``config`` gives the teacher's network (``model``), likelihood, seed, B, the
    ensemble's thinning, logging and device; its ``num_iterations`` becomes ``B + 1 + passes * S``.
    Bad input raises ``ValueError`` before any step: an empty or malformed ``samples``, keys or
    shapes that are not the teacher's, non-finite values, ``passes`` < 1, a pooled teacher
    (``num_chains`` > 1), a cyclical schedule, snapshots, or a student or the ensemble that the
    schedule would never update."""
    rows = _sample_list(samples)
    check_int("passes", passes, 1)
    students = list(students)
    if not isinstance(config, GPEDConfig):
        raise TypeError(f"config must be a GPEDConfig, got {type(config).__name__}")
    if config.num_chains > 1:
        raise ValueError(f"GPEDConfig.num_chains={config.num_chains}: given samples are one teacher; "
                         "use num_chains=1 (pool the samples into one list)")
    if config.sampler.schedule is StepSchedule.CYCLICAL:
        raise ValueError("GPEDConfig.sampler.schedule='cyclical': given samples have no cycles to keep or drop; "
                         "use the constant schedule (the sampler's other settings are not used offline)")
    if config.num_snapshots:
        raise ValueError(f"GPEDConfig.num_snapshots={config.num_snapshots}: the given samples are the snapshots; "
                         "use num_snapshots=0")
    num_samples = len(rows) if isinstance(rows, list) else int(rows.shape[0])
    visits = passes * num_samples
    config = dataclasses.replace(config, num_iterations=config.burn_in + 1 + visits, graph=False)
    for s in students:
        if isinstance(s, StudentConfig) and student_updates(config, s.thinning) == 0:
            raise ValueError(f"student {s.label!r}: thinning={s.thinning} (H) gives no update over the {visits} "
                             f"visits ({passes} pass(es) over {num_samples} samples: steps {config.burn_in + 1} .. "
                             f"{config.burn_in + visits}, of which a student distils at the multiples of H); set "
                             "its thinning=1 (one update per visit) or raise passes")
    if student_updates(config, config.eval_thinning) == 0:
        raise ValueError(f"GPEDConfig.eval_thinning={config.eval_thinning} adds no sample to the teacher ensemble "
                         f"over the {visits} visits (steps {config.burn_in + 1} .. {config.burn_in + visits}); "
                         "set eval_thinning=1 (every visit) or raise passes")
    spec = build_chain(data, config, students)
    return OfflineEngine(spec, _check_samples(rows, spec), passes)


def distill_samples(samples: Samples, data: GPEDData, config: GPEDConfig, students: Sequence[StudentConfig],
                    passes: int = 1, hooks: Sequence[Hook] = ()) -> GPEDResult:
    """Distil the teacher given as ``samples`` into ``students`` with Algorithm 1's targets,
    estimators and updates, the samples visited in order ``passes`` times (see the module
    docstring: step t > B's teacher is ``samples[(t - B - 1) mod S]``); returns one
    :class:`GPEDResult` as :func:`~gped_kit.engine.run.distill` does. ``hooks`` as for
    :meth:`GPEDEngine.run`; a progress display follows ``config.progress``."""
    return run_engine(offline_engine(samples, data, config, students, passes), hooks=hooks)[0]


def _sample_list(samples: Samples) -> list[Mapping[str, torch.Tensor]] | torch.Tensor:
    """``samples`` as a list of name -> tensor mappings (modules read as their parameters and
    buffers), or the ``(S, P)`` tensor itself; ``ValueError`` for anything else or for none."""
    if isinstance(samples, torch.Tensor):
        if samples.dim() != 2 or not samples.is_floating_point():
            raise ValueError(f"samples: a tensor of shape {tuple(samples.shape)} and dtype {samples.dtype}; a "
                             "tensor of samples must be floating point of shape (S, P), one flattened parameter "
                             "vector per row")
        if samples.shape[0] == 0:
            raise ValueError("samples: no sample given (a tensor of 0 rows); give at least one")
        return samples
    if isinstance(samples, (Mapping, nn.Module)):
        raise ValueError(f"samples: one {type(samples).__name__} given; pass a list of samples (state dicts or "
                         "modules), e.g. [sample] for one")
    if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence):
        raise ValueError(f"samples: a {type(samples).__name__}; allowed: a list of state dicts (name -> tensor) or "
                         "nn.Modules of the teacher's architecture, or a tensor (S, P)")
    if len(samples) == 0:
        raise ValueError("samples: no sample given (an empty list); give at least one")
    out: list[Mapping[str, torch.Tensor]] = []
    for i, sample in enumerate(samples):
        if isinstance(sample, nn.Module):
            out.append({**dict(sample.named_parameters()), **dict(sample.named_buffers())})
        elif isinstance(sample, Mapping):
            out.append(sample)
        else:
            raise ValueError(f"samples[{i}] is a {type(sample).__name__}; allowed: a state dict (name -> tensor) or "
                             "an nn.Module of the teacher's architecture")
    return out


def _check_samples(samples: list[Mapping[str, torch.Tensor]] | torch.Tensor,
                   spec: ChainSpec) -> list[dict[str, torch.Tensor]]:
    """Check every sample against the teacher of ``spec`` (names, shapes, finite values) and return
    them as name -> tensor dicts (a tensor's rows as views of each parameter's segment)."""
    params, buffers = spec.initial[0]
    expected = {**params, **buffers}
    if isinstance(samples, torch.Tensor):
        if buffers:
            raise ValueError(f"samples: a tensor of flattened parameters, but the teacher (GPEDConfig.model) also has "
                             f"buffers {sorted(buffers)}; give state dicts or modules, which carry them")
        size = sum(v.numel() for v in params.values())
        if samples.shape[1] != size:
            raise ValueError(f"samples: a tensor of {samples.shape[1]} columns; the teacher (GPEDConfig.model) has "
                             f"P = {size} parameters (one flattened vector per row, named_parameters() order)")
        rows = []
        for row in samples:
            sample, offset = {}, 0
            for name, value in params.items():
                sample[name] = row[offset:offset + value.numel()].view(value.shape)
                offset += value.numel()
            rows.append(sample)
        samples = rows
    out = []
    for i, sample in enumerate(samples):
        missing = [n for n in expected if n not in sample]
        unknown = [str(n) for n in sample if n not in expected]
        if missing or unknown:
            parts = ([f"lacks {missing}"] if missing else []) + ([f"has keys the teacher does not: {unknown}"]
                                                                 if unknown else [])
            raise ValueError(f"samples[{i}] {' and '.join(parts)}; the teacher (GPEDConfig.model) has parameters "
                             f"{list(params)} and buffers {list(buffers)}")
        checked = {}
        for name, reference in expected.items():
            value = sample[name]
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"samples[{i}][{name!r}] is a {type(value).__name__}, not a tensor")
            if tuple(value.shape) != tuple(reference.shape):
                raise ValueError(f"samples[{i}][{name!r}] has shape {tuple(value.shape)}; the teacher's "
                                 f"{name!r} has shape {tuple(reference.shape)}")
            if name in params and not value.is_floating_point():
                raise ValueError(f"samples[{i}][{name!r}] has dtype {value.dtype}; parameters are floating point")
            if value.is_floating_point() and not bool(torch.isfinite(value.detach()).all()):
                bad = int((~torch.isfinite(value.detach())).sum())
                raise ValueError(f"samples[{i}][{name!r}] holds {bad} non-finite value(s) (NaN or infinity) of "
                                 f"{value.numel()}")
            checked[name] = value.detach()
        out.append(checked)
    return out

