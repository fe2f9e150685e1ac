"""A chain of Algorithm 1 made concrete: data, configuration, networks and initial values.

:func:`build_chain` validates a (data, :class:`GPEDConfig`, students) triple, builds the
teacher's and every student's network once (to learn their shapes and check them against the
data and the likelihood) and keeps them as *skeletons* on the ``meta`` device: the engine's
state holds the parameter values, and the skeletons are evaluated with
``torch.func.functional_call``. The initial values are drawn under the chain's seed exactly
once, in a fixed order (teacher, then each student), so they do not depend on anything else.
A pooled teacher (``GPEDConfig.num_chains`` K > 1) is one spec: chain 0's initial values as for
one chain, then chain k's teacher drawn alone under its own seed
(:func:`~gped_kit.engine.config.chain_seeds`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import torch
from torch import nn
from torch.func import functional_call

from ..core import losses
from ..core.likelihoods import Likelihood
from ..core.options import Estimator, InputGenerator, StepSchedule
from ..core.schema import record
from ..core.targets import TARGETS, Target
from ..data.container import GPEDData
from ..models.build import instantiate
from ..models.presets import count_parameters, cpu_training_layout
from .config import (
    GPEDConfig,
    GroupKey,
    Regularizer,
    StudentConfig,
    chain_seeds,
    resolve_device,
    snapshot_steps,
)


@dataclass
class NetworkSpec:
    """A network as the engine evaluates it: skeletons (``meta`` device) in training and evaluation
    mode, and the names of its parameters and buffers in ``named_parameters()`` order."""

    train: nn.Module
    eval: nn.Module
    param_names: tuple[str, ...]
    buffer_names: tuple[str, ...]
    num_params: int
    structure: str  # the skeleton's repr: equal structures can be batched together

    @classmethod
    def of(cls, net: nn.Module) -> NetworkSpec:
        skeleton = copy.deepcopy(net).to("meta")
        return cls(train=skeleton.train(), eval=copy.deepcopy(skeleton).eval(),
                   param_names=tuple(n for n, _ in net.named_parameters()),
                   buffer_names=tuple(n for n, _ in net.named_buffers()),
                   num_params=count_parameters(net), structure=repr(skeleton))


@dataclass
class StudentSpec:
    """One student of a chain: its configuration, target, network and where it sits."""

    config: StudentConfig
    target: Target
    estimator: Estimator
    out_dim: int
    network: NetworkSpec
    regularizer: Regularizer | None
    group: GroupKey

    @property
    def label(self) -> str:
        return self.config.label


@dataclass
class ChainSpec:
    """Everything fixed about one chain (or one pooled teacher of ``config.num_chains`` chains).
    ``initial`` holds the initial parameter and buffer values (teacher first, then each student),
    drawn under ``config.seed``; ``other_teachers`` the initial values of a pooled teacher's
    chains 1 .. K-1 (:attr:`teacher_initial`)."""

    data: GPEDData
    config: GPEDConfig
    students: tuple[StudentSpec, ...]
    teacher: NetworkSpec
    likelihood: Likelihood
    device: torch.device
    groups: dict[GroupKey, tuple[int, ...]]  # each distillation group's student slots, in sorted order
    ensemble_targets: dict[str, Target]
    initial: list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]] = field(repr=False)
    snapshot_at: dict[int, int] = field(default_factory=dict)
    noise_moments: tuple[float, float] | None = None
    rng_after_init: dict[str, torch.Tensor] = field(default_factory=dict, repr=False)
    other_teachers: list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]] = field(default_factory=list,
                                                                                         repr=False)

    @property
    def teacher_initial(self) -> list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
        """The initial teacher values of each of the ``config.num_chains`` chains."""
        return [self.initial[0], *self.other_teachers]

    @property
    def num_train(self) -> int:
        """N = |D|."""
        return int(self.data.train_x.shape[0])

    @property
    def num_distill(self) -> int:
        """|D'|."""
        return int(self.data.distill_x.shape[0])

    @property
    def steps_per_epoch(self) -> float:
        """One teacher epoch in SGLD steps: N / M."""
        return self.num_train / self.config.sampler.batch_size

    @property
    def eval_sets(self) -> dict[str, torch.Tensor]:
        """The evaluation inputs: the test set first, then the further (OOD) sets."""
        return {"test": self.data.test_x, **self.data.ood_x}

    @property
    def labels(self) -> list[str]:
        return [s.label for s in self.students]

    def record(self) -> dict:
        """The key record of the chain: data identity, configuration and students, in order. A student that
        warms up in a cyclical chain records ``lr_warmup_counts: "updates"``: its warm-up counts its own updates
        since 2026-11-30 (before, steps since B, over before its first update), which keys it apart from the
        earlier numbers; with a constant step size the two counts agree, and its key is as it was."""
        cyclical = self.config.sampler.schedule is StepSchedule.CYCLICAL
        students = []
        for s in self.students:
            out = s.config.record()
            if cyclical and s.config.lr_warmup:
                out["lr_warmup_counts"] = "updates"
            students.append(out)
        return {"data": record(self.data.fingerprint()), "gped": self.config.record(), "students": students}


