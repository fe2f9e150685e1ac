"""What a GPED run computes: the teacher chain (:class:`GPEDConfig`) and its students (:class:`StudentConfig`).

Both are frozen dataclasses validated on creation, so bad input is rejected before any work
starts with the parameter, the value and what is allowed. String options are parsed into the
enums of :mod:`gped_kit.core.options`; models are any specification of
:mod:`gped_kit.models.build` (a preset name, an ``ArchSpec``, a factory or an ``nn.Module``).
:meth:`GPEDConfig.record` / :meth:`StudentConfig.record` give the key records of
:mod:`gped_kit.core.schema`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import torch
from torch import nn

from ..core import losses
from ..core.likelihoods import Likelihood, resolve_likelihood
from ..core.options import (
    Estimator,
    InputGenerator,
    RandomNumbers,
    StepSchedule,
    check_int,
    check_positive,
    parse_option,
)
from ..core.sampler import SamplerConfig
from ..core.samplers import sampler_config
from ..core.schema import record, record_fields
from ..core.sgld import SGLDConfig
from ..core.targets import Target, resolve_target
from ..models.build import ModelSpec, as_model_spec, describe
from ..models.presets import ArchSpec
from ..progress import progress_mode
from .precision import check_matmul_precision

#: A regulariser R(params, module) -> scalar (Eq. 8's R(phi)); built-ins by name in
#: :data:`gped_kit.core.losses.REGULARIZERS`.
Regularizer = Callable[[dict[str, torch.Tensor], nn.Module], torch.Tensor]


def _model_record(spec: ModelSpec | None) -> Any:
    return None if spec is None else describe(spec)


class GroupKey(NamedTuple):
    """A distillation group: the students of a chain that share the minibatch S' of D', its random
    stream and the teacher's forward pass on it (Algorithm 1's inner step). Ordered as a tuple
    (groups run in sorted order) and written ``"H,M',generator,std,derivatives"`` in checkpoints."""

    thinning: int  # H: the group distils at every step t > B with t mod H = 0
    batch_size: int  # M' = |S'|
    input_generator: str  # InputGenerator value: how x' is drawn
    noise_std: float  # the perturbation's standard deviation (input_generator "perturb"), else 0
    matches_derivatives: bool  # derivative matching: the teacher's input-gradients are needed too


@dataclass(frozen=True)
class StudentConfig:
    """One student distilled from the chain: target g, estimator U, architecture, optimiser, inputs.

    ``thinning`` is H (the paper: 100 for the predictive target, 10 for entropy); ``batch_size``
    is M'; ``lr`` is alpha_0 for Adam, halved every ``lr_halving_epochs`` epochs of the
    *teacher* after burn-in (one epoch = N/M SGLD steps, as in the authors' code; None keeps it
    constant; :func:`student_lr`); ``regularizer``/``reg_weight`` are R and lambda of Eq. 8
    (``"group_lasso"`` or a callable ``(params, module) -> scalar``). ``arch`` None means the
    teacher's architecture (its preset, or its factory with this target's output size).

    ``input_generator`` picks the distillation inputs x' (Papamakarios' thesis, Section 2.3;
    :class:`~gped_kit.core.options.InputGenerator`); ``input_noise_std`` is the ``perturb``
    generator's noise. ``derivative_weight`` gamma > 0 adds the thesis' derivative matching
    (Section 2.2.2): gamma times the squared error between the student's and the current teacher
    sample's input-gradients of the log class probabilities (one Rademacher projection of the
    class axis per example; predictive targets only). Like the entropy loss it is non-linear in
    the teacher sample, so its single-sample (online) version is biased (thesis, Section 3.3.3).
    """

    target: str | Target = "predictive"
    estimator: Estimator = Estimator.U_S
    arch: ModelSpec | None = None
    thinning: int = 100
    batch_size: int = 100
    lr: float = 1e-3
    lr_halving_epochs: float | None = 200.0
    regularizer: str | Regularizer | None = None
    reg_weight: float = 0.0
    name: str | None = None
    input_generator: InputGenerator = InputGenerator.DATA
    input_noise_std: float = 0.1
    derivative_weight: float = 0.0
    lr_warmup: int = 0

    def __post_init__(self) -> None:
        target = resolve_target(self.target)
        est = parse_option(Estimator, self.estimator, "StudentConfig.estimator")
        object.__setattr__(self, "estimator", est)
        gen = parse_option(InputGenerator, "data" if self.input_generator is None else self.input_generator,
                           "StudentConfig.input_generator")
        object.__setattr__(self, "input_generator", gen)
        if self.arch is not None:
            object.__setattr__(self, "arch", as_model_spec(self.arch, "StudentConfig.arch"))
        if est is Estimator.U_S_U_O and target.out_dim(2) < 2:
            raise ValueError(f"StudentConfig.estimator='U_s+U_o' needs a target with several columns (U_s on all "
                             f"but the last, U_o on the last); target {target.name!r} has one")
        check_int("StudentConfig.thinning (H)", self.thinning, 1)
        check_int("StudentConfig.batch_size (M')", self.batch_size, 1)
        check_positive("StudentConfig.lr", self.lr)
        if self.lr_halving_epochs is not None:
            check_positive("StudentConfig.lr_halving_epochs", self.lr_halving_epochs)
        if isinstance(self.regularizer, str) and self.regularizer not in losses.REGULARIZERS:
            raise ValueError(f"StudentConfig.regularizer={self.regularizer!r} is not known; allowed: "
                             f"{sorted(losses.REGULARIZERS)} or a callable (params, module) -> scalar")
        check_positive("StudentConfig.reg_weight", self.reg_weight, allow_zero=True)
        if gen is InputGenerator.NOISE and est.uses_store:
            raise ValueError(f"StudentConfig.estimator={est.value!r} with input_generator='noise': U_o averages the "
                             "teacher over repeated visits of stored inputs, and noise inputs are fresh every step; "
                             "use estimator='U_s'")
        check_positive("StudentConfig.input_noise_std", self.input_noise_std, allow_zero=True)
        check_positive("StudentConfig.derivative_weight", self.derivative_weight, allow_zero=True)
        check_int("StudentConfig.lr_warmup", self.lr_warmup, 0)
        if self.derivative_weight > 0 and not target.predictive_classes:
            raise ValueError(f"StudentConfig.derivative_weight={self.derivative_weight!r}: derivative matching needs a "
                             f"target whose first C outputs are class probabilities; {target.name!r} has none")

    @property
    def resolved_target(self) -> Target:
        return resolve_target(self.target)

    @property
    def matches_derivatives(self) -> bool:
        return self.derivative_weight > 0

    @property
    def group_key(self) -> GroupKey:
        """Students with equal (H, M', input generator and its noise, derivative matching or not)
        share S', its random stream and the teacher's forward pass on it."""
        std = self.input_noise_std if self.input_generator is InputGenerator.PERTURB else 0.0
        return GroupKey(self.thinning, self.batch_size, self.input_generator.value, std, self.matches_derivatives)

    @property
    def label(self) -> str:
        """The student's name in tables: ``name``, or ``<target>-<estimator>[-K<k1>x<k2>]``."""
        if self.name:
            return self.name
        shape = f"-K{self.arch.k1:g}x{self.arch.k2:g}" if isinstance(self.arch, ArchSpec) else ""
        return f"{self.resolved_target.name}-{self.estimator.value}{shape}"

    def record(self) -> dict:
        """The key record (:func:`gped_kit.core.schema.record`) with the target by name and the
        architecture and regulariser described."""
        out = record_fields(self, skip=("target", "arch", "regularizer"))
        out["target"] = self.resolved_target.name
        if self.arch is not None:
            out["arch"] = _model_record(self.arch)
        if self.regularizer is not None:
            out["regularizer"] = record(self.regularizer)
        return out


@dataclass(frozen=True)
class GPEDConfig:
    """The teacher chain and the loop (Algorithm 1; Appendix A.2 defaults for MNIST).

    ``model`` is the teacher's architecture (a preset name, an ``ArchSpec``, a factory
    ``out_dim -> nn.Module`` or an ``nn.Module``); ``likelihood`` is ``"categorical"``,
    ``"gaussian"`` or a likelihood object (:mod:`gped_kit.core.likelihoods`); ``sampler`` the
    SG-MCMC sampler of the teacher: the paper's SGLD (Eq. 7, the default), SGHMC, SGNHT or BAOA
    (:mod:`gped_kit.core.sampler`; a name gives that sampler's defaults). ``num_iterations`` is T,
    ``burn_in`` is B. ``eval_thinning`` is how often (in steps, after burn-in) the teacher sample
    is added to the ensemble on the evaluation sets; ``log_every`` how often a history row is
    written (the only host synchronisation); ``checkpoint_every`` how often the run is saved
    when a checkpoint path is given. ``num_snapshots`` S > 0 keeps S posterior samples'
    parameters, evenly thinned over the steps after burn-in (:func:`snapshot_steps`), for methods
    that need fixed members (Hydra: one head per snapshot).

    ``num_chains`` K > 1 makes the teacher a **pooled** one: K chains of this configuration, run
    as one batched computation, whose kept samples form one ensemble and feed one set of students
    (:mod:`gped_kit.engine.engine`; chain k's seed is :func:`chain_seeds`). A pooled run gives one
    result like a single chain's; K = 1 (the default) is the single chain of Algorithm 1.

    With the sampler's ``schedule="cyclical"`` (:mod:`gped_kit.core.sampler`) the cycles divide
    this T (the sampler's ``horizon`` is set to ``num_iterations``) and **burn-in and cycles
    combine as an intersection**: the sample of step t is kept (ensemble, distillation,
    snapshots) when t > B *and* t is in its cycle's sampling phase. A burn-in within the first
    cycle's exploration phase (the usual choice: B <= explore_fraction * T / cycles) changes
    nothing; a longer one also drops the kept steps before it (B = T / cycles drops the first
    cycle, still finding the posterior from the initialisation). At least one kept step must remain.

    ``matmul_precision`` is ``"highest"`` (float32 matrix products, the default) or ``"tf32"`` (TF32 for the
    teacher's minibatch forward and backward pass on CUDA; nothing changes on the CPU;
    :mod:`gped_kit.engine.precision`); it is part of the key.

    ``random_numbers`` is ``"generators"`` (each random stream of a chain its own ``torch.Generator``, the default)
    or ``"counter"`` (Philox-4x32-10 keyed by each stream's seed, the step and the position, one compiled kernel
    per draw for the whole batch, SGLD's noise inside its update; :class:`~gped_kit.core.options.RandomNumbers`);
    it is part of the key.

    ``device``, ``progress``, ``eval_batch_size`` and ``graph`` say how the run executes, not what
    it computes: they are not part of result keys (on the CPU an evaluation chunk of fewer than about 32
    rows can round a matrix product's rows differently, moving the last bit of the ensemble's sums:
    keep ``eval_batch_size`` well above that). ``eval_batch_size`` None (the default) sizes the chunk from
    the networks' widest activation, the number of chains and the device
    (:func:`~gped_kit.models.presets.eval_chunk_rows`): on the CPU 500 rows for the CNNs and 5,000 for one
    FCNN chain; on CUDA the FCNN's whole test set for up to 24 chains, so that an ensemble update is one
    forward pass, not twenty.
    ``progress`` is True (a bar, or text lines when ``$GPED_PROGRESS=lines``), False, or
    ``"bar"``/``"lines"``/``"off"``
    (:mod:`gped_kit.progress`). ``graph`` (CUDA only) replays each period of the event schedule as
    a captured CUDA graph (:mod:`gped_kit.engine.graphs`): None (the default) on CUDA and off on the
    CPU, False off, True on (an error without CUDA).
    """

    model: ModelSpec = "fcnn"
    likelihood: str | Likelihood = "categorical"
    sampler: SamplerConfig | str = field(default_factory=SGLDConfig)
    num_iterations: int = 10_000
    burn_in: int = 1_000
    eval_thinning: int = 100
    log_every: int = 1_000
    checkpoint_every: int = 10_000
    seed: int = 0
    num_snapshots: int = 0
    num_chains: int = 1
    matmul_precision: str = "highest"
    random_numbers: str | RandomNumbers = RandomNumbers.GENERATORS
    device: str = field(default="auto", metadata={"key": False})
    progress: bool | str = field(default=True, metadata={"key": False})
    eval_batch_size: int | None = field(default=None, metadata={"key": False})
    graph: bool | None = field(default=None, metadata={"key": False})

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", as_model_spec(self.model, "GPEDConfig.model"))
        object.__setattr__(self, "likelihood", resolve_likelihood(self.likelihood))
        if isinstance(self.sampler, str):
            object.__setattr__(self, "sampler", sampler_config(self.sampler))
        if not isinstance(self.sampler, SamplerConfig):
            raise ValueError(f"GPEDConfig.sampler={self.sampler!r}: must be a sampler name ('sgld', 'sghmc', "
                             "'sgnht', 'baoa') or configuration such as SGLDConfig(step_size=..., prior_precision=...)")
        check_int("GPEDConfig.num_iterations (T)", self.num_iterations, 1)
        check_int("GPEDConfig.burn_in (B)", self.burn_in, 0)
        if self.burn_in >= self.num_iterations:
            raise ValueError(f"GPEDConfig.burn_in={self.burn_in} must be < num_iterations={self.num_iterations}: "
                             "nothing would be distilled")
        if self.sampler.schedule is StepSchedule.CYCLICAL and self.sampler.horizon != self.num_iterations:
            object.__setattr__(self, "sampler", dataclasses.replace(self.sampler, horizon=self.num_iterations))
        if self.sampler.warmup_steps > self.burn_in:
            raise ValueError(f"GPEDConfig.sampler.warmup_steps={self.sampler.warmup_steps} must be <= burn_in="
                             f"{self.burn_in}: the warm-up's larger steps would leave samples in the ensemble")
        for name in ("eval_thinning", "log_every", "checkpoint_every"):
            check_int(f"GPEDConfig.{name}", getattr(self, name), 1)
        size = self.eval_batch_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ValueError(f"GPEDConfig.eval_batch_size={size!r}: must be None (sized from the networks and the "
                             "device) or an integer >= 1")
        check_int("GPEDConfig.seed", self.seed, 0)
        if self.graph not in (None, True, False):
            raise ValueError(f"GPEDConfig.graph={self.graph!r}: must be None (on for CUDA), True or False")
        check_int("GPEDConfig.num_chains (K)", self.num_chains, 1)
        check_matmul_precision(self.matmul_precision)
        object.__setattr__(self, "random_numbers", parse_option(RandomNumbers, self.random_numbers,
                                                                "GPEDConfig.random_numbers"))
        if self.num_chains > 1 and isinstance(self.model, nn.Module):
            raise ValueError(f"GPEDConfig.num_chains={self.num_chains} needs a model the kit initialises per chain (a "
                             "preset name, an ArchSpec or a factory out_dim -> nn.Module); an nn.Module instance "
                             "would start every chain from its one set of values")
        check_int("GPEDConfig.num_snapshots", self.num_snapshots, 0)
        if self.sampler.schedule is StepSchedule.CYCLICAL:
            kept = sum(len(phase) for phase in kept_phases(self))
            if not kept:
                sampler = self.sampler
                raise ValueError(f"GPEDConfig.burn_in={self.burn_in} leaves no step to keep: with schedule='cyclical' "
                                 f"samples are kept at steps t > burn_in in the last {1 - sampler.explore_fraction:g} "
                                 f"of each of the {sampler.cycles} cycles of {self.num_iterations / sampler.cycles:g} "
                                 "steps; lower burn_in or explore_fraction")
            if self.num_snapshots > kept:
                raise ValueError(f"GPEDConfig.num_snapshots={self.num_snapshots} exceeds the {kept} kept steps (after "
                                 "burn-in, in the cyclical schedule's sampling phases)")
        elif self.num_snapshots > self.num_iterations - self.burn_in:
            raise ValueError(f"GPEDConfig.num_snapshots={self.num_snapshots} exceeds the "
                             f"{self.num_iterations - self.burn_in} steps after burn-in")
        resolve_device(self.device)
        if not isinstance(self.progress, bool):
            object.__setattr__(self, "progress", progress_mode(self.progress))

    @property
    def model_name(self) -> str:
        """The preset family, or the user model's class name (for tables)."""
        if isinstance(self.model, ArchSpec):
            return self.model.family
        return type(self.model).__name__ if isinstance(self.model, nn.Module) else getattr(
            self.model, "__name__", type(self.model).__name__)

    def record(self) -> dict:
        out = record_fields(self, skip=("model", "likelihood"))
        out["model"] = _model_record(self.model)
        if self.likelihood.name != "categorical":  # the default, left out of keys
            out["likelihood"] = {"name": self.likelihood.name, **record_fields(self.likelihood)}
        return out


#: Chain k > 0 of a pooled teacher has seed ``seed + k * CHAIN_SEED_STRIDE`` (:func:`chain_seeds`).
CHAIN_SEED_STRIDE = 1_000_000


def chain_seeds(config: GPEDConfig) -> list[int]:
    """The seeds of a pooled teacher's K = ``num_chains`` chains: ``seed + k * 10^6`` for chain k.
    Chain 0 is the single chain of the same configuration (its initial values, minibatches and
    noise; the students' initial values and distillation inputs come from ``seed`` too, as for
    one chain); runs with seeds below 10^6 have disjoint chains, and a run with more chains
    extends one with fewer (K = 2's chains are K = 4's first two)."""
    return [config.seed + k * CHAIN_SEED_STRIDE for k in range(config.num_chains)]


def kept_phases(config: GPEDConfig) -> list[range]:
    """The steps t whose samples are kept (ensemble, distillation, snapshots), as ranges: t > B,
    and with a cyclical schedule only in the cycles' sampling phases
    (:meth:`~gped_kit.core.sampler.SamplerConfig.in_sampling_phase`), one range per cycle."""
    sampler = config.sampler
    if sampler.schedule is not StepSchedule.CYCLICAL:
        return [range(config.burn_in + 1, config.num_iterations)]
    phases = (range(max(p.start, config.burn_in + 1), p.stop) for p in sampler.sampling_phases())
    return [p for p in phases if len(p)]


def student_updates(config: GPEDConfig, thinning: int, t: int | None = None) -> int:
    """How many updates a student with thinning H takes in the chain of ``config`` up to step ``t``
    (None: the whole chain, t = T - 1), counting t: the kept steps (:func:`kept_phases`) that are
    multiples of H, where :func:`~gped_kit.engine.setup.events` has its group distil. With a constant
    step size floor(t / H) - floor(B / H) after burn-in; with the cyclical schedule only the cycles'
    sampling phases count."""
    check_int("thinning", thinning, 1)
    last = config.num_iterations - 1 if t is None else t
    return sum(max(min(p.stop - 1, last) // thinning - (p.start - 1) // thinning, 0)
               for p in kept_phases(config) if p.start <= last)


def snapshot_steps(config: GPEDConfig) -> list[int]:
    """The steps t whose new sample theta_{t+1} is kept as a snapshot: S evenly spaced steps
    after burn-in, the last one the chain's final step. With a cyclical schedule: S evenly spaced
    among the kept steps (:func:`kept_phases`), so no snapshot comes from an exploration phase."""
    span, s = config.num_iterations - config.burn_in, config.num_snapshots
    if config.sampler.schedule is not StepSchedule.CYCLICAL:
        return [config.burn_in + (k + 1) * span // s - 1 for k in range(s)]
    phases = kept_phases(config)
    total = sum(len(p) for p in phases)
    out = []
    for k in range(s):
        index = (k + 1) * total // s - 1  # into the kept steps, concatenated
        for phase in phases:
            if index < len(phase):
                out.append(phase[index])
                break
            index -= len(phase)
    return out


def student_lr(config: StudentConfig, t: int, burn_in: int, steps_per_epoch: float, update: int | None = None) -> float:
    """The student's Adam learning rate at teacher step ``t`` (Appendix A.2): alpha_0 halved every
    ``lr_halving_epochs`` teacher epochs (one epoch = N/M SGLD steps, ``steps_per_epoch``, as in
    the authors' code), counted from the end of burn-in, when the student starts learning.

    The epoch is the *labelled* set's, so the schedule depends on N: the paper's 200 epochs are
    20,000 steps at N = 10k and 120,000 at N = 60k, i.e. 50 vs 8 halvings over T = 10^6. (With
    the paper's B = 1,000 << 20,000, counting from 0 or from B is the same schedule up to a
    1,000-step shift; counting from B keeps a shortened profile's long burn-in from decaying the
    rate before the student has learnt anything.) With ``lr_warmup`` W the student's update u takes
    ``min(1, u / W)`` of that rate (:class:`StudentConfig`): ``update`` is u, the student's own updates
    up to t (:func:`student_updates` with t), which a warm-up needs. Counted in its updates, not in
    steps since B, a warm-up also reaches a cyclical chain's students, whose first update comes in
    the first sampling phase, maybe thousands of steps after B.
    """
    lr = config.lr
    if config.lr_warmup:
        if update is None:
            raise ValueError(f"student_lr: StudentConfig.lr_warmup={config.lr_warmup} needs update, the student's "
                             "updates up to t (student_updates(chain_config, thinning, t)); got None")
        lr *= min(1.0, max(update, 1) / config.lr_warmup)
    if config.lr_halving_epochs is None:
        return lr
    return lr * 0.5 ** math.floor(max(t - burn_in, 0) / (config.lr_halving_epochs * steps_per_epoch))


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` picks CUDA when present, else the CPU; asking for CUDA without it is an error."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not known; allowed: 'auto', 'cpu', 'cuda' or 'cuda:<index>'") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} was asked for but CUDA is not available; use 'auto' or 'cpu'")
    return resolved
