"""Beyond GPED (notebook 07): KD, GPED, EnD2 and Hydra distilled from one SGLD chain, and the 2-D spiral.

One teacher chain (FCNN on MNIST by default) is distilled, online and at once, by plain knowledge
distillation of the predictive (Bayesian Dark Knowledge, ``KD``), GPED's C+1 student (the
predictive and the expected entropy; paper 003, Experiment 4), EnD2 (a prior network trained with
Eq. 11 of paper 003, :data:`~gped_kit.baselines.endd.ENDD`) and, after the chain, Hydra (paper 002:
one head per kept posterior snapshot, trained on the snapshots' cached outputs on D',
:mod:`gped_kit.baselines.hydra`). Three more KD students show the input generators and the
derivative matching of Papamakarios' thesis (paper 001). Two references for the uncertainties:
the *snapshot ensemble* (the S kept samples, exactly what Hydra copies) and the *long-chain
teacher* (the online Monte Carlo means over the whole chain, what GPED and EnD2 distil).

Everything the notebook shows is a derived entry of the results store (kind ``"comparison"``
for MNIST, ``"spiral"`` for the toy), keyed by the chain's record and Hydra's configuration
(:func:`~gped_kit.experiments.chains.derive`): the comparison table, the memory
table, the KD-variant rows, Hydra's loss history, the spiral's uncertainty maps (float16 arrays)
and the trained Hydra (``hydra.pt``, not committed). Only a missing entry runs (or reloads) its chain.

Beside the methods the table carries (issue 27): a **zero-MU baseline** (model uncertainty 0 for
every input: its mean |Delta MU| is the references' own mean MU, the bar any method must pass), each
method's MU error **split into its two heads** (the predictive's total entropy H[E p] and the
expected entropy E[H], each against the long-chain teacher's, with signed biases:
MU error = total bias - E[H] bias, :func:`mu_error_split`), the **training budgets** (student
updates, minibatch, inputs seen, what the targets are; :func:`comparison_budgets`: GPED's students
take one step every H chain steps after burn-in, Hydra its phase-1 + phase-2 steps on the cached
snapshot logits), the teacher's own quality next to every method's (:func:`comparison_teacher_lines`)
and the references named by their size (:func:`reference_names`: "teacher, T = 4,000").

Profiles (:data:`PROFILES`): ``default`` runs on a CPU in minutes (S = 20 snapshots);
``paper`` is Hydra's MNIST setting as far as it maps onto an SGLD teacher (S = 50, T = 10^6).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..baselines import hydra
from ..baselines.endd import ENDD, ENDD_TEMPERATURE, endd_output_at_temperature, heated_label, is_endd
from ..baselines.hydra import HydraConfig
from ..core import metrics, uncertainty
from ..core.estimators import estimator_init
from ..core.options import check_int, check_positive
from ..core.schema import record
from ..core.sgld import SGLDConfig
from ..core.targets import ENTROPY_LOSSES, predictive_entropy_target
from ..data.container import GPEDData
from ..data.experiment import DataConfig
from ..data.ood import ood_available
from ..data.spiral import SpiralConfig, spiral_data
from ..engine import GPEDConfig, GPEDResult, StudentConfig
from ..models.build import ModelSpec
from ..models.cost import count_flops
from ..models.presets import ArchSpec, build_network, count_parameters
from .chains import ChainOutcome, ChainTask, DerivedOutcome, DerivedTask, run_derived
from .paper import OneThinningSettings, paper_model, teacher_config
from .store import NUMERICS, Entry, ResultsStore, code_fingerprint


@dataclass(frozen=True)
class SpiralSettings:
    """The spiral toy of the comparison: its data (:class:`~gped_kit.data.spiral.SpiralConfig`; the
    notebook's seed replaces ``data.seed``), its chain (T = ``num_iterations``, B = ``burn_in``,
    eta = ``step_size``, S = ``num_snapshots`` kept samples, students every H = ``thinning`` steps)
    and the Hydra trained on its snapshots (:class:`~gped_kit.baselines.hydra.HydraConfig`)."""

    data: SpiralConfig = SpiralConfig()
    num_iterations: int = 6_000
    burn_in: int = 2_000
    step_size: float = 2e-4
    num_snapshots: int = 10
    thinning: int = 2
    hydra: HydraConfig = HydraConfig()

    def __post_init__(self) -> None:
        for name, minimum in (("num_iterations", 1), ("burn_in", 0), ("num_snapshots", 2), ("thinning", 1)):
            check_int(f"spiral.{name}", getattr(self, name), minimum)
        check_positive("spiral.step_size", self.step_size)


@dataclass(frozen=True)
class ComparisonSettings(OneThinningSettings):
    """A profile of the comparison: the MNIST chain (:class:`~gped_kit.experiments.paper.OneThinningSettings`:
    one H for every student), its model, data and kept snapshots S; the KD variants' input noise and
    derivative weight gamma; ``hydra``, the Hydra trained on the MNIST chain's snapshots (paper 002:
    heads, temperature, steps, learning rate; :class:`~gped_kit.baselines.hydra.HydraConfig`);
    ``spiral``, the spiral toy with its own Hydra (:class:`SpiralSettings`); and the loss of the
    ``GPED`` student's entropy column (``"absolute"``, the paper's, or ``"squared"``; the other one,
    and a GPED student updated every step, run beside it as variants, see :func:`comparison_students`)."""

    model: str = "fcnn"
    labelled_size: int = 60_000
    mask_size: int = 0
    num_snapshots: int = 20
    perturb_std: float = 0.3
    derivative_weight: float = 1.0
    hydra: HydraConfig = HydraConfig()
    spiral: SpiralSettings = SpiralSettings()
    gped_entropy_loss: str = "absolute"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gped_entropy_loss not in ENTROPY_LOSSES:
            raise ValueError(f"gped_entropy_loss={self.gped_entropy_loss!r} is not known; allowed: "
                             f"{sorted(ENTROPY_LOSSES)}")
        if paper_model(self.model).dataset != "mnist":
            raise ValueError(f"model={self.model!r}: the comparison runs on MNIST; allowed: 'fcnn', 'cnn_mnist'")
        check_int("labelled_size", self.labelled_size, 1)
        check_int("mask_size", self.mask_size, 0)
        check_int("num_snapshots", self.num_snapshots, 2)
        for name in ("perturb_std", "derivative_weight"):
            check_positive(name, getattr(self, name), allow_zero=True)
        for name, config, kind in (("hydra", self.hydra, HydraConfig), ("spiral", self.spiral, SpiralSettings)):
            if not isinstance(config, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {type(config).__name__}")


PROFILES: dict[str, ComparisonSettings] = {
    "default": ComparisonSettings(num_iterations=4_000, burn_in=1_000, thinning=2, eval_thinning=50, log_every=500,
                                  checkpoint_every=1_000, model="fcnn", labelled_size=60_000, mask_size=0,
                                  num_snapshots=20, perturb_std=0.3, derivative_weight=1.0,
                                  hydra=HydraConfig(head_hidden=(100, 100), temperature=2.0, phase1_steps=1_000,
                                                    phase2_steps=2_000, lr=1e-3),
                                  spiral=SpiralSettings(data=SpiralConfig(labelled_size=1_000), num_iterations=6_000,
                                                        burn_in=2_000, step_size=2e-4, num_snapshots=10, thinning=2,
                                                        hydra=HydraConfig(phase1_steps=1_000, phase2_steps=2_000))),
    "paper": ComparisonSettings(num_iterations=1_000_000, burn_in=None, thinning=10, eval_thinning=100,
                                log_every=10_000, checkpoint_every=50_000, model="fcnn", labelled_size=60_000,
                                mask_size=0, num_snapshots=50, perturb_std=0.3, derivative_weight=1.0,
                                hydra=HydraConfig(head_hidden=(100, 100), temperature=2.0, phase1_steps=20_000,
                                                  phase2_steps=60_000, lr=1e-3),
                                spiral=SpiralSettings(data=SpiralConfig(labelled_size=1_000), num_iterations=100_000,
                                                      burn_in=10_000, step_size=2e-4, num_snapshots=10, thinning=2,
                                                      hydra=HydraConfig(phase1_steps=5_000, phase2_steps=20_000))),
}
#: Evaluation sets of the MNIST comparison: the MNIST test set rotated by 60 degrees (labelled; a
#: rotated set like the Hydra paper's Table 1 row "MNIST (rotated)", not its "MNIST (shifted)"
#: row of translated images) and Fashion-MNIST (OOD, when present).
COMPARISON_SHIFT_SETS = ("mnist_rotated60",)
COMPARISON_OOD_SETS = ("fashion_mnist",)
#: The baseline that predicts model uncertainty 0 for every input (a row of :func:`comparison_table`).
ZERO_MU = "Zero MU (baseline)"
#: Methods with an uncertainty decomposition (KD students have the predictive only), and the zero-MU baseline.
MU_METHODS = ("Long-chain teacher", "Snapshot ensemble", "GPED", "GPED (squared error)", "GPED (absolute error)",
              "GPED (every step)", "EnD2", heated_label("EnD2", ENDD_TEMPERATURE), "Hydra", ZERO_MU)
#: The references of the comparison: the online Monte Carlo means of the whole chain, and its kept snapshots.
TEACHER, SNAPSHOTS = "Long-chain teacher", "Snapshot ensemble"
#: Columns of the KD-variant rows (from the chain's summary).
KD_COLUMNS = ("student", "input_generator", "derivative_weight", "student_nll", "student_accuracy", "nll_gap")


def comparison_code() -> str:
    """The code fingerprint of the comparison's derived entries: the numerics and this module."""
    return code_fingerprint(*NUMERICS, "gped_kit.experiments.comparison")


