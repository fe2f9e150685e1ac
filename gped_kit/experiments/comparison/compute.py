"""What the comparison computes from one chain's full result: Hydra trained on its snapshots
(:func:`train_hydra_on_chain`), every method's predictive and uncertainties (:func:`comparison_methods`,
:func:`comparison_marginal_variance`), the comparison table with the heads' errors and the zero-MU
baseline (:func:`comparison_table`), the memory, costs and training budgets, and the KD-variant rows.
Everything here is written into the derived entries (:mod:`.run`): a change to a number it computes bumps the
comparison's numerics version (:mod:`~gped_kit.experiments.numerics`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
import torch

from ...baselines import hydra
from ...baselines.endd import heated_label
from ...core import metrics, uncertainty
from ...core.estimators import estimator_init
from ...core.targets import PREDICTIVE_ENTROPY
from ...data.container import GPEDData
from ...engine import GPEDResult, StudentConfig, student_updates
from ...models.build import ModelSpec
from ...models.cost import count_flops
from ...models.presets import ArchSpec, build_network, count_parameters
from ..chains import ChainTask
from .settings import SNAPSHOTS, TEACHER, ZERO_MU

#: Columns of the KD-variant rows (from the chain's summary).
KD_COLUMNS = ("student", "input_generator", "derivative_weight", "student_nll", "student_accuracy", "nll_gap")


def train_hydra_on_chain(result: GPEDResult, data: GPEDData, arch: ArchSpec | str, config: hydra.HydraConfig,
                         progress: bool = True) -> hydra.HydraResult:
    """Hydra trained on a chain's kept snapshots (``GPEDResult.snapshots``, S >= 2): their logits on D'
    cached once (:func:`~gped_kit.baselines.hydra.snapshot_logits`), then the paper's two phases."""
    if result.snapshots is None or len(result.snapshots) < 2:
        raise ValueError("Hydra needs a chain with GPEDConfig.num_snapshots >= 2 (its result's snapshots)")
    x = data.distill_x
    logits = hydra.snapshot_logits(result.snapshots.to(x.device), arch, data.input_shape, data.num_classes, x)
    return hydra.train_hydra(logits, x, arch, data.input_shape, config, progress=progress)


def _eval_inputs(data: GPEDData, eval_set: str) -> torch.Tensor:
    return data.test_x if eval_set == "test" else data.ood_x[eval_set]


def comparison_methods(result: GPEDResult, data: GPEDData, arch: ArchSpec | str, hydra_net: hydra.HydraNet,
                       eval_set: str) -> dict[str, tuple[torch.Tensor, uncertainty.Uncertainties | None]]:
    """Per method, the predictive (N, C) on ``eval_set`` ("test" or an OOD / shift set) and its
    uncertainties (None for predictive-only students): the long-chain teacher (online means,
    :func:`~gped_kit.core.uncertainty.from_moments`), the snapshot ensemble (its members,
    :func:`~gped_kit.core.uncertainty.from_samples`), every student (GPED's C+1 outputs; EnD2's
    Dirichlet in closed form, at tau = 1 and, as ``"EnD2 (tau = 2.5)"``, at its training temperature,
    alpha = exp(raw / 2.5); KD: the predictive only) and Hydra (the mixture over its heads)."""
    c = data.num_classes
    x = _eval_inputs(data, eval_set)
    out: dict[str, tuple[torch.Tensor, uncertainty.Uncertainties | None]] = {}
    t = result.teacher_outputs[eval_set][PREDICTIVE_ENTROPY.name]
    out["Long-chain teacher"] = (t[:, :c], uncertainty.from_moments(t[:, :c], t[:, c]))
    snaps = hydra.snapshot_logits(result.snapshots.to(x.device), arch, data.input_shape, c, x)
    u = uncertainty.from_samples(snaps.softmax(-1).cpu())
    out["Snapshot ensemble"] = (u.predictive, u)
    for label, output in result.student_outputs[eval_set].items():
        target = result.target(label)
        if target.has_uncertainties:
            u = target.uncertainties(output, c)
            out[label] = (u.predictive, u)
        else:
            out[label] = (output[:, :c], None)
    for label, output in result.student_outputs[eval_set].items():
        target = result.target(label)
        if target.has_temperature:  # EnD2 also read at its training temperature (see experiment4)
            t = target.training_temperature
            u = target.uncertainties(target.at_temperature(output, c, t), c)
            out[heated_label(label, t)] = (u.predictive, u)
    u = hydra.hydra_uncertainties(hydra_net, x)
    out["Hydra"] = (u.predictive.cpu(), uncertainty.Uncertainties(*(v.cpu() for v in (u.predictive, u.total, u.data))))
    return out


