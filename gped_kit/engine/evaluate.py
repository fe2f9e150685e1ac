"""What an engine reports: history rows at log points, the ensemble's and students' metrics, results.

These functions read an engine's :class:`~gped_kit.engine.state.EngineState` (and its
:class:`~gped_kit.engine.setup.EngineSetup`); only :func:`log` changes it (it empties the running
sums since the last log point and appends the history rows). They read the device, so the loop
calls them at log points only, never inside a period of steps.

Run r's teacher ensemble estimates E[g] on an evaluation input as the mean of g over its kept
samples; for a pooled teacher, over every chain's, ``sum_k sums_k / (K count)``
(:meth:`~gped_kit.engine.layout.ChainLayout.run_means`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Sequence

import pandas as pd
import torch
from torch.func import functional_call, vmap

from ..core.estimators import estimates
from ..core.options import StepSchedule
from ..core.schema import record
from ..core.targets import SkillWarning, Target, check_skill
from ..data.container import describe_counts
from ..models.presets import ArchSpec, eval_chunks
from .result import GPEDResult
from .setup import EngineSetup
from .spec import ChainSpec
from .state import EngineState, chain_view, tree_leaves


def run_count(state: EngineState, setup: EngineSetup) -> int:
    """The number of samples in each run's ensemble: K x the chains' count for a pooled teacher."""
    return setup.layout.run_count(state.host.ensemble_count)


def finished(state: EngineState, setup: EngineSetup) -> bool:
    return state.host.t >= setup.config.num_iterations


def log(state: EngineState, setup: EngineSetup) -> list[list[dict]]:
    """One history row per (run, student) at the current step (the teacher's columns repeated; one
    row with the teacher's columns alone for a run without students); checks every chain for
    divergence. A pooled run's rows carry the pooled teacher's metrics, the mean of its chains'
    minibatch NLLs and each chain's ensemble NLL (``teacher_nll_chain<k>``). Reads the device: call at
    log points only."""
    host, layout, t = state.host, setup.layout, state.host.t
    train_nll = (state.chain.train_nll_sum / max(host.steps_in_nll_sum, 1)).tolist()
    losses = [(s.loss_sum / max(n, 1)).tolist() for s, n in zip(state.students, host.steps_since_log)]
    for k, value in enumerate(train_nll):
        if not math.isfinite(value):
            c = layout.chain_specs[k]
            sampler = c.config.sampler
            what = (f"{layout.chain_name(k)}{str(sampler.name).upper()} diverged before step {t}: the "
                    f"teacher's minibatch NLL is {value}")
            hint = data_hint(setup, layout.chain_run[k], ("train_x", "train_y")) or sampler.divergence_hint(
                t, c.num_train)
            raise FloatingPointError(f"{what}. {hint[:1].upper()}{hint[1:]}.")
    for j, (values, n) in enumerate(zip(losses, host.steps_since_log)):
        for r, value in enumerate(values):
            if n and not math.isfinite(value):
                s = setup.chains[r].students[j]
                hint = data_hint(setup, r, ("distill_x",)) or (
                    f"lower its lr={s.config.lr:g}, or look for non-finite target values (a target's g returning "
                    f"NaN or infinity on some inputs; this student's target is {s.target.name!r})")
                raise FloatingPointError(f"{layout.run_name(r)}student {s.label!r} diverged before step {t} "
                                         f"(training loss {value}); {hint}")
    state.chain.train_nll_sum.zero_()
    for s in state.students:
        s.loss_sum.zero_()
    outputs = student_outputs(state, setup, ["test"]) if t > setup.config.burn_in else None
    count = run_count(state, setup)
    if t % setup.config.log_every == 0:  # regular log points only: a stop (interruption) changes nothing
        state.recent.advance(count, test_sums(state, setup))
    rows_per_run = []
    for r, c in enumerate(setup.chains):
        base = {"step": t, "teacher_train_nll": layout.run_train_nll(train_nll, r), "teacher_samples": count,
                "elapsed_s": state.elapsed, **teacher_metrics(state, setup, r)}
        if layout.pooled:
            base.update(chain_metrics(state, setup))
        rows = []
        for j, s in enumerate(c.students):
            row = dict(base, student=s.label, student_train_loss=losses[j][r] if host.steps_since_log[j]
                       else float("nan"))
            if outputs is not None:
                row.update(student_metrics(state, setup, r, j, outputs[r]["test"][s.label]))
            rows.append(row)
        rows = rows or [base]
        state.history[r].extend(rows)
        rows_per_run.append(rows)
    state.host = dataclasses.replace(host, steps_in_nll_sum=0, steps_since_log=[0] * len(host.steps_since_log))
    return rows_per_run


def data_hint(setup: EngineSetup, r: int, names: Sequence[str]) -> str | None:
    """Why run r diverged when the data behind the failed loss hold NaN or infinite values
    (changed in place after the chain was built: :meth:`GPEDData.validate` rejects them before);
    None when they are finite. Reads the data: only called when a divergence is raised."""
    counts = setup.chains[r].data.non_finite_counts(names)
    if not counts:
        return None
    return (f"the chain's data hold non-finite values (NaN or infinity) in {describe_counts(counts)}, so every "
            "loss that touches them is NaN whatever the step size; they were finite when the chain was built, so "
            "the tensors were changed in place since: rebuild the data from finite tensors")


def ensemble_means(state: EngineState, setup: EngineSetup, r: int, eval_set: str = "test") -> dict[str, torch.Tensor]:
    """Run r's teacher-ensemble estimates of E[g] per tracked target on ``eval_set`` (empty before the
    first sample): chain r's, or for a pooled teacher the mean over every chain's kept samples."""
    count = state.host.ensemble_count
    if count == 0:
        return {}
    return setup.layout.run_means(state.ensemble.sums, r, setup.eval_slices[eval_set], count)


def chain_ensemble_means(state: EngineState, setup: EngineSetup, k: int,
                         eval_set: str = "test") -> dict[str, torch.Tensor]:
    """Teacher chain k's own ensemble estimates (its kept samples only; for independent chains the
    same as :func:`ensemble_means`)."""
    count = state.host.ensemble_count
    if count == 0:
        return {}
    sl = setup.eval_slices[eval_set]
    return {name: sums[k, sl] / count for name, sums in state.ensemble.sums.items()}


def teacher_metrics(state: EngineState, setup: EngineSetup, r: int) -> dict[str, float]:
    """The teacher ensemble's predictive metrics on run r's test set (``teacher_nll`` etc.)."""
    means = ensemble_means(state, setup, r)
    if not means:
        return {}
    likelihood, labels = setup.chains[r].likelihood, setup.test_labels[r]
    out = {f"teacher_{name}": value for name, value in likelihood.predictive_metrics(means, labels).items()}
    recent = state.recent.means(r, run_count(state, setup), test_sums(state, setup))
    if recent:
        out.update({f"teacher_recent_{name}": value
                    for name, value in likelihood.predictive_metrics(recent, labels).items()})
        out["teacher_recent_from_sample"] = state.recent.start_count + 1
    return out


def chain_metrics(state: EngineState, setup: EngineSetup) -> dict[str, float]:
    """Each teacher chain's own ensemble NLL on the test set, ``teacher_nll_chain<k>`` (the columns a
    pooled run's history adds; empty before the first sample)."""
    if state.host.ensemble_count == 0:
        return {}
    likelihood, labels = setup.chains[0].likelihood, setup.test_labels[0]
    return {f"teacher_nll_chain{k}": likelihood.predictive_nll(chain_ensemble_means(state, setup, k), labels)
            for k in range(setup.layout.K)}