def comparison_students(model: str, settings: ComparisonSettings, variants: bool = True
                        ) -> tuple[StudentConfig, ...]:
    """KD (U_s: Bayesian Dark Knowledge), GPED (C+1, U_s on the predictive, U_o on the entropy, whose
    entropy column uses ``settings.gped_entropy_loss``), EnD2 (U_s) and, with ``variants``: GPED with
    the other entropy loss, GPED updated every step (H = 1: twice the distillation steps), and KD
    students with the thesis' input generators (``perturb`` with ``perturb_std``, ``noise``) and with
    derivative matching (``derivative_weight``); all others are updated every ``settings.thinning``
    steps, with the paper's student dropout and lr schedule for ``model``.

    Why the GPED variants: the entropy column's targets (U_o running means of the samples' entropies,
    with few visits per input in a short chain) are right-skewed, and the paper's absolute error is
    minimised by their median, not their mean, so E[H] comes out low and the knowledge uncertainty
    (total - E[H]) high; the squared error's minimiser is the mean."""
    paper = paper_model(model)
    arch = ArchSpec(model, dropout=paper.student_dropout)
    common = dict(thinning=settings.thinning, lr_halving_epochs=paper.lr_halving_epochs)
    main = predictive_entropy_target(settings.gped_entropy_loss)
    other = predictive_entropy_target("squared" if settings.gped_entropy_loss == "absolute" else "absolute")
    students = [StudentConfig("predictive", "U_s", arch=arch, name="KD", **common),
                StudentConfig(main, "U_s+U_o", arch=arch, name="GPED", **common),
                StudentConfig(ENDD, "U_s", arch=ArchSpec(model, dropout=paper.endd_dropout), name="EnD2", **common)]
    if variants:
        other_name = "GPED (squared error)" if settings.gped_entropy_loss == "absolute" else "GPED (absolute error)"
        students += [
            StudentConfig(other, "U_s+U_o", arch=arch, name=other_name, **common),
            StudentConfig(main, "U_s+U_o", arch=arch, name="GPED (every step)",
                          **{**common, "thinning": 1})]
        students += [
            StudentConfig("predictive", "U_s", arch=arch, name="KD (perturbed inputs)", input_generator="perturb",
                          input_noise_std=settings.perturb_std, **common),
            StudentConfig("predictive", "U_s", arch=arch, name="KD (noise inputs)", input_generator="noise", **common),
            StudentConfig("predictive", "U_s", arch=arch, name="KD + derivative matching",
                          derivative_weight=settings.derivative_weight, **common)]
    return tuple(students)


