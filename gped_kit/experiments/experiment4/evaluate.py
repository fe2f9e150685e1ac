"""Experiment 4's evaluation and its derived store entries: one chain's full outputs turned into the
downstream metrics of Tables 2-4 and 8-16 and Figure 15's per-input data uncertainty
(:func:`experiment4_evaluate`), kept in the results store as a derived entry of kind
``"experiment4"`` of each chain (:func:`run_experiment4`, keyed by the chain's and Experiment 4's numerics versions,
:mod:`~gped_kit.experiments.numerics`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ...baselines.endd import heated_label
from ...core import metrics, uncertainty
from ...core.status import Status
from ...core.targets import PREDICTIVE_ENTROPY, Target
from ...data.container import GPEDData
from ...data.experiment import DataConfig, ood_set_name
from ...engine import GPEDResult
from ..chains import ChainGrid, ChainTask, FailureReport
from ..derived import DerivedOutcome, DerivedTask, run_derived
from ..store import Entry, ResultsStore
from ..verdicts import student_skill
from .settings import DOWNSTREAM_COLUMNS, ENDD_EVAL_TEMPERATURES, STUDENT_SIZES, Experiment4Settings


def _student_keys(label: str) -> dict[str, str]:
    method, estimator, size = label.split("-", 2)
    return {"method": method, "estimator": estimator, "student": size}


def experiment4_uncertainties(result: GPEDResult, targets: Mapping[str, Target], num_classes: int,
                              eval_set: str = "test", endd_temperatures: Sequence[float] = ENDD_EVAL_TEMPERATURES
                              ) -> dict[str, uncertainty.Uncertainties]:
    """Per-input uncertainties on ``eval_set`` (the test set or an OOD set) of the teacher ensemble
    (``"Ensemble"``: online means of pi and H[pi], :func:`~gped_kit.core.uncertainty.from_moments`)
    and of every GPED / EnD2 student by label, from its target in ``targets`` (label -> target; its
    decomposition, :meth:`~gped_kit.core.targets.Target.uncertainties`: the C+1 outputs directly,
    the Dirichlet's closed forms). Every EnD2 student is also read at each evaluation temperature
    of ``endd_temperatures`` (alpha = exp(raw / tau),
    :func:`~gped_kit.baselines.endd.endd_output_at_temperature`), under :func:`heated_label`."""
    t = result.teacher_outputs[eval_set][PREDICTIVE_ENTROPY.name]
    out = {"Ensemble": uncertainty.from_moments(t[:, :num_classes], t[:, num_classes])}
    for label, output in result.student_outputs[eval_set].items():
        out[label] = targets[label].uncertainties(output, num_classes)
    for label, output in result.student_outputs[eval_set].items():
        if targets[label].has_temperature:
            for temperature in endd_temperatures:
                heated = targets[label].at_temperature(output, num_classes, temperature)
                out[heated_label(label, temperature)] = targets[label].uncertainties(heated, num_classes)
    return out


def _summary_value(summary: pd.DataFrame, column: str) -> Any:
    return summary[column].iloc[0] if column in summary and len(summary) else float("nan")


def experiment4_evaluate(task: ChainTask, result: GPEDResult, ndcg_trials: int = 500,
                         seed: int = 0, labels: torch.Tensor | None = None) -> dict[str, pd.DataFrame]:
    """The downstream metrics of one Experiment 4 chain (a result with its full outputs).

    ``downstream``, one tidy row per (who, metric[, uncertainty, OOD set]): the in-distribution
    ``nll`` and ``accuracy`` (Ensemble and students; from the run's summary) and ``entropy_mae``
    (students: mean |E[H] student - E[H] ensemble|, Tables 2, 8-10); ``mu_mean``, the mean model
    (knowledge) uncertainty on the test set (Ensemble and students) and on each OOD set, and
    ``mu_mae``, a student's mean |MU student - MU ensemble| on the test set (the teacher-quality
    lines, :func:`experiment4_teacher_lines`); per OOD set and uncertainty
    (total, knowledge) the ``auroc`` (:func:`~gped_kit.core.metrics.ood_auroc`, OOD = positives,
    Tables 3, 11-13; ``ood_masked`` says whether the OOD inputs carried the test set's masks); per
    uncertainty the ``ndcg@20`` of each student's ranking against the ensemble's
    (:func:`~gped_kit.core.metrics.ndcg_trials`: mean, and ``std`` over the trials of 100 random test
    inputs, Tables 4, 14-16). Every EnD2 student appears twice: method ``"EnD2"``
    (tau = 1) and ``"EnD2 (tau = 2.5)"`` (:func:`experiment4_uncertainties`); the latter's ``nll`` and
    ``accuracy`` need the test ``labels`` (left out without them). ``data_uncertainty``: one row
    per test input with the expected data uncertainty E[H] of the ensemble and of each
    largest-width student, at both EnD2 temperatures (Figure 15). Every student's row has its ``skill``: the
    lowest of its skills over the best constant prediction in the run's summary (absent from chains stored
    before every built-in target reported skill).
    """
    summary = result.summary.set_index("student")
    c = int(next(iter(result.student_outputs["test"].values())).shape[1]) - 1
    info = task.data if isinstance(task.data, DataConfig) else None
    base = {"model": task.config.model_name,
            "dataset": info.dataset if info else _summary_value(result.summary, "dataset"),
            "labelled_size": info.labelled_size if info else _summary_value(result.summary, "labelled_size"),
            "mask_size": info.mask_size if info else _summary_value(result.summary, "mask_size"),
            "masking_rate": float(_summary_value(result.summary, "masking_rate"))}
    rows = []
    # each student's lowest skill over the best constant prediction (its summary's; an EnD2 student read at
    # another temperature keeps its own): a comparison that rests on a student below the floor is no evidence
    skills = student_skill(summary).to_dict()
    skills.update({heated_label(label, t): value for label, value in list(skills.items())
                   for t in ENDD_EVAL_TEMPERATURES})

    def add(who: str, metric: str, value: float, **extra: Any) -> None:
        keys = ({"method": "Ensemble", "estimator": None, "student": None} if who == "Ensemble"
                else _student_keys(who))
        skill = {} if who == "Ensemble" or who not in skills else {"skill": skills[who]}
        rows.append({**base, **keys, "metric": metric, "value": float(value), **skill, **extra})

    first = summary.iloc[0]
    add("Ensemble", "nll", first["teacher_nll"])
    add("Ensemble", "accuracy", first["teacher_accuracy"])
    targets = {s.label: s.resolved_target for s in task.students}
    test = experiment4_uncertainties(result, targets, c)
    add("Ensemble", "mu_mean", test["Ensemble"].knowledge.mean())
    y = labels.cpu() if labels is not None else None
    for label in (who for who in test if who != "Ensemble"):
        if label in summary.index:
            add(label, "nll", summary.loc[label, "student_nll"])
            add(label, "accuracy", summary.loc[label, "student_accuracy"])
        elif y is not None:
            add(label, "nll", metrics.nll(test[label].predictive.cpu(), y))
            add(label, "accuracy", metrics.accuracy(test[label].predictive.cpu(), y))
        add(label, "entropy_mae", metrics.mae(test[label].data, test["Ensemble"].data))
        add(label, "mu_mean", test[label].knowledge.mean())
        add(label, "mu_mae", metrics.mae(test[label].knowledge, test["Ensemble"].knowledge))
        for kind in ("total", "knowledge"):
            scores = metrics.ndcg_trials(test["Ensemble"].get(kind), test[label].get(kind), k=20,
                                         subset_size=100, trials=ndcg_trials, seed=seed)
            add(label, "ndcg@20", scores.mean(), std=float(scores.std()), uncertainty=kind)
    for ood_name in result.teacher_outputs:
        if ood_name == "test":
            continue
        ood = experiment4_uncertainties(result, targets, c, ood_name)
        set_name, masked = ood_set_name(ood_name)
        if info is not None and info.ood_masking == "unmasked":
            masked = False
        for who, u in ood.items():
            for kind in ("total", "knowledge"):
                add(who, "auroc", metrics.ood_auroc(test[who].get(kind), u.get(kind)), uncertainty=kind,
                    ood_dataset=set_name, ood_masked=masked)
            add(who, "mu_mean", u.knowledge.mean(), ood_dataset=set_name, ood_masked=masked)
    per_input = pd.DataFrame({"model": base["model"], "input": range(len(test["Ensemble"].data)),
                              **{who: u.data.numpy().round(4) for who, u in test.items()
                                 if who == "Ensemble" or who.endswith(STUDENT_SIZES[1])}})
    return {"downstream": pd.DataFrame(rows), "data_uncertainty": per_input}


# ------------------------------------------------------------------------------ running the experiment
@dataclass
class Experiment4Run(FailureReport):
    """What :func:`run_experiment4` produced: the chains (:class:`~gped_kit.experiments.chains.ChainGrid`,
    compact results), one status row per task (:attr:`cells`), and the concatenated ``downstream`` and
    ``data_uncertainty`` tables of every evaluated chain (columns ``cell``, ``run_key`` and the chain's
    ``seed`` added)."""

    grid: ChainGrid
    evaluations: list[DerivedOutcome]
    downstream: pd.DataFrame
    data_uncertainty: pd.DataFrame

    @property
    def cells(self) -> pd.DataFrame:
        """The grid's status rows with the evaluation's: ``status`` is the chain's (``failed`` when the
        evaluation failed), ``evaluation`` the derived entry's (ran / reused / ...), ``entry`` its key."""
        cells = self.grid.cells
        if cells.empty:
            return cells
        cells["evaluation"] = [e.status for e in self.evaluations]
        cells["entry"] = [e.entry.key if e.entry is not None else "" for e in self.evaluations]
        failed = [e.status == Status.FAILED and e.chain.status != Status.FAILED for e in self.evaluations]
        cells.loc[failed, "status"] = Status.FAILED
        cells.loc[failed, "error"] = [e.error for e, f in zip(self.evaluations, failed) if f]
        return cells


