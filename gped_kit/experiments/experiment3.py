"""Experiment 3: student architecture search on the speed-storage-accuracy trade-off (paper 003,
Section 3.3; Section 4, Experiment 3; Appendix A.2; Figures 2 and 6-13).

Two ways of choosing a student architecture, both distilled from ONE teacher chain per data
setting (Algorithm 1 with many students attached; the chain does not depend on them):

* **exhaustive search** (Section 3.3, first approach): one student per pair of width multipliers
  (K1, K2) on a grid around the teacher (:class:`~gped_kit.models.ArchSpec`; K1 = K2 = 1 is the
  *base student*, the teacher's architecture);
* **group l1/l2 regularisation and pruning** (Section 3.3, second approach): students with the
  *largest* architecture of the grid, distilled with ``lambda R(phi)``,
  ``R = sum_k ||phi_{G_k}||_2`` (:func:`gped_kit.losses.group_lasso`: one group per hidden unit /
  conv channel holding its incoming weights), one per lambda of a log grid (Appendix A.2:
  1e-8 ... 1e-3, no dropout). Each is then **pruned** (:func:`prune`) and **fine-tuned**
  (:func:`finetune`).

**Pruning rule.** A hidden unit (a row of a Linear weight) or conv channel (an output channel
of a Conv2d, its C_in x k x k kernel weights) is removed when *all* its incoming weights have
magnitude below epsilon (``criterion="max_abs"``, the rule of Section 3.3 and of the authors'
code: "a unit survives if any incoming weight exceeds" epsilon = 1e-3), or, with
``criterion="group_norm"``, when the l2 norm of the group is below epsilon (stricter: it implies
the first). The output layer is never pruned and every hidden layer keeps at least one unit.
Removal is physical: the unit's row (and bias) goes, and so do the matching input columns of
the next layer -- input channels of a following Conv2d, or, across the ``Flatten`` after the last
conv, the H*W consecutive features each channel maps to. A removed unit whose incoming weights
are (nearly) zero still emits a constant, ``relu(bias)``; with ``fold_bias=True`` (default)
that constant's effect on the next layer is added to the next layer's bias (exact for the
padding-free convolutions used here, and for reflect/replicate/circular padding; a following
zero-padded convolution, numeric or ``padding="same"``, raises a ValueError asking for
``fold_bias=False``), so the pruned network equals the *masked* network in
which the removed units' incoming weights are set to zero (:func:`mask_network`). With
``fold_bias=False`` it equals the masked network with their biases zeroed too (the authors'
code left such biases in place, a bug: a "pruned" unit still passed relu(bias)).

**Fine-tuning design.** A pruned student needs the teacher to be fine-tuned. Rather than run
the chain again, it is fine-tuned on the chain's stored U_o Monte Carlo estimates (Eq. 10):
the running means ``g_hat_i`` over D' that Algorithm 1 kept for a U_o student of the same
target (every Experiment 3 student uses U_o, so the store exists; students sharing (H, M')
hold identical stores). It takes Adam steps on minibatches of M' visited D' examples
(drawn with replacement, seeded, on the device, no host synchronisation), with the target's
loss, i.e. distillation continued with the estimates frozen at the end of the chain. The
schedule follows A.2: the learning rate restarts at 1e-4 (FCNN) / 1e-3 (CNN); the length is
given in teacher epochs (600 MNIST, 800 CIFAR-10) as for the student's halving schedule, one
epoch being N/M SGLD steps with one student step every H of them, i.e.
``epochs * (N / M) / H`` student steps (3,600 for MNIST at N = 60,000, M = 100, H = 100).

**Costs** (:mod:`gped_kit.cost`): parameters, FLOPs per input (PyTorch's counter: FLOPs = 2 x
multiply-accumulates of matmuls and convolutions) and measured latency per batch.
**Pareto frontier** (:func:`pareto_front`): the non-dominated students for one metric (lower
NLL / MAE, higher accuracy is better) against one cost.

:func:`run_experiment3` runs one data setting end to end through the results store
(:func:`gped_kit.experiments.run_stored`) and writes ``experiment3_search.csv`` beside the
chain's summary: one row per network (teacher, every exhaustive student, and every lambda
student distilled / pruned / fine-tuned).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import torch
from torch import nn

from .cost import network_cost
from .data import DatasetNotFoundError, ExperimentData, prepare_data
from .distill import GPEDConfig, GPEDRun, StudentConfig, prediction_metrics, resolve_device
from .experiments import PAPER_SETTINGS, GridCell, distillation_cell, run_key, run_stored
from .models import EVAL_CHUNK_SIZE, ArchSpec, inference_network
from .targets import OnlineMeanEstimator, Target, resolve_target

# ----------------------------------------------------------------------------- constants
#: Metric columns of the search table: (label, lower is better).
METRICS: dict[str, tuple[str, bool]] = {
    "student_nll": ("test NLL", True),
    "student_accuracy": ("test accuracy", False),
    "entropy_mae": ("expected-entropy MAE", True),
}
#: Cost columns of the search table and their axis labels.
COSTS: dict[str, str] = {
    "flops": "FLOPs per input (2 x MACs)",
    "params": "parameters",
    "latency_ms": "latency per batch (ms)",
}
#: Search methods: the width-multiplier grid and group l1/l2 + pruning.
METHODS: dict[str, str] = {"exhaustive": "exhaustive search", "group_lasso": "group l1/l2 + pruning"}
PRUNE_CRITERIA = ("max_abs", "group_norm")
#: Which target each metric belongs to.
METRIC_TARGET = {"student_nll": "predictive", "student_accuracy": "predictive", "entropy_mae": "entropy"}
#: Appendix A.2: fine-tuning restarts the student learning rate at these values.
FINETUNE_LR = {"fcnn": 1e-4, "cnn_mnist": 1e-3, "cnn_cifar10": 1e-3}
#: Appendix A.2: fine-tuning length in (teacher) epochs per data set.
FINETUNE_EPOCHS = {"mnist": 600.0, "cifar10": 800.0}
#: Experiment 3's data settings (Section 4, Figures 2 and 6-13): MNIST at N = 60,000 with
#: masking rate 0.29 (m = 15), CIFAR-10 at N = 20,000 without masking.
EXPERIMENT3_DATA = {"fcnn": (60_000, 15), "cnn_mnist": (60_000, 15), "cnn_cifar10": (20_000, 0)}
SEARCH_FILE = "experiment3_search.csv"
SETTINGS_FILE = "experiment3_search.json"

EXPERIMENT3_PROFILES: dict[str, dict[str, Any]] = {
    # CPU, minutes: CNN-MNIST and FCNN (CIFAR-10 reports missing data here), a short chain
    # (T = 2,200 with the paper's B = 1,000 and students every H = 2 steps: 600 student
    # steps), a 3 x 3 grid, three lambdas. The lambda grid is shifted up one decade from the
    # paper's (1e-4 ... 1e-2 instead of ... 1e-3) because 600 steps give the penalty little
    # time to drive groups to zero. Fine-tuning: one teacher epoch (300 student steps).
    # Figures: predictive students give Figures 2, 6 (CNN-MNIST) and 8, 9 (FCNN); the
    # expected-entropy Figures 7 and 10 need targets=["predictive", "entropy"] (about +5.5
    # minutes on the 2-core CPU, which the main job's 45-minute budget does not leave; the
    # notebook says why each missing figure is missing).
    "default": dict(models=["cnn_mnist", "fcnn", "cnn_cifar10"], targets=["predictive"],
                    num_iterations=2_200, burn_in=1_000,
                    predictive_thinning=2, entropy_thinning=2, eval_thinning=50, log_every=400,
                    checkpoint_every=1_100, scale_step_size=False,
                    k1_values=[0.5, 1.0, 2.0], k2_values=[0.5, 1.0, 2.0], reg_weights=[1e-4, 1e-3, 1e-2],
                    prune_eps=1e-3, prune_criterion="max_abs", finetune_epochs=1.0, finetune_lr=None,
                    finetune_lr_halving_epochs=None, latency_batch_size=100, latency_repeats=20),
    # Appendix A.2 on a GPU: T = 10^6, the paper's B per model, H = 100 (predictive) / 10
    # (entropy), lambda on the paper's log grid 1e-8 ... 1e-3, epsilon = 1e-3, fine-tuning
    # 600 (MNIST) / 800 (CIFAR-10) epochs (None = the paper's value per model). The paper does
    # not list its K values. Per model (a K grid may be a list for every model or a dict
    # model -> list): CNNs 0.5 ... 4 (K = 4 x 4 is 15.6x (CNN-MNIST) / 15.9x (CIFAR-10) the base
    # student's parameters, beyond the paper's best CNN students at 6.6x and 4.7-5.4x); FCNN 0.5 ... 5, because the
    # paper's best FCNN student has about 9.9x the base's parameters and 10x its FLOPs
    # (Figures 8 and 9), beyond K = 4 x 4 (8.0x): K1 x K2 = 5 x 4 is 10.0x / 10.0x, and the
    # group l1/l2 students start from 5 x 5 (11.7x) and prune back from there.
    "paper": dict(models=["cnn_mnist", "fcnn", "cnn_cifar10"], targets=["predictive", "entropy"],
                  num_iterations=1_000_000, burn_in=None,
                  predictive_thinning=100, entropy_thinning=10, eval_thinning=100, log_every=10_000,
                  checkpoint_every=50_000, scale_step_size=False,
                  k1_values={"cnn_mnist": [0.5, 1.0, 2.0, 3.0, 4.0], "fcnn": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0],
                             "cnn_cifar10": [0.5, 1.0, 2.0, 3.0, 4.0]},
                  k2_values={"cnn_mnist": [0.5, 1.0, 2.0, 3.0, 4.0], "fcnn": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0],
                             "cnn_cifar10": [0.5, 1.0, 2.0, 3.0, 4.0]},
                  reg_weights=[1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3], prune_eps=1e-3, prune_criterion="max_abs",
                  finetune_epochs=None, finetune_lr=None, finetune_lr_halving_epochs=None,
                  latency_batch_size=100, latency_repeats=50),
}


def _allowed(name: str, value: Any, allowed: Sequence[str] | Mapping[str, Any]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not known; allowed: {sorted(allowed)}")


def _check_eps(eps: float, name: str = "eps") -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"{name}={eps!r}: the pruning threshold must be a finite number >= 0 "
                         "(the paper uses 1e-3; 0 prunes nothing)")
    return float(eps)


# ----------------------------------------------------------------------------- students
def search_students(model: str, k1_values: Sequence[float], k2_values: Sequence[float],
                    reg_weights: Sequence[float], targets: Sequence[str] = ("predictive",),
                    thinning: Mapping[str, int] | None = None, estimator: str = "U_o",
                    dropout: float | None = None, lr_halving_epochs: float | None = None) -> tuple[StudentConfig, ...]:
    """The students of Experiment 3 for one teacher ``model``, all fed by one chain.

    Per target: one **exhaustive** student per (K1, K2) in ``k1_values x k2_values`` (with the
    paper's student dropout for the model: 0.5 for the FCNN, none for the CNNs), and one
    **group l1/l2** student per lambda in ``reg_weights`` with the largest grid architecture
    (max K1, max K2), no dropout (Appendix A.2). ``thinning`` maps target -> H (default: the
    paper's 100 predictive / 10 entropy). All use ``estimator`` (U_o by default: its store is
    what pruned students are fine-tuned on). Group l1/l2 students are named
    ``group_lasso-<target>-<estimator>-K<k1>x<k2>-lambda<value>``.

    Raises ValueError for an empty or non-positive K grid, an empty lambda grid or a lambda <= 0.
    """
    _allowed("model", model, PAPER_SETTINGS)
    for name, values in (("k1_values", k1_values), ("k2_values", k2_values)):
        values = list(values)
        if not values or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 for v in values):
            raise ValueError(f"{name}={values!r}: must be a non-empty list of width multipliers > 0")
    reg_weights = list(reg_weights)
    if not reg_weights:
        raise ValueError("reg_weights=[]: the lambda grid must hold at least one value > 0 "
                         "(the paper: a log grid from 1e-8 to 1e-3)")
    bad = [w for w in reg_weights if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0]
    if bad:
        raise ValueError(f"reg_weights={reg_weights!r}: every lambda must be a number > 0, got {bad}")
    if not targets:
        raise ValueError("targets=[]: name at least one target, e.g. 'predictive' or 'entropy'")
    paper = PAPER_SETTINGS[model]
    thinning = {"predictive": 100, "entropy": 10, **(thinning or {})}
    dropout = paper["student_dropout"] if dropout is None else dropout
    halving = paper["lr_halving_epochs"] if lr_halving_epochs is None else lr_halving_epochs
    largest = ArchSpec(model, max(k1_values), max(k2_values), dropout=0.0)
    students = []
    for target in targets:
        name = resolve_target(target).name
        h = thinning.get(name, thinning["predictive"])
        for k1 in k1_values:
            for k2 in k2_values:
                students.append(StudentConfig(target=target, estimator=estimator, thinning=h,
                                              arch=ArchSpec(model, k1, k2, dropout=dropout),
                                              lr_halving_epochs=halving))
        for lam in reg_weights:
            students.append(StudentConfig(
                target=target, estimator=estimator, thinning=h, arch=largest, lr_halving_epochs=halving,
                regularizer="group_lasso", reg_weight=float(lam),
                name=f"group_lasso-{name}-{estimator}-K{largest.k1:g}x{largest.k2:g}-lambda{lam:g}"))
    return tuple(students)


def model_grid(params: Mapping[str, Any], name: str, model: str) -> list:
    """A profile value that may differ per model: ``params[name]`` if it is a list, or
    ``params[name][model]`` if it is a dict ``model -> list`` (the paper profile's K grids).
    ValueError names the models a dict lacks."""
    value = params[name]
    if isinstance(value, Mapping):
        if model not in value:
            raise ValueError(f"{name} gives values for the models {sorted(value)} only, not for {model!r}; "
                             "add an entry for it or pass one list for every model")
        value = value[model]
    return list(value)


def experiment3_cell(model: str, params: Mapping[str, Any], labelled_size: int | None = None,
                     mask_size: int | None = None, seed: int = 0, device: str = "auto",
                     data_root: str | None = None, verify_checksums: bool = True) -> GridCell:
    """One Experiment 3 data setting: the chain of :func:`gped_kit.experiments.distillation_cell`
    (the paper's settings for ``model``; chain length and thinning from ``params``, a profile of
    :data:`EXPERIMENT3_PROFILES`) with the students of :func:`search_students`; the K grids may be
    given per model (:func:`model_grid`). ``labelled_size`` and ``mask_size`` default to the
    paper's Experiment 3 setting (:data:`EXPERIMENT3_DATA`)."""
    _allowed("model", model, EXPERIMENT3_DATA)
    n_default, m_default = EXPERIMENT3_DATA[model]
    labelled_size = n_default if labelled_size is None else labelled_size
    mask_size = m_default if mask_size is None else mask_size
    base = distillation_cell(model, labelled_size, mask_size, params, seed=seed, device=device,
                             data_root=data_root, targets=(), estimators=(), verify_checksums=verify_checksums)
    students = search_students(model, model_grid(params, "k1_values", model), model_grid(params, "k2_values", model),
                               params["reg_weights"],
                               targets=params.get("targets", ("predictive",)),
                               thinning={"predictive": params["predictive_thinning"],
                                         "entropy": params["entropy_thinning"]})
    return dataclasses.replace(base, students=students)


# ----------------------------------------------------------------------------- pruning
_ELEMENTWISE = (nn.ReLU, nn.Dropout, nn.Identity)
_SHAPE_ONLY = (nn.MaxPool2d, nn.Flatten)


def _weight_layer_positions(net: nn.Module) -> list[int]:
    """Positions of the Conv2d/Linear layers of a flat ``nn.Sequential``; validates the structure."""
    if not isinstance(net, nn.Sequential):
        raise TypeError(f"net must be a flat nn.Sequential of Conv2d/ReLU/MaxPool2d/Flatten/Linear/Dropout "
                        f"(as build_network makes), got {type(net).__name__}")
    positions = []
    for i, module in enumerate(net):
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            if isinstance(module, nn.Conv2d) and module.groups != 1:
                raise TypeError(f"net[{i}]: grouped convolutions (groups={module.groups}) are not supported")
            positions.append(i)
        elif not isinstance(module, _ELEMENTWISE + _SHAPE_ONLY):
            raise TypeError(f"net[{i}] is a {type(module).__name__}; pruning supports Conv2d, Linear, ReLU, "
                            "MaxPool2d, Flatten, Dropout and Identity only")
    if len(positions) < 2:
        raise ValueError("net needs at least one hidden Conv2d/Linear layer before the output layer to prune")
    return positions


def unit_keep_masks(net: nn.Sequential, eps: float = 1e-3, criterion: str = "max_abs",
                    min_units: int = 1) -> list[torch.Tensor]:
    """One boolean mask per hidden Conv2d/Linear layer (all but the output layer): True = the unit
    or channel survives. ``max_abs``: survives if any incoming weight has magnitude >= ``eps``;
    ``group_norm``: if the l2 norm of its incoming weights is >= ``eps``. Each layer keeps at
    least ``min_units`` units (those with the largest scores)."""
    eps = _check_eps(eps)
    _allowed("criterion", criterion, PRUNE_CRITERIA)
    if not isinstance(min_units, int) or isinstance(min_units, bool) or min_units < 1:
        raise ValueError(f"min_units={min_units!r}: must be an integer >= 1")
    positions = _weight_layer_positions(net)
    masks = []
    for pos in positions[:-1]:
        w = net[pos].weight.detach().flatten(1)
        score = w.abs().amax(dim=1) if criterion == "max_abs" else w.norm(dim=1)
        keep = score >= eps
        if int(keep.sum()) < min_units:
            keep[score.topk(min(min_units, score.numel())).indices] = True
        masks.append(keep)
    return masks


def mask_network(net: nn.Sequential, masks: Sequence[torch.Tensor], zero_bias: bool = False) -> nn.Sequential:
    """A copy of ``net`` with the incoming weights of every unit/channel whose mask is False set
    to zero (and their biases too if ``zero_bias``): the network :func:`prune` reproduces."""
    positions = _weight_layer_positions(net)
    if len(masks) != len(positions) - 1:
        raise ValueError(f"masks: expected {len(positions) - 1} masks (one per hidden layer), got {len(masks)}")
    masked = copy.deepcopy(net)
    with torch.no_grad():
        for pos, keep in zip(positions[:-1], masks):
            layer = masked[pos]
            drop = ~keep.to(layer.weight.device)
            layer.weight[drop] = 0.0
            if zero_bias and layer.bias is not None:
                layer.bias[drop] = 0.0
    return masked


def _pads_with_zeros(conv: nn.Conv2d) -> bool:
    """Whether ``conv`` pads its input with zeros, so that a constant input channel is not seen as
    a constant at the border (which makes folding a removed channel's constant inexact).
    Handles numeric padding (int or tuple) and the strings ``"valid"`` (no padding) and
    ``"same"`` (padding of dilation * (k - 1) in total per side pair: none only for a 1 x 1
    kernel). Padding modes other than ``"zeros"`` (reflect, replicate, circular) pad a
    constant map with that constant, so folding stays exact."""
    padding = conv.padding
    if isinstance(padding, str):
        if padding == "valid":
            amount = 0
        elif padding == "same":
            amount = sum(d * (k - 1) for d, k in zip(conv.dilation, conv.kernel_size))
        else:  # torch accepts only "valid" and "same"; anything else is a malformed layer
            raise ValueError(f"Conv2d padding={padding!r} is not understood; expected 'valid', 'same' or numbers")
    else:
        amount = sum(int(p) for p in padding)
    return amount > 0 and conv.padding_mode == "zeros"


def _constant_after(segment: Sequence[nn.Module], values: torch.Tensor) -> torch.Tensor:
    """What a constant pre-activation ``values`` (one per unit/channel) becomes after the modules
    between two weight layers: ReLU applies, Dropout (eval) / Identity / pooling / Flatten keep it
    (max-pooling a constant map gives the constant)."""
    for module in segment:
        if isinstance(module, nn.ReLU):
            values = torch.relu(values)
    return values


def prune(net: nn.Sequential, eps: float = 1e-3, criterion: str = "max_abs", fold_bias: bool = True,
          min_units: int = 1, masks: Sequence[torch.Tensor] | None = None) -> nn.Sequential:
    """A physically smaller copy of ``net`` without the hidden units/channels that
    :func:`unit_keep_masks` (``eps``, ``criterion``) drops, or those False in ``masks`` if given.

    Removed with each unit: its weight row / kernel and bias, and the next layer's matching input
    columns (input channels of a Conv2d; across ``Flatten`` the H*W features of each channel).
    With ``fold_bias`` the constant a removed unit still emits (relu(bias), its incoming weights
    being zeroed) is folded into the next layer's bias, so in eval mode the result equals
    ``mask_network(net, masks)``; without it, ``mask_network(net, masks, zero_bias=True)``.
    The input ``net`` is not modified; the result is on its device, in eval mode if it was.
    """
    positions = _weight_layer_positions(net)
    if masks is None:
        masks = unit_keep_masks(net, eps, criterion, min_units)
    elif len(masks) != len(positions) - 1:
        raise ValueError(f"masks: expected {len(positions) - 1} masks (one per hidden layer), got {len(masks)}")
    masks = [m.to(torch.bool).cpu() for m in masks]
    layers: list[nn.Module] = []
    prev_keep: torch.Tensor | None = None
    prev_const: torch.Tensor | None = None  # what each unit of the previous weight layer emits if removed
    with torch.no_grad():
        for k, pos in enumerate(positions):
            start = positions[k - 1] + 1 if k else 0
            layers.extend(copy.deepcopy(m) for m in net[start:pos])
            layer = net[pos]
            weight = layer.weight.detach()
            bias = layer.bias.detach() if layer.bias is not None else torch.zeros(weight.shape[0], device=weight.device,
                                                                                  dtype=weight.dtype)
            bias_add = torch.zeros_like(bias)
            if prev_keep is not None:
                keep_in = prev_keep.to(weight.device)
                if isinstance(layer, nn.Linear):
                    if layer.in_features % keep_in.numel():
                        raise ValueError(f"net[{pos}]: {layer.in_features} input features are not a multiple of "
                                         f"the {keep_in.numel()} units/channels before it")
                    per_unit = layer.in_features // keep_in.numel()  # H*W after a conv, 1 after a Linear
                    keep_in = keep_in.repeat_interleave(per_unit)
                    const = prev_const.repeat_interleave(per_unit)
                    bias_add = weight[:, ~keep_in] @ const[~keep_in]
                else:
                    const = prev_const
                    if fold_bias and bool((const[~keep_in] != 0).any()) and _pads_with_zeros(layer):
                        raise ValueError(f"net[{pos}]: folding removed channels' constants into a zero-padded "
                                         f"convolution (padding={layer.padding!r}) is not exact at the border; "
                                         "use fold_bias=False")
                    bias_add = weight[:, ~keep_in].sum(dim=(2, 3)) @ const[~keep_in]
                weight = weight[:, keep_in]
            keep_out = masks[k].to(weight.device) if k < len(masks) else torch.ones(weight.shape[0], dtype=torch.bool,
                                                                                   device=weight.device)
            new_weight = weight[keep_out].clone()
            new_bias = (bias + bias_add)[keep_out].clone()
            has_bias = layer.bias is not None or bool((bias_add != 0).any())
            if isinstance(layer, nn.Linear):
                new = nn.Linear(new_weight.shape[1], new_weight.shape[0], bias=has_bias,
                                device=weight.device, dtype=weight.dtype)
            else:
                new = nn.Conv2d(new_weight.shape[1], new_weight.shape[0], layer.kernel_size, stride=layer.stride,
                                padding=layer.padding, dilation=layer.dilation, bias=has_bias,
                                padding_mode=layer.padding_mode, device=weight.device, dtype=weight.dtype)
            new.weight.copy_(new_weight)
            if has_bias:
                new.bias.copy_(new_bias)
            layers.append(new)
            if k < len(masks):
                end = positions[k + 1]
                pre = bias if fold_bias else torch.zeros_like(bias)
                prev_const = _constant_after(net[pos + 1:end], pre)
                prev_keep = masks[k]
        layers.extend(copy.deepcopy(m) for m in net[positions[-1] + 1:])
    pruned = nn.Sequential(*layers)
    pruned.train(net.training)
    return pruned


# ----------------------------------------------------------------------------- fine-tuning
def finetune(net: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, target: str | Target, steps: int,
             lr: float, batch_size: int = 100, lr_halving_steps: int | None = None, seed: int = 0,
             noise_std: float = 0.0) -> nn.Module:
    """Fine-tune ``net`` in place on fixed targets (Appendix A.2's fine-tuning after pruning).

    ``inputs`` (n, C, H, W) and ``targets`` (n, D) are D' examples and their U_o estimates
    ``g_hat_i`` (see :func:`uo_store`); every step draws ``batch_size`` of them with replacement
    (a seeded generator on the device; nothing is read back to the host), optionally adds the
    BDK input noise, and takes one Adam step on the mean of ``target``'s loss (cross-entropy
    for the predictive distribution, absolute error for the entropy). The learning rate starts
    at ``lr`` and is halved every ``lr_halving_steps`` steps (None: constant)."""
    target = resolve_target(target)
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"finetune steps={steps!r}: must be an integer >= 0")
    if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
        raise ValueError(f"finetune lr={lr!r}: must be finite and > 0")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"finetune batch_size={batch_size!r}: must be an integer >= 1")
    if lr_halving_steps is not None and (not isinstance(lr_halving_steps, int) or lr_halving_steps < 1):
        raise ValueError(f"finetune lr_halving_steps={lr_halving_steps!r}: must be an integer >= 1 or None")
    if inputs.shape[0] != targets.shape[0] or inputs.shape[0] < 1:
        raise ValueError(f"finetune: inputs ({inputs.shape[0]}) and targets ({targets.shape[0]}) must be "
                         "non-empty and of equal length")
    device = inputs.device
    gen = torch.Generator(device).manual_seed(int(seed))
    optimizer = torch.optim.Adam(net.parameters(), lr=lr)
    net.train()
    for step in range(steps):
        if lr_halving_steps is not None and step % lr_halving_steps == 0:
            for group in optimizer.param_groups:
                group["lr"] = lr * 0.5 ** (step // lr_halving_steps)
        idx = torch.randint(inputs.shape[0], (batch_size,), device=device, generator=gen)
        x = inputs[idx]
        if noise_std > 0:
            x = x + noise_std * torch.randn(x.shape, device=device, generator=gen)
        loss = target.loss(targets[idx], net(x)).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    net.eval()
    return net


def uo_store(run: GPEDRun, student: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The U_o Monte Carlo estimates (Eq. 10) the chain kept for ``student``'s target: (indices of
    the visited D' examples, their estimates g_hat_i). Taken from the student itself if it uses
    U_o, else from another U_o student of the same target; ValueError if there is none."""
    by_label = {s.config.label: s for s in run.students}
    _allowed("student", student, by_label)
    wanted = by_label[student]
    stores = [s for s in [wanted, *run.students]
              if s.target.name == wanted.target.name and isinstance(s.estimator, OnlineMeanEstimator)]
    if not stores:
        raise ValueError(f"student {student!r}: no U_o student of target {wanted.target.name!r} in this chain, "
                         "so there are no stored Monte Carlo estimates to fine-tune on; use estimator='U_o'")
    est = stores[0].estimator
    visited = torch.nonzero(est.counts > 0).squeeze(1)
    return visited, est.estimate(visited)


# ----------------------------------------------------------------------------- evaluation
@torch.no_grad()
def evaluate_student(net: nn.Module, target: str | Target, data: ExperimentData,
                     teacher_test: Mapping[str, torch.Tensor] | None = None,
                     batch_size: int = EVAL_CHUNK_SIZE) -> dict:
    """Test metrics of a student network as Algorithm 1 reports them: ``student_nll`` and
    ``student_accuracy`` (predictive targets), ``target_mae`` against the teacher ensemble's
    estimate, ``entropy_mae`` (entropy targets) and ``nll_gap`` (student - teacher NLL)."""
    target = resolve_target(target)
    net = inference_network(net)
    x = data.test_x
    pred = torch.cat([target.link(net(x[i:i + batch_size])) for i in range(0, x.shape[0], batch_size)])
    return prediction_metrics(target, pred, data.test_y, data.num_classes, dict(teacher_test or {}))


# ----------------------------------------------------------------------------- the search
@dataclass(frozen=True)
class SearchSettings:
    """What happens after the chain (Appendix A.2): pruning threshold ``prune_eps`` (epsilon) and
    ``prune_criterion``, bias folding, fine-tuning length ``finetune_epochs`` (teacher epochs;
    None = the paper's 600 MNIST / 800 CIFAR-10), learning rate ``finetune_lr`` (None = 1e-4
    FCNN / 1e-3 CNN) halved every ``finetune_lr_halving_epochs`` (None = the paper's student
    schedule, 200 / 400 epochs), and the latency measurement (batch size, repeats)."""

    prune_eps: float = 1e-3
    prune_criterion: str = "max_abs"
    fold_bias: bool = True
    finetune_epochs: float | None = None
    finetune_lr: float | None = None
    finetune_lr_halving_epochs: float | None = None
    latency_batch_size: int = 100
    latency_repeats: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        _check_eps(self.prune_eps, "SearchSettings.prune_eps")
        _allowed("SearchSettings.prune_criterion", self.prune_criterion, PRUNE_CRITERIA)
        if self.finetune_epochs is not None and not (self.finetune_epochs >= 0 and math.isfinite(self.finetune_epochs)):
            raise ValueError(f"finetune_epochs={self.finetune_epochs!r}: must be a finite number >= 0 or None")
        if self.finetune_lr is not None and not (self.finetune_lr > 0 and math.isfinite(self.finetune_lr)):
            raise ValueError(f"finetune_lr={self.finetune_lr!r}: must be finite and > 0, or None")
        if self.finetune_lr_halving_epochs is not None and not self.finetune_lr_halving_epochs > 0:
            raise ValueError(f"finetune_lr_halving_epochs={self.finetune_lr_halving_epochs!r}: must be > 0 or None")
        for name in ("latency_batch_size", "latency_repeats"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r}: must be an integer >= 1")

    @classmethod
    def from_params(cls, params: Mapping[str, Any], seed: int = 0) -> SearchSettings:
        """The settings named in a resolved profile (:data:`EXPERIMENT3_PROFILES`)."""
        names = [f.name for f in dataclasses.fields(cls) if f.name in params]
        return cls(**{n: params[n] for n in names}, seed=seed)


@dataclass
class SearchResult:
    """One data setting's search: ``table`` (one row per network, see :func:`run_experiment3`),
    ``status`` (``ran``/``resumed``/``reused`` as the store reports the chain, ``missing data``,
    ``failed``), ``error`` (the message, e.g. the loader's), the store directory and the time."""

    model: str
    table: pd.DataFrame
    status: str
    error: str = ""
    run_dir: Path | None = None
    seconds: float = 0.0

    @property
    def candidates(self) -> pd.DataFrame:
        """The search's outputs: exhaustive students and fine-tuned pruned students."""
        return search_candidates(self.table)


def search_candidates(table: pd.DataFrame, method: str | None = None) -> pd.DataFrame:
    """Rows that are outputs of a search: exhaustive students (stage ``distilled``) and group
    l1/l2 students after pruning and fine-tuning (stage ``fine-tuned``); ``method`` keeps one."""
    if table.empty:
        return table
    if method is not None:
        _allowed("method", method, METHODS)
    keep = (((table["method"] == "exhaustive") & (table["stage"] == "distilled"))
            | ((table["method"] == "group_lasso") & (table["stage"] == "fine-tuned")))
    if method is not None:
        keep &= table["method"] == method
    return table[keep]


def _finetune_steps(epochs: float, data: ExperimentData, config: GPEDConfig, thinning: int) -> int:
    """Student steps in ``epochs`` teacher epochs: epochs * (N / M) SGLD steps, one student step per H."""
    return int(round(epochs * data.train_x.shape[0] / config.sgld.batch_size / thinning))


def run_experiment3(cell: GridCell, settings: SearchSettings, results_dir: str | Path, recompute: bool = False,
                    progress: bool = True) -> SearchResult:
    """Run one Experiment 3 data setting: load its data (:func:`gped_kit.data.prepare_data`), then
    :func:`search_on_data`. An absent data set gives status ``missing data`` with the loader's
    message (nothing else is caught)."""
    if not isinstance(settings, SearchSettings):
        raise TypeError(f"settings must be a SearchSettings, got {type(settings).__name__}")
    started = time.perf_counter()
    try:
        data = prepare_data(cell.data, device=resolve_device(cell.config.device))
    except DatasetNotFoundError as exc:
        return SearchResult(cell.config.model, pd.DataFrame(), "missing data", str(exc), None,
                            time.perf_counter() - started)
    config = cell.config if progress else dataclasses.replace(cell.config, progress=False)
    result = search_on_data(data, config, cell.students, settings, results_dir, recompute)
    result.seconds = time.perf_counter() - started
    return result


def search_on_data(data: ExperimentData, config: GPEDConfig, students: Sequence[StudentConfig],
                   settings: SearchSettings, results_dir: str | Path, recompute: bool = False) -> SearchResult:
    """The chain and all students through the results store (:func:`gped_kit.experiments.run_stored`),
    then costs, pruning and fine-tuning; returns (and stores) the search table.

    The table has one row per network with the chain's configuration columns and
    ``method`` (``teacher``/``exhaustive``/``group_lasso``), ``stage`` (``teacher``,
    ``distilled``, ``pruned``, ``fine-tuned``), ``is_base`` (the exhaustive student with the
    teacher's architecture), the costs of :func:`gped_kit.cost.network_cost` (``params``,
    ``flops``, ``macs``, ``latency_ms``, ``architecture``, ``widths``), the metrics
    (``student_nll``, ``student_accuracy``, ``entropy_mae``, ``target_mae``, ``nll_gap``),
    the teacher's (``teacher_nll``, ``teacher_accuracy``, ``teacher_samples``), and for pruned
    students ``units_removed``, ``prune_check_max_abs_diff`` (the largest |pruned - masked|
    output difference on 1,000 test inputs) and ``finetune_steps``; ``chain_seconds`` (the
    chain with all students attached) and ``search_seconds`` (costs, pruning, fine-tuning) time
    the two stages. The teacher row carries one teacher network's costs; the ensemble costs
    ``teacher_samples`` times as much.

    A finished chain reloaded from the store (``reused``) with a stored table for the same
    settings returns that table without recomputing. Pruned and fine-tuned networks are saved
    under ``<run dir>/pruned/<student>.pt``.
    """
    if not isinstance(settings, SearchSettings):
        raise TypeError(f"settings must be a SearchSettings, got {type(settings).__name__}")
    started = time.perf_counter()
    result = run_stored(data, config, students, results_dir, recompute=recompute)
    status = str(result.summary["store_status"].iloc[0])
    run = GPEDRun(data, config, students)
    run_dir = Path(results_dir) / run_key(run)
    settings_json = json.dumps(dataclasses.asdict(settings), sort_keys=True)
    table_path, settings_path = run_dir / SEARCH_FILE, run_dir / SETTINGS_FILE
    if (status == "reused" and table_path.exists() and settings_path.exists()
            and settings_path.read_text() == settings_json):
        return SearchResult(config.model, pd.read_csv(table_path), status, "", run_dir, time.perf_counter() - started)
    run.load_checkpoint(run_dir / "checkpoint.pt")
    stage_started = time.perf_counter()
    table = _search_table(run, result.summary, settings, run_dir)
    table["chain_seconds"] = float(result.summary["elapsed_s"].iloc[0]) if "elapsed_s" in result.summary else math.nan
    table["search_seconds"] = time.perf_counter() - stage_started
    table.to_csv(table_path, index=False)
    settings_path.write_text(settings_json)
    return SearchResult(config.model, table, status, "", run_dir, time.perf_counter() - started)


def _search_table(run: GPEDRun, summary: pd.DataFrame, settings: SearchSettings, run_dir: Path) -> pd.DataFrame:
    data, config = run.data, run.config
    shape = tuple(data.input_shape)
    teacher_test = ({n: run.teacher_mean(n) for n in run.accumulator.targets} if run.accumulator.count else {})
    by_label = summary.set_index("student")
    dataset = data.config.dataset if data.config is not None else ""
    epochs = (settings.finetune_epochs if settings.finetune_epochs is not None
              else FINETUNE_EPOCHS.get(dataset, FINETUNE_EPOCHS["mnist"]))
    lr = settings.finetune_lr if settings.finetune_lr is not None else FINETUNE_LR[config.model]
    halving_epochs = (settings.finetune_lr_halving_epochs if settings.finetune_lr_halving_epochs is not None
                      else PAPER_SETTINGS[config.model]["lr_halving_epochs"])
    noise_std = data.config.distill_noise_std if data.config is not None else 0.0

    def costs(net: nn.Module) -> dict:
        return network_cost(net, shape, settings.latency_batch_size, settings.latency_repeats)

    rows = []
    first = by_label.iloc[0].to_dict() if len(by_label) else {}
    common = {k: first.get(k) for k in ("dataset", "labelled_size", "mask_size", "masking_rate", "model",
                                        "step_size", "num_iterations", "burn_in", "seed", "device", "run_key")
              if k in first}
    teacher_metrics = run.teacher_metrics()
    teacher_cols = {"teacher_nll": teacher_metrics.get("teacher_nll", math.nan),
                    "teacher_accuracy": teacher_metrics.get("teacher_accuracy", math.nan),
                    "teacher_samples": run.accumulator.count}
    rows.append({**common, **teacher_cols, "method": "teacher", "stage": "teacher", "student": "teacher",
                 "target": "predictive", "is_base": False, "student_nll": teacher_cols["teacher_nll"],
                 "student_accuracy": teacher_cols["teacher_accuracy"], **costs(run.teacher)})
    pruned_dir = run_dir / "pruned"
    for i, s in enumerate(run.students):
        label = s.config.label
        base_row = {k: v for k, v in by_label.loc[label].to_dict().items()
                    if k not in ("store_status", "iterations_per_s", "elapsed_s", "student_train_loss")}
        method = "group_lasso" if s.config.regularizer == "group_lasso" and s.config.reg_weight > 0 else "exhaustive"
        arch = s.config.arch or ArchSpec(config.model)
        base_row.update(common, **teacher_cols, method=method, stage="distilled", student=label,
                        is_base=bool(method == "exhaustive" and arch.k1 == 1 and arch.k2 == 1))
        rows.append({**base_row, **costs(s.net)})
        if method != "group_lasso":
            continue
        masks = unit_keep_masks(s.net, settings.prune_eps, settings.prune_criterion)
        pruned = prune(s.net, masks=masks, fold_bias=settings.fold_bias)
        masked = mask_network(s.net, masks, zero_bias=not settings.fold_bias).eval()
        with torch.no_grad():
            x = data.test_x[:1000]
            check = float((pruned.eval()(x) - masked(x)).abs().max())
        removed = sum(int((~m).sum()) for m in masks)
        prune_cols = {"units_removed": removed, "prune_check_max_abs_diff": check, "prune_eps": settings.prune_eps,
                      "prune_criterion": settings.prune_criterion}
        metric_cols = [c for c in ("student_nll", "student_accuracy", "target_mae", "entropy_mae", "nll_gap")
                       if c in base_row]
        clean = {k: v for k, v in base_row.items() if k not in metric_cols and k != "student_params"}
        rows.append({**clean, **prune_cols, "stage": "pruned",
                     **evaluate_student(pruned, s.target, data, teacher_test), **costs(pruned)})
        steps = _finetune_steps(epochs, data, config, s.config.thinning)
        halving = _finetune_steps(halving_epochs, data, config, s.config.thinning) if halving_epochs else None
        idx, estimates = uo_store(run, label)
        tuned = finetune(copy.deepcopy(pruned), data.distill_x[idx], estimates, s.target, steps, lr,
                         batch_size=s.config.batch_size, lr_halving_steps=max(halving, 1) if halving else None,
                         seed=settings.seed * 1000 + i, noise_std=noise_std)
        rows.append({**clean, **prune_cols, "stage": "fine-tuned", "finetune_steps": steps, "finetune_lr": lr,
                     **evaluate_student(tuned, s.target, data, teacher_test), **costs(tuned)})
        pruned_dir.mkdir(parents=True, exist_ok=True)
        torch.save({"pruned": pruned.cpu(), "fine-tuned": tuned.cpu(), "masks": [m.cpu() for m in masks]},
                   pruned_dir / f"{label}.pt")
    return pd.DataFrame(rows)


def load_search_results(results_dir: str | Path) -> pd.DataFrame:
    """Every stored search table (``<key>/experiment3_search.csv``) under ``results_dir``, concatenated
    (an absent or empty store gives an empty frame)."""
    files = sorted(p for p in Path(results_dir).glob(f"*/{SEARCH_FILE}") if ".old-" not in p.parent.name)
    if not files:
        return pd.DataFrame()
    return pd.concat([pd.read_csv(f) for f in files], ignore_index=True)


# ----------------------------------------------------------------------------- Pareto frontier
def _check_metric_cost(table: pd.DataFrame, metric: str, cost: str) -> None:
    _allowed("metric", metric, METRICS)
    _allowed("cost", cost, COSTS)
    missing = [c for c in (metric, cost) if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the column(s) {missing}; it has {sorted(table.columns)}")


def pareto_front(table: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """The non-dominated rows of ``table`` for ``metric`` against ``cost``, sorted by cost.

    A row is dominated when another has cost <= and a metric at least as good (lower NLL /
    MAE, higher accuracy; :data:`METRICS`), one of the two strictly. Rows with a missing metric
    or cost are ignored; exact duplicates are both kept. ``metric`` is one of :data:`METRICS`,
    ``cost`` one of :data:`COSTS` (ValueError otherwise)."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    _check_metric_cost(table, metric, cost)
    rows = table.dropna(subset=[metric, cost])
    if rows.empty:
        return rows
    c = rows[cost].to_numpy(dtype=float)
    v = rows[metric].to_numpy(dtype=float) * (1.0 if METRICS[metric][1] else -1.0)  # lower is better
    no_worse = (c[None, :] <= c[:, None]) & (v[None, :] <= v[:, None])  # [i, j]: j is no worse than i
    strictly = (c[None, :] < c[:, None]) | (v[None, :] < v[:, None])
    dominated = (no_worse & strictly).any(axis=1)
    front = rows[~dominated]
    return front.sort_values([cost, metric], ascending=[True, METRICS[metric][1]])


def best_student(table: pd.DataFrame, metric: str) -> pd.Series | None:
    """The search candidate (:func:`search_candidates`) with the best ``metric``, or None."""
    _allowed("metric", metric, METRICS)
    rows = search_candidates(table)
    if rows.empty or metric not in rows:
        return None
    rows = rows.dropna(subset=[metric])
    if rows.empty:
        return None
    return rows.loc[rows[metric].idxmin() if METRICS[metric][1] else rows[metric].idxmax()]


def base_student(table: pd.DataFrame, target: str) -> pd.Series | None:
    """The exhaustive student with the teacher's architecture (K1 = K2 = 1) for ``target``, or None."""
    if table.empty:
        return None
    rows = table[(table["method"] == "exhaustive") & (table["is_base"].astype(bool)) & (table["target"] == target)]
    return rows.iloc[0] if len(rows) else None


def experiment3_comparison(table: pd.DataFrame, model: str, metric: str = "student_nll") -> pd.DataFrame:
    """Our search beside the paper's statements for ``model`` and ``metric`` (Figures 2, 6-13):
    the base student's metric, FLOPs and parameters, the best searched student's metric and its
    parameter / FLOP ratios to the base student, which method found it, whether the group
    l1/l2 students beat the exhaustive frontier at their cost, and (NLL) the best group l1/l2
    student at <= 50% of the base FLOPs. ``paper`` holds the paper's value where it states one."""
    from .paper_results import experiment3_figure2, experiment3_figures

    _allowed("metric", metric, METRICS)
    rows_model = table[table["model"] == model] if not table.empty else table
    figures = experiment3_figures()
    fig = figures[(figures["model"] == model) & (figures["metric"] == metric)]
    paper_fig = fig.iloc[0] if len(fig) else None
    stated = experiment3_figure2() if (model, metric) == ("cnn_mnist", "student_nll") else {}
    out: list[dict] = []

    def add(quantity: str, ours: Any, paper: Any = math.nan, note: str = "") -> None:
        out.append({"figure": paper_fig["figure"] if paper_fig is not None else "", "model": model, "metric": metric,
                    "quantity": quantity, "ours": ours, "paper": paper, "note": note})

    base = base_student(rows_model, METRIC_TARGET[metric]) if len(rows_model) else None
    best = best_student(rows_model[rows_model["target"] == METRIC_TARGET[metric]], metric) if len(rows_model) else None
    if len(rows_model):
        teacher = rows_model[rows_model["method"] == "teacher"]
        if metric != "entropy_mae" and len(teacher):
            add("teacher ensemble " + METRICS[metric][0], float(teacher[metric].iloc[0]),
                stated.get("teacher_nll", math.nan), "paper: Table 5 at N = 60,000, r = 0.29" if stated else "")
    add("base student " + METRICS[metric][0], float(base[metric]) if base is not None else math.nan,
        stated.get("base_student_nll", math.nan))
    add("base student FLOPs per input", float(base["flops"]) if base is not None else math.nan,
        stated.get("base_student_flops", math.nan), "ours: FLOPs = 2 x MACs; the paper does not state its convention")
    add("base student MACs per input", float(base["macs"]) if base is not None else math.nan)
    add("base student parameters", float(base["params"]) if base is not None else math.nan,
        stated.get("base_student_params", math.nan))
    add("best searched student " + METRICS[metric][0], float(best[metric]) if best is not None else math.nan,
        stated.get("searched_nll", math.nan))
    add("best student found by", METHODS[best["method"]] if best is not None else "",
        METHODS[paper_fig["best_method"]] if paper_fig is not None else "")
    add("best student architecture", best["architecture"] if best is not None else "")
    ratio_ok = best is not None and base is not None
    add("best / base parameters", float(best["params"] / base["params"]) if ratio_ok else math.nan,
        float(paper_fig["params_ratio"]) if paper_fig is not None else math.nan)
    add("best / base FLOPs", float(best["flops"] / base["flops"]) if ratio_ok else math.nan,
        float(paper_fig["flops_ratio"]) if paper_fig is not None else math.nan)
    if ratio_ok:
        lower = METRICS[metric][1]
        better = best[metric] < base[metric] if lower else best[metric] > base[metric]
        add("a searched student beats the base student", bool(better), True)
    cands = search_candidates(rows_model[rows_model["target"] == METRIC_TARGET[metric]]) if len(rows_model) else rows_model
    if len(cands):
        add("group l1/l2 students better than the exhaustive frontier at their FLOPs",
            group_beats_exhaustive(cands, metric, "flops"), "yes (much better NLL at the same cost)"
            if metric == "student_nll" else "")
    if metric == "student_nll" and base is not None and len(cands):
        cheap = cands[(cands["method"] == "group_lasso") & (cands["flops"] <= 0.5 * base["flops"])]
        add("best group l1/l2 NLL at <= 50% of the base FLOPs",
            float(cheap[metric].min()) if len(cheap) else math.nan, "a small loss vs the base student",
            "none of our pruned students is that small" if cheap.empty else "")
    return pd.DataFrame(out)


NO_COMPARABLE = "no comparable exhaustive student"


def group_vs_exhaustive(candidates: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """Each group l1/l2 student of ``candidates`` against the exhaustive students, one row each:
    ``student``, ``cost``, ``metric``, ``compared_with`` (``"equal or lower cost"`` /
    ``"higher cost only"`` / ``"none"``), ``reference`` (the best exhaustive metric it is
    compared with) and ``verdict``:

    * with exhaustive students of equal or lower ``cost``: ``"better"`` if its ``metric`` is
      strictly better than the best of them, else ``"not better"``;
    * cheaper than every exhaustive student: ``"better"`` only if its metric is strictly better
      than that of *every* exhaustive student (all of which cost more: it dominates the grid);
      otherwise it is a different trade-off, not a loss, and its verdict is
      :data:`NO_COMPARABLE` (``"no comparable exhaustive student"``); likewise when there are no
      exhaustive students at all.

    Students lacking the metric or the cost are left out."""
    _check_metric_cost(candidates, metric, cost)
    lower = METRICS[metric][1]
    ex = candidates[candidates["method"] == "exhaustive"].dropna(subset=[metric, cost])
    group = candidates[candidates["method"] == "group_lasso"].dropna(subset=[metric, cost])

    def best(values: pd.Series) -> float:
        return float(values.min() if lower else values.max())

    def beats(value: float, reference: float) -> bool:
        return bool(value < reference if lower else value > reference)

    out = []
    for _, row in group.iterrows():
        value = float(row[metric])
        cheaper = ex[ex[cost] <= row[cost]][metric]
        if len(cheaper):
            reference = best(cheaper)
            compared, verdict = "equal or lower cost", "better" if beats(value, reference) else "not better"
        elif len(ex):
            reference = best(ex[metric])
            compared, verdict = "higher cost only", "better" if beats(value, reference) else NO_COMPARABLE
        else:
            reference, compared, verdict = math.nan, "none", NO_COMPARABLE
        out.append({"student": row.get("student", ""), "cost": float(row[cost]), "metric": value,
                    "compared_with": compared, "reference": reference, "verdict": verdict})
    return pd.DataFrame(out, columns=["student", "cost", "metric", "compared_with", "reference", "verdict"])


def group_beats_exhaustive(candidates: pd.DataFrame, metric: str, cost: str) -> str:
    """"k of n": how many of the n comparable group l1/l2 students beat the exhaustive search at
    their ``cost`` (:func:`group_vs_exhaustive`: strictly better ``metric`` than every exhaustive
    student of equal or lower cost, or, for a student cheaper than all of them, than every
    exhaustive student). Students with no comparable exhaustive student (cheaper than all of
    them and not better) are not counted in n but named after it, e.g.
    ``"2 of 3 (1 more: no comparable exhaustive student)"``."""
    verdicts = group_vs_exhaustive(candidates, metric, cost)["verdict"]
    wins = int((verdicts == "better").sum())
    odd = int((verdicts == NO_COMPARABLE).sum())
    text = f"{wins} of {len(verdicts) - odd}"
    return text + (f" ({odd} more: {NO_COMPARABLE})" if odd else "")


def frontier_table(table: pd.DataFrame, metric: str, cost: str) -> pd.DataFrame:
    """The Pareto frontier of each search method (and of both together) for ``metric`` vs
    ``cost``: columns ``front`` (``exhaustive``/``group_lasso``/``both``), the student, its
    architecture, cost and metric."""
    _allowed("metric", metric, METRICS)
    _allowed("cost", cost, COSTS)
    cands = search_candidates(table)
    if cands.empty:
        return pd.DataFrame(columns=["model", "front", "student", "architecture", cost, metric])
    cands = cands[cands["target"] == METRIC_TARGET[metric]]
    parts = []
    for model, rows in cands.groupby("model"):
        for front, sub in (("exhaustive", rows[rows["method"] == "exhaustive"]),
                           ("group_lasso", rows[rows["method"] == "group_lasso"]), ("both", rows)):
            f = pareto_front(sub, metric, cost)
            parts.append(f.assign(front=front)[["model", "front", "student", "architecture", cost, metric]])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def figure_availability(results: Mapping[str, SearchResult], targets: Sequence[str],
                        profile: str = "") -> pd.DataFrame:
    """Which of the paper's Experiment 3 figures (2 and 6-13, :func:`gped_kit.paper_results.experiment3_figures`)
    this run can draw, one row per figure in the paper's order: ``figure``, ``model``, ``metric``,
    ``produced`` (bool) and ``reason`` (empty when produced). ``results`` maps each model of the
    run to its :class:`SearchResult`; ``targets`` are the distilled targets (the profile's).

    A figure is produced when its model was searched, its search has results, its metric's
    target (:data:`METRIC_TARGET`: predictive for NLL and accuracy, entropy for the
    entropy MAE) was distilled, and the table holds that metric for some searched student.
    Otherwise ``reason`` says which of these fails: the model is not in the run, its data set
    is absent (status ``missing data``), the search has no results, or the target was not
    distilled in this profile."""
    from .paper_results import experiment3_figures

    distilled = [resolve_target(t).name for t in targets]
    where = f"the {profile!r} profile" if profile else "this run"
    models = list(results)
    out = []
    for fig in experiment3_figures().itertuples():
        target, label = METRIC_TARGET[fig.metric], METRICS[fig.metric][0]
        res = results.get(fig.model)
        reason = ""
        if res is None:
            reason = (f"not produced: {fig.model} is not among the models of {where} ({', '.join(models) or 'none'}); "
                      "add it to `models`")
        elif res.status == "missing data":
            reason = (f"not produced: the {fig.dataset} data set is absent here (search status 'missing data'; "
                      "the loader's message says where to put it)")
        elif res.table is None or res.table.empty:
            first = (res.error or "").strip().splitlines()[:1]
            reason = f"not produced: the {fig.model} search has no results (status {res.status!r}" + (
                f": {first[0]})" if first else ")")
        elif target not in distilled:
            reason = (f"not produced: the {target} target is not distilled in {where} (targets {distilled}); "
                      f"add {target!r} to `targets`")
        else:
            cands = search_candidates(res.table)
            has = (fig.metric in cands.columns and "target" in cands.columns
                   and cands.loc[cands["target"] == target, fig.metric].notna().any())
            if not has:
                reason = f"not produced: the table has no {label} for any searched {target} student of {fig.model}"
        out.append({"figure": fig.figure, "model": fig.model, "metric": fig.metric, "produced": not reason,
                    "reason": reason})
    return pd.DataFrame(out, columns=["figure", "model", "metric", "produced", "reason"])


def trend_sentence(comparison: pd.DataFrame) -> str:
    """One sentence on whether the paper's Experiment 3 trend (wider or pruned students beat the
    base student) appears in :func:`experiment3_comparison`'s table."""
    rows = comparison.set_index("quantity")
    key = "a searched student beats the base student"
    if key not in rows.index:
        return "No search results to compare (the data set is missing or nothing ran)."
    metric = comparison["metric"].iloc[0]
    label = METRICS[metric][0]
    base = rows.loc[f"base student {label}", "ours"]
    best = rows.loc[f"best searched student {label}", "ours"]
    how = rows.loc["best student found by", "ours"]
    if bool(rows.loc[key, "ours"]):
        return (f"Yes: the paper's trend appears. The best searched student ({how}) reaches {label} "
                f"{best:.3f} against the base student's {base:.3f}, with "
                f"{rows.loc['best / base parameters', 'ours']:.1f}x its parameters and "
                f"{rows.loc['best / base FLOPs', 'ours']:.1f}x its FLOPs.")
    return (f"No: no searched student beats the base student here ({label} {best:.3f} vs {base:.3f}); "
            "the paper's trend does not appear in this run.")


__all__ = [
    "METRICS", "COSTS", "METHODS", "PRUNE_CRITERIA", "EXPERIMENT3_PROFILES", "EXPERIMENT3_DATA",
    "search_students", "experiment3_cell", "unit_keep_masks", "mask_network", "prune", "finetune", "uo_store",
    "evaluate_student", "SearchSettings", "SearchResult", "run_experiment3", "search_candidates",
    "load_search_results", "pareto_front", "best_student", "base_student", "experiment3_comparison",
    "group_beats_exhaustive", "group_vs_exhaustive", "NO_COMPARABLE", "model_grid", "figure_availability",
    "frontier_table", "trend_sentence", "search_on_data",
]