def comparison_marginal_variance(result: GPEDResult, data: GPEDData, arch: ArchSpec | str,
                                 hydra_net: hydra.HydraNet, eval_set: str) -> dict[str, torch.Tensor]:
    """Per method that has it, the marginal variance E[p(y=c|x,theta) (1 - p(y=c|x,theta))], (N, C),
    on ``eval_set``: the snapshot ensemble and Hydra (mean over members / heads of
    :func:`~gped_kit.core.targets.marginal_variance_g`), the students whose target estimates it
    (``Target.marginal_variance``: EnD2's Dirichlet in closed form alpha_c (alpha_0 - alpha_c) /
    (alpha_0 (alpha_0 + 1)), :func:`~gped_kit.baselines.endd.dirichlet_marginal_variance`) and the
    long-chain teacher only when
    the chain accumulated the ``marginal_variance`` target (a student distilling it). KD and GPED's C+1
    student do not estimate it."""
    c = data.num_classes
    x = _eval_inputs(data, eval_set)
    teacher = result.teacher_outputs[eval_set]
    out: dict[str, torch.Tensor] = {}
    if "marginal_variance" in teacher:
        out["Long-chain teacher"] = teacher["marginal_variance"]
    snaps = hydra.snapshot_logits(result.snapshots.to(x.device), arch, data.input_shape, c, x)
    out["Snapshot ensemble"] = hydra.marginal_variance_from_samples(snaps.log_softmax(-1)).cpu()
    for label, output in result.student_outputs[eval_set].items():
        target = result.target(label)
        if target.marginal_variance is not None:  # EnD2: the Dirichlet's closed form
            out[label] = target.marginal_variance(output, c)
        if target.has_temperature and target.marginal_variance is not None:
            t = target.training_temperature
            out[heated_label(label, t)] = target.marginal_variance(target.at_temperature(output, c, t), c)
    out["Hydra"] = hydra.hydra_marginal_variance(hydra_net, x).cpu()
    return out


def comparison_memory(result: GPEDResult, data: GPEDData, hydra_result: hydra.HydraResult,
                      students: Sequence[StudentConfig]) -> pd.DataFrame:
    """What each method stores while it is made, in bytes: Hydra's kept snapshots and its cached
    snapshot logits on D'; each student's estimator store (built as the engine builds it,
    :func:`~gped_kit.core.estimators.estimator_init`, on the ``meta`` device, and measured by its
    ``nbytes``: 0 for U_s, |D'| sums and counts for U_o, the entropy column's U_o for GPED's
    ``U_s+U_o``); the long-chain teacher's running means on each evaluation set (the chain's
    accumulated targets, at each set's real size)."""
    n, c = data.distill_x.shape[0], data.num_classes
    snaps = result.snapshots
    rows = [{"method": "Hydra", "what": "S kept snapshots (parameters)",
             "bytes": snaps.numel() * snaps.element_size()},
            {"method": "Hydra", "what": "cached snapshot logits on D'", "bytes": int(hydra_result.cache_bytes)}]
    for s in students:
        store = estimator_init(s.estimator, n, s.resolved_target.out_dim(c), device="meta",
                              dtype=s.resolved_target.dtype)
        rows.append({"method": s.label, "what": f"{s.estimator.value} estimator store on D' ({n} inputs)",
                     "bytes": int(store.nbytes)})
    for name, sums in result.teacher_outputs.items():
        rows.append({"method": "Long-chain teacher",
                     "what": f"running sums on {name} ({next(iter(sums.values())).shape[0]} inputs; {', '.join(sums)})",
                     "bytes": sum(t.numel() * t.element_size() for t in sums.values())})
    return pd.DataFrame(rows)