def _write_evaluation(entry: Entry, tables: Mapping[str, pd.DataFrame]) -> None:
    entry.write_table("downstream", tables["downstream"])
    per_input = tables["data_uncertainty"]
    entry.write_arrays({c: per_input[c].to_numpy() for c in per_input.columns if c not in ("model", "input")})


def _read_evaluation(entry: Entry, model: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    arrays = entry.arrays()
    n = len(next(iter(arrays.values()))) if arrays else 0
    per_input = pd.DataFrame({"model": model, "input": range(n), **{k: v.astype(float) for k, v in arrays.items()}})
    return entry.table("downstream"), per_input


def _evaluation_compute(task: ChainTask, ndcg_trials: int, seed: int) -> Callable[[Entry, GPEDResult, GPEDData], None]:
    """The computation of an Experiment 4 entry from its chain's full result (runs where the chain is)."""

    def compute(entry: Entry, result: GPEDResult, data: GPEDData) -> None:
        _write_evaluation(entry, experiment4_evaluate(task, result, ndcg_trials, seed, labels=data.test_y))

    return compute


def run_experiment4(tasks: Sequence[ChainTask], store: ResultsStore, settings: Experiment4Settings, seed: int = 0,
                    recompute: bool = False, progress: bool = True, executor: str = "local",
                    address: str | None = None) -> Experiment4Run:
    """Every task's evaluation (:func:`experiment4_evaluate` with ``settings.ndcg_trials`` trials and
    ``seed``) through ``store``: a derived entry of kind ``"experiment4"`` keyed by
    ``{"chain": <chain record>, "ndcg_trials", "seed"}`` and the chain's and Experiment 4's numerics
    versions (:func:`~gped_kit.experiments.derived.derive`), holding the ``downstream`` table and
    the per-input data uncertainty (float16 arrays). Only a task whose entry is missing runs (or reloads) its chain. A
    task whose data set is absent is recorded as ``missing data``; a failure is recorded and the
    others go on (:meth:`Experiment4Run.raise_if_failed` stops a notebook at the end).
    ``executor="ray"`` evaluates each missing entry, with its chain, as a Ray task at ``address``
    (:func:`~gped_kit.experiments.derived.run_derived`)."""
    record = {"ndcg_trials": settings.ndcg_trials, "seed": seed}
    items = [DerivedTask(task, "experiment4", record, _evaluation_compute(task, settings.ndcg_trials, seed))
             for task in tasks]
    evaluations, downstream, per_input = [], [], []
    for task, outcome in zip(tasks, run_derived(items, store, recompute, progress, executor, address)):
        evaluations.append(outcome)
        if outcome.entry is not None:
            down, values = _read_evaluation(outcome.entry, task.config.model_name)
            run_key = outcome.chain.entry.key if outcome.chain.entry is not None else ""
            chain_seed = task.config.seed
            downstream.append(down.assign(cell=task.label, run_key=run_key, seed=chain_seed))
            per_input.append(values.assign(cell=task.label, run_key=run_key, seed=chain_seed))
    empty = pd.DataFrame(columns=list(DOWNSTREAM_COLUMNS))
    return Experiment4Run(ChainGrid([e.chain for e in evaluations]), evaluations,
                          pd.concat(downstream, ignore_index=True) if downstream else empty,
                          pd.concat(per_input, ignore_index=True) if per_input else pd.DataFrame())