def _regularizer(cfg: StudentConfig) -> Regularizer | None:
    if cfg.reg_weight == 0 or cfg.regularizer is None:
        return None
    return losses.REGULARIZERS[cfg.regularizer] if isinstance(cfg.regularizer, str) else cfg.regularizer


def student_model(cfg: StudentConfig, teacher_model: object):
    """The model a student is built from: its ``arch``, or else the teacher's model."""
    if cfg.arch is not None:
        return cfg.arch
    if isinstance(teacher_model, nn.Module):
        raise ValueError(f"student {cfg.label!r}: the teacher is an nn.Module instance, whose output size is fixed; "
                         "give StudentConfig.arch (a module or a factory out_dim -> nn.Module)")
    return teacher_model


def build_chain(data: GPEDData, config: GPEDConfig, students: Sequence[StudentConfig]) -> ChainSpec:
    """Validate and build one chain; see the module docstring. Raises ``ValueError`` naming the
    problem before any sampling starts."""
    if not isinstance(data, GPEDData):
        raise TypeError(f"data must be a GPEDData (gped_kit.data.container), got {type(data).__name__}")
    data.validate()  # again: its tensors may have been changed in place since it was built
    students = list(students)
    for i, s in enumerate(students):
        if not isinstance(s, StudentConfig):
            raise TypeError(f"students[{i}] is a {type(s).__name__}, not a StudentConfig")
    labels = [s.label for s in students]
    if len(set(labels)) != len(labels):
        raise ValueError(f"student labels must be unique, got {labels}; set StudentConfig.name")
    likelihood = config.likelihood
    for s in students:
        target = s.resolved_target
        if target.likelihood != likelihood.name:
            raise ValueError(f"student {s.label!r}: target {target.name!r} is for a {target.likelihood} likelihood, "
                             f"but the teacher's is {likelihood.name}")
    if likelihood.integer_labels and data.train_y.is_floating_point():
        raise ValueError(f"data: the {likelihood.name} likelihood needs integer class labels in train_y; "
                         "for real-valued targets use GPEDConfig(likelihood='gaussian')")
    device = resolve_device(config.device)
    data = data.to(device)
    num_outputs = data.num_outputs
    shape = data.input_shape
    cpu_layout = device.type == "cpu"

    def place(net: nn.Module) -> nn.Module:
        net = net.to(device)
        return cpu_training_layout(net) if cpu_layout else net

    initial = []
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(config.seed)
        teacher = place(instantiate(config.model, shape, likelihood.raw_outputs(num_outputs), "GPEDConfig.model"))
        initial.append(_values(teacher))
        student_specs = []
        for s in students:
            target = s.resolved_target
            out_dim = target.out_dim(num_outputs)
            net = place(instantiate(student_model(s, config.model), shape, out_dim, f"student {s.label!r}"))
            initial.append(_values(net))
            student_specs.append(StudentSpec(config=s, target=target, estimator=s.estimator, out_dim=out_dim,
                                             network=NetworkSpec.of(net), regularizer=_regularizer(s),
                                             group=s.group_key))
        # the global stream after initialisation drives dropout masks (as when modules are built and trained)
        rng = {"cpu": torch.get_rng_state()}
        if cuda:
            rng["cuda"] = torch.cuda.get_rng_state(device)
    others = []
    for seed in chain_seeds(config)[1:]:  # a pooled teacher's further chains: each teacher under its own seed
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            others.append(_values(place(instantiate(config.model, shape, likelihood.raw_outputs(num_outputs),
                                                    "GPEDConfig.model"))))
    for s in student_specs:
        if s.regularizer is not None:
            s.regularizer(initial[1 + student_specs.index(s)][0], s.network.train)  # fails now, not mid-run
    groups: dict[GroupKey, list[int]] = {}
    for j, s in enumerate(student_specs):
        groups.setdefault(s.group, []).append(j)
    ensemble = {likelihood.ensemble_target: TARGETS[likelihood.ensemble_target]}
    for s in student_specs:
        ensemble.setdefault(s.target.name, s.target)
    teacher_spec = NetworkSpec.of(teacher)
    check_target_widths(data, teacher_spec, initial[0], likelihood, student_specs, ensemble)
    noise_moments = None
    if any(s.config.input_generator is InputGenerator.NOISE for s in student_specs):
        noise_moments = (float(data.distill_x.mean()), float(data.distill_x.std()))
    return ChainSpec(data=data, config=config, students=tuple(student_specs), teacher=teacher_spec,
                     likelihood=likelihood, device=device,
                     groups={k: tuple(v) for k, v in sorted(groups.items())},
                     ensemble_targets=ensemble, initial=initial,
                     snapshot_at={t: k for k, t in enumerate(snapshot_steps(config))}, noise_moments=noise_moments,
                     rng_after_init=rng, other_teachers=others)


