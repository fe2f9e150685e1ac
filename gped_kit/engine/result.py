"""What a run of Algorithm 1 produced, for one chain: tidy tables, evaluation outputs, networks."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import pandas as pd
import torch
from torch import nn

from ..core.calibration import NUM_BINS, calibration
from ..core.likelihoods import Categorical
from ..core.options import Estimator
from ..core.targets import Target
from ..models.presets import ArchSpec
from .distilled import DistilledModel
from .spec import ChainSpec, student_model


@dataclass
class GPEDResult:
    """One chain's results.

    ``summary``: one tidy row per student (configuration columns and the final metrics);
    ``history``: one row per (log point, student). ``teacher_outputs[set][target]``: the teacher
    ensemble's estimate of E[g] on each evaluation set (``"test"`` and the further sets);
    ``student_outputs[set][label]``: each student's linked outputs there. ``snapshots``: the kept
    posterior samples (``GPEDConfig.num_snapshots``), one flattened parameter vector per row
    (``named_parameters()`` order). ``student_params``/``student_buffers``: each student's final
    values; ``stores``: per student, U_o's visited D' indices and estimates (None for U_s).
    Results reloaded from a results store without a checkpoint carry tables and outputs only
    (``spec`` and the parameters are then None/empty).
    """

    summary: pd.DataFrame
    history: pd.DataFrame
    teacher_outputs: dict[str, dict[str, torch.Tensor]]
    student_outputs: dict[str, dict[str, torch.Tensor]]
    steps_done: int
    finished: bool
    snapshots: torch.Tensor | None = None
    student_params: list[dict[str, torch.Tensor]] = field(default_factory=list, repr=False)
    student_buffers: list[dict[str, torch.Tensor]] = field(default_factory=list, repr=False)
    stores: list[tuple[torch.Tensor, torch.Tensor] | None] = field(default_factory=list, repr=False)
    spec: ChainSpec | None = field(default=None, repr=False)

    @property
    def labels(self) -> list[str]:
        return list(self.summary["student"]) if "student" in self.summary else []

    def _slot(self, label: str) -> int:
        labels = self.labels
        if label not in labels:
            raise ValueError(f"student={label!r} is not in this run; allowed: {labels}")
        return labels.index(label)

    def target(self, label: str) -> Target:
        """Student ``label``'s target (its metrics, uncertainty decomposition, ...); needs the chain's
        spec (a result of a run, or of a chain reloaded with its state)."""
        j = self._slot(label)
        if self.spec is None:
            raise ValueError("this result was reloaded without its checkpoint: it holds tables and outputs only, "
                             f"not student {label!r}'s target object; recompute the run, or resolve the target "
                             "from the task's StudentConfig (resolved_target)")
        return self.spec.students[j].target

    def student_network(self, label: str) -> nn.Module:
        """Student ``label``'s final network as an ``nn.Module`` on the CPU, in evaluation mode
        (raw outputs; apply the target's ``link`` for its prediction)."""
        if self.spec is None or not self.student_params:
            raise ValueError("this result was reloaded without its checkpoint: it holds tables and outputs only; "
                             "recompute the run to get its networks")
        j = self._slot(label)
        net = copy.deepcopy(self.spec.students[j].network.eval).to_empty(device="cpu")
        net.load_state_dict({**self.student_params[j], **self.student_buffers[j]})
        return net.eval()

    def model(self, label: str) -> DistilledModel:
        """Student ``label`` as a :class:`~gped_kit.engine.distilled.DistilledModel` on the CPU: predict
        with it (the target's prediction and uncertainty decomposition), save it, move it to a device."""
        net = self.student_network(label)
        j = self._slot(label)
        student = self.spec.students[j]
        arch = student_model(student.config, self.spec.config.model)
        return DistilledModel(net, student.target, self.spec.data.num_outputs, self.spec.data.input_shape,
                              arch if isinstance(arch, ArchSpec) else None, label)

    def calibration_table(self, eval_set: str = "test", num_bins: int = NUM_BINS) -> pd.DataFrame:
        """The calibration on ``eval_set`` of the teacher ensemble (``network`` ``"teacher"``) and of every
        student whose target predicts classes (its first C linked outputs are a predictive distribution:
        the predictive target, Experiment 4's C+1 head, EnD2's Dirichlet mean): one row per (network, non-empty
        confidence bin) with ``network``, ``target``, ``ece`` (torchmetrics', :func:`~gped_kit.core.calibration.
        calibration`) and the bin's ``lower``, ``upper``, ``count``, ``confidence``, ``accuracy``; empty for a
        regression likelihood or before the ensemble has a sample. Every finished chain stores it beside its
        summary (table ``calibration`` of its store entry), so reliability diagrams need no recomputation.
        Needs the chain's spec (its labels); ValueError for a result reloaded without its checkpoint."""
        if self.spec is None:
            raise ValueError("this result was reloaded without its checkpoint: read its stored 'calibration' "
                             "table instead, or recompute the run")
        if eval_set != "test":
            raise ValueError(f"eval_set={eval_set!r}: only the test set has labels here; allowed: 'test'")
        columns = ["network", "target", "ece", "lower", "upper", "count", "confidence", "accuracy"]
        spec, labels, c = self.spec, self.spec.data.test_y, self.spec.data.num_outputs
        teacher = self.teacher_outputs.get(eval_set, {})
        if not isinstance(spec.likelihood, Categorical) or spec.likelihood.ensemble_target not in teacher:
            return pd.DataFrame(columns=columns)
        probs = {("teacher", spec.likelihood.ensemble_target): teacher[spec.likelihood.ensemble_target]}
        for student in spec.students:
            output = self.student_outputs.get(eval_set, {}).get(student.label)
            if student.target.predictive_classes and output is not None:
                probs[(student.label, student.target.name)] = output[:, :c]
        frames = []
        for (network, target), p in probs.items():
            if not bool(torch.isfinite(p).all()):
                continue  # a diverged student: its summary's student_ece is NaN
            cal = calibration(p, labels, num_bins)
            frames.append(cal.bins.assign(network=network, target=target, ece=cal.ece))
        return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)

    def store(self, label: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The U_o Monte Carlo estimates (Eq. 10) the chain kept for ``label``'s target: (indices of
        the visited D' inputs, their estimates g_hat_i). Taken from the student itself if it uses
        U_o, else from another U_o student of the same target; ValueError if there is none."""
        j = self._slot(label)
        if self.spec is None:
            raise ValueError("this result was reloaded without its checkpoint: no U_o store")
        target = self.spec.students[j].target.name
        for i in [j, *range(len(self.spec.students))]:
            same = self.spec.students[i].target.name == target
            if same and self.stores[i] is not None and self.spec.students[i].estimator is Estimator.U_O:
                return self.stores[i]
        raise ValueError(f"student {label!r}: no U_o student of target {target!r} in this chain, so there are no "
                         "stored Monte Carlo estimates; use estimator='U_o'")
