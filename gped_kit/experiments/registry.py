"""One registry of the notebooks and their experiments.

Every notebook of ``notebooks/`` has one :class:`Notebook` entry in :data:`NOTEBOOKS`, which says
what the tools around the notebooks need to know about it:

* its experiment module and profiles (:attr:`Notebook.profiles`) and, from them, its settings for a
  profile and overrides (:meth:`Notebook.settings`);
* the chains it runs, built exactly as the notebook builds them (:meth:`Notebook.chain_tasks`, with
  the notebook parameters they take besides the settings in :attr:`Notebook.parameters`), and how
  many run as one batch (:meth:`Notebook.chains_per_batch`); what it computes after the chains
  (:attr:`Notebook.after_chains`);
* its paper profile scaled down for a CPU (:attr:`Notebook.scaled_paper`), what a run of it must
  leave in the results store (:meth:`Notebook.missing`) and the lines its checks must print
  (:meth:`Notebook.verdicts`).

The batch runner (:mod:`gped_kit.cli.batch`) checks a run's settings and overrides here before
it starts any notebook; ``tests/test_paper_profile.py`` runs every notebook with a scaled paper
profile and checks its store; ``benchmarks/paper_profile_work.py`` counts the work of every
notebook's unscaled paper profile. **Adding a notebook** is the notebook, its experiment module
and one entry here (``tests/test_registry.py`` checks that every notebook is registered and that
an entry's parameters agree with the notebook's parameters cell).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from ..baselines.endd import ENDD
from ..data.sources import DatasetNotFoundError, load_split
from . import comparison, experiment3, experiment4, experiment12, quickstart, samplers, thesis
from .chains import ChainTask
from .numerics import numerics_code
from .paper import paper_model
from .settings import resolve_settings
from .store import ResultsStore

#: The chain of the scaled paper profile (``tests/test_paper_profile.py``): T = 10^6 -> 101 with
#: B -> 50, so that every event of Algorithm 1 happens at least once at the paper's thinnings, and
#: 500 of the 10,000 test images (evaluating every student on all of them is most of the scaled
#: run's time, and proves nothing more).
SCALED_CHAIN = {"num_iterations": 101, "burn_in": 50, "test_size": 500}

TaskBuilder = Callable[..., list[ChainTask]]
StoreCheck = Callable[[ResultsStore, Any, Sequence[ChainTask], Collection[str], int], list[str]]
Verdicts = Callable[[Any, Collection[str]], list[str]]


def _no_lines(settings: Any, absent: Collection[str]) -> list[str]:
    return []


@dataclass(frozen=True)
class Notebook:
    """A notebook of ``notebooks/`` and the experiment it runs.

    ``name`` is the file's stem; ``module`` the experiment module whose ``PROFILES`` the notebook
    resolves its settings from (None: the notebook has no profiles, e.g. it only draws or runs
    its own small example); ``tasks(settings, seed=, device=, data_root=, **parameters)`` builds
    the notebook's chain tasks as the notebook does (None: it runs no chain of the store), with
    ``parameters`` the notebook parameters it takes besides the settings, at the defaults of the
    notebook's parameters cell; ``after_chains`` names what the notebook computes from its chains
    (``"search"``: Experiment 3's pruning and fine-tuning; ``"hydra"``: Hydra on the snapshots);
    ``scaled_paper`` are the overrides of the ``paper`` profile that make it run on a CPU (None:
    no paper profile to run); ``stored`` checks what else than the chains a run must store, and
    ``verdicts`` gives the lines the notebook's checks print (both for a run where the data sets
    ``absent`` are missing); ``needs_chain_state`` says whether what the notebook derives from its
    chains (searches, Experiment 4's evaluations, Hydra) needs their full final state (checkpoints),
    not only their stored tables."""

    name: str
    module: ModuleType | None = None
    tasks: TaskBuilder | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    after_chains: str = ""
    scaled_paper: Mapping[str, Any] | None = None
    stored: StoreCheck | None = None
    verdicts: Verdicts = _no_lines
    needs_chain_state: bool = False

    @property
    def profiles(self) -> Mapping[str, Any]:
        """The experiment module's profiles (empty without a module)."""
        return getattr(self.module, "PROFILES", {}) if self.module is not None else {}

    def path(self, notebook_dir: str | Path = "notebooks") -> Path:
        return Path(notebook_dir) / f"{self.name}.ipynb"

    def settings(self, profile: str = "default", overrides: Mapping[str, Any] | None = None) -> Any:
        """The notebook's settings for ``profile`` with ``overrides`` (as the notebook resolves its
        parameters, :func:`~gped_kit.experiments.settings.resolve_settings`); None without profiles."""
        if self.module is None:
            return None
        return resolve_settings(self.profiles, profile, overrides)

    def chain_tasks(self, settings: Any, *, seed: int = 0, device: str = "auto", data_root: str | None = None,
                    **parameters: Any) -> list[ChainTask]:
        """The notebook's chains under ``settings``, in the order the notebook runs them; ``parameters``
        override :attr:`parameters` (names it does not take are an error). Empty when the notebook
        runs no chain."""
        unknown = sorted(set(parameters) - set(self.parameters))
        if unknown:
            raise ValueError(f"{self.name}: {unknown[0]} is not a parameter of its chains; allowed: "
                             f"{sorted(self.parameters)}")
        if self.tasks is None:
            return []
        return list(self.tasks(settings, seed=seed, device=device, data_root=data_root,
                               **{**self.parameters, **parameters}))

    def chains_per_batch(self, settings: Any) -> int:
        """How many consecutive compatible chains the notebook runs as one batch."""
        return int(getattr(settings, "chains_per_batch", 1) or 1)

    def missing(self, store: ResultsStore, settings: Any, absent: Collection[str] = (), *, seed: int = 0,
                **parameters: Any) -> list[str]:
        """What a completed run of the notebook under ``settings`` would have stored and ``store``
        lacks, one line each (empty: all there): a complete chain entry per chain task whose data
        set is present (and none for those in ``absent``), and the notebook's derived results, each
        made by this checkout's code (entries that a re-keying superseded count as missing)."""
        tasks = self.chain_tasks(settings, seed=seed, **parameters)
        gaps = chain_gaps(store, tasks, absent)
        if self.stored is not None:
            gaps += self.stored(store, settings, tasks, absent, seed)
        return gaps


# ----------------------------------------------------------------------------- what a run stores
#: The data sets the registered notebooks' chains train on.
CHAIN_DATASETS = ("mnist", "cifar10")


def absent_datasets(root: str | Path | None = None) -> frozenset[str]:
    """The data sets of :data:`CHAIN_DATASETS` that cannot be loaded here (under ``root``, default the
    data root), e.g. CIFAR-10 on an offline machine: the ``absent`` of :meth:`Notebook.missing`."""
    absent = set()
    for name in CHAIN_DATASETS:
        try:
            load_split(name, "test", root)
        except DatasetNotFoundError:
            absent.add(name)
    return frozenset(absent)


def _dataset(task: ChainTask) -> str:
    return str(getattr(task.data, "dataset", ""))


def _signature(task: ChainTask) -> dict[str, Any]:
    """The summary columns that tell a task's chain from the others."""
    out = {"dataset": _dataset(task), "model": task.config.model_name, "seed": task.config.seed,
           "num_iterations": task.config.num_iterations, "sampler": str(task.config.sampler.name)}
    for name in ("labelled_size", "mask_size"):
        value = getattr(task.data, name, None)
        if value is not None:
            out[name] = value
    return out


def _chains_found(summaries: pd.DataFrame, signature: tuple, students: frozenset[str]) -> list[str]:
    """The keys of the complete chain entries among ``summaries`` (this code's chain summaries) with
    ``signature``'s summary columns and exactly ``students``."""
    rows = summaries
    for column, value in signature:
        rows = rows[rows[column] == value] if column in rows else rows.iloc[:0]
    return [key for key, chain in (rows.groupby("entry") if len(rows) else [])
            if set(chain["student"]) == students and (chain["steps_done"] == dict(signature)["num_iterations"]).all()]


def _group(task: ChainTask) -> tuple[tuple, frozenset[str]]:
    return tuple(sorted(_signature(task).items())), frozenset(s.label for s in task.students)


def _chain_summaries(store: ResultsStore) -> pd.DataFrame:
    """The summary tables of this code's complete chain entries (their keys in column ``entry``)."""
    return store.load("summary", "chain", code=numerics_code("chain"))


def _task_chains(summaries: pd.DataFrame, tasks: Sequence[ChainTask]) -> set[str]:
    """The keys of the complete chain entries of ``tasks`` among ``summaries`` (:func:`_chain_summaries`)."""
    return {key for task in tasks for key in _chains_found(summaries, *_group(task))}


def _derived_rows(store: ResultsStore, kind: str, table: str, chains: set[str]) -> pd.DataFrame:
    """Table ``table`` of this code's complete ``kind`` entries derived from one of the chain entries
    ``chains`` (a derived entry's record holds its chain's record under ``"chain"``)."""
    return store.load(table, kind, code=numerics_code(kind),
                      where=lambda e: isinstance(e.record, Mapping) and "chain" in e.record
                      and store.entry("chain", e.record["chain"]).key in chains)


def chain_gaps(store: ResultsStore, tasks: Sequence[ChainTask], absent: Collection[str] = ()) -> list[str]:
    """The chain tasks without a complete chain entry in ``store`` (one that ran every iteration with
    exactly the task's students) under this checkout's numerics, and those of data sets in ``absent`` that
    have one; one line each. Entries of other numerics versions (superseded,
    :mod:`~gped_kit.experiments.numerics`) count for nothing: the notebook would not read them.
    Tasks that only differ in what the summaries do not show (e.g. two SGLD samplers) need as many
    entries as there are such tasks."""
    summaries = _chain_summaries(store)
    groups: dict[tuple, list[ChainTask]] = {}
    for task in tasks:
        groups.setdefault(_group(task), []).append(task)
    gaps = []
    for (signature, students), same in groups.items():
        found = len(_chains_found(summaries, signature, students))
        label = ", ".join(t.label for t in same)
        if _dataset(same[0]) in absent:
            if found:
                gaps.append(f"{label}: its data set {_dataset(same[0])!r} is absent here, yet a chain is stored")
        elif found < len(same):
            gaps.append(f"{label}: {found} complete chain entries with its {len(students)} students, expected "
                        f"{len(same)}")
    return gaps


def _search_gaps(store: ResultsStore, settings: experiment3.Experiment3Settings, tasks: Sequence[ChainTask],
                 absent: Collection[str], seed: int) -> list[str]:
    """Every present model's search table (derived from that model's chain of ``settings``): the
    exhaustive grid and each lambda's distilled, pruned and fine-tuned group l1/l2 student, per target."""
    summaries, gaps = _chain_summaries(store), []
    for task in tasks:
        model = task.config.model_name
        if _dataset(task) in absent:
            continue
        table = _derived_rows(store, "search", experiment3.SEARCH_TABLE, _task_chains(summaries, [task]))
        k1, k2 = settings.grid(model)
        for target in settings.targets:
            rows = table[table["target"] == target] if len(table) else table
            exhaustive = int((rows["method"] == "exhaustive").sum()) if len(rows) else 0
            if exhaustive != len(k1) * len(k2):
                gaps.append(f"search {model} {target}: {exhaustive} exhaustive students, expected {len(k1) * len(k2)}")
            for stage in ("distilled", "pruned", "fine-tuned"):
                n = int(((rows["method"] == "group_lasso") & (rows["stage"] == stage)).sum()) if len(rows) else 0
                if n != len(settings.reg_weights):
                    gaps.append(f"search {model} {target}: {n} group l1/l2 students {stage}, expected "
                                f"{len(settings.reg_weights)}")
    return gaps


def _experiment4_gaps(store: ResultsStore, settings: experiment4.Experiment4Settings, tasks: Sequence[ChainTask],
                      absent: Collection[str], seed: int) -> list[str]:
    """Every present chain's downstream evaluation, with a row group for each of its students, and one
    more for each EnD2 student at every further evaluation temperature (``ENDD_EVAL_TEMPERATURES``)."""
    summaries, gaps = _chain_summaries(store), []
    for task in tasks:
        if _dataset(task) in absent:
            continue
        downstream = _derived_rows(store, "experiment4", "downstream", _task_chains(summaries, [task]))
        rows = downstream[downstream["method"] != "Ensemble"] if len(downstream) else downstream
        n = rows.groupby(["method", "estimator", "student"]).ngroups if len(rows) else 0
        endd = sum(student.target == ENDD for student in task.students)
        expected = len(task.students) + endd * len(experiment4.ENDD_EVAL_TEMPERATURES)
        if n != expected:
            gaps.append(f"experiment 4 {task.label}: {n} evaluated students, expected {expected} "
                        f"({len(task.students)} students, {endd} of them EnD2 also at "
                        f"T = {', '.join(f'{t:g}' for t in experiment4.ENDD_EVAL_TEMPERATURES)})")
    return gaps


def _comparison_gaps(store: ResultsStore, settings: comparison.ComparisonSettings, tasks: Sequence[ChainTask],
                     absent: Collection[str], seed: int) -> list[str]:
    """The MNIST comparison table (derived from the chains of ``settings``) with every method, and the
    spiral's entry."""
    table = _derived_rows(store, "comparison", "comparison", _task_chains(_chain_summaries(store), tasks))
    methods = {"Hydra", "GPED", "EnD2", "KD", "Snapshot ensemble", "Long-chain teacher"}
    have = set(table["method"]) if len(table) else set()
    gaps = [f"comparison: no rows for {sorted(methods - have)}"] if methods - have else []
    if not store.entries("spiral", code=numerics_code("spiral")):
        gaps.append("spiral: no complete entry")
    return gaps


def _toy_gaps(store: ResultsStore, settings: thesis.ThesisToysSettings, tasks: Sequence[ChainTask],
              absent: Collection[str], seed: int) -> list[str]:
    """A complete toy entry for every mixture-of-Gaussians size and for the logistic regression."""
    configs = [*thesis.mog_configs(settings, seed), thesis.logreg_config(settings, seed)]
    return [f"toy {thesis.toy_record(c)}: no complete entry" for c in configs
            if not store.entry("toy", thesis.toy_record(c)).complete]


# ----------------------------------------------------------------------------- the notebooks' chains
def _quickstart_tasks(settings: quickstart.QuickstartSettings, *, seed: int, device: str, data_root: str | None,
                      dataset: str, model: str, labelled_size: int | None, mask_size: int, step_size: float,
                      prior_precision: float, batch_size: int, student_dropout: float) -> list[ChainTask]:
    """Notebook 00's chain (:func:`~gped_kit.experiments.quickstart.quickstart_task`)."""
    return [quickstart.quickstart_task(settings, dataset=dataset, model=model, labelled_size=labelled_size,
                                       mask_size=mask_size, step_size=step_size, prior_precision=prior_precision,
                                       batch_size=batch_size, student_dropout=student_dropout, seed=seed,
                                       device=device, data_root=data_root)]


def _experiment1_tasks(settings: experiment12.Experiment2Settings, *, seed: int, device: str,
                       data_root: str | None, models: Sequence[str]) -> list[ChainTask]:
    return experiment12.experiment1_tasks(models, settings, seed=seed, device=device, data_root=data_root)


def _experiment2_tasks(settings: experiment12.Experiment2Settings, *, seed: int, device: str,
                       data_root: str | None, models: Sequence[str], lr_check_models: Sequence[str]
                       ) -> list[ChainTask]:
    """Notebook 02's grid, then its learning-rate schedule check."""
    grid = experiment12.experiment2_tasks(models, settings, seed=seed, device=device, data_root=data_root)
    return grid + [t for model in lr_check_models if model in models
                   for t in experiment12.lr_schedule_tasks(model, settings, seed=seed, device=device,
                                                            data_root=data_root)]


def _cifar_tasks(settings: experiment12.Experiment2Settings, *, seed: int, device: str,
                 data_root: str | None) -> list[ChainTask]:
    return [experiment12.distillation_task("cnn_cifar10", n, 0, settings, seed=seed, device=device,
                                           data_root=data_root) for n in settings.cifar_labelled_sizes]


def _experiment3_tasks(settings: experiment3.Experiment3Settings, *, seed: int, device: str,
                       data_root: str | None) -> list[ChainTask]:
    return experiment3.experiment3_tasks(settings, seed=seed, device=device, data_root=data_root)


def _experiment4_tasks(settings: experiment4.Experiment4Settings, *, seed: int, device: str,
                       data_root: str | None, models: Sequence[str]) -> list[ChainTask]:
    """Notebook 06's chains: one per seed of the settings and model, seeds outermost."""
    return experiment4.experiment4_tasks(models, settings, seed=seed, device=device, data_root=data_root)


def _comparison_tasks(settings: comparison.ComparisonSettings, *, seed: int, device: str,
                      data_root: str | None) -> list[ChainTask]:
    """Notebook 07's MNIST comparison chain, then the spiral's."""
    return [comparison.comparison_task(settings, seed=seed, device=device, data_root=data_root),
            comparison.spiral_task(settings, seed=seed, device=device)]


def _sampler_tasks(settings: samplers.SamplerStudySettings, *, seed: int, device: str,
                   data_root: str | None) -> list[ChainTask]:
    return samplers.sampler_study_tasks(settings, device=device, data_root=data_root)


# ----------------------------------------------------------------------------- the lines the checks print
def _lines_01(settings: Any, absent: Collection[str]) -> list[str]:
    return ["every MNIST cell completed: True", "every cell ran or reported missing data: True",
            *(["Not on this machine: data set 'cifar10'"] if "cifar10" in absent else [])]


def _lines_02(settings: experiment12.Experiment2Settings, absent: Collection[str]) -> list[str]:
    models = NOTEBOOKS["02_experiment2_mnist"].parameters["models"]
    cells = len(models) * len(settings.labelled_sizes) * len(settings.mask_sizes)
    lines = [f"{cells} cells, one SGLD chain each", "every cell completed: True"]
    return lines + (["one of a batch"] if settings.chains_per_batch > 1 else [])


def _lines_03(settings: Any, absent: Collection[str]) -> list[str]:
    if "cifar10" not in absent:
        return ["CIFAR-10 present here: True"]
    return ["every CIFAR-10 cell reports missing data: True",
            "the message names where it looked and how to get the files: True"]


def _lines_05(settings: experiment3.Experiment3Settings, absent: Collection[str]) -> list[str]:
    """MNIST ships with the kit, so its models must finish; others may report missing data."""
    return [f"{model}: search finished: True" if paper_model(model).dataset == "mnist"
            else f"{model}: search finished or reported missing data: True" for model in settings.models]


def _lines_06(settings: Any, absent: Collection[str]) -> list[str]:
    models = [m for m in NOTEBOOKS["06_experiment4_uncertainty"].parameters["models"]
              if paper_model(m).dataset not in absent]
    return ["every cell ran or reported missing data: True", f"MNIST cells with results: {sorted(models)}"]


# ----------------------------------------------------------------------------- the registry
NOTEBOOKS: dict[str, Notebook] = {entry.name: entry for entry in (
    Notebook("00_quickstart", quickstart, _quickstart_tasks,
             parameters={"dataset": "mnist", "model": "fcnn", "labelled_size": None, "mask_size": 0,
                         "step_size": 4e-6, "prior_precision": 10.0, "batch_size": 100, "student_dropout": 0.5},
             scaled_paper=SCALED_CHAIN),
    Notebook("01_experiment1", experiment12, _experiment1_tasks,
             parameters={"models": ["fcnn", "cnn_mnist", "cnn_cifar10"]}, scaled_paper=SCALED_CHAIN,
             verdicts=_lines_01),
    Notebook("02_experiment2_mnist", experiment12, _experiment2_tasks,
             parameters={"models": ["fcnn", "cnn_mnist"], "lr_check_models": ["fcnn"]}, scaled_paper=SCALED_CHAIN,
             verdicts=_lines_02),
    Notebook("03_experiment2_cifar10", experiment12, _cifar_tasks, scaled_paper=SCALED_CHAIN, verdicts=_lines_03),
    Notebook("04_figure3_masking"),
    # Experiment 3's fine-tuning: 600 epochs -> 0.3 with the lr halved every 0.1 epochs; latency 50 -> 2 repeats
    Notebook("05_experiment3_search", experiment3, _experiment3_tasks, after_chains="search",
             scaled_paper={**SCALED_CHAIN, "search.finetune_epochs": 0.3, "search.finetune_lr_halving_epochs": 0.1,
                           "search.latency_repeats": 2},
             stored=_search_gaps, verdicts=_lines_05, needs_chain_state=True),
    Notebook("06_experiment4_uncertainty", experiment4, _experiment4_tasks,
             parameters={"models": ["fcnn", "cnn_mnist", "cnn_cifar10"]}, scaled_paper=SCALED_CHAIN,
             stored=_experiment4_gaps, verdicts=_lines_06, needs_chain_state=True),
    # Hydra 20,000 + 60,000 -> 200 + 600 steps; the spiral's chain 100,000 -> 1,000 (B 100), its Hydra 50 + 200
    Notebook("07_hydra_comparison", comparison, _comparison_tasks, after_chains="hydra",
             scaled_paper={**SCALED_CHAIN, "hydra.phase1_steps": 200, "hydra.phase2_steps": 600,
                           "spiral.num_iterations": 1_000, "spiral.burn_in": 100, "spiral.hydra.phase1_steps": 50,
                           "spiral.hydra.phase2_steps": 200},
             stored=_comparison_gaps, needs_chain_state=True),
    # S = 10,000 -> 1,000 samples (burn-in 100) for both toys, M = 100, 500 SGD iterations per student
    Notebook("08_thesis_toys", thesis,
             scaled_paper={"mog.num_samples": 1_000, "mog.burn_in": 100, "mog.num_distill_samples": 100,
                           "logreg.num_samples": 1_000, "logreg.burn_in": 100, "logreg.num_iterations": 500},
             stored=_toy_gaps),
    Notebook("09_your_own_model"),
    # T = 1,101 with the paper's B = 1,000 kept: the warm-up candidate needs B >= its 1,000 warm-up steps
    Notebook("10_samplers", samplers, _sampler_tasks, scaled_paper={"num_iterations": 1_101, "test_size": 500}),
)}


def notebook(name: str) -> Notebook:
    """The entry of a notebook by its name (``"05_experiment3_search"``, with or without ``.ipynb``)
    or its number (``"05"``); ``ValueError`` lists the registered names."""
    stem = Path(name).stem if name.endswith(".ipynb") else name
    if stem in NOTEBOOKS:
        return NOTEBOOKS[stem]
    found = [entry for key, entry in NOTEBOOKS.items() if key.split("_", 1)[0] == stem]
    if len(found) == 1:
        return found[0]
    raise ValueError(f"notebook {name!r} is not registered; registered: {sorted(NOTEBOOKS)}")


__all__ = ["CHAIN_DATASETS", "Notebook", "NOTEBOOKS", "SCALED_CHAIN", "absent_datasets", "chain_gaps",
           "notebook"]