def _labels_of(student: StudentConfig) -> list[str]:
    """A student's rows: its label, and for EnD2 also the label it has at its training temperature."""
    target = student.resolved_target
    if target.has_temperature:
        return [student.label, heated_label(student.label, target.training_temperature)]
    return [student.label]


def comparison_costs(model: ModelSpec, data: GPEDData, num_snapshots: int, hydra_net: hydra.HydraNet,
                     students: Sequence[StudentConfig]) -> pd.DataFrame:
    """Parameters and FLOPs per input (PyTorch's counter, 2 x MACs) of every method's deployed network:
    the snapshot ensemble (S teachers), each student, Hydra."""
    c, shape = data.num_classes, data.input_shape
    teacher = build_network(model, shape, c)
    rows = [{"method": "Snapshot ensemble", "params": num_snapshots * count_parameters(teacher),
             "flops": num_snapshots * count_flops(teacher, shape)}]
    for s in students:
        net = build_network(s.arch or model, shape, s.resolved_target.out_dim(c))
        for label in _labels_of(s):
            rows.append({"method": label, "params": count_parameters(net), "flops": count_flops(net, shape)})
    rows.append({"method": "Hydra", "params": count_parameters(hydra_net), "flops": count_flops(hydra_net, shape)})
    return pd.DataFrame(rows)


def comparison_table(result: GPEDResult, data: GPEDData, arch: ArchSpec | str, hydra_net: hydra.HydraNet,
                     costs: pd.DataFrame | None = None, labels: Mapping[str, torch.Tensor | None] | None = None
                     ) -> pd.DataFrame:
    """One row per (method, evaluation set): accuracy, NLL and Brier score (labelled sets), mean
    total uncertainty, mean model uncertainty MU (knowledge) and the mean |Delta MU| against the
    snapshot ensemble (``mu_mae_snapshots``, the Hydra paper's Table 1) and against the long-chain
    teacher (``mu_mae_teacher``); the same for the expected entropy E[H] (``data_mean``,
    ``entropy_mae_snapshots``, ``entropy_mae_teacher``) and, for the methods of
    :func:`comparison_marginal_variance`, the marginal variance E[p(1-p)] averaged over inputs and
    classes (``mv_mean``, ``mv_mae_snapshots``; ``mv_mae_teacher`` only when the chain accumulated
    it); every distilled method's skill over the best constant prediction (:func:`method_skill`; the
    references, teacher and snapshot ensemble, have none); ``params``/``flops`` from ``costs``. A set is labelled
    when ``data`` holds its labels (the test set; a shifted copy of it, ``data.ood_y``) or ``labels`` gives them
    (None: unlabelled); labels of another length than the set's outputs are an error.
    Each method's MU error is split into its heads against the long-chain teacher (:func:`head_errors`:
    ``total_mae_teacher``, ``total_bias_teacher``, ``data_bias_teacher``, ``mu_bias_teacher``), and each set
    gets a :data:`ZERO_MU` row (:func:`zero_mu_row`)."""
    labels = {"test": data.test_y, **data.ood_y, **(labels or {})}
    model = arch.family if isinstance(arch, ArchSpec) else str(arch)
    rows = []
    for eval_set in result.teacher_outputs:
        methods = comparison_methods(result, data, arch, hydra_net, eval_set)
        ref_snap, ref_teacher = methods[SNAPSHOTS][1], methods[TEACHER][1]
        mv = comparison_marginal_variance(result, data, arch, hydra_net, eval_set)
        for method, (pred, u) in methods.items():
            row = {"model": model, "eval_set": eval_set, "method": method}
            y = labels.get(eval_set)
            if y is not None:
                if len(y) != len(pred):
                    raise ValueError(f"comparison_table: {len(y)} labels for evaluation set {eval_set!r}, whose "
                                     f"outputs have {len(pred)} rows")
                y = y.cpu()
                row.update(accuracy=metrics.accuracy(pred, y), nll=metrics.nll(pred, y),
                           brier=metrics.brier_score(pred, y))
            total = metrics.predictive_entropy(pred)
            row["total_mean"] = float(total.mean())
            if u is not None:
                row.update(mu_mean=float(u.knowledge.mean()),
                           mu_mae_snapshots=metrics.mae(u.knowledge, ref_snap.knowledge),
                           mu_mae_teacher=metrics.mae(u.knowledge, ref_teacher.knowledge),
                           data_mean=float(u.data.mean()),
                           entropy_mae_snapshots=metrics.mae(u.data, ref_snap.data),
                           entropy_mae_teacher=metrics.mae(u.data, ref_teacher.data))
            row.update(head_errors(total, u, ref_teacher))
            if method not in (TEACHER, SNAPSHOTS):
                row.update(method_skill(pred, u, methods[TEACHER][0], ref_teacher))
            if method in mv:
                row.update(mv_mean=float(mv[method].mean()),
                           mv_mae_snapshots=metrics.mae(mv[method], mv["Snapshot ensemble"]))
                if "Long-chain teacher" in mv:
                    row["mv_mae_teacher"] = metrics.mae(mv[method], mv["Long-chain teacher"])
            rows.append(row)
        rows.append({"model": model, "eval_set": eval_set, **zero_mu_row(ref_snap, ref_teacher)})
    table = pd.DataFrame(rows)
    if costs is not None:
        table = table.merge(costs, on="method", how="left")
    return table