#: How many training inputs :func:`check_target_widths` runs the teacher and every target's g on.
WIDTH_CHECK_ROWS = 3


def check_target_widths(data: GPEDData, teacher: NetworkSpec,
                        values: tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]], likelihood: Likelihood,
                        students: Sequence[StudentSpec], ensemble: dict[str, Target]) -> None:
    """Every target's ``g`` tried once, before any sampling, on the teacher's statistics of the first
    :data:`WIDTH_CHECK_ROWS` training inputs (on the run's device, the teacher at its initial values, in
    evaluation mode): it must return a ``(B, D)`` tensor with D = ``target.out_dim(C)``, the width of the
    student's output, of U_o's store and of the ensemble's sums, and only finite values. Otherwise
    ``ValueError`` names the target, its students and the width g returned and the declared one, or how many
    of its values are NaN or infinite (a wrong width would otherwise fail steps into the run, or broadcast
    silently; a non-finite value would make the student diverge, blamed on its learning rate). The teacher's
    raw outputs on those inputs must be finite too (``ValueError`` naming the model otherwise: the finite
    data were checked before, so the network makes them). No random numbers are drawn and no network's state
    changes."""
    num_outputs = data.num_outputs
    x = data.train_x[:WIDTH_CHECK_ROWS]
    rows = int(x.shape[0])
    targets = {id(t): t for t in (*ensemble.values(), *(s.target for s in students))}
    with torch.no_grad():
        raw = functional_call(teacher.eval, values, (x,))
        bad = _non_finite(raw)
        if bad:
            raise ValueError(f"GPEDConfig.model: the teacher's raw outputs on the first {rows} training inputs, at its "
                             f"initial parameters, hold non-finite values ({bad} of {raw.numel()} NaN or infinite), "
                             "so every sampling step would diverge whatever the step size; the data are finite: "
                             "check the model's forward pass and initial parameters")
        stats = likelihood.statistics(raw)
        for target in targets.values():
            width = target.out_dim(num_outputs)
            try:
                out = target.g(stats)
            except Exception as exc:  # a g that cannot run at all: say which target, keep the cause
                raise ValueError(f"target {target.name!r}: its g failed on the teacher's statistics of {rows} "
                                 f"inputs (shape {tuple(stats.shape)}): {type(exc).__name__}: {exc}") from exc
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else None
            if shape == (rows, width):
                bad = _non_finite(out)
                if not bad:
                    continue
                raise ValueError(
                    f"target {target.name!r}{_users(target, students)}: its g returned NaN or infinite values on "
                    f"the teacher's statistics of the first {rows} training inputs ({bad} of {out.numel()} values; "
                    "the teacher's outputs there are finite); the student would learn them and diverge. Make g "
                    "return finite values (e.g. clamp probabilities before a log, guard divisions)")
            got = (f"a {type(out).__name__}, not a tensor" if shape is None
                   else f"shape {shape}, width {shape[-1]}" if len(shape) == 2 and shape[0] == rows
                   else f"shape {shape}, not (batch, width)")
            raise ValueError(
                f"target {target.name!r}{_users(target, students)}: its g returned {got} for a batch of {rows} "
                f"inputs, but the target declares width {width} (out_dim({num_outputs}) = {width} for {num_outputs} "
                f"{likelihood.name} outputs): the width of the student's output, of the U_o store and of the "
                f"ensemble's sums. Make g return ({rows}, {width}), or declare the width g returns with the "
                "out_dim parameter (custom_target(..., out_dim=...) or Target(out_dim=...)).")


def _non_finite(values: torch.Tensor) -> int:
    """How many of ``values`` are NaN or infinite (one host synchronisation: call at setup only)."""
    return int(values.numel() - torch.isfinite(values).sum())


def _users(target: Target, students: Sequence[StudentSpec]) -> str:
    """`` (student 'a')`` / `` (students 'a', 'b')``: the students that learn ``target``, for an error message
    (empty when only the teacher ensemble tracks it)."""
    users = [s.label for s in students if s.target is target]
    return f" (student{'s' if len(users) > 1 else ''} {', '.join(map(repr, users))})" if users else ""


def _values(net: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return ({n: p.detach() for n, p in net.named_parameters()}, {n: b.detach() for n, b in net.named_buffers()})
