"""The notebook registry (gped_kit.experiments.registry) agrees with notebooks/: every notebook is
registered, an entry's parameters are those of the notebook's parameters cell, its settings resolve
(with the scaled paper overrides of tests/test_paper_profile.py), its chains are built as the
notebook builds them, and the store check finds what is missing and nothing else."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path

import nbformat
import pandas as pd
import papermill
import pytest

from gped_kit.cli import store as store_cli
from gped_kit.experiments import experiment4, frame, units
from gped_kit.experiments.frame import Experiment, chain_gaps
from gped_kit.experiments.registry import NOTEBOOKS, notebook
from gped_kit.experiments.store import ResultsStore
from gped_kit.models.presets import ArchSpec

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
WITH_PROFILES = [e for e in NOTEBOOKS.values() if e.profiles]


def package_of(entry: Experiment) -> str:
    """The experiment package (or module) whose profiles the entry holds: ``"experiment1"``, ``"thesis"``, ..."""
    module = type(next(iter(entry.profiles.values()))).__module__
    return module.removeprefix("gped_kit.experiments.").split(".")[0]


def declared(entry: Experiment) -> dict[str, str]:
    """The notebook's parameters as papermill reads them: name -> default (source text)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: p["default"] for name, p in papermill.inspect_notebook(str(entry.path(NOTEBOOK_DIR))).items()}


def test_every_notebook_is_registered_and_every_entry_has_its_notebook():
    assert sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(NOTEBOOKS)
    assert notebook("05") is notebook("05_experiment3_search.ipynb") is NOTEBOOKS["05_experiment3_search"]
    with pytest.raises(ValueError, match="not registered; registered: "):
        notebook("99")


@pytest.mark.parametrize("entry", WITH_PROFILES, ids=lambda e: e.name)
def test_entry_agrees_with_the_parameters_cell(entry):
    params = declared(entry)
    assert "profile" in params
    # the chains' parameters have the parameters cell's defaults
    for name, default in entry.parameters.items():
        assert name in params, f"{entry.name} does not declare {name}"
        assert ast.literal_eval(params[name]) == default, f"{entry.name}: {name} = {params[name]}, registry {default}"
    # a declared setting takes the profile's value unless given: None, or Overrides() for a composed one
    fields = {f for f in entry.settings("default").__dataclass_fields__}
    for name in fields & set(params):
        assert params[name] in ("None", "Overrides()"), f"{entry.name}: {name} = {params[name]}"
    # and the notebook resolves its settings from its experiment package's profiles
    code = "\n".join(c.source for c in nbformat.read(str(entry.path(NOTEBOOK_DIR)), as_version=4).cells
                     if c.cell_type == "code")
    assert re.search(rf"from gped_kit\.experiments import [^\n]*\b{package_of(entry)}\b", code)
    assert ".PROFILES, profile, globals())" in code


@pytest.mark.parametrize("entry", WITH_PROFILES, ids=lambda e: e.name)
def test_profiles_resolve_and_give_chains(entry):
    for profile in ("default", "paper"):
        settings = entry.settings(profile)
        tasks = entry.chain_tasks(settings)
        assert (len(tasks) > 0) == (entry.tasks is not None)
        per_batch = entry.chains_per_batch(settings)
        assert per_batch == "auto" or per_batch >= 1
    scaled = entry.settings("paper", entry.scaled_paper)
    assert scaled != entry.settings("paper")
    for task in entry.chain_tasks(scaled):
        assert task.config.num_iterations in (101, 1_101, 1_000)  # the scaled chains (the spiral: 1,000)
    with pytest.raises(ValueError, match="is not a parameter of its chains"):
        entry.chain_tasks(entry.settings(), no_such_parameter=1)


