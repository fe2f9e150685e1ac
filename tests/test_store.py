"""The results store: keys from configuration records, atomic entries, locks shared by processes,
and chains run, resumed or reused through it."""

import ast
import dataclasses
import json
import multiprocessing
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

import pandas as pd
import pytest
import torch

from gped_kit.cli import store as store_cli
from gped_kit.core.schema import key_of, record
from gped_kit.core.sgld import SGLDConfig
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.experiments import chains
from gped_kit.experiments import comparison as C
from gped_kit.experiments import experiment4 as E4
from gped_kit.experiments.chains import ChainTask, DerivedTask, run_chains, run_derived
from gped_kit.experiments.codetext import canonical_dump
from gped_kit.experiments.registry import RESULT_CODES
from gped_kit.experiments.store import NUMERICS, ResultsStore, code_fingerprint


@dataclass(frozen=True)
class Old:
    x: int = 1


@dataclass(frozen=True)
class New:  # Old with one more field
    x: int = 1
    y: float = 0.5


def test_a_field_added_with_a_default_changes_no_key():
    assert record(Old(x=3)) == record(New(x=3)) == {"x": 3}
    assert key_of(record(Old(x=3))) == key_of(record(New(x=3)))
    assert key_of(record(New(x=3, y=1.0))) != key_of(record(Old(x=3)))
    # the engine's configurations follow the same rule
    assert GPEDConfig().record() == {"model": {"family": "fcnn", "k1": 1.0, "k2": 1.0, "dropout": 0.0}}
    assert "progress" not in GPEDConfig(progress=False, device="cpu").record()
    assert StudentConfig().record() == {"target": "predictive"}


def test_entries_are_written_atomically_listed_and_set_aside_on_recompute(tmp_path):
    store = ResultsStore(tmp_path)
    table = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    entry, status = store.cached("toy", {"n": 1}, "code1", lambda e: (e.write_table("summary", table),
                                                                       e.write_arrays({"z": torch.arange(3.0)})))
    assert status == "ran" and entry.complete and entry.meta["record"] == {"n": 1}
    assert entry.meta["machine"]["torch"] == torch.__version__
    again, status = store.cached("toy", {"n": 1}, "code1", lambda e: pytest.fail("must not recompute"))
    assert status == "reused" and again.table("summary").equals(table)
    assert list(again.arrays()["z"]) == [0.0, 1.0, 2.0]
    other, _ = store.cached("toy", {"n": 1}, "code2", lambda e: e.write_table("summary", table.assign(a=0)))
    assert other.key != entry.key  # other code, other entry: the first one is still there
    assert len(store.entries("toy")) == 2 and len(store.load("summary", "toy")) == 4
    fresh, status = store.cached("toy", {"n": 1}, "code1", lambda e: e.write_table("summary", table.assign(a=5)),
                                 recompute=True)
    assert status == "ran" and list(fresh.table("summary")["a"]) == [5, 5]
    aside = [p for p in (tmp_path / "toy").iterdir() if ".old-" in p.name]
    assert len(aside) == 1 and pd.read_csv(aside[0] / "summary.csv").equals(table)  # nothing lost
    assert not list(tmp_path.rglob(".*.tmp"))
    with pytest.raises(KeyError, match="no table 'nope'"):
        fresh.table("nope")


def test_reading_the_current_results_gives_one_entry_per_setting(tmp_path):
    """A code change leaves the old entries in place: ``code=`` the current fingerprint reads, per
    setting, only the entry the current code made."""
    store = ResultsStore(tmp_path)
    for n in (1, 2):
        store.cached("toy", {"n": n}, "old",
                     lambda e, n=n: e.write_table("summary", pd.DataFrame({"n": [n], "v": [0]})))
    store.cached("toy", {"n": 1}, "new", lambda e: e.write_table("summary", pd.DataFrame({"n": [1], "v": [1]})))
    assert len(store.entries("toy")) == 3 and len(store.load("summary", "toy")) == 3
    current = store.load("summary", "toy", code="new")
    assert current[["n", "v"]].values.tolist() == [[1, 1]]  # setting n=1 once, the new code's; n=2 not yet redone
    assert [e.code for e in store.entries("toy", code="old")] == ["old", "old"]
    assert store.load("summary", "toy", code="none such").empty
    assert len(store.load("summary", "toy", code="old", where=lambda e: e.record == {"n": 2})) == 1