#: Columns of :func:`method_skill`.
SKILL_COLUMNS = ("predictive_mae_teacher", "predictive_skill", "entropy_skill", "mu_skill", "skill")


def method_skill(pred: torch.Tensor, u: uncertainty.Uncertainties | None, teacher_pred: torch.Tensor,
                 teacher: uncertainty.Uncertainties) -> dict[str, float]:
    """A distilled method's skill over the best constant prediction of the long-chain teacher's expectations, as
    the engine scores a student (:class:`~gped_kit.core.targets.ClassificationMetrics`): ``1 - error / constant``
    (:func:`~gped_kit.core.metrics.skill`), the constant being per output the teacher's median over the inputs
    (:func:`~gped_kit.core.metrics.constant_mae`, chosen with hindsight).

    ``predictive_mae_teacher`` = mean |p - p_teacher| over inputs and classes and its ``predictive_skill``; with
    an uncertainty decomposition ``u`` also ``entropy_skill`` (of E[H], the entropy head) and ``mu_skill`` (of
    MU = H[E p] - E[H], derived from both heads). ``skill`` is the lowest of ``predictive_skill`` and
    ``entropy_skill``, the expectations the method is trained to reproduce: a method below
    :data:`~gped_kit.core.targets.SKILL_FLOOR` learnt next to nothing per input, and no comparison counts it
    (:func:`~gped_kit.experiments.verdicts.unskilled`). ``mu_skill`` says whether its model uncertainty beats a
    constant one (a stronger null than predicting zero, :func:`zero_mu_row`)."""
    out = {"predictive_mae_teacher": metrics.mae(pred, teacher_pred)}
    out["predictive_skill"] = metrics.skill(out["predictive_mae_teacher"], metrics.constant_mae(teacher_pred))
    trained = [out["predictive_skill"]]
    if u is not None:
        out["entropy_skill"] = metrics.skill(metrics.mae(u.data, teacher.data), metrics.constant_mae(teacher.data))
        out["mu_skill"] = metrics.skill(metrics.mae(u.knowledge, teacher.knowledge),
                                        metrics.constant_mae(teacher.knowledge))
        trained.append(out["entropy_skill"])
    out["skill"] = float("nan") if any(math.isnan(v) for v in trained) else min(trained)
    return out


