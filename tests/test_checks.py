"""Declared checks and their recorded outcomes: a statement filled for its cell with clear errors, an invariant's
value a bool, the writer printing the line nbval compares and recording the outcome, a run's outcomes replaced by
its latest execution, the batch runner naming an invariant that did not hold, and every notebook testing only
checks its experiment declares, each of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gped_kit.cli.batch import failed_invariants
from gped_kit.cli.executors import NotebookRun
from gped_kit.cli.report import checks_line
from gped_kit.experiments.artifacts import MANIFEST, read_manifest
from gped_kit.experiments.checks import Check, CheckOutcome, Role, declare_checks
from gped_kit.experiments.frame import Experiment
from gped_kit.experiments.registry import EXPERIMENTS
from gped_kit.viz.writer import ArtifactWriter

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"

FINISHED = Check("finished", "{model}: search finished")
BEATS = Check("beats", "{model}: a student beats the base ({metric})", Role.FINDING)
COUNT = Check("count", "frontier students below the grid", Role.FINDING)
DEMO = Experiment("98_demo", checks=declare_checks(FINISHED, BEATS, COUNT))


def test_a_statement_is_filled_for_its_cell_and_nothing_else():
    assert FINISHED.fields == ("model",)
    assert FINISHED.cell(model="fcnn") == "fcnn: search finished"
    assert BEATS.cell(model="fcnn", metric="NLL") == "fcnn: a student beats the base (NLL)"
    with pytest.raises(ValueError, match="is about \\['model'\\]; given \\[\\]"):
        FINISHED.cell()
    with pytest.raises(ValueError, match="given \\['model', 'seed'\\]"):
        FINISHED.cell(model="fcnn", seed=0)
    with pytest.raises(ValueError, match="must be an identifier"):
        Check("not a key", "x")
    with pytest.raises(ValueError, match="statement is empty"):
        Check("empty", " ")


def test_an_invariant_is_a_bool_and_a_finding_any_value():
    assert FINISHED.outcome(np.bool_(True), model="fcnn").value is True  # numpy's bool is a bool
    assert FINISHED.outcome(False, model="fcnn").failed
    assert not FINISHED.outcome(True, model="fcnn").failed
    with pytest.raises(ValueError, match="is an invariant: its value must be True or False, given 'yes'"):
        FINISHED.outcome("yes", model="fcnn")
    with pytest.raises(ValueError, match="given 1 \\(int\\)"):
        FINISHED.outcome(1, model="fcnn")
    found = COUNT.outcome("3 of 3")
    assert (found.value, found.line, found.failed) == ("3 of 3", "frontier students below the grid: 3 of 3", False)
    assert not BEATS.outcome(False, model="fcnn", metric="NLL").failed  # a finding either way
    rates = Check("rates", "masking rates", Role.FINDING).outcome({5: 0.032, 10: 0.128})
    assert rates.line == "masking rates: {5: 0.032, 10: 0.128}"  # printed as print() would
    assert rates.value == {"5": 0.032, "10": 0.128}  # recorded as JSON
    assert CheckOutcome.from_json(json.loads(json.dumps(rates.to_json()))) == rates


def test_declare_checks_refuses_a_key_or_a_statement_twice():
    with pytest.raises(ValueError, match="declared twice"):
        declare_checks(FINISHED, FINISHED)
    with pytest.raises(ValueError, match="have the same statement"):
        declare_checks(FINISHED, Check("other", FINISHED.statement))


def test_the_writer_prints_the_line_and_records_the_latest_execution(tmp_path, capsys):
    writer = ArtifactWriter(DEMO, "default", tmp_path, settings={"models": ["fcnn"]})
    writer.check("finished", True, model="fcnn")
    writer.check(BEATS, np.bool_(False), model="fcnn", metric="NLL")
    writer.check("count", "2 of 3")
    assert capsys.readouterr().out.splitlines() == ["fcnn: search finished: True",
                                                    "fcnn: a student beats the base (NLL): False",
                                                    "frontier students below the grid: 2 of 3"]
    manifest = read_manifest(tmp_path)
    assert [o.statement for o in manifest.outcomes("98_demo", "default")] == [
        "fcnn: a student beats the base (NLL)", "fcnn: search finished", "frontier students below the grid"]
    assert manifest.runs["98_demo/default"] == {"models": ["fcnn"]}
    assert manifest.failed_checks() == {}
    before = (tmp_path / MANIFEST).read_bytes()
    again = ArtifactWriter(DEMO, "default", tmp_path, settings={"models": ["fcnn"]})  # the notebook run again
    again.check("finished", True, model="fcnn")
    again.check(BEATS, False, model="fcnn", metric="NLL")
    again.check("count", "2 of 3")
    assert (tmp_path / MANIFEST).read_bytes() == before  # the same outcomes: the manifest is byte-identical
    later = ArtifactWriter(DEMO, "default", tmp_path)  # a later execution that records one check only
    later.check("finished", False, model="cnn_mnist")
    manifest = read_manifest(tmp_path)
    assert [o.line for o in manifest.outcomes("98_demo", "default")] == ["cnn_mnist: search finished: False"]
    assert [o.statement for o in manifest.failed_checks()["98_demo/default"]] == ["cnn_mnist: search finished"]
    ArtifactWriter(DEMO, "long", tmp_path).check("count", "1 of 3")  # another profile keeps its own
    assert len(read_manifest(tmp_path).outcomes("98_demo", "default")) == 1
    with pytest.raises(ValueError, match="declares no check 'nope'; declared: \\['beats', 'count', 'finished'\\]"):
        later.check("nope", True)


def test_the_batch_runner_names_an_invariant_that_did_not_hold(tmp_path):
    notebooks, figures = tmp_path / "notebooks", tmp_path / "figures"
    notebooks.mkdir()
    ArtifactWriter(DEMO, "long", figures).check("finished", False, model="fcnn")
    ArtifactWriter(DEMO, "default", figures).check("finished", True, model="fcnn")
    runs = [NotebookRun(notebooks / "98_demo.ipynb", {"profile": profile}, tmp_path / f"{profile}.ipynb")
            for profile in ("long", "default")]
    summary = pd.DataFrame({"status": ["ran", "ran"], "output_path": [str(r.output_path) for r in runs]})
    defaults = {"profile": '"default"', "figures_dir": '"../figures"'}  # as the parameters cell declares them
    assert failed_invariants(runs, summary, lambda path: defaults) == [
        "98_demo (long): invariant not holding: fcnn: search finished: False"]
    summary.loc[0, "status"] = "failed"  # a notebook that failed is reported as such, not by its checks
    assert failed_invariants(runs, summary, lambda path: defaults) == []


#: A check a notebook tests: ``writer.check("key"`` or ``writer.check("a" if ... else "b"``.
CHECK_CALL = re.compile(r'writer\.check\(\s*"(\w+)"(?:\s+if\s+[^"]+\s+else\s+"(\w+)")?')


@pytest.mark.parametrize("entry", [e for e in EXPERIMENTS if e.checks], ids=lambda e: e.name)
def test_every_notebook_tests_its_declared_checks_and_only_those(entry):
    cells = json.loads(entry.path(NOTEBOOK_DIR).read_text())["cells"]
    source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    used = {key for match in CHECK_CALL.findall(source) for key in match if key}
    assert used == set(entry.checks), f"{entry.name}: tests {sorted(used)}, declares {sorted(entry.checks)}"


def test_expected_checks_name_declared_checks():
    for entry in EXPERIMENTS:
        for profile in entry.profiles:
            settings = entry.settings(profile)
            for absent in ((), ("cifar10",)):
                expected = entry.expected_checks(settings, absent)
                statements = {c.statement for c in entry.checks.values()}
                for statement, value in expected.items():
                    assert any(re.fullmatch(re.sub(r"\\\{\w+(?::[^}]*)?\\\}", ".+", re.escape(s)), statement)
                               for s in statements), f"{entry.name}: {statement!r} is no declared check's"
                    assert isinstance(value, (bool, str))


def test_the_index_says_which_invariants_hold():
    held = [FINISHED.outcome(True, model="fcnn"), FINISHED.outcome(True, model="cnn_mnist"), COUNT.outcome("2 of 3")]
    assert checks_line(held) == ("Checks (default profile, its latest run): all 2 invariants hold; 1 finding.")
    assert checks_line(held[1:]) == "Checks (default profile, its latest run): 1 invariant, which holds; 1 finding."
    assert checks_line(held[2:]) == "Checks (default profile, its latest run): no invariants; 1 finding."
    broken = [FINISHED.outcome(False, model="fcnn"), BEATS.outcome(True, model="fcnn", metric="NLL"), COUNT.outcome(0)]
    assert checks_line(broken) == ("Checks (default profile, its latest run): 1 of 1 invariant do **not** hold: "
                                   "“fcnn: search finished: False”; 2 findings.")


def test_no_committed_run_records_an_invariant_that_does_not_hold():
    manifest = read_manifest(NOTEBOOK_DIR.parent / "figures")
    assert manifest.failed_checks() == {}
    for entry in EXPERIMENTS:  # every notebook's default run tested its checks when it was last executed
        recorded = {o.check for o in manifest.outcomes(entry.name, "default")}
        undeclared = recorded - set(entry.checks)
        assert not undeclared, f"{entry.name}: outcomes of undeclared checks {undeclared}"
        assert bool(recorded) == bool(entry.checks), f"{entry.name}: its default run recorded no check outcome"
