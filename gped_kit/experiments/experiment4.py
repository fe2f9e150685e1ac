"""Experiment 4 (paper 003, Section 4; Appendices A.3, A.4, B.3): uncertainty for downstream tasks, GPED against EnD2.

One SGLD teacher chain per model, in the setting of Experiment 3 (MNIST: |D| = 60,000 at masking
rate 0.29, m = 15; CIFAR-10: |D| = 20,000, no masking), feeds eight students at once: a GPED C+1
student (the predictive and the expected entropy E[H]; the entropy column always with U_o, so its
"U_s" student runs the ``U_s+U_o`` estimator) and an EnD2 prior network (Eq. 11, training
temperature 2.5 fixed, :data:`gped_kit.baselines.endd.ENDD`), each with U_s and U_o, each with the
teacher's architecture (``base``) and the largest width multiplier (``largest_width_multiplier``).
The paper does not state its largest multipliers; K1 = K2 = 2 is our choice in both profiles.

Uncertainties (:mod:`gped_kit.core.uncertainty`): total H[E pi], expected data E[H[pi]] and
knowledge (their difference). :func:`experiment4_evaluate` turns one chain's full outputs into the
downstream metrics of Tables 2-4 and 8-16 (NLL, accuracy, entropy MAE; OOD AUROC; nDCG@20 of the
uncertainty ranking against the ensemble's) and Figure 15's per-input data uncertainty;
:func:`run_experiment4` keeps them in the results store as a derived entry (kind
``"experiment4"``) of each chain, so the chain's full state is needed only when that entry is
missing.

**Thinning.** The paper uses H = 100 for predictive targets and H = 10 for entropy targets, but
the C+1 student distils both through one network and one update, so every Experiment 4 student
(GPED and EnD2 alike) is updated every ``thinning`` iterations (:class:`OneThinningSettings`;
default 2, paper profile 10, the entropy value, so the entropy column gets the paper's update rate).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from ..baselines.endd import ENDD
from ..core import metrics, uncertainty
from ..core.options import check_int, check_positive
from ..core.targets import Target
from ..data.container import GPEDData
from ..data.experiment import OOD_MASKINGS, DataConfig, ood_set_name
from ..data.ood import OOD_SETS, ood_available
from ..engine import GPEDResult, StudentConfig
from ..models.presets import ArchSpec
from . import paper_tables
from .chains import ChainGrid, ChainTask, DerivedOutcome, DerivedTask, FailureReport, run_derived
from .experiment3 import PROFILES as SEARCH_PROFILES
from .experiment3 import Experiment3Settings
from .paper import OneThinningSettings, paper_model, teacher_config
from .store import NUMERICS, Entry, ResultsStore, code_fingerprint


@dataclass(frozen=True)
class Experiment4Settings(OneThinningSettings):
    """A profile of Experiment 4: the chain (:class:`OneThinningSettings`), the MNIST labelled-set
    size and mask, the CIFAR-10 labelled-set size, the largest student's width multipliers (K1, K2)
    -- one pair for every model, or ``((model, (K1, K2)), ...)`` -- the dropout of every CNN student
    (GPED and EnD2 alike), how the OOD sets are masked (:data:`~gped_kit.data.experiment.OOD_MASKINGS`),
    how many images of each OOD set to keep (None: all) and the nDCG trials.

    Appendix A.4: the largest student has "the largest width multiplier of Experiment 3", so the
    profiles take it from :data:`gped_kit.experiments.experiment3.PROFILES` of the same name; "the
    dropout rate for CNN models is 0.3" (every CNN student; the FCNN's are the paper's 0.5)."""

    labelled_size: int = 60_000
    mask_size: int = 15
    cifar_labelled_size: int = 20_000
    largest_k: tuple = (2.0, 2.0)
    cnn_dropout: float = 0.3
    ood_masking: str = "both"
    ood_size: int | None = None
    ndcg_trials: int = 500

    def __post_init__(self) -> None:
        super().__post_init__()
        largest = self.largest_k
        if isinstance(largest, Mapping):
            largest = tuple(largest.items())
        largest = tuple(largest)
        per_model = bool(largest) and all(isinstance(v, (tuple, list)) and len(v) == 2 for v in largest)
        if per_model:
            largest = tuple((str(m), tuple(float(k) for k in ks)) for m, ks in largest)
        elif len(largest) != 2:
            raise ValueError(f"largest_k={self.largest_k!r}: must be the two width multipliers (K1, K2), or "
                             "((model, (K1, K2)), ...)")
        else:
            largest = tuple(float(k) for k in largest)
        object.__setattr__(self, "largest_k", largest)
        check_positive("cnn_dropout", self.cnn_dropout, allow_zero=True)
        if not self.cnn_dropout < 1:
            raise ValueError(f"cnn_dropout={self.cnn_dropout!r}: must be in [0, 1)")
        if self.ood_masking not in OOD_MASKINGS:
            raise ValueError(f"ood_masking={self.ood_masking!r} is not known; allowed: {list(OOD_MASKINGS)}")
        check_int("labelled_size", self.labelled_size, 1)
        check_int("cifar_labelled_size", self.cifar_labelled_size, 1)
        check_int("mask_size", self.mask_size, 0)
        check_int("ndcg_trials", self.ndcg_trials, 1)
        if self.ood_size is not None:
            check_int("ood_size", self.ood_size, 1)

    def largest(self, model: str) -> tuple[float, float]:
        """The largest student's (K1, K2) for ``model``."""
        if isinstance(self.largest_k[0], tuple):
            table = dict(self.largest_k)
            if model not in table:
                raise ValueError(f"largest_k gives multipliers for {sorted(table)} only, not for {model!r}")
            return table[model]
        return self.largest_k

    def student_dropout(self, model: str, endd: bool) -> float:
        """Dropout of a ``model`` student: ``cnn_dropout`` for every CNN student; the FCNN's the paper's
        (0.5 for GPED students, Appendix A.2, and EnD2's prior networks, A.4)."""
        paper = paper_model(model)
        if ArchSpec(model).hidden_widths().get("conv0"):
            return self.cnn_dropout
        return paper.endd_dropout if endd else paper.student_dropout


