"""A distilled student as a model to predict with, save and load.

:meth:`GPEDResult.model <gped_kit.engine.result.GPEDResult.model>` gives a student of a run as a
:class:`DistilledModel`: its network (evaluation mode) with its target, so that
:meth:`DistilledModel.predict` returns what the student estimates, decoded:

* ``output``: the target's linked output, the student's estimate of E[g] (for EnD² the Dirichlet's
  mean and precision);
* for a target with an uncertainty decomposition (``predictive+entropy``, EnD²): the predictive
  probabilities and the total / data / knowledge uncertainty per input
  (:mod:`gped_kit.core.uncertainty`); a GPED student's knowledge uncertainty is the raw difference
  total - data of its two distilled heads, which can be negative where the data head reads above the
  predictive head's entropy (each head has its own error; a true mixture's never is): it is kept raw, so
  that total = data + knowledge and rankings by it keep their order, and ``knowledge.clamp_min(0)`` floors it;
* for the Gaussian ``predictive_variance`` target: the predictive mean and its aleatoric
  E[sigma^2] and epistemic Var[mu] variance per dimension
  (:func:`gped_kit.core.likelihoods.regression_moments`);
* for the ``predictive`` target: the probabilities and their entropy (total uncertainty; its
  split into data and knowledge needs the expected entropy, which such a student does not learn).

:meth:`DistilledModel.save` writes one file: the weights, the target's name, the number of the
likelihood's outputs, the input shape and, when the student's network is one of the kit's
architectures (:class:`~gped_kit.models.presets.ArchSpec`), that architecture.
:func:`load` reads it back with ``torch.load(weights_only=True)``; a network the kit cannot
rebuild (a user's module or factory) or a target it does not know by name (a custom target,
EnD²) is given to :func:`load`, and its absence is an error naming the file and what is missing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import torch
from torch import nn

from ..core.calibration import NUM_BINS, Calibration, calibration
from ..core.likelihoods import regression_moments
from ..core.metrics import predictive_entropy
from ..core.targets import TARGETS, Target
from ..files import new_file_path
from ..models.presets import ArchSpec, build_network

#: The layout version of a saved model (:meth:`DistilledModel.save`).
FORMAT = 1


@dataclass(frozen=True)
class Prediction:
    """A distilled model's prediction for N inputs (see the module docstring); fields the target does
    not give are None. ``to_frame()`` gives one tidy row per input."""

    output: torch.Tensor
    probabilities: torch.Tensor | None = None
    total: torch.Tensor | None = None
    data: torch.Tensor | None = None
    knowledge: torch.Tensor | None = None
    mean: torch.Tensor | None = None
    aleatoric: torch.Tensor | None = None
    epistemic: torch.Tensor | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per input: the per-input uncertainties, the predicted class and its probability
        (classification), the mean and variances per dimension (regression), or the outputs."""
        columns: dict[str, Any] = {}
        if self.probabilities is not None:
            best = self.probabilities.max(dim=-1)
            columns["prediction"] = best.indices.cpu().numpy()
            columns["probability"] = best.values.cpu().numpy()
        for name in ("total", "data", "knowledge"):
            value = getattr(self, name)
            if value is not None:
                columns[name] = value.cpu().numpy()
        if self.mean is not None:
            for d in range(self.mean.shape[-1]):
                columns[f"mean_{d}"] = self.mean[:, d].cpu().numpy()
                columns[f"aleatoric_{d}"] = self.aleatoric[:, d].cpu().numpy()
                columns[f"epistemic_{d}"] = self.epistemic[:, d].cpu().numpy()
        if not columns:
            for d in range(self.output.shape[-1]):
                columns[f"output_{d}"] = self.output[:, d].cpu().numpy()
        return pd.DataFrame(columns)

    def calibration(self, labels: torch.Tensor, num_bins: int = NUM_BINS) -> Calibration:
        """The predictive's calibration against ``labels`` (:func:`~gped_kit.core.calibration.calibration`:
        the ECE and a reliability diagram's bins); ``ValueError`` for a target without class probabilities."""
        if self.probabilities is None:
            raise ValueError("calibration needs class probabilities; this prediction has none (its target does not "
                             "predict classes)")
        return calibration(self.probabilities, labels, num_bins)