def head_errors(total: torch.Tensor, u: uncertainty.Uncertainties | None,
                reference: uncertainty.Uncertainties) -> dict[str, float]:
    """A method's uncertainty errors against a ``reference`` (the long-chain teacher), head by head.

    MU = H[E p] - E[H p] (knowledge uncertainty), so a method's MU error is its total-entropy error
    minus its expected-entropy error: with ``total`` = H[E p] of its predictive (N,) and ``u`` its
    decomposition (None: a predictive-only student), ``total_mae_teacher`` = mean |H - H_ref| and
    ``total_bias_teacher`` = mean (H - H_ref) (the predictive head, GPED's softmax); with ``u``
    also ``data_bias_teacher`` = mean (E[H] - E[H]_ref) (GPED's entropy head; its mean absolute
    error is ``entropy_mae_teacher``) and ``mu_bias_teacher`` = mean (MU - MU_ref), which equals
    ``total_bias_teacher - data_bias_teacher``."""
    out = {"total_mae_teacher": metrics.mae(total, reference.total),
           "total_bias_teacher": float((total - reference.total).mean())}
    if u is not None:
        out["data_bias_teacher"] = float((u.data - reference.data).mean())
        out["mu_bias_teacher"] = float((u.knowledge - reference.knowledge).mean())
    return out


def zero_mu_row(snapshots: uncertainty.Uncertainties, teacher: uncertainty.Uncertainties) -> dict[str, object]:
    """The :data:`ZERO_MU` baseline on one set: model uncertainty 0 for every input, so its mean
    |Delta MU| against a reference is the reference's mean |MU| (``mu_mae_snapshots``,
    ``mu_mae_teacher``; ``mu_mean`` 0, ``mu_bias_teacher`` = -mean MU_teacher). A method whose MU
    error exceeds it would do better by predicting no model uncertainty at all."""
    return {"method": ZERO_MU, "mu_mean": 0.0, "mu_mae_snapshots": metrics.zero_mae(snapshots.knowledge),
            "mu_mae_teacher": metrics.zero_mae(teacher.knowledge),
            "mu_bias_teacher": -float(teacher.knowledge.mean())}


def _targets_of(student: StudentConfig) -> str:
    estimator = student.estimator.value
    return {"U_s": "the current SGLD sample at each update (U_s)",
            "U_o": "running Monte Carlo means per input (U_o)",
            "U_s+U_o": "the current sample for the predictive, running means for E[H] (U_s+U_o)",
            }.get(estimator, estimator)


#: Columns of :func:`comparison_budgets`.
BUDGET_COLUMNS = ("method", "train_steps", "train_batch_size", "inputs_seen", "targets")


def comparison_budgets(task: ChainTask, config: hydra.HydraConfig, num_snapshots: int | None = None) -> pd.DataFrame:
    """The training budget of every method of the comparison: ``train_steps`` (student updates during
    the chain, :func:`~gped_kit.engine.config.student_updates`: the engine's own schedule; Hydra's phase-1 +
    phase-2 steps after it), ``train_batch_size``,
    ``inputs_seen`` (steps x batch, minibatches drawn from D' in both cases) and ``targets`` (what each
    update is fitted to). GPED's C+1 student with the profile's H takes about (T - B) / H updates on
    targets from single samples or running means; Hydra takes its own number of steps on the exact
    cached logits of the S kept snapshots (``num_snapshots``, default the chain's), and has more
    parameters (``params`` of the comparison table). The budgets are equal when Hydra's steps are the
    GPED student's updates (:func:`hydra_config_for_steps`)."""
    cfg = task.config
    snaps = cfg.num_snapshots if num_snapshots is None else num_snapshots
    rows = []
    for s in task.students:
        steps = student_updates(cfg, s.thinning)
        for label in _labels_of(s):
            rows.append({"method": label, "train_steps": steps, "train_batch_size": s.batch_size,
                         "inputs_seen": steps * s.batch_size, "targets": _targets_of(s)})
    steps = config.phase1_steps + config.phase2_steps
    rows.append({"method": "Hydra", "train_steps": steps, "train_batch_size": config.batch_size,
                 "inputs_seen": steps * config.batch_size,
                 "targets": f"the exact cached logits of the S = {snaps} kept snapshots, after the chain"})
    return pd.DataFrame(rows, columns=list(BUDGET_COLUMNS))


def kd_variants(summary: pd.DataFrame) -> pd.DataFrame:
    """The KD students' rows of a chain's summary (:data:`KD_COLUMNS`): the thesis' input generators
    and derivative matching beside plain KD."""
    rows = summary[summary["student"].astype(str).str.startswith("KD")]
    return rows.reindex(columns=list(KD_COLUMNS)).reset_index(drop=True)