def comparison_task(settings: ComparisonSettings, seed: int = 0, device: str = "auto", data_root: str | None = None,
                    verify_checksums: bool = True) -> ChainTask:
    """The MNIST comparison chain: ``settings.model``'s teacher (Appendix A.2) with ``num_snapshots``
    kept samples, the students of :func:`comparison_students`, and the shift / OOD sets evaluated online."""
    ood = COMPARISON_SHIFT_SETS + tuple(n for n in COMPARISON_OOD_SETS if ood_available(n, data_root))
    data = DataConfig("mnist", labelled_size=settings.labelled_size, mask_size=settings.mask_size, seed=seed,
                      root=data_root, verify_checksums=verify_checksums, ood_datasets=ood, test_size=settings.test_size)
    config = teacher_config(settings.model, settings.labelled_size, settings, seed, device,
                            num_snapshots=settings.num_snapshots)
    return ChainTask(data, config, comparison_students(settings.model, settings))


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
    Dirichlet in closed form, at T = 1 and, as ``"EnD2 (T = 2.5)"``, at its training temperature,
    alpha = exp(raw / 2.5); KD: the predictive only) and Hydra (the mixture over its heads)."""
    c = data.num_classes
    x = _eval_inputs(data, eval_set)
    out: dict[str, tuple[torch.Tensor, uncertainty.Uncertainties | None]] = {}
    t = result.teacher_outputs[eval_set]["predictive+entropy"]
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
        if is_endd(target):  # EnD2 also read at its training temperature (see experiment4)
            u = target.uncertainties(endd_output_at_temperature(output, c, ENDD_TEMPERATURE), c)
            out[heated_label(label, ENDD_TEMPERATURE)] = (u.predictive, u)
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
        if is_endd(target):
            heated = endd_output_at_temperature(output, c, ENDD_TEMPERATURE)
            out[heated_label(label, ENDD_TEMPERATURE)] = target.marginal_variance(heated, c)
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
        store = estimator_init(s.estimator, n, s.resolved_target.out_dim(c), device="meta")
        rows.append({"method": s.label, "what": f"{s.estimator.value} estimator store on D' ({n} inputs)",
                     "bytes": int(store.nbytes)})
    for name, sums in result.teacher_outputs.items():
        rows.append({"method": "Long-chain teacher",
                     "what": f"running sums on {name} ({next(iter(sums.values())).shape[0]} inputs; {', '.join(sums)})",
                     "bytes": sum(t.numel() * t.element_size() for t in sums.values())})
    return pd.DataFrame(rows)


def _labels_of(student: StudentConfig) -> list[str]:
    """A student's rows: its label, and for EnD2 also the label it has at its training temperature."""
    if is_endd(student.resolved_target):
        return [student.label, heated_label(student.label, ENDD_TEMPERATURE)]
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
    it); ``params``/``flops`` from ``costs``. ``labels`` gives the labels of further sets (the
    rotated MNIST test set has the test set's labels; None: unlabelled). Each method's MU error
    is split into its heads against the long-chain teacher (:func:`head_errors`: ``total_mae_teacher``,
    ``total_bias_teacher``, ``data_bias_teacher``, ``mu_bias_teacher``), and each set gets a
    :data:`ZERO_MU` row (:func:`zero_mu_row`)."""
    labels = {"test": data.test_y, **{n: data.test_y for n in COMPARISON_SHIFT_SETS}, **(labels or {})}
    model = arch.family if isinstance(arch, ArchSpec) else str(arch)
    rows = []
    for eval_set in result.teacher_outputs:
        methods = comparison_methods(result, data, arch, hydra_net, eval_set)
        ref_snap, ref_teacher = methods["Snapshot ensemble"][1], methods["Long-chain teacher"][1]
        mv = comparison_marginal_variance(result, data, arch, hydra_net, eval_set)
        for method, (pred, u) in methods.items():
            row = {"model": model, "eval_set": eval_set, "method": method}
            y = labels.get(eval_set)
            if y is not None and len(y) == len(pred):
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
    return {"method": ZERO_MU, "mu_mean": 0.0, "mu_mae_snapshots": float(snapshots.knowledge.abs().mean()),
            "mu_mae_teacher": float(teacher.knowledge.abs().mean()),
            "mu_bias_teacher": -float(teacher.knowledge.mean())}


#: Columns of :func:`mu_error_split`.
MU_SPLIT_COLUMNS = ("eval_set", "method", "mu_mae_teacher", "total_mae_teacher", "entropy_mae_teacher",
                    "mu_bias_teacher", "total_bias_teacher", "data_bias_teacher", "total_mean", "data_mean",
                    "mu_mean", "teacher_total_mean", "teacher_data_mean", "teacher_mu_mean")


def mu_error_split(table: pd.DataFrame) -> pd.DataFrame:
    """Each method's model-uncertainty error split into its two heads, per evaluation set, from a
    :func:`comparison_table`: its mean |Delta MU| against the long-chain teacher, the predictive
    head's total-entropy error and the entropy head's expected-entropy error (mean absolute and
    signed: MU bias = total bias - E[H] bias, :func:`head_errors`), its own mean total, E[H] and MU,
    and the teacher's (``teacher_*``). Rows: the methods of :data:`MU_METHODS` present, teacher
    first, the zero-MU baseline last."""
    rows = table[table["method"].isin(MU_METHODS)].copy()
    teacher = table[table["method"] == TEACHER].set_index("eval_set")
    for col in ("total_mean", "data_mean", "mu_mean"):
        rows[f"teacher_{col}"] = rows["eval_set"].map(teacher[col]) if col in teacher else float("nan")
    rows["order"] = rows["method"].map({m: i for i, m in enumerate(MU_METHODS)})
    rows = rows.sort_values(["eval_set", "order"], key=lambda c: c.map(
        {e: i for i, e in enumerate(dict.fromkeys(table["eval_set"]))}) if c.name == "eval_set" else c, kind="stable")
    return rows.reindex(columns=list(MU_SPLIT_COLUMNS)).reset_index(drop=True)


#: Quantities on which the long-chain teacher has a value of its own (:func:`comparison_teacher_lines`).
TEACHER_QUANTITIES = ("accuracy", "nll", "total_mean", "data_mean", "mu_mean")


def comparison_teacher_lines(table: pd.DataFrame) -> pd.DataFrame:
    """The long-chain teacher's own quality next to every method's: one row per (evaluation set,
    method, quantity of :data:`TEACHER_QUANTITIES`) with ``value``, ``teacher`` (the teacher's on that
    set) and ``minus_teacher`` = value - teacher (for NLL: the NLL gap). The mean |Delta MU| of a
    method against the teacher is ``mu_mae_teacher`` in the table itself."""
    quantities = [q for q in TEACHER_QUANTITIES if q in table]
    long = table.melt(id_vars=["eval_set", "method"], value_vars=quantities, var_name="quantity",
                      value_name="value").dropna(subset=["value"])
    teacher = long[long["method"] == TEACHER].set_index(["eval_set", "quantity"])["value"].rename("teacher")
    out = long[long["method"] != TEACHER].join(teacher, on=["eval_set", "quantity"])
    out["minus_teacher"] = out["value"] - out["teacher"]
    return out.reset_index(drop=True)


def student_updates(num_iterations: int, burn_in: int, thinning: int) -> int:
    """How many updates a student with thinning H takes in a chain of T iterations with burn-in B:
    the steps t = 0 .. T-1 with t > B and t mod H = 0 (:meth:`gped_kit.engine.GPEDEngine.events`),
    i.e. floor((T - 1) / H) - floor(B / H)."""
    for name, value, low in (("num_iterations", num_iterations, 1), ("burn_in", burn_in, 0), ("thinning", thinning, 1)):
        check_int(name, value, low)
    return max((num_iterations - 1) // thinning - burn_in // thinning, 0)


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
    the chain, :func:`student_updates`; Hydra's phase-1 + phase-2 steps after it), ``train_batch_size``,
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
        steps = student_updates(cfg.num_iterations, cfg.burn_in, s.thinning)
        for label in _labels_of(s):
            rows.append({"method": label, "train_steps": steps, "train_batch_size": s.batch_size,
                         "inputs_seen": steps * s.batch_size, "targets": _targets_of(s)})
    steps = config.phase1_steps + config.phase2_steps
    rows.append({"method": "Hydra", "train_steps": steps, "train_batch_size": config.batch_size,
                 "inputs_seen": steps * config.batch_size,
                 "targets": f"the exact cached logits of the S = {snaps} kept snapshots, after the chain"})
    return pd.DataFrame(rows, columns=list(BUDGET_COLUMNS))


def hydra_config_for_steps(config: hydra.HydraConfig, steps: int) -> hydra.HydraConfig:
    """``config`` with ``steps`` training steps in all, split between the two phases in ``config``'s
    ratio (phase 1 rounded, phase 2 the rest): e.g. Hydra given the GPED student's number of updates,
    :func:`student_updates`, so that both get the same budget of steps and inputs."""
    check_int("steps", steps, 1)
    total = config.phase1_steps + config.phase2_steps
    phase1 = round(steps * config.phase1_steps / total) if total else 0
    return dataclasses.replace(config, phase1_steps=phase1, phase2_steps=steps - phase1)


def reference_names(table: pd.DataFrame) -> dict[str, str]:
    """The references named by their size, from a comparison table's ``num_iterations`` and
    ``num_snapshots`` columns: ``{"Long-chain teacher": "teacher, T = 4,000", "Snapshot ensemble":
    "snapshot ensemble, S = 20"}`` (a column that is absent leaves that name as it is)."""
    names = {}
    if "num_iterations" in table and table["num_iterations"].notna().any():
        names[TEACHER] = f"teacher, T = {int(table['num_iterations'].dropna().iloc[0]):,}"
    if "num_snapshots" in table and table["num_snapshots"].notna().any():
        names[SNAPSHOTS] = f"snapshot ensemble, S = {int(table['num_snapshots'].dropna().iloc[0])}"
    return names


def named_references(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of a comparison table whose reference methods are named by their size
    (:func:`reference_names`), for display; the stored names stay as they are."""
    return table.assign(method=table["method"].replace(reference_names(table)))


def kd_variants(summary: pd.DataFrame) -> pd.DataFrame:
    """The KD students' rows of a chain's summary (:data:`KD_COLUMNS`): the thesis' input generators
    and derivative matching beside plain KD."""
    rows = summary[summary["student"].astype(str).str.startswith("KD")]
    return rows.reindex(columns=list(KD_COLUMNS)).reset_index(drop=True)


# ------------------------------------------------------------------------------ through the results store
@dataclass
class ComparisonRun:
    """The MNIST comparison as stored: the chain's outcome (compact: summary and history), the
    derived entry's status (``ran`` / ``reused``) and the entry, and its tables: ``table``
    (:func:`comparison_table` with costs and the run's setting), ``memory`` (:func:`comparison_memory`),
    ``kd_variants`` (:func:`kd_variants`) and ``hydra_history`` (Hydra's losses per log point)."""

    chain: ChainOutcome
    status: str
    entry: Entry
    table: pd.DataFrame
    memory: pd.DataFrame
    kd_variants: pd.DataFrame
    hydra_history: pd.DataFrame

    @property
    def summary(self) -> pd.DataFrame:
        return self.chain.result.summary if self.chain.result is not None else pd.DataFrame()

    @property
    def history(self) -> pd.DataFrame:
        return self.chain.result.history if self.chain.result is not None else pd.DataFrame()

    @property
    def eval_sets(self) -> list[str]:
        return list(dict.fromkeys(self.table["eval_set"]))

    @property
    def hydra_seconds(self) -> float:
        return float(self.table["hydra_seconds"].iloc[0])

    @property
    def hydra_path(self) -> Path:
        """The trained Hydra (:func:`~gped_kit.baselines.hydra.load_hydra`); absent where the entry was
        made elsewhere (it is not committed)."""
        return self.entry.path / "hydra.pt"


def _raise_unless_done(outcome: DerivedOutcome, what: str) -> Entry:
    if outcome.entry is None:
        raise RuntimeError(f"{what}: {outcome.status}: {outcome.error}")
    return outcome.entry


def run_comparison(settings: ComparisonSettings, store: ResultsStore, seed: int = 0, device: str = "auto",
                   data_root: str | None = None, recompute: bool = False, progress: bool = True,
                   task: ChainTask | None = None, executor: str = "local", address: str | None = None
                   ) -> ComparisonRun:
    """The MNIST comparison end to end through ``store``: a derived entry of kind ``"comparison"`` keyed
    by the chain's record and Hydra's configuration, computed only when missing (the chain is then run,
    resumed or reloaded with its full state, Hydra trained on its snapshots and every table written).
    ``task`` replaces :func:`comparison_task`'s chain (other data, e.g. in tests). ``executor="ray"``
    computes a missing entry, with its chain, as a Ray task at ``address`` (one GPU when the chain's
    device is CUDA; :func:`~gped_kit.experiments.chains.run_derived`). Raises ``RuntimeError`` when
    the chain or the comparison failed or its data are missing."""
    task = task or comparison_task(settings, seed, device, data_root)
    config = settings.hydra

    def compute(entry: Entry, result: GPEDResult, data: GPEDData) -> None:
        arch = task.config.model
        trained = train_hydra_on_chain(result, data, arch, config, progress)
        hydra.save_hydra(trained, entry.path / "hydra.pt")
        costs = comparison_costs(arch, data, len(result.snapshots), trained.net, task.students)
        costs = costs.merge(comparison_budgets(task, config, len(result.snapshots)), on="method", how="outer",
                            sort=False)
        table = comparison_table(result, data, arch, trained.net, costs)
        table = table.assign(labelled_size=data.info.get("labelled_size"), mask_size=data.info.get("mask_size"),
                             num_iterations=task.config.num_iterations, num_snapshots=len(result.snapshots),
                             hydra_seconds=round(trained.seconds, 1), hydra_cache_bytes=trained.cache_bytes)
        entry.write_table("comparison", table)
        entry.write_table("memory", comparison_memory(result, data, trained, task.students))
        entry.write_table("kd_variants", kd_variants(result.summary))
        entry.write_table("hydra_history", pd.DataFrame(trained.history, columns=["phase", "step", "loss"]))

    item = DerivedTask(task, "comparison", {"hydra": record(config)}, comparison_code(), compute)
    outcome = run_derived([item], store, recompute, progress, executor, address)[0]
    entry = _raise_unless_done(outcome, f"comparison chain {task.label}")
    return ComparisonRun(outcome.chain, outcome.status, entry, entry.table("comparison"), entry.table("memory"),
                         entry.table("kd_variants"), entry.table("hydra_history"))


# ------------------------------------------------------------------------------ the 2-D spiral
def spiral_task(settings: ComparisonSettings, seed: int = 0, device: str = "auto") -> ChainTask:
    """The spiral toy's chain (``settings.spiral``, :class:`SpiralSettings`; 2-D feature vectors): an
    FCNN teacher (2-400-400-2; prior precision 1) with ``spiral.num_snapshots`` kept samples, KD / GPED /
    EnD2 students (the teacher's architecture without dropout, constant learning rate, H =
    ``spiral.thinning``) and the grid as an evaluation set for uncertainty maps."""
    spiral = settings.spiral
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=spiral.step_size, prior_precision=1.0,
                                                         batch_size=100),
                        num_iterations=spiral.num_iterations, burn_in=spiral.burn_in, eval_thinning=10,
                        log_every=max(spiral.num_iterations // 10, 1),
                        checkpoint_every=spiral.num_iterations, seed=seed, device=device,
                        num_snapshots=spiral.num_snapshots)
    students = tuple(dataclasses.replace(s, thinning=spiral.thinning, lr_halving_epochs=None,
                                         arch=ArchSpec("fcnn"))
                     for s in comparison_students("fcnn", settings, variants=False))
    return ChainTask(dataclasses.replace(spiral.data, seed=seed), config, students, name=f"spiral seed={seed}")