def largest_multipliers(search: Experiment3Settings) -> tuple[tuple[str, tuple[float, float]], ...]:
    """Per model, the largest (K1, K2) of an Experiment 3 profile's exhaustive grid (Appendix A.4)."""
    return tuple((model, (max(search.grid(model)[0]), max(search.grid(model)[1]))) for model in search.models)


#: ``default``: short chains for a CPU; ``paper``: T = 10^6 (B the paper's per model) for a GPU.
PROFILES: dict[str, Experiment4Settings] = {
    "default": Experiment4Settings(num_iterations=3_000, burn_in=1_000, thinning=2, eval_thinning=50, log_every=500,
                                   checkpoint_every=1_000, labelled_size=60_000, mask_size=15,
                                   cifar_labelled_size=20_000,
                                   largest_k=largest_multipliers(SEARCH_PROFILES["default"]), ood_size=None,
                                   ndcg_trials=500),
    "paper": Experiment4Settings(num_iterations=1_000_000, burn_in=None, thinning=10, eval_thinning=100,
                                 log_every=10_000, checkpoint_every=50_000, labelled_size=60_000, mask_size=15,
                                 cifar_labelled_size=20_000, largest_k=largest_multipliers(SEARCH_PROFILES["paper"]),
                                 ood_size=None, ndcg_trials=500),
}
#: OOD test sets per in-distribution data set (Section 4, Experiment 4; Fashion-MNIST added: it is
#: the one available offline here, and Hydra's paper uses it for MNIST).
OOD_FOR = {"mnist": ("fashion_mnist", "kmnist", "notmnist"), "cifar10": ("svhn", "tinyimagenet", "lsun")}
#: The paper's names of the two student sizes (Tables 2-4, 8-16).
STUDENT_SIZES = ("base", "largest_width_multiplier")
#: Columns of the ``downstream`` table (an empty one has them too).
DOWNSTREAM_COLUMNS = ("model", "method", "estimator", "student", "metric", "value", "std", "uncertainty",
                      "ood_dataset", "ood_masked")


def experiment4_code() -> str:
    """The code fingerprint of Experiment 4's derived entries: the numerics and this module."""
    return code_fingerprint(*NUMERICS, "gped_kit.experiments.experiment4")