def test_code_fingerprint_follows_the_code_not_its_layout_or_profiles(tmp_path, monkeypatch):
    pkg = tmp_path / "fp_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))

    def fingerprint(source: str) -> str:
        (pkg / "a.py").write_text(source)
        code_fingerprint.cache_clear()
        return code_fingerprint("fp_pkg")

    first = fingerprint("x = 1\nPROFILES = {'default': 1}\n")
    assert fingerprint("x = 2\nPROFILES = {'default': 1}\n") != first  # the code changed
    assert fingerprint("x = 1  # a comment\n\nPROFILES = {'default': 1}\n") == first  # layout, comments
    assert fingerprint("x = 1\nPROFILES: dict = {'default': 1, 'long': 2}\n") == first  # a profile added
    assert fingerprint("x = 1\nPROFILE = {'default': 1}\n") != first  # only PROFILES is left out
    code_fingerprint.cache_clear()


ROOT = Path(__file__).resolve().parents[1]
#: Prints, for every .py file of the kit, its path and the SHA-256 of code_text, with codetext.py
#: loaded by path (it imports only the standard library, so any Python can run this).
CODE_TEXT_SCRIPT = """
import hashlib, importlib.util, sys
from pathlib import Path
root = Path(sys.argv[1])
spec = importlib.util.spec_from_file_location("codetext", root / "gped_kit/experiments/codetext.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
for f in sorted((root / "gped_kit").rglob("*.py")):
    print(f.relative_to(root).as_posix(), hashlib.sha256(module.code_text(f.read_text()).encode()).hexdigest())
"""


def other_pythons() -> dict[str, str]:
    """Interpreters of Python 3.11 or newer other than this one, by version: on PATH (python3.11,
    python3.12, ...) or installed by pyenv. The GPU machine runs Python 3.12."""
    candidates = [shutil.which(f"python3.{minor}") for minor in range(11, 15)]
    candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.*/bin/python3"))]
    found: dict[str, str] = {}
    for exe in filter(None, candidates):
        try:
            version = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                     capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if version and tuple(map(int, version.split("."))) >= (3, 11) and version != "%d.%d" % sys.version_info[:2]:
            found.setdefault(version, exe)
    return found