@dataclass
class SpiralRun:
    """The spiral toy as stored: the chain's outcome (compact), the derived entry's status and the entry,
    the comparison ``table`` (test set and grid), the uncertainty ``maps`` on the grid (per method,
    :class:`~gped_kit.core.uncertainty.Uncertainties` read from float16 arrays) and the data's
    configuration (:attr:`data` regenerates the points, for plots)."""

    chain: ChainOutcome
    status: str
    entry: Entry
    table: pd.DataFrame
    maps: dict[str, uncertainty.Uncertainties]
    config: SpiralConfig
    hydra_history: pd.DataFrame

    @property
    def data(self) -> GPEDData:
        return spiral_data(self.config)


_MAP_PARTS = ("predictive", "total", "data")


def _write_maps(entry: Entry, maps: Mapping[str, uncertainty.Uncertainties]) -> None:
    entry.write_arrays({f"{method}/{part}": getattr(u, part) for method, u in maps.items() for part in _MAP_PARTS})


def _read_maps(entry: Entry) -> dict[str, uncertainty.Uncertainties]:
    arrays = entry.arrays()
    methods = list(dict.fromkeys(k.rsplit("/", 1)[0] for k in arrays))
    return {m: uncertainty.Uncertainties(*(torch.from_numpy(np.asarray(arrays[f"{m}/{p}"], dtype=np.float32))
                                           for p in _MAP_PARTS)) for m in methods}