def ood_availability(dataset: str, data_root: str | None = None) -> pd.DataFrame:
    """Which of the OOD sets for ``dataset`` are present under the data root, and how to get the others."""
    if dataset not in OOD_FOR:
        raise ValueError(f"dataset={dataset!r} is not known; allowed: {sorted(OOD_FOR)}")
    return pd.DataFrame([{"ood_dataset": name, "available": ood_available(name, data_root),
                          "how to get it": OOD_SETS[name].source} for name in OOD_FOR[dataset]])


def experiment4_students(model: str, settings: Experiment4Settings) -> tuple[StudentConfig, ...]:
    """The eight students of one chain, named ``<method>-<estimator>-<size>`` with the paper's labels:
    GPED C+1 (``predictive+entropy``; its "U_s" student runs ``U_s+U_o``, U_o on the entropy column)
    and EnD2 (:data:`~gped_kit.baselines.endd.ENDD`), with U_s and U_o, for the base and the largest
    width multiplier (Appendix A.4), with the dropout of :meth:`Experiment4Settings.student_dropout`."""
    paper = paper_model(model)
    k1, k2 = settings.largest(model)
    gped_dropout, endd_dropout = settings.student_dropout(model, endd=False), settings.student_dropout(model, endd=True)
    students = []
    for size, (a, b) in zip(STUDENT_SIZES, ((1.0, 1.0), (k1, k2))):
        for estimator, engine_estimator in (("U_s", "U_s+U_o"), ("U_o", "U_o")):
            students.append(StudentConfig(
                "predictive+entropy", engine_estimator, arch=ArchSpec(model, a, b, dropout=gped_dropout),
                thinning=settings.thinning, lr_halving_epochs=paper.lr_halving_epochs,
                name=f"GPED-{estimator}-{size}"))
            students.append(StudentConfig(
                ENDD, estimator, arch=ArchSpec(model, a, b, dropout=endd_dropout),
                thinning=settings.thinning, lr_halving_epochs=paper.lr_halving_epochs,
                name=f"EnD2-{estimator}-{size}"))
    return tuple(students)


def experiment4_task(model: str, settings: Experiment4Settings, seed: int = 0, device: str = "auto",
                     data_root: str | None = None, verify_checksums: bool = True) -> ChainTask:
    """One Experiment 4 chain: ``model``'s teacher (Appendix A.2) on the Experiment 3 setting, feeding
    the students of :func:`experiment4_students`, with every available OOD set of :data:`OOD_FOR`
    evaluated beside the test set, masked like it, whole, or both (``settings.ood_masking``)."""
    paper = paper_model(model)
    mnist = paper.dataset == "mnist"
    n = settings.labelled_size if mnist else settings.cifar_labelled_size
    ood = tuple(name for name in OOD_FOR[paper.dataset] if ood_available(name, data_root))
    data = DataConfig(paper.dataset, labelled_size=n, mask_size=settings.mask_size if mnist else 0, seed=seed,
                      root=data_root, verify_checksums=verify_checksums, ood_datasets=ood, ood_size=settings.ood_size,
                      ood_masking=settings.ood_masking)
    return ChainTask(data, teacher_config(model, n, settings, seed, device), experiment4_students(model, settings))


def _student_keys(label: str) -> dict[str, str]:
    method, estimator, size = label.split("-", 2)
    return {"method": method, "estimator": estimator, "student": size}


def experiment4_uncertainties(result: GPEDResult, targets: Mapping[str, Target], num_classes: int,
                              eval_set: str = "test") -> dict[str, uncertainty.Uncertainties]:
    """Per-input uncertainties on ``eval_set`` (the test set or an OOD set) of the teacher ensemble
    (``"Ensemble"``: online means of pi and H[pi], :func:`~gped_kit.core.uncertainty.from_moments`)
    and of every GPED / EnD2 student by label, from its target in ``targets`` (label -> target; its
    decomposition, :meth:`~gped_kit.core.targets.Target.uncertainties`: the C+1 outputs directly,
    the Dirichlet's closed forms)."""
    t = result.teacher_outputs[eval_set]["predictive+entropy"]
    out = {"Ensemble": uncertainty.from_moments(t[:, :num_classes], t[:, num_classes])}
    for label, output in result.student_outputs[eval_set].items():
        out[label] = targets[label].uncertainties(output, num_classes)
    return out


