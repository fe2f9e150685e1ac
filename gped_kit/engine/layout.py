"""How a batch's teacher chains feed its runs, chosen once when an engine is built.

A *run* has one result, history and checkpoint. The engine holds K teacher chains (the chain axis
of the teacher's state and ensemble sums) and R runs (the run axis of the students' state):

* :class:`Independent` -- K independent chains, one run each (R = K): chain k feeds run k. With
  K = 1 the step functions run on chain 0's views (``batched`` False), otherwise under
  ``torch.func.vmap`` over the chain axis.
* :class:`Pooled` -- one pooled teacher (``GPEDConfig.num_chains`` K > 1, or one chain run through
  the pooled code): its K chains' kept samples form one teacher ensemble and feed one set of
  students (R = 1). The ensemble is ``sum_k sums_k / (K count)``, U_s's targets the mean of g over
  the K current samples and U_o's running means take all K samples
  (:func:`~gped_kit.engine.distill.distill_pooled`).

Everything that differs between the two is a method of the layout (which chains a run owns, how
a run's ensemble and sums read the chains', its generators' states, the names in messages), so
the step, the evaluation and the checkpoints hold no branch on the kind of run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import torch

from ..core.autodiff import Autodiff
from ..core.schema import record
from .config import chain_seeds
from .spec import ChainSpec
from .streams import ChainStreams

Sums = dict[str, torch.Tensor]


def check_batchable(chains: Sequence[ChainSpec]) -> None:
    """Raise ``ValueError`` naming the first field in which ``chains`` cannot share one batched
    computation; return None when they can. A pooled teacher (``num_chains`` > 1) is already one
    batched computation of its K chains and is never batched with other chains.

    Shared: the teacher's and each student slot's network structure, the likelihood, input
    shape and number of outputs, device, T, B, ``eval_thinning``, ``log_every``, snapshots, the
    sampler's algorithm and every field of it not carried per chain (for SGLD: M, schedule and
    warm-up; for the momentum samplers all but tau), the evaluation sets (names and sizes), and
    per student slot the target, estimator, H, M' and input generator; |D'| when a student keeps
    a U_o store. Per chain they may differ in the data (N, masks, D'), seed, prior precision, the
    SGLD step size and the students' learning rates and schedules.
    """
    chains = list(chains)
    if not chains:
        raise ValueError("check_batchable: no chains given")
    ref = chains[0]
    pooled = [k for k, c in enumerate(chains) if c.config.num_chains > 1]
    if pooled and len(chains) > 1:
        k = pooled[0]
        raise ValueError(f"check_batchable: chain {k} is a pooled teacher (GPEDConfig.num_chains="
                         f"{chains[k].config.num_chains}): its chains already run as one batched computation, and a "
                         "batch of pooled teachers is not supported; run it alone (distill / a batch of one)")

    def eval_layout(c: ChainSpec) -> list:
        return [(name, int(x.shape[0])) for name, x in c.eval_sets.items()]

    fields: list[tuple[str, Callable[[ChainSpec], Any]]] = [
        ("teacher network", lambda c: c.teacher.structure),
        ("likelihood", lambda c: record(c.likelihood) or c.likelihood.name),
        ("input shape", lambda c: c.data.input_shape),
        ("number of outputs", lambda c: c.data.num_outputs),
        ("device", lambda c: c.device),
        ("GPEDConfig.num_iterations (T)", lambda c: c.config.num_iterations),
        ("GPEDConfig.burn_in (B)", lambda c: c.config.burn_in),
        ("GPEDConfig.eval_thinning", lambda c: c.config.eval_thinning),
        ("GPEDConfig.log_every", lambda c: c.config.log_every),
        ("GPEDConfig.num_snapshots", lambda c: c.config.num_snapshots),
        ("sampler (all but its per-chain coefficients)", lambda c: c.config.sampler.shared_fields()),
        ("evaluation sets (name, size)", eval_layout),
        ("number of students", lambda c: len(c.students)),
    ]
    for k, chain in enumerate(chains[1:], start=1):
        for name, get in fields:
            if get(chain) != get(ref):
                raise ValueError(f"check_batchable: chain {k} differs from chain 0 in {name}: "
                                 f"{get(chain)!r} != {get(ref)!r}")
        for j, (s, s0) in enumerate(zip(chain.students, ref.students)):
            slot = [("target", lambda x: x.target.name), ("target definition", lambda x: x.target),
                    ("estimator", lambda x: x.estimator), ("network", lambda x: x.network.structure),
                    ("distillation group (H, M', input generator)", lambda x: x.group),
                    ("regulariser", lambda x: (x.regularizer, x.config.reg_weight)),
                    ("derivative weight", lambda x: x.config.derivative_weight)]
            for name, get in slot:
                if get(s) != get(s0):
                    raise ValueError(f"check_batchable: chain {k} student {j} ({s.label!r}) differs from chain 0's "
                                     f"({s0.label!r}) in {name}: {get(s)!r} != {get(s0)!r}")
        if any(s.estimator.uses_store for s in ref.students) and chain.num_distill != ref.num_distill:
            raise ValueError(f"check_batchable: chain {k} has |D'| = {chain.num_distill}, chain 0 {ref.num_distill}; "
                             "U_o stores of different sizes cannot be stacked")


@dataclass(frozen=True)
class ChainLayout:
    """The chains of a batch and the runs they feed (see the module docstring). ``runs`` are the
    specs, one per run; ``chain_specs[k]`` and ``chain_seeds[k]`` teacher chain k's spec and seed,
    ``chain_run[k]`` the run it feeds; ``batched``: the teacher's step functions run under vmap
    (else on chain 0's views); ``students_batched``: the students' do."""

    pooled: ClassVar[bool]
    runs: tuple[ChainSpec, ...]
    chain_specs: tuple[ChainSpec, ...]
    chain_seeds: tuple[int, ...]
    chain_run: tuple[int, ...]
    batched: bool

    @property
    def K(self) -> int:
        """The number of teacher chains."""
        return len(self.chain_specs)

    @property
    def num_runs(self) -> int:
        return len(self.runs)

    @property
    def students_batched(self) -> bool:
        raise NotImplementedError

    @property
    def autodiff(self) -> Autodiff:
        """The teacher's autodiff mode (functorch under vmap)."""
        return Autodiff.FUNCTORCH if self.batched else Autodiff.AUTOGRAD

    @property
    def student_autodiff(self) -> Autodiff:
        return Autodiff.FUNCTORCH if self.students_batched else Autodiff.AUTOGRAD

    def teacher_initial(self) -> list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        """Each teacher chain's initial (parameters, buffers)."""
        raise NotImplementedError

    def run_chains(self, r: int) -> int | slice:
        """The index of run ``r``'s teacher chains in the chain axis: its own chain (the axis
        dropped), or all K of a pooled teacher (the axis kept)."""
        raise NotImplementedError

    def run_count(self, count: int) -> int:
        """The samples in each run's ensemble when each chain kept ``count``."""
        raise NotImplementedError

    def run_sums(self, sums: Sums, rows: slice) -> Sums:
        """Each run's ensemble running sums on ``rows`` of the evaluation inputs (run axis first)."""
        raise NotImplementedError

    def run_means(self, sums: Sums, r: int, rows: slice, count: int) -> Sums:
        """Run r's ensemble estimates of E[g] on ``rows`` from the chains' sums of ``count`` samples each."""
        raise NotImplementedError

    def run_train_nll(self, train_nll: Sequence[float], r: int) -> float:
        """Run r's minibatch NLL from each chain's."""
        raise NotImplementedError

    def chain_name(self, k: int) -> str:
        """Chain k, as a message's prefix (empty for a lone chain)."""
        raise NotImplementedError

    def run_name(self, r: int) -> str:
        """Run r, as a message's prefix (empty for a lone run)."""
        raise NotImplementedError

    def generators(self, streams: ChainStreams, r: int) -> dict[str, Any]:
        """Run r's random generators' states (a checkpoint's ``generators``)."""
        raise NotImplementedError

    def load_generators(self, streams: ChainStreams, r: int, saved: dict[str, Any]) -> None:
        """Set run r's generators to the states :meth:`generators` gave."""
        raise NotImplementedError


@dataclass(frozen=True)
class Independent(ChainLayout):
    """K independent chains, run k fed by chain k."""

    pooled: ClassVar[bool] = False

    @property
    def students_batched(self) -> bool:
        return self.batched

    def teacher_initial(self) -> list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        return [c.initial[0] for c in self.runs]

    def run_chains(self, r: int) -> int | slice:
        return r

    def run_count(self, count: int) -> int:
        return count

    def run_sums(self, sums: Sums, rows: slice) -> Sums:
        return {name: s[:, rows] for name, s in sums.items()}

    def run_means(self, sums: Sums, r: int, rows: slice, count: int) -> Sums:
        return {name: s[r, rows] / count for name, s in sums.items()}

    def run_train_nll(self, train_nll: Sequence[float], r: int) -> float:
        return train_nll[r]

    def chain_name(self, k: int) -> str:
        return f"chain {k} of the batch: " if self.batched else ""

    def run_name(self, r: int) -> str:
        return self.chain_name(r)

    def generators(self, streams: ChainStreams, r: int) -> dict[str, Any]:
        return streams.state_dict(r)

    def load_generators(self, streams: ChainStreams, r: int, saved: dict[str, Any]) -> None:
        streams.load_state_dict(r, saved)


@dataclass(frozen=True)
class Pooled(ChainLayout):
    """One pooled teacher: K chains feeding one run."""

    pooled: ClassVar[bool] = True

    @property
    def students_batched(self) -> bool:
        return False

    def teacher_initial(self) -> list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        return self.runs[0].teacher_initial

    def run_chains(self, r: int) -> int | slice:
        return slice(None)

    def run_count(self, count: int) -> int:
        return count * self.K

    def run_sums(self, sums: Sums, rows: slice) -> Sums:
        return {name: s[:, rows].sum(0, keepdim=True) for name, s in sums.items()}

    def run_means(self, sums: Sums, r: int, rows: slice, count: int) -> Sums:
        return {name: s[:, rows].sum(0) / self.run_count(count) for name, s in sums.items()}

    def run_train_nll(self, train_nll: Sequence[float], r: int) -> float:
        return sum(train_nll) / self.K

    def chain_name(self, k: int) -> str:
        return f"chain {k} (seed {self.chain_seeds[k]}) of the pooled teacher: " if self.K > 1 else ""

    def run_name(self, r: int) -> str:
        return ""

    def generators(self, streams: ChainStreams, r: int) -> dict[str, Any]:
        return {"chains": [streams.chain_state_dict(i) for i in range(self.K)], "groups": streams.groups_state_dict(r)}

    def load_generators(self, streams: ChainStreams, r: int, saved: dict[str, Any]) -> None:
        for i, chain in enumerate(saved["chains"]):
            streams.load_chain_state_dict(i, chain)
        streams.load_groups_state_dict(r, saved["groups"])


def chain_layout(chains: Sequence[ChainSpec], use_vmap: bool | None = None,
                 pooled: bool | None = None) -> ChainLayout:
    """The layout of ``chains`` (one spec per run; checked by :func:`check_batchable`): a pooled
    teacher when its spec pools ``num_chains`` > 1 chains or ``pooled`` is True (one spec), else
    independent chains. ``use_vmap`` forces (True) or avoids (False, one chain only) the vmapped
    path; by default it is used exactly when K > 1."""
    chains = tuple(chains)
    check_batchable(chains)
    ref = chains[0]
    is_pooled = ref.config.num_chains > 1 if pooled is None else bool(pooled)
    if is_pooled and len(chains) > 1:
        raise ValueError(f"pooled=True needs one spec (one pooled run), got {len(chains)}")
    if not is_pooled and ref.config.num_chains > 1:
        raise ValueError(f"pooled=False: the spec pools num_chains={ref.config.num_chains} chains")
    if is_pooled:
        n = ref.config.num_chains
        specs, seeds, runs = (ref,) * n, tuple(chain_seeds(ref.config)), (0,) * n
    else:
        specs, seeds, runs = chains, tuple(c.config.seed for c in chains), tuple(range(len(chains)))
    K = len(specs)
    if use_vmap is False and K > 1:
        raise ValueError(f"use_vmap=False needs one chain, got {K}")
    batched = K > 1 if use_vmap is None else bool(use_vmap)
    kind = Pooled if is_pooled else Independent
    return kind(runs=chains, chain_specs=specs, chain_seeds=seeds, chain_run=runs, batched=batched)