class DistilledModel:
    """A student network with its target (see the module docstring). ``num_outputs`` is C, the
    likelihood's outputs (classes, or regression dimensions); ``architecture`` the kit's
    architecture of the network when it has one (what :meth:`save` needs to rebuild it)."""

    def __init__(self, network: nn.Module, target: Target, num_outputs: int, input_shape: tuple[int, ...],
                 architecture: ArchSpec | None = None, label: str = "") -> None:
        self.network = network.eval()
        self.target = target
        self.num_outputs = int(num_outputs)
        self.input_shape = tuple(int(n) for n in input_shape)
        self.architecture = architecture
        self.label = label

    def __repr__(self) -> str:
        arch = self.architecture if self.architecture is not None else type(self.network).__name__
        return f"DistilledModel({self.label!r}, target={self.target.name!r}, network={arch})"

    @property
    def device(self) -> torch.device:
        return next(self.network.parameters()).device

    def to(self, device: str | torch.device) -> DistilledModel:
        self.network.to(device)
        return self

    def outputs(self, x: torch.Tensor, batch_size: int = 500) -> torch.Tensor:
        """The linked outputs (N, D) on ``x`` (N, *input_shape), in chunks of ``batch_size``, in
        evaluation mode and without gradients, on the model's device."""
        if tuple(x.shape[1:]) != self.input_shape:
            raise ValueError(f"predict: inputs of shape {tuple(x.shape)}; this model takes (N, "
                             f"{', '.join(map(str, self.input_shape))})")
        if batch_size < 1:
            raise ValueError(f"predict: batch_size={batch_size!r} must be >= 1")
        device = self.device
        self.network.eval()
        with torch.no_grad():
            parts = [self.target.link(self.network(x[i:i + batch_size].to(device)))
                     for i in range(0, x.shape[0], batch_size)]
        return torch.cat(parts) if parts else torch.empty(0, self.target.out_dim(self.num_outputs), device=device)

    def predict(self, x: torch.Tensor, batch_size: int = 500) -> Prediction:
        """The target's prediction on ``x`` with its uncertainty decomposition (module docstring)."""
        output = self.outputs(x, batch_size)
        target, c = self.target, self.num_outputs
        if target.has_uncertainties:
            u = target.uncertainties(output, c)
            return Prediction(output, probabilities=u.predictive, total=u.total, data=u.data, knowledge=u.knowledge)
        if target.likelihood == "gaussian" and output.shape[-1] == 3 * c:
            moments = regression_moments(output)
            return Prediction(output, mean=moments.mean, aleatoric=moments.aleatoric, epistemic=moments.epistemic)
        if target.predictive_classes:
            probs = output[:, :c]
            return Prediction(output, probabilities=probs, total=predictive_entropy(probs))
        return Prediction(output)

    def save(self, path: str | Path) -> Path:
        """Write the model to ``path``, whole or not at all; an existing file is an error (nothing is
        overwritten, also when two writers race)."""
        path = Path(path)
        record = {"format": FORMAT, "label": self.label, "target": self.target.name, "num_outputs": self.num_outputs,
                  "input_shape": list(self.input_shape),
                  "architecture": None if self.architecture is None else dataclasses.asdict(self.architecture),
                  "state_dict": {k: v.detach().cpu() for k, v in self.network.state_dict().items()}}
        try:
            with new_file_path(path) as tmp:
                torch.save(record, tmp)
        except FileExistsError:
            raise FileExistsError(f"DistilledModel.save: {path} exists; remove it or choose another path") from None
        return path


def load(path: str | Path, network: nn.Module | Callable[[int], nn.Module] | None = None,
         target: Target | None = None, device: str | torch.device = "cpu") -> DistilledModel:
    """A model :meth:`DistilledModel.save` wrote. ``network`` (a module, or a factory ``out_dim ->
    nn.Module``) is needed when the saved network is not one of the kit's architectures, ``target``
    when the saved target is not a built-in one (a custom target, EnD²: its name must match)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"load: no saved model at {path}")
    record = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise ValueError(f"load: {path} is not a saved DistilledModel (format {FORMAT})")
    name = record["target"]
    if target is None:
        if name not in TARGETS:
            raise ValueError(f"load: {path} holds a student of target {name!r}, which is not built in; pass target= "
                             f"(the same Target, e.g. gped_kit.baselines.endd.endd_target() or your custom_target)")
        target = TARGETS[name]
    elif target.name != name:
        raise ValueError(f"load: {path} holds a student of target {name!r}, target= is {target.name!r}")
    c, shape = int(record["num_outputs"]), tuple(record["input_shape"])
    out_dim = target.out_dim(c)
    arch = ArchSpec(**record["architecture"]) if record["architecture"] is not None else None
    if network is not None:
        net = network if isinstance(network, nn.Module) else network(out_dim)
    elif arch is not None:
        net = build_network(arch, shape, out_dim)
    else:
        raise ValueError(f"load: {path} holds a network that is not one of the kit's architectures; pass network= "
                         f"(the module, or a factory out_dim -> nn.Module, with out_dim = {out_dim})")
    try:
        net.load_state_dict(record["state_dict"])
    except RuntimeError as exc:
        raise ValueError(f"load: the network given does not match the weights in {path}: {exc}") from None
    return DistilledModel(net.to(device), target, c, shape, arch, record["label"])