def _summary_value(summary: pd.DataFrame, column: str) -> Any:
    return summary[column].iloc[0] if column in summary and len(summary) else float("nan")


def experiment4_evaluate(task: ChainTask, result: GPEDResult, ndcg_trials: int = 500,
                         seed: int = 0) -> dict[str, pd.DataFrame]:
    """The downstream metrics of one Experiment 4 chain (a result with its full outputs).

    ``downstream``, one tidy row per (who, metric[, uncertainty, OOD set]): the in-distribution
    ``nll`` and ``accuracy`` (Ensemble and students; from the run's summary) and ``entropy_mae``
    (students: mean |E[H] student - E[H] ensemble|, Tables 2, 8-10); per OOD set and uncertainty
    (total, knowledge) the ``auroc`` (:func:`~gped_kit.core.metrics.ood_auroc`, OOD = positives,
    Tables 3, 11-13; ``ood_masked`` says whether the OOD inputs carried the test set's masks); per
    uncertainty the ``ndcg@20`` of each student's ranking against the ensemble's
    (:func:`~gped_kit.core.metrics.ndcg_trials`: mean, and ``std`` over the trials of 100 random
    test inputs, Tables 4, 14-16). ``data_uncertainty``: one row per test input with
    the expected data uncertainty E[H] of the ensemble and of each largest-width student (Figure 15).
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

    def add(who: str, metric: str, value: float, **extra: Any) -> None:
        keys = ({"method": "Ensemble", "estimator": None, "student": None} if who == "Ensemble"
                else _student_keys(who))
        rows.append({**base, **keys, "metric": metric, "value": float(value), **extra})

    first = summary.iloc[0]
    add("Ensemble", "nll", first["teacher_nll"])
    add("Ensemble", "accuracy", first["teacher_accuracy"])
    targets = {s.label: s.resolved_target for s in task.students}
    test = experiment4_uncertainties(result, targets, c)
    for label in result.student_outputs["test"]:
        add(label, "nll", summary.loc[label, "student_nll"])
        add(label, "accuracy", summary.loc[label, "student_accuracy"])
        add(label, "entropy_mae", metrics.mae(test[label].data, test["Ensemble"].data))
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
    per_input = pd.DataFrame({"model": base["model"], "input": range(len(test["Ensemble"].data)),
                              **{who: u.data.numpy().round(4) for who, u in test.items()
                                 if who == "Ensemble" or who.endswith(STUDENT_SIZES[1])}})
    return {"downstream": pd.DataFrame(rows), "data_uncertainty": per_input}


# ------------------------------------------------------------------------------ derived entries
# ------------------------------------------------------------------------------ running the experiment
@dataclass
class Experiment4Run(FailureReport):
    """What :func:`run_experiment4` produced: the chains (:class:`~gped_kit.experiments.chains.ChainGrid`,
    compact results), one status row per task (:attr:`cells`), and the concatenated ``downstream`` and
    ``data_uncertainty`` tables of every evaluated chain (columns ``cell`` and ``run_key`` added)."""

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
        failed = [e.status == "failed" and e.chain.status != "failed" for e in self.evaluations]
        cells.loc[failed, "status"] = "failed"
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
        _write_evaluation(entry, experiment4_evaluate(task, result, ndcg_trials, seed))

    return compute


def run_experiment4(tasks: Sequence[ChainTask], store: ResultsStore, settings: Experiment4Settings, seed: int = 0,
                    recompute: bool = False, progress: bool = True, executor: str = "local",
                    address: str | None = None) -> Experiment4Run:
    """Every task's evaluation (:func:`experiment4_evaluate` with ``settings.ndcg_trials`` trials and
    ``seed``) through ``store``: a derived entry of kind ``"experiment4"`` keyed by
    ``{"chain": <chain record>, "ndcg_trials", "seed"}`` and the code of the numerics and this module
    (:func:`~gped_kit.experiments.chains.derive`), holding the ``downstream`` table and
    the per-input data uncertainty (float16 arrays). Only a task whose entry is missing runs (or reloads) its chain. A
    task whose data set is absent is recorded as ``missing data``; a failure is recorded and the
    others go on (:meth:`Experiment4Run.raise_if_failed` stops a notebook at the end).
    ``executor="ray"`` evaluates each missing entry, with its chain, as a Ray task at ``address``
    (:func:`~gped_kit.experiments.chains.run_derived`)."""
    code = experiment4_code()
    record = {"ndcg_trials": settings.ndcg_trials, "seed": seed}
    items = [DerivedTask(task, "experiment4", record, code, _evaluation_compute(task, settings.ndcg_trials, seed))
             for task in tasks]
    evaluations, downstream, per_input = [], [], []
    for task, outcome in zip(tasks, run_derived(items, store, recompute, progress, executor, address)):
        evaluations.append(outcome)
        if outcome.entry is not None:
            down, values = _read_evaluation(outcome.entry, task.config.model_name)
            run_key = outcome.chain.entry.key if outcome.chain.entry is not None else ""
            downstream.append(down.assign(cell=task.label, run_key=run_key))
            per_input.append(values.assign(cell=task.label, run_key=run_key))
    empty = pd.DataFrame(columns=list(DOWNSTREAM_COLUMNS))
    return Experiment4Run(ChainGrid([e.chain for e in evaluations]), evaluations,
                          pd.concat(downstream, ignore_index=True) if downstream else empty,
                          pd.concat(per_input, ignore_index=True) if per_input else pd.DataFrame())


# ------------------------------------------------------------------------------ beside the paper
_EXP4_KEYS = {"in_distribution": ["model", "method", "estimator", "student", "metric"],
              "ood": ["model", "ood_dataset", "uncertainty", "method", "estimator", "student", "metric"],
              "ndcg": ["model", "uncertainty", "method", "estimator", "student", "metric"]}


def experiment4_comparison(downstream: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Our Experiment 4 numbers beside the paper's (``value_paper``, ``std_paper``, ``table``).

    ``kind``: ``"in_distribution"`` (Tables 2, 8-10: NLL, accuracy, entropy MAE),
    ``"ood"`` (Tables 3, 11-13: AUROC) or ``"ndcg"`` (Tables 4, 14-16). Every printed cell of
    those tables is kept. Our rows come first (``source == "ours"``, sorted by the keys; the
    paper's value where the paper has that cell, else NaN, e.g. our Fashion-MNIST OOD rows and
    accuracies); then the paper's cells we have no run for (``source == "paper only"``, in the
    paper's order, with ``value``/``std`` NaN: the KMNIST, notMNIST, TinyImageNet and LSUN rows
    when those sets are absent here, and all CIFAR-10 rows while CIFAR-10 is). The Ensemble's
    in-distribution and OOD rows are repeated for each estimator and student size the paper
    prints them with. ``downstream`` may be empty: then the result is the paper's tables alone.
    """
    if kind not in _EXP4_KEYS:
        raise ValueError(f"kind={kind!r} is not known; allowed: {sorted(_EXP4_KEYS)}")
    paper = {"in_distribution": paper_tables.experiment4_in_distribution, "ood": paper_tables.experiment4_ood,
             "ndcg": paper_tables.experiment4_ndcg}[kind]()
    metric = {"in_distribution": ["nll", "accuracy", "entropy_mae"], "ood": ["auroc"], "ndcg": ["ndcg@20"]}[kind]
    keys = _EXP4_KEYS[kind]
    ours = downstream[downstream["metric"].isin(metric)].copy()
    if kind == "ndcg":
        ours = ours[ours["method"] != "Ensemble"]
    ens = ours["method"] == "Ensemble"
    if ens.any():  # the paper repeats the ensemble in every (estimator, student) table
        combos = ours.loc[~ens, ["estimator", "student"]].drop_duplicates()
        repeated = ours[ens].drop(columns=["estimator", "student"]).merge(combos, how="cross")
        ours = pd.concat([ours[~ens], repeated], ignore_index=True)
    cols = ["value", "std"] if kind == "ndcg" else ["value"]
    extra = ["ood_masked"] if kind == "ood" else []  # ours only: the paper does not say
    ours = ours.reindex(columns=keys + extra + cols)  # a key absent from downstream (e.g. no OOD set ran) is NaN
    for key in keys:  # object keys, so that empty or all-NaN key columns still match the paper's strings
        ours[key] = ours[key].astype(object)
    for c in cols:
        ours[c] = pd.to_numeric(ours[c], errors="coerce").astype(float)
    paper = paper[keys + cols + ["table"]].rename(columns={c: f"{c}_paper" for c in cols})
    ours_part = ours.merge(paper, on=keys, how="left").sort_values(keys + extra).assign(source="ours")
    ours_keys = pd.MultiIndex.from_frame(ours[keys]) if len(ours) else pd.MultiIndex.from_tuples([], names=keys)
    paper_only = paper[~pd.MultiIndex.from_frame(paper[keys]).isin(ours_keys)]
    paper_only = paper_only.assign(**{c: float("nan") for c in cols + extra}, source="paper only")
    columns = keys + extra + cols + [f"{c}_paper" for c in cols] + ["table", "source"]
    parts = [part[columns] for part in (ours_part, paper_only) if len(part)]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)