def test_sums(state: EngineState, setup: EngineSetup) -> dict[str, torch.Tensor]:
    """Each run's ensemble running sums on the test rows (run axis first): views of the chains' sums,
    or for a pooled teacher their sum over the chains (1, n, D)."""
    return setup.layout.run_sums(state.ensemble.sums, setup.eval_slices["test"])


def student_metrics(state: EngineState, setup: EngineSetup, r: int, j: int, output: torch.Tensor) -> dict[str, float]:
    """Test metrics of student j of run r from its linked outputs (see :func:`prediction_metrics`)."""
    spec = setup.chains[r]
    return prediction_metrics(spec, spec.students[j].target, output, ensemble_means(state, setup, r))


@torch.no_grad()
def student_outputs(state: EngineState, setup: EngineSetup,
                    eval_sets: Sequence[str] | None = None) -> list[dict[str, dict[str, torch.Tensor]]]:
    """Every run's students' linked outputs (evaluation mode) on the evaluation sets:
    ``[run r][set][student label] -> (n, D)``."""
    names = list(setup.eval_slices) if eval_sets is None else list(eval_sets)
    out: list[dict[str, dict[str, torch.Tensor]]] = [{n: {} for n in names} for _ in setup.chains]
    chunk = setup.eval_chunk
    for j, spec in enumerate(setup.chains[0].students):
        module, link = spec.network.eval, spec.target.link
        student = state.students[j]

        def forward(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
            return link(functional_call(module, (params, buffers), (x,)))

        for name in names:
            sl = setup.eval_slices[name]
            parts = []
            for start, stop in eval_chunks(sl.start, sl.stop, chunk):
                (x,), batched = setup.eval_sets.rows(start, stop)
                if setup.layout.students_batched:
                    parts.append(vmap(forward, in_dims=(0, 0, 0 if batched else None))(
                        student.params, student.buffers, x))
                else:
                    parts.append(forward(chain_view(student.params, 0), chain_view(student.buffers, 0),
                                         x[0] if batched else x).unsqueeze(0))
            values = torch.cat(parts, dim=1)
            for r, c in enumerate(setup.chains):
                out[r][name][c.students[j].label] = values[r]
    return out


def memory_bytes(state: EngineState, setup: EngineSetup) -> dict[str, int]:
    """Bytes the batch's state and data hold now, by part (data: each distinct set once)."""
    def size(tree: Any) -> int:
        return sum(t.numel() * t.element_size() for t in tree_leaves(tree))

    buffers = state.buffers
    teacher_scratch = buffers.teacher.grads.flat
    noise = buffers.teacher.noise.flat
    out = {"teacher": (size(state.chain) + size(buffers.noise) + size(state.snapshots) + size(teacher_scratch)
                       + (0 if noise is buffers.noise else size(noise))),
           "students": sum(size((s.params, s.buffers, s.adam, s.lr, s.loss_sum, b.grads.flat))
                           for s, b in zip(state.students, buffers.students)),
           "u_o_stores": sum(size(s.store) for s in state.students),
           "ensemble": size(state.ensemble),
           "data": setup.train_sets.nbytes + setup.distill_sets.nbytes + setup.eval_sets.nbytes}
    out["total"] = sum(out.values())
    return out


def results(state: EngineState, setup: EngineSetup) -> list[GPEDResult]:
    """Each run's :class:`GPEDResult` at the current step (a pooled teacher's snapshots: every chain's,
    chain by chain, K x S rows)."""
    outputs = student_outputs(state, setup)
    t, done, elapsed = state.host.t, finished(state, setup), state.elapsed
    out = []
    for r, c in enumerate(setup.chains):
        history = pd.DataFrame(state.history[r])
        last = history[history["step"] == t] if len(history) else history
        rows = []
        for j, s in enumerate(c.students):
            row = config_columns(c, s, setup.device)
            match = last[last["student"] == s.label] if "student" in last else last
            if len(match):
                row.update({key: v for key, v in match.iloc[-1].items() if key not in ("student", "step")})
            row["steps_done"] = t
            row["iterations_per_s"] = t / elapsed if elapsed else float("nan")
            if done and (text := check_skill(s.label, row)) is not None:
                warnings.warn(text, SkillWarning, stacklevel=3)
            rows.append(row)
        teacher = {name: {n: v.cpu() for n, v in ensemble_means(state, setup, r, name).items()}
                   for name in setup.eval_slices}
        students = {name: {label: v.cpu() for label, v in outputs[r][name].items()} for name in setup.eval_slices}
        snapshots = None
        if setup.config.num_snapshots:
            taken = state.snapshots[setup.layout.run_chains(r), :state.host.snapshots_taken]
            snapshots = taken.reshape(-1, taken.shape[-1]).cpu()
        out.append(GPEDResult(
            summary=pd.DataFrame(rows), history=history, teacher_outputs=teacher, student_outputs=students,
            steps_done=t, finished=done, snapshots=snapshots,
            student_params=[{n: v[r].detach().cpu().clone() for n, v in s.params.items()} for s in state.students],
            student_buffers=[{n: v[r].detach().cpu().clone() for n, v in s.buffers.items()} for s in state.students],
            stores=[_store_estimates(s.store, r) if c.students[j].estimator.uses_store else None
                    for j, s in enumerate(state.students)],
            spec=c))
    return out


def _store_estimates(store, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    counts = store.counts[k]
    visited = torch.nonzero(counts > 0).squeeze(1)
    chain_store = type(store)(store.sums[k], counts)
    return visited.cpu(), estimates(chain_store, visited).cpu()


def prediction_metrics(spec: ChainSpec, target: Target, output: torch.Tensor,
                       ensemble: dict[str, torch.Tensor]) -> dict[str, float]:
    """Test metrics of a student's linked outputs as Algorithm 1 reports them: the target's own
    (:meth:`~gped_kit.core.targets.Target.evaluate`) against chain ``spec``'s test labels, the
    teacher ensemble's estimate of the same E[g] (``ensemble[target.name]``, when tracked) and, for a
    target reporting ``nll_gap``, the ensemble's predictive NLL (its likelihood's
    ``predictive_nll``). ``ensemble`` maps target names to the ensemble's estimates (empty
    before the first sample)."""
    labels = spec.data.test_y.to(output.device)
    ensemble = {name: value.to(output.device) for name, value in ensemble.items()}
    teacher_nll = None
    if target.reports("nll_gap") and spec.likelihood.ensemble_target in ensemble:
        teacher_nll = spec.likelihood.predictive_nll(ensemble, labels)
    return target.evaluate(output, labels, spec.data.num_outputs, ensemble.get(target.name), teacher_nll)


def config_columns(spec: ChainSpec, student, device: torch.device) -> dict[str, Any]:
    """The tidy configuration columns of one (chain, student) row."""
    cfg, sc = spec.config, student.config
    arch = sc.arch if sc.arch is not None else cfg.model
    preset = arch if isinstance(arch, ArchSpec) else None
    cols = dict(spec.data.info)
    cols.update(
        model=cfg.model_name, likelihood=spec.likelihood.name, sampler=str(cfg.sampler.name),
        step_size=cfg.sampler.step_size,
        schedule=str(cfg.sampler.schedule), prior_precision=cfg.sampler.prior_precision,
        batch_size=cfg.sampler.batch_size, num_iterations=cfg.num_iterations, burn_in=cfg.burn_in,
        eval_thinning=cfg.eval_thinning, seed=cfg.seed, device=str(device), torch_version=torch.__version__,
        student=sc.label, target=student.target.name, estimator=sc.estimator.value,
        student_arch=preset.family if preset else _model_name(arch),
        k1=preset.k1 if preset else float("nan"), k2=preset.k2 if preset else float("nan"),
        dropout=preset.dropout if preset else float("nan"), thinning=sc.thinning, student_batch_size=sc.batch_size,
        lr=sc.lr, lr_halving_epochs=sc.lr_halving_epochs,
        regularizer=record(sc.regularizer) if sc.regularizer is not None else None, reg_weight=sc.reg_weight,
        input_generator=sc.input_generator.value, derivative_weight=sc.derivative_weight,
        student_params=student.network.num_params, teacher_params=spec.teacher.num_params)
    if cfg.num_chains > 1:  # columns of the newer options only where they are used: older tables stay as they were
        cols["num_chains"] = cfg.num_chains
    if cfg.matmul_precision != "highest":
        cols["matmul_precision"] = cfg.matmul_precision
    if cfg.sampler.schedule is StepSchedule.CYCLICAL:
        cols.update(cycles=cfg.sampler.cycles, explore_fraction=cfg.sampler.explore_fraction,
                    cycle_floor=cfg.sampler.cycle_floor)
    if sc.lr_warmup:
        cols["lr_warmup"] = sc.lr_warmup
    return cols


def _model_name(model: Any) -> str:
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    return getattr(model, "__name__", type(model).__name__)