def test_quickstart_chain_is_the_notebooks():
    """Notebook 00 builds its chain in its cells: executed here up to the task, it equals the registry's."""
    entry = NOTEBOOKS["00_quickstart"]
    nb = nbformat.read(str(entry.path(NOTEBOOK_DIR)), as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "injected-parameters" in cell.metadata.get("tags", []):
            continue
        exec(compile(cell.source, entry.name, "exec"), namespace)  # noqa: S102 -- the notebook's own code
        if "task" in namespace:
            break
    (task,) = entry.chain_tasks(entry.settings())
    assert namespace["task"] == task


def _store_chain(store: ResultsStore, key: str, rows: list[dict], code: str | None = None) -> None:
    """A complete chain entry with ``rows`` as its summary, made by ``code`` (default: this code's)."""
    entry = store.entry("chain", {"test": key}, code)
    entry.path.mkdir(parents=True)
    entry.write_table("summary", pd.DataFrame(rows))
    entry.finish()


#: The skill columns of the built-in targets' students (what a chain stores since every target reports skill).
SKILLS = {"skill": 0.5, "entropy_mae_skill": 0.5, "student_nll_skill": 0.5}


def _rows(task, students=None, steps=None, skill: bool = True) -> list[dict]:
    """A chain summary's rows as the engine writes them (:func:`gped_kit.engine.evaluate.config_columns`): the
    columns that tell chains apart, ``num_chains`` only for a pooled teacher, ``cycles`` only for a cyclical
    schedule and ``lr_warmup`` only on the rows of students that warm up."""
    sampler = task.config.sampler
    base = {"dataset": task.data.dataset, "model": task.config.model_name, "seed": task.config.seed,
            "num_iterations": task.config.num_iterations, "burn_in": task.config.burn_in,
            "eval_thinning": task.config.eval_thinning, "sampler": str(sampler.name),
            "schedule": str(sampler.schedule), "step_size": sampler.step_size,
            "prior_precision": sampler.prior_precision, "batch_size": sampler.batch_size,
            **({"num_chains": task.config.num_chains} if task.config.num_chains > 1 else {}),
            **({"cycles": sampler.cycles} if str(sampler.schedule) == "cyclical" else {}),
            "labelled_size": task.data.labelled_size or 60_000, "mask_size": task.data.mask_size,
            "steps_done": task.config.num_iterations if steps is None else steps, **(SKILLS if skill else {})}
    by_label = {s.label: s for s in task.students}
    return [{**base, **_student_columns(task, by_label[label]),
             **({"lr_warmup": by_label[label].lr_warmup} if by_label[label].lr_warmup else {})}
            for label in (students or list(by_label))]


def _student_columns(task, student) -> dict:
    """A student's columns of its summary row, as the engine writes them (its architecture, or the teacher's)."""
    arch = student.arch if student.arch is not None else task.config.model
    preset = arch if isinstance(arch, ArchSpec) else None
    return {"student": student.label, "target": student.resolved_target.name, "estimator": student.estimator.value,
            "student_arch": preset.family if preset else str(arch), "k1": preset.k1 if preset else float("nan"),
            "k2": preset.k2 if preset else float("nan"), "dropout": preset.dropout if preset else float("nan"),
            "thinning": student.thinning, "student_batch_size": student.batch_size, "lr": student.lr,
            "lr_halving_epochs": student.lr_halving_epochs, "reg_weight": student.reg_weight,
            "input_generator": student.input_generator.value, "derivative_weight": student.derivative_weight}


def test_chain_gaps_find_missing_partial_and_unexpected_chains(tmp_path):
    entry = NOTEBOOKS["01_experiment1"]
    settings = entry.settings("paper", frame.SCALED_CHAIN)
    fcnn, cnn, cifar = entry.chain_tasks(settings, estimator_ablation=False)
    store = ResultsStore(tmp_path)
    (ablation,) = entry.chain_tasks(settings)[3:]  # with the ablation (the notebook's default): one chain more
    assert len(entry.missing(store, settings, absent={"cifar10"})) == 3
    assert len(entry.missing(store, settings, absent={"cifar10"}, estimator_ablation=False)) == 2
    _store_chain(store, "ablation", _rows(ablation))
    _store_chain(store, "cnn-old-code", _rows(cnn), code="0" * 16)  # superseded by a re-keying: not read
    _store_chain(store, "fcnn", _rows(fcnn))
    _store_chain(store, "cnn-short", _rows(cnn, steps=50))  # interrupted: not complete
    _store_chain(store, "cnn-fewer", _rows(cnn, students=[s.label for s in cnn.students][:2]))
    (gap,) = chain_gaps(store, [fcnn, cnn, cifar], absent={"cifar10"})
    assert gap.startswith("cnn_mnist N=60000 m=0 seed=0: 0 complete chain entries")
    _store_chain(store, "cnn", _rows(cnn))
    assert entry.missing(store, settings, absent={"cifar10"}) == []
    _store_chain(store, "cifar", _rows(cifar))
    (gap,) = entry.missing(store, settings, absent={"cifar10"})
    assert "absent here, yet a chain is stored" in gap
    assert entry.missing(store, settings) == []  # CIFAR-10 present: its chain is expected and there


@pytest.mark.parametrize("setting", ["burn_in", "eval_thinning", "prior_precision", "batch_size"])
def test_a_chain_of_another_burn_in_thinning_prior_or_minibatch_is_not_the_tasks(tmp_path, setting):
    """A chain run with ``-p burn_in=...`` (or another evaluation thinning, prior precision or minibatch size) is
    another store entry: the store lists the task's chain as missing and its unit is not done."""
    entry = NOTEBOOKS["01_experiment1"]
    settings = entry.settings("paper", frame.SCALED_CHAIN)
    fcnn, *_ = entry.chain_tasks(settings, estimator_ablation=False)
    store = ResultsStore(tmp_path)
    other = {**_rows(fcnn)[0], setting: _rows(fcnn)[0][setting] * 2}
    _store_chain(store, "other", [{**row, setting: other[setting]} for row in _rows(fcnn)])
    (gap,) = chain_gaps(store, [fcnn])
    assert gap.startswith(f"{fcnn.label}: 0 complete chain entries")
    (unit,) = units.mark_done([units.WorkUnit("fcnn", "01_experiment1", "paper", (fcnn,), "Table 1")], store)
    assert unit.done == (False,)
    _store_chain(store, "the task's", _rows(fcnn))
    assert chain_gaps(store, [fcnn]) == []


@pytest.mark.parametrize(("column", "value"), [("lr", 3e-4), ("lr_halving_epochs", None), ("thinning", 7),
                                               ("student_batch_size", 50), ("dropout", 0.25),
                                               ("matmul_precision", "tf32")])
def test_a_chain_of_other_students_or_matmul_precision_is_not_the_tasks(tmp_path, column, value):
    """A chain whose students have the task's names but another learning rate, halving period (e.g. held
    constant), thinning H, minibatch size or dropout, or whose teacher ran in TF32, is not the task's chain: the
    store lists the task's as missing and its unit is not done."""
    entry = NOTEBOOKS["01_experiment1"]
    settings = entry.settings("paper", frame.SCALED_CHAIN)
    fcnn, *_ = entry.chain_tasks(settings, estimator_ablation=False)
    assert all(isinstance(s.arch, ArchSpec) for s in fcnn.students)  # so that the dropout column is compared
    store = ResultsStore(tmp_path)
    rows = _rows(fcnn)
    assert column == "matmul_precision" or all(row[column] != value for row in rows)
    _store_chain(store, "other", [{**row, column: value} if i == 0 else row for i, row in enumerate(rows)])
    (gap,) = chain_gaps(store, [fcnn])
    assert gap.startswith(f"{fcnn.label}: 0 complete chain entries")
    (unit,) = units.mark_done([units.WorkUnit("fcnn", "01_experiment1", "paper", (fcnn,), "Table 1")], store)
    assert unit.done == (False,)
    _store_chain(store, "the task's", rows)
    assert chain_gaps(store, [fcnn]) == []


def test_a_chain_stored_before_its_students_reported_skill_is_missing_and_not_done(tmp_path):
    """Its students cannot count as evidence (a student counts only where it is known to beat the best constant
    prediction): the store lists it as missing, a unit with it is not done, and a run computes it again."""
    entry = NOTEBOOKS["01_experiment1"]
    settings = entry.settings("paper", frame.SCALED_CHAIN)
    fcnn, *_ = entry.chain_tasks(settings, estimator_ablation=False)
    store = ResultsStore(tmp_path)
    _store_chain(store, "fcnn", _rows(fcnn, skill=False))
    (gap,) = chain_gaps(store, [fcnn])
    assert gap.startswith(f"{fcnn.label}: chain ") and "stored before its students reported skill" in gap
    assert "entropy_mae_skill, skill, student_nll_skill" in gap
    (unit,) = units.mark_done([units.WorkUnit("fcnn", "01_experiment1", "paper", (fcnn,), "Table 1")], store)
    assert unit.done == (False,)
    store.entries("chain")[0].set_aside()
    _store_chain(store, "fcnn again", _rows(fcnn))
    assert chain_gaps(store, [fcnn]) == []
    (unit,) = units.mark_done([units.WorkUnit("fcnn", "01_experiment1", "paper", (fcnn,), "Table 1")], store)
    assert unit.done == (True,)


def test_a_constant_and_a_cyclical_chain_of_one_seed_are_told_apart(tmp_path):
    """Notebook 10's one-chain and pooled candidates with a constant and with a cyclical step size share seed,
    length, sampler and students: a stored constant chain is not the cyclical candidate's, and a chain of a
    cyclical candidate stored before its students reported skill leaves only that candidate to be run."""
    entry = NOTEBOOKS["10_samplers"]
    settings = entry.settings("pooling", {"seeds": [0]})
    tasks = entry.chain_tasks(settings)
    by_label = {t.label: t for t in tasks}
    constant, cyclical = by_label["BAOA, one chain seed=0"], by_label["BAOA cyclical, one chain seed=0"]
    pooled = by_label["BAOA, 4 chains pooled seed=0"]
    pooled_cyclical = by_label["BAOA cyclical, 4 chains pooled seed=0"]
    assert frame._group(constant) != frame._group(cyclical) and frame._group(pooled) != frame._group(pooled_cyclical)
    store = ResultsStore(tmp_path)
    for i, task in enumerate(tasks):
        _store_chain(store, str(i), _rows(task, skill=task is not cyclical))
    (gap,) = chain_gaps(store, tasks)
    assert gap.startswith("BAOA cyclical, one chain seed=0: chain ") and "before its students reported skill" in gap
    marked = units.mark_done([units.WorkUnit(t.label, "10_samplers", "pooling", (t,), "samplers") for t in tasks],
                             store)
    assert [u.name for u in marked if not u.complete] == ["BAOA cyclical, one chain seed=0"]


def test_tasks_that_summaries_do_not_tell_apart_need_one_entry_each(tmp_path):
    entry = NOTEBOOKS["10_samplers"]
    settings = entry.settings("paper", entry.scaled_paper)
    tasks = entry.chain_tasks(settings)
    sgld = [t for t in tasks if str(t.config.sampler.name) == "sgld"]
    assert len(sgld) == 2  # the paper's SGLD and SGLD with a warm-up
    store = ResultsStore(tmp_path)
    for i, task in enumerate(tasks):
        _store_chain(store, str(i), _rows(task))
    assert entry.missing(store, settings) == []
    store.entries("chain")[0].set_aside()
    assert len(entry.missing(store, settings)) == 1


def test_derived_results_count_only_for_the_chain_they_were_derived_from(tmp_path):
    """Experiment 4's evaluations of one profile's chains do not stand in for another profile's: a derived
    entry counts for a task only when its record names that task's chain (and it was made by this code)."""
    entry = NOTEBOOKS["06_experiment4_uncertainty"]
    settings = entry.settings("paper", entry.scaled_paper)
    tasks = [t for t in entry.chain_tasks(settings) if t.data.dataset == "mnist"]
    store = ResultsStore(tmp_path)
    for task in tasks:
        _store_chain(store, task.label, _rows(task))
    expected = {t.label: len(t.students) + sum(s.resolved_target.has_temperature for s in t.students)
                * len(experiment4.ENDD_EVAL_TEMPERATURES) for t in tasks}

    def evaluate(chain: str, groups: int, code: str | None = None) -> None:
        derived = store.entry("experiment4", {"chain": {"test": chain}, "seed": 0},
                              code)
        derived.path.mkdir(parents=True)
        derived.write_table("downstream", pd.DataFrame({"method": [f"m{i}" for i in range(groups)],
                                                        "estimator": "U_s", "student": "s", "model": "x"}))
        derived.finish()

    first, second = tasks[0], tasks[1]
    assert len(entry.missing(store, settings, absent={"cifar10"})) == len(tasks)
    evaluate("another profile's chain", expected[second.label])  # a chain no task of these settings has
    evaluate(second.label, expected[second.label], code="0" * 16)  # superseded code
    evaluate(first.label, expected[first.label])
    gaps = entry.missing(store, settings, absent={"cifar10"})
    assert [g.split(":")[0] for g in gaps] == [f"experiment 4 {t.label}" for t in tasks[1:]]
    evaluate(second.label, expected[second.label] - 1)  # one student short
    assert f"experiment 4 {second.label}: {expected[second.label] - 1} evaluated" in \
        " ".join(entry.missing(store, settings, absent={"cifar10"}))


def test_store_missing_cli_names_what_a_profile_lacks_and_how_to_compute_it(tmp_path, capsys):
    entry = NOTEBOOKS["01_experiment1"]
    absent = frame.absent_datasets()
    tasks = [t for t in entry.chain_tasks(entry.settings("cpu30")) if t.data.dataset not in absent]
    store = ResultsStore(tmp_path)
    for task in tasks[1:]:
        _store_chain(store, task.label, _rows(task))
    assert store_cli.main(["missing", "01", "--profile", "cpu30", "--results", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "python -m gped_kit.cli.batch --profile cpu30 01_experiment1" in out
    assert f"    {tasks[0].label}: 0 complete chain entries" in out and tasks[1].label not in out
    _store_chain(store, tasks[0].label, _rows(tasks[0]))
    assert store_cli.missing_results(tmp_path, ["01"], ["cpu30"], absent) == {("01_experiment1", "cpu30"): []}
    assert store_cli.main(["missing", "01", "--profile", "cpu30", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("complete: all 1 notebook profiles")
    with pytest.raises(SystemExit):
        store_cli.main(["missing", "01", "--profile", "no_such_profile", "--results", str(tmp_path)])
    assert "notebook 01_experiment1 has the profiles" in capsys.readouterr().err