def spiral_run(settings: ComparisonSettings, store: ResultsStore, seed: int = 0, device: str = "auto",
               recompute: bool = False, progress: bool = True, executor: str = "local",
               address: str | None = None) -> SpiralRun:
    """The spiral toy end to end through ``store`` (:func:`spiral_task`; a derived entry of kind
    ``"spiral"`` keyed by the chain's record and Hydra's configuration): the comparison table on the
    test set and the grid (unlabelled), and every uncertainty method's maps on the grid.
    ``executor``/``address`` as :func:`run_comparison`."""
    task = spiral_task(settings, seed, device)
    config = settings.spiral.hydra

    def compute(entry: Entry, result: GPEDResult, data: GPEDData) -> None:
        trained = train_hydra_on_chain(result, data, "fcnn", config, progress)
        hydra.save_hydra(trained, entry.path / "hydra.pt")
        table = comparison_table(result, data, "fcnn", trained.net, labels={"grid": None})
        entry.write_table("comparison", table.assign(dataset="spiral", hydra_seconds=round(trained.seconds, 1)))
        entry.write_table("hydra_history", pd.DataFrame(trained.history, columns=["phase", "step", "loss"]))
        _write_maps(entry, {m: u for m, (_, u) in comparison_methods(result, data, "fcnn", trained.net, "grid").items()
                            if u is not None})

    item = DerivedTask(task, "spiral", {"hydra": record(config)}, comparison_code(), compute)
    outcome = run_derived([item], store, recompute, progress, executor, address)[0]
    entry = _raise_unless_done(outcome, f"spiral chain {task.label}")
    return SpiralRun(outcome.chain, outcome.status, entry, entry.table("comparison"), _read_maps(entry), task.data,
                     entry.table("hydra_history"))