def experiment4_claims(downstream: pd.DataFrame) -> pd.DataFrame:
    """The paper's Experiment 4 claims checked on our numbers, one row per claim: GPED beats
    EnD2 on NLL and on entropy MAE in every setting ("consistently performs better across all
    metrics"), in AUROC ("75% of cases") and in nDCG@20 ("91% of settings"). A setting is one
    (model, estimator, student size[, OOD set, uncertainty]) where both methods have a value;
    ``ours`` counts the settings GPED wins, ``fraction`` is their share. AUROC is counted separately
    for masked and whole OOD inputs when both were evaluated."""
    rows = []
    if "ood_masked" in downstream and downstream["ood_masked"].notna().any():
        auroc = downstream[downstream["metric"] == "auroc"]
        for masked, part in auroc.groupby("ood_masked"):
            label = "masked" if bool(masked) else "whole"
            claims = experiment4_claims(part.drop(columns=["ood_masked"]))
            rows += [dict(r, claim=f"{r['claim']} (OOD inputs {label})") for r in claims.to_dict("records")]
        downstream = downstream[downstream["metric"] != "auroc"]
    keys = ["model", "estimator", "student"]
    for metric, extra, better, paper in (("nll", [], "lower", "GPED better in every setting (Tables 2, 8-10)"),
                                         ("entropy_mae", [], "lower", "GPED better in every setting"),
                                         ("auroc", ["ood_dataset", "uncertainty"], "higher",
                                          "GPED better in 75% of cases"),
                                         ("ndcg@20", ["uncertainty"], "higher", "GPED better in 91% of settings")):
        df = downstream[(downstream["metric"] == metric) & downstream["method"].isin(["GPED", "EnD2"])]
        if df.empty:
            continue
        wide = df.pivot_table(index=keys + extra, columns="method", values="value").dropna()
        if not {"GPED", "EnD2"} <= set(wide.columns):
            continue
        wins = (wide["GPED"] < wide["EnD2"]) if better == "lower" else (wide["GPED"] > wide["EnD2"])
        rows.append({"claim": f"GPED {better} {metric} than EnD2", "ours": f"{int(wins.sum())} of {len(wins)}",
                     "fraction": float(wins.mean()) if len(wins) else float("nan"), "paper": paper})
    order = {"nll": 0, "entropy_mae": 1, "auroc": 2, "ndcg@20": 3}
    rows.sort(key=lambda r: order[r["claim"].split()[2]])
    return pd.DataFrame(rows, columns=["claim", "ours", "fraction", "paper"])


def figure15_students(per_input: pd.DataFrame) -> dict[str, torch.Tensor]:
    """Figure 15's students from one model's ``data_uncertainty`` rows: each largest-width student's
    E[H] per test input, named ``"<method>-<estimator> (largest)"``."""
    columns = sorted(c for c in per_input.columns if c.endswith(STUDENT_SIZES[1]))
    return {c.replace(f"-{STUDENT_SIZES[1]}", " (largest)"): torch.tensor(per_input[c].to_numpy(dtype=float))
            for c in columns}