def test_code_text_is_python_3_11_ast_dump():
    """The fingerprint's text of every kit file is what Python 3.11's ast.dump writes (so entries
    stored before the version-independent dump keep their keys); checked where this is 3.11."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("ast.dump's text is 3.11's only on Python 3.11")
    for f in sorted((ROOT / "gped_kit").rglob("*.py")):
        tree = ast.parse(f.read_text())
        assert canonical_dump(tree) == ast.dump(tree), f


def test_code_fingerprint_is_the_same_on_every_python_version():
    """A chain computed on the GPU machine (Python 3.12) must be stored under the key this checkout
    looks up (its Python may be another): the code text of every kit file is the same on every
    installed Python 3.11+. (Python 3.12's ast.dump adds type_params=[], 3.13's leaves out empty
    fields: with ast.dump the fingerprints differed and the device's slices were never found.)"""
    pythons = other_pythons()
    if not pythons:
        pytest.skip("no other Python 3.11+ installed")
    here = subprocess.run([sys.executable, "-c", CODE_TEXT_SCRIPT, str(ROOT)], capture_output=True, text=True,
                          check=True).stdout
    assert len(here.splitlines()) > 50
    for version, exe in pythons.items():
        there = subprocess.run([exe, "-c", CODE_TEXT_SCRIPT, str(ROOT)], capture_output=True, text=True,
                               check=True, timeout=300).stdout
        differ = [a.split()[0] for a, b in zip(here.splitlines(), there.splitlines()) if a != b]
        assert there.count("\n") == here.count("\n") and not differ, f"Python {version} ({exe}): {differ[:5]}"


@pytest.mark.parametrize("package, modules, code", [
    ("gped_kit.experiments.experiment4", E4.EVALUATION_MODULES, E4.experiment4_code),
    ("gped_kit.experiments.comparison", C.COMPARISON_MODULES, C.comparison_code)])
def test_derived_fingerprints_cover_the_computation_and_not_the_analysis(package, modules, code):
    """Rewording a claim or laying out a table differently must re-key no stored result: the modules a
    derived entry's fingerprint covers import, from their own package, only each other and the tasks
    (whose choices are in the chain's record), never the analysis."""
    assert code() == code_fingerprint(*NUMERICS, *modules)
    assert f"{package}.analysis" not in modules and f"{package}.settings" in modules
    for name in modules:
        tree = ast.parse(Path(import_module(name).__file__).read_text())
        siblings = {f"{package}.{node.module}" for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
        assert siblings <= {*modules, f"{package}.tasks"}, (name, siblings)


def tiny_tasks(digits_data, seeds=(0, 1), steps=60):
    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=steps, burn_in=20,
                     eval_thinning=5, log_every=20, checkpoint_every=20, progress=False, device="cpu")
    students = (StudentConfig("predictive", "U_s", thinning=2), StudentConfig("entropy", "U_o", thinning=2))
    return [ChainTask(digits_data, dataclasses.replace(cfg, seed=s), students, keep_outputs=("test",), name=f"s{s}")
            for s in seeds]


def test_chains_run_then_reuse_compact_results_and_full_state(digits_data, tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    first = run_chains(tiny_tasks(digits_data), store, progress=False)
    assert list(first.cells["status"]) == ["ran", "ran"]
    second = run_chains(tiny_tasks(digits_data), store, progress=False)
    assert list(second.cells["status"]) == ["reused", "reused"]
    cols = [c for c in first.table if c not in ("store_status", "elapsed_s", "iterations_per_s")]
    pd.testing.assert_frame_equal(first.table[cols], second.table[cols], check_dtype=False)
    torch.testing.assert_close(second.results[0].student_outputs["test"]["entropy-U_o"],
                               first.results[0].student_outputs["test"]["entropy-U_o"], rtol=1e-3, atol=1e-3)
    # the full state comes back from the checkpoint, without steps
    state = run_chains(tiny_tasks(digits_data), store, progress=False, requires_state=True)
    assert list(state.cells["status"]) == ["reused", "reused"] and state.results[0].student_params
    # without checkpoints (a fresh clone), full state means recomputing, with the same numbers
    for o in first.outcomes:
        o.entry.checkpoint.unlink()
    again = run_chains(tiny_tasks(digits_data), store, progress=False, requires_state=True)
    assert list(again.cells["status"]) == ["ran", "ran"]
    assert again.table["teacher_nll"].tolist() == first.table["teacher_nll"].tolist()
    # other numerics code: other entries, computed afresh; the old ones stay
    monkeypatch.setattr(chains, "chain_code", lambda: "changed-code")
    changed = run_chains(tiny_tasks(digits_data), store, progress=False)
    assert list(changed.cells["status"]) == ["ran", "ran"] and len(store.entries("chain")) == 4


def test_interrupted_chain_resumes_in_the_store_and_batches_equal_single_runs(digits_data, tmp_path):
    store = ResultsStore(tmp_path)
    tasks = tiny_tasks(digits_data, seeds=(0, 1, 2))
    spec = build_chain(digits_data, tasks[1].config, tasks[1].students)
    entry = store.entry("chain", spec.record(), chains.chain_code())
    run_engine(GPEDEngine([spec]), [entry.checkpoint], max_steps=30)  # killed at step 30
    grid = run_chains(tasks, store, progress=False)
    assert list(grid.cells["status"]) == ["ran", "resumed", "ran"]
    alone = run_chains(tasks, ResultsStore(tmp_path / "other"), progress=False)
    assert grid.table["teacher_nll"].tolist() == alone.table["teacher_nll"].tolist()
    batched = run_chains(tasks, ResultsStore(tmp_path / "batched"), progress=False, chains_per_batch=3)
    assert batched.cells["batched"].all()
    torch.testing.assert_close(torch.tensor(batched.table["teacher_nll"].values),
                               torch.tensor(alone.table["teacher_nll"].values), rtol=1e-4, atol=1e-5)


def test_failures_and_corrupt_checkpoints_are_recorded_and_the_grid_goes_on(digits_data, tmp_path):
    store = ResultsStore(tmp_path)
    tasks = tiny_tasks(digits_data)
    bad = dataclasses.replace(tasks[0], config=dataclasses.replace(tasks[0].config, sampler=SGLDConfig(step_size=5.0,
                                                                                                     batch_size=50)),
                              name="diverging")
    spec = build_chain(digits_data, tasks[1].config, tasks[1].students)
    entry = store.entry("chain", spec.record(), chains.chain_code())
    entry.path.mkdir(parents=True)
    entry.checkpoint.write_bytes(b"not a checkpoint")
    grid = run_chains([bad, tasks[1]], store, progress=False)
    cells = grid.cells.set_index("cell")
    assert cells.loc["diverging", "status"] == "failed" and "SGLD diverged" in cells.loc["diverging", "error"]
    assert cells.loc["s1", "status"] == "failed" and "cannot be read" in cells.loc["s1", "error"]
    assert entry.checkpoint.read_bytes() == b"not a checkpoint"  # kept for inspection
    with pytest.raises(RuntimeError, match="2 chain"):
        grid.raise_if_failed()


def _worker(args):
    root, seeds, tag = args
    torch.set_num_threads(1)
    from conftest import make_digits_data  # the test data, rebuilt in the worker

    grid = run_chains(tiny_tasks(make_digits_data(), seeds=seeds, steps=40), ResultsStore(root), progress=False)
    return tag, list(grid.cells["status"]), grid.table["teacher_nll"].tolist()


def test_four_processes_share_one_store_without_losing_or_overwriting_entries(tmp_path):
    """Four processes ask for overlapping chains at once: each chain is computed exactly once, the
    others wait for its lock and reuse it, and every entry is complete and readable."""
    jobs = [(str(tmp_path), seeds, k) for k, seeds in enumerate([(0, 1), (1, 2), (2, 0), (0, 1, 2)])]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        outputs = pool.map(_worker, jobs)
    statuses = [s for _, st, _ in outputs for s in st]
    assert statuses.count("ran") == 3 and statuses.count("reused") == len(statuses) - 3
    store = ResultsStore(tmp_path)
    entries = store.entries("chain")
    assert len(entries) == 3 and all(e.complete for e in entries)
    nll = {}
    for _, _, values in outputs:
        for v in values:
            nll.setdefault(round(v, 12), 0)
    assert len(nll) == 3  # three chains, one value each, whichever process read it
    for e in entries:
        meta = json.loads((e.path / "entry.json").read_text())
        assert meta["complete"] and len(e.table("summary")) == 2
    assert not list(tmp_path.rglob(".*.tmp"))


def test_stored_executor_reads_back_what_is_stored_and_computes_nothing(digits_data, tmp_path):
    """executor="stored": stored chains are reused, missing ones reported "not stored", nothing runs."""
    store = ResultsStore(tmp_path)
    first, second = tiny_tasks(digits_data)
    run_chains([first], store, progress=False)
    grid = run_chains([first, second], store, progress=False, executor="stored")
    assert [o.status for o in grid.outcomes] == ["reused", "not stored"]
    assert grid.outcomes[1].result is None and not grid.outcomes[1].entry.path.exists()  # nothing started
    assert len(store.entries("chain")) == 1 and grid.failed.empty


def test_stored_executor_does_not_wait_for_a_chain_another_process_computes(digits_data, tmp_path):
    """A chain whose lock another process holds (it is computing it) reads as "not stored" at once: a
    notebook showing another profile's stored results never waits for that profile's running chains."""
    store = ResultsStore(tmp_path, lock_timeout=2)
    first, _ = tiny_tasks(digits_data)
    entry = run_chains([first], store, progress=False, executor="stored").outcomes[0].entry
    entry.path.parent.mkdir(parents=True, exist_ok=True)
    hold = ("import sys, time\nfrom filelock import FileLock\nlock = FileLock(sys.argv[1])\nlock.acquire()\n"
            "print('held', flush=True)\ntime.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", hold, str(entry.path.parent / f"{entry.key}.lock")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        grid = run_chains([first], store, progress=False, executor="stored")
        assert [o.status for o in grid.outcomes] == ["not stored"] and grid.failed.empty  # no lock timeout
    finally:
        holder.kill()
        holder.wait(10)


def test_stored_executor_derives_nothing(digits_data, tmp_path):
    """run_derived with executor="stored" reads a stored derived entry back and reports a missing one."""
    store = ResultsStore(tmp_path)
    first, second = tiny_tasks(digits_data)
    items = [DerivedTask(t, "probe", {"n": 1}, "code", lambda e, result, data: e.write_table(
        "summary", pd.DataFrame({"steps": [result.steps_done]}))) for t in (first, second)]
    assert [o.status for o in run_derived(items[:1], store)] == ["ran"]
    outcomes = run_derived(items, store, executor="stored")
    assert [o.status for o in outcomes] == ["reused", "not stored"]
    assert outcomes[0].entry.table("summary")["steps"].tolist() == [60] and outcomes[1].entry is None
    assert len(store.entries("probe")) == 1 and len(store.entries("chain")) == 1  # the second chain never ran


def test_stale_lists_complete_entries_under_another_code_and_refuses_unknown_kinds(tmp_path, capsys):
    store = ResultsStore(tmp_path)
    codes = {kind: code() for kind, code in RESULT_CODES.items()}

    def make(kind: str, record: dict, code: str, finish: bool = True) -> Path:
        with store.open(kind, record, code) as entry:
            entry.write_table("summary", pd.DataFrame({"x": [1.0]}))
            if finish:
                entry.finish(seconds=1.0)
        return entry.path

    make("chain", {"seed": 0}, codes["chain"])                       # current: kept
    old = make("chain", {"seed": 0}, "0" * 16)                       # the same record under older code
    make("chain", {"seed": 1}, "1" * 16, finish=False)               # in progress: never listed
    old_toy = make("toy", {"toy": "mog"}, "2" * 16)
    make("spiral", {"seed": 0}, codes["spiral"])
    assert store_cli.stale_entries(tmp_path) == ([old, old_toy], [])
    assert store_cli.main(["stale", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [old.as_posix(), old_toy.as_posix()]
    make("newkind", {"a": 1}, "3" * 16)                              # a kind the registry does not know
    assert store_cli.stale_entries(tmp_path) == ([old, old_toy], ["newkind"])
    assert store_cli.main(["stale", "--results", str(tmp_path)]) == 1
    assert "newkind" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        store_cli.main(["stale", "--results", str(tmp_path / "absent")])


def test_every_kind_of_committed_result_has_its_code_in_the_registry():
    kinds = {p.parent.parent.name for p in (Path(__file__).resolve().parents[1] / "results").glob("*/*/entry.json")}
    assert kinds and kinds <= set(RESULT_CODES)
