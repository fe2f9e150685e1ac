"""Algorithm 1 (GPED): one SGLD teacher chain distilled online into one or more students.

For t = 0 .. T-1 the teacher takes one SGLD step (Eq. 7) on a minibatch of D. After burn-in
(t > B), every ``H`` steps each student draws a minibatch S' of size M' from D' (with
replacement, as the authors' code does), updates its target estimates with the most recent
sample (U_s, Eq. 9, or U_o, Eq. 10) and takes one Adam step on
``mean_i l(g_hat_i, f(x_i|phi)) + lambda R(phi)`` (Eq. 8). Students that share (H, M') share
S' and the teacher forward pass on it. Every ``eval_thinning`` steps after burn-in the teacher
sample's expectations on the test set are added to running sums (the teacher ensemble,
evaluated online without storing samples).

One chain can feed many students (targets x estimators x architectures): the chain and its
random streams do not depend on which students are attached, so adding a student never
changes the teacher. The loop reads nothing back from the device except every
``log_every`` steps (history rows, progress bar, divergence check).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from . import losses as losses_mod
from . import metrics
from .data import ExperimentData
from .models import (EVAL_CHUNK_SIZE, ArchSpec, build_network, count_parameters, cpu_training_layout,
                     flat_parameters, inference_network)
from .samplers import SGLD, SGLDConfig
from .targets import ESTIMATORS, PosteriorAccumulator, Target, make_estimator, resolve_target

Regularizer = Callable[[nn.Module], torch.Tensor]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` picks CUDA when present, else the CPU."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} was asked for but CUDA is not available; use 'auto' or 'cpu'")
    return device


@dataclass(frozen=True)
class StudentConfig:
    """One student distilled from the chain: target g, estimator U, architecture, optimiser.

    ``thinning`` is H (the paper: 100 for the predictive target, 10 for entropy);
    ``batch_size`` is M'; ``lr`` is alpha_0 for Adam, halved every ``lr_halving_epochs``
    epochs of the *teacher* after burn-in (one epoch = N/M SGLD steps, as in the authors' code;
    None keeps it constant; :func:`student_lr`); ``regularizer``/``reg_weight`` are R and lambda (``"group_lasso"`` or a
    callable ``module -> scalar``). ``arch`` None means the teacher's architecture.

    ``input_generator`` picks the distillation inputs x' (Papamakarios' thesis, Section 2.3:
    the "data generator"): None uses D' as the data configures it (resampled, with the
    data's ``distill_noise_std`` perturbation if any); ``"resample"`` resamples D' without
    noise; ``"perturb"`` adds N(0, ``input_noise_std``^2) per pixel to the resampled D'
    points; ``"noise"`` draws pure Gaussian noise with D''s overall pixel mean and standard
    deviation (fresh every step, so it needs the U_s estimator: U_o averages per stored
    input). ``derivative_weight`` gamma > 0 adds the thesis' derivative matching (Section
    2.2.2) to the loss: gamma times the squared error between the student's and the current
    teacher sample's input-gradients of the log class probabilities (one Rademacher
    projection of the class axis per example; predictive targets only). Like the entropy
    loss, it is non-linear in the teacher sample, so its single-sample (online) version is
    biased (thesis, Section 3.3.3).
    """

    target: str | Target = "predictive"
    estimator: str = "U_s"
    arch: ArchSpec | None = None
    thinning: int = 100
    batch_size: int = 100
    lr: float = 1e-3
    lr_halving_epochs: float | None = 200.0
    regularizer: str | Regularizer | None = None
    reg_weight: float = 0.0
    name: str | None = None
    input_generator: str | None = None
    input_noise_std: float = 0.1
    derivative_weight: float = 0.0

    def __post_init__(self) -> None:
        resolve_target(self.target)
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"StudentConfig.estimator={self.estimator!r} is not known; allowed: {ESTIMATORS}")
        if self.estimator == "U_s+U_o" and resolve_target(self.target).out_dim(2) < 2:
            raise ValueError(f"StudentConfig.estimator='U_s+U_o' needs a target with several columns (U_s on all "
                             f"but the last, U_o on the last); target {resolve_target(self.target).name!r} has one")
        _check_int("StudentConfig.thinning (H)", self.thinning, 1)
        _check_int("StudentConfig.batch_size (M')", self.batch_size, 1)
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"StudentConfig.lr={self.lr!r}: must be finite and > 0")
        if self.lr_halving_epochs is not None and not self.lr_halving_epochs > 0:
            raise ValueError(f"StudentConfig.lr_halving_epochs={self.lr_halving_epochs!r}: must be > 0 or None")
        if isinstance(self.regularizer, str) and self.regularizer not in losses_mod.REGULARIZERS:
            raise ValueError(
                f"StudentConfig.regularizer={self.regularizer!r} is not known; allowed: "
                f"{sorted(losses_mod.REGULARIZERS)} or a callable"
            )
        if not self.reg_weight >= 0:
            raise ValueError(f"StudentConfig.reg_weight={self.reg_weight!r}: must be >= 0")
        if self.input_generator is not None and self.input_generator not in INPUT_GENERATORS:
            raise ValueError(f"StudentConfig.input_generator={self.input_generator!r} is not known; "
                             f"allowed: None (D' as configured) or {INPUT_GENERATORS}")
        if self.input_generator == "noise" and "U_o" in self.estimator:
            raise ValueError(f"StudentConfig.estimator={self.estimator!r} with input_generator='noise': U_o "
                             "averages the teacher over repeated visits of stored inputs, and noise inputs "
                             "are fresh every step; use estimator='U_s'")
        if not (self.input_noise_std >= 0 and math.isfinite(self.input_noise_std)):
            raise ValueError(f"StudentConfig.input_noise_std={self.input_noise_std!r}: must be finite and >= 0")
        if not (self.derivative_weight >= 0 and math.isfinite(self.derivative_weight)):
            raise ValueError(f"StudentConfig.derivative_weight={self.derivative_weight!r}: must be finite and >= 0")
        if self.derivative_weight > 0 and not resolve_target(self.target).predictive_classes:
            raise ValueError(f"StudentConfig.derivative_weight={self.derivative_weight!r}: derivative matching "
                             f"needs a target whose first C outputs are class probabilities; "
                             f"{resolve_target(self.target).name!r} has none")

    @property
    def group_key(self) -> tuple:
        """Students with equal (H, M', input generator, derivative matching or not) share S' and the
        teacher's forward pass (and one random stream)."""
        base = (self.thinning, self.batch_size)
        if self.input_generator is None and self.derivative_weight == 0:
            return base  # the key of runs made before input generators existed
        std = self.input_noise_std if self.input_generator == "perturb" else 0.0
        return base + (self.input_generator or "data", std, self.derivative_weight > 0)

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        arch = self.arch
        shape = "" if arch is None else f"-K{arch.k1:g}x{arch.k2:g}"
        return f"{resolve_target(self.target).name}-{self.estimator}{shape}"


@dataclass(frozen=True)
class GPEDConfig:
    """The teacher chain and the loop (Algorithm 1; Appendix A.2 defaults for MNIST).

    ``num_iterations`` is T, ``burn_in`` is B. ``eval_thinning`` is how often (in SGLD steps,
    after burn-in) the teacher sample is added to the test-set ensemble; ``log_every`` is how
    often a history row is written (the only host synchronisation);
    ``checkpoint_every`` how often the run is saved when a checkpoint path is given.
    ``num_snapshots`` S > 0 keeps S posterior samples' parameters, evenly thinned over the
    steps after burn-in (:func:`snapshot_steps`), for distillation methods that need fixed
    members (Hydra: one head per snapshot); they cost S x (number of teacher parameters)
    floats of device memory.
    """

    model: str = "fcnn"
    sgld: SGLDConfig = field(default_factory=SGLDConfig)
    num_iterations: int = 10_000
    burn_in: int = 1_000
    eval_thinning: int = 100
    log_every: int = 1_000
    checkpoint_every: int = 10_000
    seed: int = 0
    device: str = "auto"
    progress: bool = True
    eval_batch_size: int = EVAL_CHUNK_SIZE
    num_snapshots: int = 0

    def __post_init__(self) -> None:
        ArchSpec(self.model)  # validates the family name
        _check_int("GPEDConfig.num_iterations (T)", self.num_iterations, 1)
        _check_int("GPEDConfig.burn_in (B)", self.burn_in, 0)
        if self.burn_in >= self.num_iterations:
            raise ValueError(
                f"GPEDConfig.burn_in={self.burn_in} must be < num_iterations={self.num_iterations}: "
                "nothing would be distilled"
            )
        _check_int("GPEDConfig.eval_thinning", self.eval_thinning, 1)
        _check_int("GPEDConfig.log_every", self.log_every, 1)
        _check_int("GPEDConfig.checkpoint_every", self.checkpoint_every, 1)
        _check_int("GPEDConfig.eval_batch_size", self.eval_batch_size, 1)
        _check_int("GPEDConfig.num_snapshots", self.num_snapshots, 0)
        if self.num_snapshots > self.num_iterations - self.burn_in:
            raise ValueError(f"GPEDConfig.num_snapshots={self.num_snapshots} exceeds the "
                             f"{self.num_iterations - self.burn_in} steps after burn-in")


def snapshot_steps(config: GPEDConfig) -> list[int]:
    """The steps t whose new sample theta_{t+1} is kept as a snapshot: S evenly spaced steps
    after burn-in, the last one the chain's final step."""
    span, s = config.num_iterations - config.burn_in, config.num_snapshots
    return [config.burn_in + (k + 1) * span // s - 1 for k in range(s)]


INPUT_GENERATORS = ("resample", "perturb", "noise")


def _check_int(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}")


@dataclass
class _Student:
    config: StudentConfig
    target: Target
    net: nn.Module
    optimizer: torch.optim.Optimizer
    estimator: object
    regularizer: Regularizer | None
    loss_sum: torch.Tensor
    num_params: int
    steps_since_log: int = 0


@dataclass
class GPEDResult:
    """What a run produced: one summary row per student, the per-log-point history, and the
    test-set expectation estimates of the teacher ensemble (per target name) and of each
    student (its linked outputs, per student label); ``teacher_ood``/``student_ood`` hold the
    same for each out-of-distribution set of the data (keyed by set name first).
    ``snapshots`` holds the kept posterior samples (``GPEDConfig.num_snapshots``), one
    flattened parameter vector per row (``torch.nn.utils.vector_to_parameters`` order)."""

    summary: pd.DataFrame
    history: pd.DataFrame
    teacher_test: dict[str, torch.Tensor]
    student_test: dict[str, torch.Tensor]
    steps_done: int
    finished: bool
    teacher_ood: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    student_ood: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    snapshots: torch.Tensor | None = None  # (S, P) flattened teacher parameters, if kept


class GPEDRun:
    """A resumable run of Algorithm 1: ``GPEDRun(data, config, students).run()``.

    ``run(checkpoint=path)`` saves every ``checkpoint_every`` steps and at the end; calling it
    again with the same path (in a new process too) continues from the checkpoint, and gives
    the same result as an uninterrupted run. A checkpoint made with a different configuration
    is never overwritten: it raises.
    """

    def __init__(self, data: ExperimentData, config: GPEDConfig, students: Sequence[StudentConfig]) -> None:
        names = [s.label for s in students]
        if len(set(names)) != len(names):
            raise ValueError(f"student labels must be unique, got {names}; set StudentConfig.name")
        n_train = data.train_x.shape[0]
        if n_train < 1 or data.distill_x.shape[0] < 1:
            raise ValueError("data: the labelled set D and the distillation set D' must be non-empty")
        self.config = config
        self.student_configs = list(students)
        self.device = resolve_device(config.device)
        self.data = data.to(self.device)
        self.num_classes = data.num_classes
        self.t = 0
        self.resumed_from: int | None = None  # the step a checkpoint was loaded at, if any
        self.history_rows: list[dict] = []
        self.elapsed = 0.0

        with self._rng():
            torch.manual_seed(config.seed)
            self.teacher = cpu_training_layout(
                build_network(ArchSpec(config.model), data.input_shape, data.num_classes).to(self.device))
            self.students = [self._make_student(s) for s in students]
            self._dropout_rng = self._rng_state()
        dev = self.device
        self.gen_data = torch.Generator(dev).manual_seed(config.seed * 4 + 1)
        self.gen_noise = torch.Generator(dev).manual_seed(config.seed * 4 + 2)
        self.sgld = SGLD(list(self.teacher.parameters()), n_train, config.sgld, self.gen_noise)
        self.groups: dict[tuple[int, int], list[_Student]] = {}
        for s in self.students:
            self.groups.setdefault(s.config.group_key, []).append(s)
        self.gen_groups = {
            key: torch.Generator(dev).manual_seed(config.seed * 4 + 3 + 1000 * (i + 1))
            for i, key in enumerate(sorted(self.groups))
        }
        # The teacher ensemble is accumulated on the test set followed by any OOD sets, in one pass.
        eval_sets = {"test": self.data.test_x, **self.data.ood_x}
        self.eval_slices, start = {}, 0
        for name, x in eval_sets.items():
            self.eval_slices[name] = slice(start, start + x.shape[0])
            start += x.shape[0]
        eval_x = torch.cat(list(eval_sets.values())) if self.data.ood_x else self.data.test_x
        self.accumulator = PosteriorAccumulator(
            eval_x, self.num_classes, [s.target for s in self.students], config.eval_batch_size
        )
        self.train_nll_sum = torch.zeros((), device=dev)
        self._steps_in_sum = 0
        self._snapshot_at = {t: k for k, t in enumerate(snapshot_steps(config))}
        num_teacher_params = count_parameters(self.teacher)
        self.snapshots = torch.zeros(config.num_snapshots, num_teacher_params, device=dev)
        self.num_snapshots_taken = 0
        if any(s.config.input_generator == "noise" for s in self.students):
            pixels = self.data.distill_x
            self._noise_moments = (float(pixels.mean()), float(pixels.std()))

    # ------------------------------------------------------------------ set-up helpers
    def _make_student(self, cfg: StudentConfig) -> _Student:
        target = resolve_target(cfg.target)
        arch = cfg.arch or ArchSpec(self.config.model)
        net = cpu_training_layout(
            build_network(arch, self.data.input_shape, target.out_dim(self.num_classes)).to(self.device))
        reg = cfg.regularizer
        reg_fn = losses_mod.REGULARIZERS[reg] if isinstance(reg, str) else reg
        return _Student(
            config=cfg,
            target=target,
            net=net,
            optimizer=torch.optim.Adam(net.parameters(), lr=cfg.lr),
            estimator=make_estimator(cfg.estimator, self.data.distill_x.shape[0],
                                     target.out_dim(self.num_classes), self.device),
            regularizer=reg_fn if cfg.reg_weight > 0 else None,
            loss_sum=torch.zeros((), device=self.device),
            num_params=count_parameters(net),
        )

    def _rng(self):
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        return torch.random.fork_rng(devices=devices)

    def _rng_state(self) -> dict:
        state = {"cpu": torch.get_rng_state()}
        if self.device.type == "cuda":
            state["cuda"] = torch.cuda.get_rng_state(self.device)
        return state

    def _set_rng_state(self, state: dict) -> None:
        torch.set_rng_state(state["cpu"])
        if "cuda" in state:
            torch.cuda.set_rng_state(state["cuda"], self.device)

    # ------------------------------------------------------------------ the loop
    def _teacher_log_probs(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.teacher(x), dim=-1)

    def _distill_inputs(self, key: tuple, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """S': indices into D' and the inputs x' of the group's input generator."""
        data, batch_size = self.data, key[1]
        generator = key[2] if len(key) > 2 and key[2] != "data" else None
        idx = torch.randint(data.distill_x.shape[0], (batch_size,), device=self.device, generator=gen)
        if generator == "noise":
            mean, std = self._noise_moments
            shape = (batch_size, *data.distill_x.shape[1:])
            return idx, mean + std * torch.randn(shape, device=self.device, generator=gen)
        x = data.distill_x[idx]
        if generator is None:
            noise_std = getattr(data.config, "distill_noise_std", 0.0)
        else:
            noise_std = key[3] if generator == "perturb" else 0.0
        if noise_std > 0:
            x = x + noise_std * torch.randn(x.shape, device=self.device, generator=gen)
        return idx, x

    def _distill_step(self, key: tuple, t: int) -> None:
        gen = self.gen_groups[key]
        idx, x = self._distill_inputs(key, gen)
        matching = [s for s in self.groups[key] if s.config.derivative_weight > 0]
        teacher_grad = projection = None
        if matching:
            projection = losses_mod.rademacher(x.shape[0], self.num_classes, gen)
            x = x.detach().requires_grad_(True)
            log_probs = self._teacher_log_probs(x)
            teacher_grad = losses_mod.input_gradients(log_probs, x, projection).detach()
            log_probs = log_probs.detach()
        else:
            with torch.no_grad():
                log_probs = self._teacher_log_probs(x)
        for s in self.groups[key]:
            target_hat = s.estimator.update(idx, s.target.g(log_probs))
            s.net.train()
            raw = s.net(x)
            loss = s.target.loss(target_hat, raw).mean()
            if s.config.derivative_weight > 0:
                student_log_probs = F.log_softmax(raw[:, :self.num_classes], dim=-1)
                student_grad = losses_mod.input_gradients(student_log_probs, x, projection, create_graph=True)
                loss = loss + s.config.derivative_weight * losses_mod.derivative_square_error(
                    student_grad, teacher_grad).mean()
            if s.regularizer is not None:
                loss = loss + s.config.reg_weight * s.regularizer(s.net)
            s.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self._set_lr(s, t)
            s.optimizer.step()
            s.loss_sum += loss.detach()
            s.steps_since_log += 1

    def _set_lr(self, s: _Student, t: int) -> None:
        if s.config.lr_halving_epochs is None:
            return
        lr = student_lr(s.config, t, self.config.burn_in, self.data.train_x.shape[0] / self.config.sgld.batch_size)
        for group in s.optimizer.param_groups:
            group["lr"] = lr

    def run(self, checkpoint: str | Path | None = None, resume: bool = True,
            max_steps: int | None = None) -> GPEDResult:
        """Run (or continue) the chain up to T, or ``max_steps`` more steps if given."""
        cfg = self.config
        if checkpoint is not None:
            checkpoint = Path(checkpoint)
            if checkpoint.exists():
                if not resume:
                    raise FileExistsError(
                        f"checkpoint {checkpoint} exists; pass resume=True to continue it, or another path"
                    )
                self.load_checkpoint(checkpoint)
        stop = cfg.num_iterations if max_steps is None else min(cfg.num_iterations, self.t + max_steps)
        progress = _progress_bar(cfg, self.t) if self.t < stop else None
        data, N = self.data, self.data.train_x.shape[0]
        M = cfg.sgld.batch_size
        started = time.perf_counter()
        with self._rng():
            self._set_rng_state(self._dropout_rng)
            try:
                for t in range(self.t, stop):
                    idx = torch.randint(N, (M,), device=self.device, generator=self.gen_data)
                    loss = F.cross_entropy(self.teacher(data.train_x[idx]), data.train_y[idx])
                    self.sgld.step(loss, t)
                    self.train_nll_sum += loss.detach()
                    self._steps_in_sum += 1
                    if t in self._snapshot_at:
                        self.snapshots[self._snapshot_at[t]] = flat_parameters(self.teacher)
                        self.num_snapshots_taken = self._snapshot_at[t] + 1
                    if t > cfg.burn_in:
                        if t % cfg.eval_thinning == 0:
                            teacher = inference_network(self.teacher)
                            self.accumulator.accumulate(lambda x: F.log_softmax(teacher(x), dim=-1))
                        for key in self.groups:
                            if t % key[0] == 0:
                                self._distill_step(key, t)
                    self.t = t + 1
                    if self.t % cfg.log_every == 0 or self.t == stop:
                        self.elapsed += time.perf_counter() - started
                        started = time.perf_counter()
                        row = self._log()
                        if progress is not None:
                            progress.update(self.t - progress.n)
                            progress.set_postfix(teacher_nll=row.get("teacher_nll", float("nan")),
                                                 train_nll=row["teacher_train_nll"])
                    if checkpoint is not None and (self.t % cfg.checkpoint_every == 0 or self.t == stop):
                        self._dropout_rng = self._rng_state()
                        self.save_checkpoint(checkpoint)
            finally:
                self._dropout_rng = self._rng_state()
                if progress is not None:
                    progress.close()
        return self.result()

    # ------------------------------------------------------------------ evaluation
    def _log(self) -> dict:
        """One history row per student (teacher columns repeated); checks for divergence."""
        train_nll = float(self.train_nll_sum) / max(self._steps_in_sum, 1)
        if not math.isfinite(train_nll):
            eta = self.config.sgld.step_size_at(self.t)
            N = self.data.train_x.shape[0]
            raise FloatingPointError(
                f"SGLD diverged before step {self.t}: the teacher's minibatch NLL is {train_nll}. "
                f"The step size eta={eta:g} is likely too large for N={N} (the gradient step on the mean "
                f"NLL is eta*N/2={eta * N / 2:g}); lower GPEDConfig.sgld.step_size."
            )
        self.train_nll_sum.zero_()
        self._steps_in_sum = 0
        base = {"step": self.t, "teacher_train_nll": train_nll, "teacher_samples": self.accumulator.count,
                "elapsed_s": self.elapsed}
        base.update(self.teacher_metrics())
        rows = []
        for s in self.students:
            row = dict(base, student=s.config.label)
            row["student_train_loss"] = float(s.loss_sum) / s.steps_since_log if s.steps_since_log else float("nan")
            if s.steps_since_log and not math.isfinite(row["student_train_loss"]):
                raise FloatingPointError(
                    f"student {s.config.label!r} diverged before step {self.t} (training loss "
                    f"{row['student_train_loss']}); lower its lr={s.config.lr:g}"
                )
            s.loss_sum.zero_()
            s.steps_since_log = 0
            if self.t > self.config.burn_in:  # before that the student is untrained: nothing to evaluate
                row.update(self.student_metrics(s))
            rows.append(row)
        self.history_rows.extend(rows or [base])
        return base

    def teacher_metrics(self) -> dict:
        if self.accumulator.count == 0:
            return {}
        pred = self.teacher_mean("predictive")
        return {"teacher_nll": metrics.nll(pred, self.data.test_y),
                "teacher_accuracy": metrics.accuracy(pred, self.data.test_y)}

    def teacher_mean(self, target: str, eval_set: str = "test") -> torch.Tensor:
        """The teacher ensemble's estimate of E[g] for ``target`` on the test set or an OOD set."""
        return self.accumulator.mean(target)[self.eval_slices[eval_set]]

    @torch.no_grad()
    def student_predictions(self, s: _Student, x: torch.Tensor | None = None) -> torch.Tensor:
        """The student's linked outputs on ``x`` (default: the test set), in eval mode."""
        net = inference_network(s.net)
        x = self.data.test_x if x is None else x
        step = self.config.eval_batch_size
        return torch.cat([s.target.link(net(x[i:i + step])) for i in range(0, x.shape[0], step)])

    def student_metrics(self, s: _Student) -> dict:
        teacher = {name: self.teacher_mean(name) for name in (s.target.name, "predictive")} if self.accumulator.count else {}
        return prediction_metrics(s.target, self.student_predictions(s), self.data.test_y, self.num_classes, teacher)

    def result(self) -> GPEDResult:
        history = pd.DataFrame(self.history_rows)
        last = history[history["step"] == self.t] if len(history) else history
        summary_rows = []
        for s in self.students:
            row = self.config_columns(s)
            match = last[last["student"] == s.config.label] if "student" in last else last
            if len(match):
                row.update({k: v for k, v in match.iloc[-1].items() if k not in ("student", "step")})
            row["steps_done"] = self.t
            row["iterations_per_s"] = self.t / self.elapsed if self.elapsed else float("nan")
            summary_rows.append(row)
        teacher = {name: ({n: self.teacher_mean(n, name).cpu() for n in self.accumulator.targets}
                          if self.accumulator.count else {}) for name in self.eval_slices}
        student = {name: {s.config.label: self.student_predictions(s, x).cpu() for s in self.students}
                   for name, x in {"test": self.data.test_x, **self.data.ood_x}.items()}
        snapshots = self.snapshots[:self.num_snapshots_taken].cpu() if self.config.num_snapshots else None
        return GPEDResult(pd.DataFrame(summary_rows), history, teacher.pop("test"), student.pop("test"),
                          self.t, self.t >= self.config.num_iterations, teacher_ood=teacher, student_ood=student,
                          snapshots=snapshots)

    def config_columns(self, s: _Student) -> dict:
        """The tidy configuration columns of one (chain, student) run."""
        cfg, sc = self.config, s.config
        arch = sc.arch or ArchSpec(cfg.model)
        dc = self.data.config
        cols = {}
        if dc is not None:
            cols.update(dataset=dc.dataset, labelled_size=self.data.train_x.shape[0],
                        mask_size=getattr(dc, "mask_size", 0), masking_rate=self.data.masking_rate,
                        data_seed=dc.seed, distill_noise_std=getattr(dc, "distill_noise_std", 0.0))
        cols.update(
            model=cfg.model, step_size=cfg.sgld.step_size, schedule=cfg.sgld.schedule,
            prior_precision=cfg.sgld.prior_precision, batch_size=cfg.sgld.batch_size,
            num_iterations=cfg.num_iterations, burn_in=cfg.burn_in, eval_thinning=cfg.eval_thinning,
            seed=cfg.seed, device=str(self.device), student=sc.label, target=s.target.name,
            estimator=sc.estimator, student_arch=arch.family, k1=arch.k1, k2=arch.k2,
            dropout=arch.dropout, thinning=sc.thinning, student_batch_size=sc.batch_size, lr=sc.lr,
            lr_halving_epochs=sc.lr_halving_epochs, regularizer=_name_of(sc.regularizer),
            reg_weight=sc.reg_weight, input_generator=sc.input_generator or "data",
            derivative_weight=sc.derivative_weight, student_params=s.num_params,
            teacher_params=count_parameters(self.teacher),
        )
        return cols

    # ------------------------------------------------------------------ checkpoints
    def fingerprint(self) -> str:
        """JSON of everything that defines the run; a checkpoint only resumes a matching run."""
        dc = self.data.config
        payload = {
            "gped": _jsonable(dataclasses.asdict(self.config)),
            "students": [_jsonable({**dataclasses.asdict(s), "target": resolve_target(s.target).name,
                                    "regularizer": _name_of(s.regularizer)}) for s in self.student_configs],
            "data": _jsonable(dataclasses.asdict(dc)) if dc is not None else None,
            "shapes": [list(self.data.train_x.shape), list(self.data.distill_x.shape), list(self.data.test_x.shape)],
        }
        if payload["data"] is not None and not getattr(dc, "ood_datasets", ()):
            # fields added for Experiment 4: left out at their defaults so earlier runs keep their keys
            for key in ("ood_datasets", "ood_size"):
                payload["data"].pop(key, None)
        for key in ("progress", "device", "eval_batch_size"):  # how the run is executed, not what it computes
            payload["gped"].pop(key, None)
        if not self.config.num_snapshots:  # added for Hydra; left out at its default (earlier runs' keys)
            payload["gped"].pop("num_snapshots", None)
        defaults = {"input_generator": None, "input_noise_std": 0.1, "derivative_weight": 0.0}
        for student in payload["students"]:  # fields added for issue 6, likewise left out at defaults
            if all(student.get(k) == v for k, v in defaults.items()):
                for k in defaults:
                    student.pop(k, None)
        return json.dumps(payload, sort_keys=True)

    def save_checkpoint(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {
            "fingerprint": self.fingerprint(),
            "t": self.t,
            "elapsed": self.elapsed,
            "history_rows": self.history_rows,
            "teacher": self.teacher.state_dict(),
            "students": [{"net": s.net.state_dict(), "optimizer": s.optimizer.state_dict(),
                          "estimator": s.estimator.state_dict(), "loss_sum": s.loss_sum,
                          "steps_since_log": s.steps_since_log}
                         for s in self.students],
            "accumulator": self.accumulator.state_dict(),
            "generators": {"data": self.gen_data.get_state(), "noise": self.gen_noise.get_state(),
                           "groups": {_group_name(k): g.get_state() for k, g in self.gen_groups.items()}},
            "snapshots": self.snapshots,
            "num_snapshots_taken": self.num_snapshots_taken,
            "dropout_rng": self._dropout_rng,
            "train_nll_sum": self.train_nll_sum,
            "steps_in_sum": self._steps_in_sum,
        }
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)

    def load_checkpoint(self, path: str | Path) -> None:
        state = torch.load(path, map_location=self.device, weights_only=False)
        if state["fingerprint"] != self.fingerprint():
            raise ValueError(
                f"checkpoint {path} was made by a run with another configuration; it is left untouched. "
                "Use another checkpoint path, or the configuration it was made with."
            )
        self.t, self.elapsed = state["t"], state["elapsed"]
        self.resumed_from = self.t
        self.history_rows = list(state["history_rows"])
        self.teacher.load_state_dict(state["teacher"])
        for s, st in zip(self.students, state["students"]):
            s.net.load_state_dict(st["net"])
            s.optimizer.load_state_dict(st["optimizer"])
            s.estimator.load_state_dict(st["estimator"])
            s.loss_sum.copy_(st["loss_sum"])
            s.steps_since_log = st["steps_since_log"]
        self.accumulator.load_state_dict(state["accumulator"])
        self.gen_data.set_state(state["generators"]["data"].cpu())
        self.gen_noise.set_state(state["generators"]["noise"].cpu())
        for key, gen in self.gen_groups.items():
            gen.set_state(state["generators"]["groups"][_group_name(key)].cpu())
        if self.config.num_snapshots:
            self.snapshots.copy_(state["snapshots"])
            self.num_snapshots_taken = state["num_snapshots_taken"]
        self._dropout_rng = {k: v.cpu() for k, v in state["dropout_rng"].items()}
        self.train_nll_sum.copy_(state["train_nll_sum"])
        self._steps_in_sum = state["steps_in_sum"]


def student_lr(config: StudentConfig, t: int, burn_in: int, steps_per_epoch: float) -> float:
    """The student's Adam learning rate at teacher step ``t`` (Appendix A.2): alpha_0 halved every
    ``lr_halving_epochs`` teacher epochs (one epoch = N/M SGLD steps, ``steps_per_epoch``, as in
    the authors' code), counted from the end of burn-in, when the student starts learning.

    The epoch is the *labelled* set's, so the schedule depends on N: the paper's 200 epochs are
    20,000 steps at N = 10k and 120,000 at N = 60k, i.e. 50 vs 8 halvings over T = 10^6. (With
    the paper's B = 1,000 << 20,000, counting from 0 or from B is the same schedule up to a
    1,000-step shift; counting from B keeps a shortened profile's long burn-in from decaying the
    rate before the student has learnt anything.)
    """
    if config.lr_halving_epochs is None:
        return config.lr
    return config.lr * 0.5 ** math.floor(max(t - burn_in, 0) / (config.lr_halving_epochs * steps_per_epoch))


def prediction_metrics(target: Target, pred: torch.Tensor, labels: torch.Tensor, num_classes: int,
                       teacher: dict[str, torch.Tensor] | None = None) -> dict:
    """Test metrics of a student's linked outputs ``pred`` as Algorithm 1 reports them:
    ``student_nll``/``student_accuracy`` when the first C columns are a predictive
    distribution; against the teacher ensemble's estimates ``teacher`` (target name -> E[g]),
    ``target_mae`` (when the outputs estimate E[g]), ``entropy_mae`` (entropy targets) and
    ``nll_gap`` = student NLL - ensemble NLL."""
    out: dict = {}
    teacher = teacher or {}
    if target.predictive_classes:
        probs = pred[:, :num_classes]
        out["student_nll"] = metrics.nll(probs, labels)
        out["student_accuracy"] = metrics.accuracy(probs, labels)
    if target.estimates_g and target.name in teacher:
        reference = teacher[target.name].to(pred.device)
        out["target_mae"] = metrics.mae(pred, reference)
        if target.name in ("entropy", "predictive+entropy"):
            out["entropy_mae"] = metrics.mae(pred[:, -1], reference[:, -1])
    if "student_nll" in out and "predictive" in teacher:
        out["nll_gap"] = out["student_nll"] - metrics.nll(teacher["predictive"].to(pred.device), labels)
    return out


def run_gped(data: ExperimentData, config: GPEDConfig, students: Sequence[StudentConfig],
             checkpoint: str | Path | None = None) -> GPEDResult:
    """Run Algorithm 1 to completion (resuming from ``checkpoint`` if it exists)."""
    return GPEDRun(data, config, students).run(checkpoint=checkpoint)


def _progress_bar(cfg: GPEDConfig, start: int):
    if not cfg.progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=cfg.num_iterations, initial=start, desc="GPED", unit="it", mininterval=1.0)


def _group_name(key: tuple) -> str:
    return ",".join(str(k) for k in key)


def _name_of(obj: object) -> str | None:
    if obj is None or isinstance(obj, str):
        return obj
    return getattr(obj, "__name__", repr(obj))


def _jsonable(obj: object) -> object:
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, Target):
        return obj.name
    return _name_of(obj)
