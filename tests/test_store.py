"""The results store: keys from configuration records, atomic entries, locks shared by processes,
and chains run, resumed or reused through it."""

import dataclasses
import json
import multiprocessing
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from gped_kit.cli import store as store_cli
from gped_kit.cli.packs import store_state
from gped_kit.core.schema import key_of, record
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.engine.run import run_engine
from gped_kit.engine.spec import build_chain
from gped_kit.experiments import numerics
from gped_kit.experiments.chains import ChainTask, run_chains, skill_not_stored
from gped_kit.experiments.derived import DerivedTask, run_derived
from gped_kit.experiments.store import REKEY_PREFIX, ResultsStore


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
    assert status == Status.RAN and entry.complete and entry.meta["record"] == {"n": 1}
    assert entry.meta["machine"]["torch"] == torch.__version__
    again, status = store.cached("toy", {"n": 1}, "code1", lambda e: pytest.fail("must not recompute"))
    assert status == Status.REUSED and again.table("summary").equals(table)
    assert list(again.arrays()["z"]) == [0.0, 1.0, 2.0]
    other, _ = store.cached("toy", {"n": 1}, "code2", lambda e: e.write_table("summary", table.assign(a=0)))
    assert other.key != entry.key  # other code, other entry: the first one is still there
    assert len(store.entries("toy")) == 2 and len(store.load("summary", "toy")) == 4
    fresh, status = store.cached("toy", {"n": 1}, "code1", lambda e: e.write_table("summary", table.assign(a=5)),
                                 recompute=True)
    assert status == Status.RAN and list(fresh.table("summary")["a"]) == [5, 5]
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


def test_keys_follow_the_declared_numerics_versions_not_the_code(monkeypatch):
    """A key changes with its kind's numerics version and with the versions of the results it is derived
    from, and with nothing else of the code: bumping the chain's version re-keys chains and every kind
    derived from a chain, never the toys; bumping the search's re-keys searches only."""
    store = ResultsStore("unused")
    record = {"seed": 0}
    before = {kind: store.entry(kind, record).key for kind in numerics.KEYED_BY}
    versions = numerics.NUMERICS
    assert numerics.numerics_code("search") == f"chain={versions['chain']},search={versions['search']}"
    assert store.entry("chain", record).key == key_of({"kind": "chain", "record": record,
                                                       "code": numerics.numerics_code("chain")})
    monkeypatch.setattr(numerics, "NUMERICS", {**numerics.NUMERICS, "chain": numerics.NUMERICS["chain"] + 1})
    after = {kind: store.entry(kind, record).key for kind in numerics.KEYED_BY}
    assert {k for k in before if before[k] != after[k]} == {"chain", "search", "experiment4", "comparison", "spiral"}
    monkeypatch.setattr(numerics, "NUMERICS", {**numerics.NUMERICS, "search": numerics.NUMERICS["search"] + 1})
    assert {k for k in after if after[k] != store.entry(k, record).key} == {"search"}
    assert set(numerics.KEYED_BY) >= set(numerics.NUMERICS) and set(numerics.LEGACY_CODES) == set(numerics.KEYED_BY)
    for kind, parts in numerics.KEYED_BY.items():
        assert parts[-1] in numerics.NUMERICS and set(parts) <= set(numerics.NUMERICS), kind
    with pytest.raises(ValueError, match="kind='nope' is not a kind of stored result"):
        store.entry("nope", record)


def test_compact_arrays_never_store_a_finite_value_as_inf(tmp_path):
    """Floats are stored as float16, except an array with a finite value beyond its range (an EnD² student's
    alpha_0 of 1e6), which keeps its value in float32; infinities and NaNs stay what they were."""
    entry = ResultsStore(tmp_path).entry("chain", {"test": "arrays"})
    entry.path.mkdir(parents=True)
    entry.write_arrays({"small": torch.tensor([0.5, 2.0]), "large": torch.tensor([0.5, 1e6, float("inf")]),
                        "labels": torch.tensor([1, 2])})
    arrays = entry.arrays()
    assert arrays["small"].dtype == np.float16 and arrays["labels"].dtype.kind == "i"
    assert arrays["large"].dtype == np.float32 and arrays["large"][1] == 1e6 and np.isinf(arrays["large"][2])


def test_rekey_moves_legacy_entries_to_their_version_keys_without_recomputing(tmp_path, capsys):
    """``store rekey``: entries made by the legacy code fingerprints move to their version-1 keys with their
    files; a derived entry's tables name its chain's new key; entries of other code stay; a second run
    moves nothing; the moved entries are reused, not recomputed."""
    store = ResultsStore(tmp_path)
    chain = {"gped": {"seed": 0}}

    def make(kind: str, record: dict, code: str, table: pd.DataFrame) -> Path:
        with store.open(kind, record, code) as entry:
            entry.write_table("summary", table)
            entry.checkpoint.write_bytes(b"state")
            entry.finish(seconds=1.0)
        return entry.path

    old_chain = make("chain", chain, numerics.LEGACY_CODES["chain"], pd.DataFrame({"teacher_nll": [0.1234567891]}))
    make("search", {"chain": chain, "settings": {}}, numerics.LEGACY_CODES["search"],
         pd.DataFrame({"run_key": [old_chain.name], "student_nll": [0.5]}))
    other = make("chain", {"gped": {"seed": 1}}, "f" * 16, pd.DataFrame({"teacher_nll": [0.2]}))
    before = (old_chain / "summary.csv").read_bytes()
    assert store_cli.main(["rekey", "--results", str(tmp_path)]) == 0
    assert "chain: 1 entries of" in capsys.readouterr().out
    new_chain = store.entry("chain", chain)
    assert not old_chain.exists() and new_chain.complete and other.exists()
    assert (new_chain.path / "summary.csv").read_bytes() == before and new_chain.checkpoint.read_bytes() == b"state"
    meta = new_chain.meta
    assert meta["key"] == new_chain.key and meta["code"] == numerics.numerics_code("chain")
    assert meta["rekeyed_from"] == {"key": old_chain.name, "code": numerics.LEGACY_CODES["chain"]}
    search = store.entry("search", {"chain": chain, "settings": {}})
    assert search.complete and search.table("summary")["run_key"].tolist() == [new_chain.key]
    assert store_cli.rekey_store(tmp_path) == {kind: {} for kind in numerics.LEGACY_CODES}  # nothing left to move
    entry, status = store.cached("chain", chain, None, lambda e: pytest.fail("must not recompute"))
    assert status == Status.REUSED and entry.key == new_chain.key
    assert not [p for p in (tmp_path / "chain").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("meta_written", [False, True])
def test_a_rekey_interrupted_midway_is_hidden_from_readers_and_finished_by_the_next(tmp_path, meta_written):
    """A ``store rekey`` killed after moving an entry into its hidden folder (before or after rewriting its
    ``entry.json`` and tables) leaves no entry that readers list; the next ``rekey`` finishes that move."""
    store = ResultsStore(tmp_path)
    chain = {"gped": {"seed": 0}}
    legacy = {kind: numerics.LEGACY_CODES[kind] for kind in ("chain", "search")}
    with store.open("chain", chain, legacy["chain"]) as old_chain:
        old_chain.write_table("summary", pd.DataFrame({"teacher_nll": [0.25]}))
        old_chain.finish()
    with store.open("search", {"chain": chain, "settings": {}}, legacy["search"]) as old_search:
        old_search.write_table("summary", pd.DataFrame({"run_key": [old_chain.key], "student_nll": [0.5]}))
        old_search.finish()
    new_chain, new_search = store.entry("chain", chain), store.entry("search", {"chain": chain, "settings": {}})
    staging = old_search.path.with_name(f"{REKEY_PREFIX}{old_search.key}-abc123")
    old_search.path.rename(staging)  # the process dies here, or after the next step
    if meta_written:
        meta = json.loads((staging / "entry.json").read_text())
        meta.update(key=new_search.key, code=new_search.code,
                    rekeyed_from={"key": old_search.key, "code": old_search.code})
        (staging / "entry.json").write_text(json.dumps(meta))
    assert [e.name for e in store.entries()] == [f"chain/{old_chain.key}"]
    assert store.load("summary", "search").empty
    assert not [f for f in store_state(tmp_path) if REKEY_PREFIX in f]  # nor does a pack of the store carry it
    moved = store_cli.rekey_store(tmp_path)
    assert moved["chain"] == {old_chain.key: new_chain.key} and moved["search"] == {old_search.key: new_search.key}
    assert not staging.exists() and new_search.complete and new_search.meta["rekeyed_from"] == {
        "key": old_search.key, "code": legacy["search"]}
    assert new_search.table("summary")["run_key"].tolist() == [new_chain.key]
    assert sorted(e.name for e in store.entries()) == sorted([new_chain.name, new_search.name])
    assert store_cli.rekey_store(tmp_path) == {kind: {} for kind in numerics.LEGACY_CODES}


def test_committed_entries_are_keyed_by_this_checkouts_numerics():
    """Every committed entry's key is the one this checkout computes from its record and its kind's numerics
    code: the store a fresh clone reads is the one the notebooks ask for (a numerics version bumped without
    recomputing its results, or an entry moved by hand, fails here)."""
    store = ResultsStore(Path(__file__).resolve().parents[1] / "results")
    entries = store.entries()
    assert len(entries) > 50
    wrong = [f"{e.kind}/{e.key} (code {e.code})" for e in entries
             if e.code != numerics.numerics_code(e.kind) or store.entry(e.kind, e.record).key != e.key]
    assert not wrong, f"{len(wrong)} committed entries not keyed by this checkout's numerics, e.g. {wrong[:3]}"


def tiny_tasks(digits_data, seeds=(0, 1), steps=60):
    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=steps, burn_in=20,
                     eval_thinning=5, log_every=20, checkpoint_every=20, progress=False, device="cpu")
    students = (StudentConfig("predictive", "U_s", thinning=2), StudentConfig("entropy", "U_o", thinning=2))
    return [ChainTask(digits_data, dataclasses.replace(cfg, seed=s), students, keep_outputs=("test",), name=f"s{s}")
            for s in seeds]


def test_chains_run_then_reuse_compact_results_and_full_state(digits_data, tmp_path, monkeypatch, capsys):
    store = ResultsStore(tmp_path)
    first = run_chains(tiny_tasks(digits_data), store, progress=False)
    assert list(first.cells["status"]) == [Status.RAN, Status.RAN]
    second = run_chains(tiny_tasks(digits_data), store, progress=False)
    assert list(second.cells["status"]) == [Status.REUSED, Status.REUSED]
    cols = [c for c in first.table if c not in ("store_status", "elapsed_s", "iterations_per_s")]
    pd.testing.assert_frame_equal(first.table[cols], second.table[cols], check_dtype=False)
    torch.testing.assert_close(second.results[0].student_outputs["test"]["entropy-U_o"],
                               first.results[0].student_outputs["test"]["entropy-U_o"], rtol=1e-3, atol=1e-3)
    # the full state comes back from the checkpoint, without steps, and the stored entry stays as it was made
    for o in first.outcomes:  # as if made earlier, so that a rewrite within the same second shows too
        (o.entry.path / "entry.json").write_text(json.dumps({**o.entry.meta, "made": "2026-01-01 00:00:00"}))
    made = {p: p.read_bytes() for o in first.outcomes for p in sorted(o.entry.path.glob("*")) if p.suffix != ".pt"}
    state = run_chains(tiny_tasks(digits_data), store, progress=False, requires_state=True)
    assert list(state.cells["status"]) == [Status.REUSED, Status.REUSED] and state.results[0].student_params
    assert {p: p.read_bytes() for p in made} == made
    # without checkpoints (a fresh clone), full state means recomputing, with the same numbers
    for o in first.outcomes:
        o.entry.checkpoint.unlink()
    again = run_chains(tiny_tasks(digits_data), store, progress=False, requires_state=True)
    assert list(again.cells["status"]) == [Status.RAN, Status.RAN]
    assert again.table["teacher_nll"].tolist() == first.table["teacher_nll"].tolist()
    # ... and the stored tables are kept beside the new ones, not overwritten (another machine's draw may differ)
    kept = sorted(store.root.glob("chain/*.old-*"))
    assert len(kept) == 2 and all((k / "summary.csv").exists() for k in kept)
    assert "stored without its checkpoint, needed for its full state; computed again" in capsys.readouterr().err
    # another numerics version: other entries, computed afresh; the old ones stay
    monkeypatch.setattr(numerics, "NUMERICS", {**numerics.NUMERICS, "chain": numerics.NUMERICS["chain"] + 1})
    changed = run_chains(tiny_tasks(digits_data), store, progress=False)
    assert list(changed.cells["status"]) == [Status.RAN, Status.RAN] and len(store.entries("chain")) == 4


def test_a_chain_stored_without_its_students_skill_is_computed_again_and_the_stored_one_kept(digits_data, tmp_path,
                                                                                            capsys):
    """Its students cannot count as evidence: a run computes it again (the stored tables set aside, not
    overwritten), while ``executor="stored"`` still reads it as it is."""
    store = ResultsStore(tmp_path)
    (task,) = tiny_tasks(digits_data, seeds=(0,))
    first = run_chains([task], store, progress=False)
    entry = first.outcomes[0].entry
    assert skill_not_stored(task, entry) == ()
    old = entry.table("summary")
    stripped = old.drop(columns=[c for c in old.columns if c.endswith("skill")])
    entry.write_table("summary", stripped)  # as a chain stored before every target reported skill
    assert skill_not_stored(task, entry) == ("entropy_mae_skill", "skill", "student_nll_skill")
    stored = run_chains([task], store, progress=False, executor="stored")
    assert list(stored.cells["status"]) == [Status.REUSED] and "skill" not in stored.table
    derived = {}
    for name, chain in (("mine", entry.record), ("another's", {"another": "chain"})):
        derived[name] = store.entry("experiment4", {"chain": chain, "seed": 0})
        derived[name].path.mkdir(parents=True)
        derived[name].write_table("downstream", pd.DataFrame({"method": ["GPED"]}))
        derived[name].finish()
    again = run_chains([task], store, progress=False)
    assert list(again.cells["status"]) == [Status.RAN]
    err = capsys.readouterr().err
    assert "stored before its students reported skill (entropy_mae_skill, skill, student_nll_skill)" in err
    # what was derived from the old draw is set aside with it, to be derived again from the new one
    assert not derived["mine"].path.exists() and derived["another's"].complete
    (moved,) = store.root.glob("experiment4/*.old-*")
    assert f"the 1 results derived from it in experiment4/{moved.name}" in err
    (kept,) = store.root.glob("chain/*.old-*")
    pd.testing.assert_frame_equal(pd.read_csv(kept / "summary.csv"), stripped)
    assert again.table["skill"].notna().all() and again.table["teacher_nll"].tolist() == old["teacher_nll"].tolist()
    assert list(run_chains([task], store, progress=False).cells["status"]) == [Status.REUSED]


def test_a_complete_chain_computed_again_never_overwrites_the_stored_one(digits_data, tmp_path, capsys):
    """A complete chain with no checkpoint of its last step, asked for outputs it was stored without or for its
    full state beside an earlier slice's checkpoint, starts again from step 0 (another draw on another machine):
    the stored tables and what was derived from them are set aside first, and it says why."""
    store = ResultsStore(tmp_path)
    (task,) = tiny_tasks(digits_data, seeds=(0,))
    bare = dataclasses.replace(task, keep_outputs=())
    first = run_chains([bare], store, progress=False)
    entry = first.outcomes[0].entry
    derived = store.entry("experiment4", {"chain": entry.record, "seed": 0})
    derived.path.mkdir(parents=True)
    derived.write_table("downstream", pd.DataFrame({"method": ["GPED"]}))
    derived.finish()
    entry.checkpoint.unlink()  # a fresh clone: tables only
    entry.write_table("summary", entry.table("summary").assign(teacher_nll=12345.0))  # to tell the draws apart
    again = run_chains([task], store, progress=False)
    assert list(again.cells["status"]) == [Status.RAN] and again.table["teacher_nll"].iloc[0] < 100
    (kept,) = store.root.glob("chain/*.old-*")
    assert pd.read_csv(kept / "summary.csv")["teacher_nll"].iloc[0] == 12345.0
    assert not derived.path.exists() and len(list(store.root.glob("experiment4/*.old-*"))) == 1
    err = capsys.readouterr().err
    assert "stored without its checkpoint, needed for its outputs on test; computed again, the stored tables are " \
           f"kept in {kept.name}, and the 1 results derived from it in experiment4/" in err
    # an earlier slice's checkpoint beside the complete entry (packs leave a finished chain's last one out): its
    # full state is computed from step 0, not resumed into a draw of two machines
    spec = build_chain(digits_data, task.config, task.students)
    run_engine(GPEDEngine([spec]), [tmp_path / "slice.pt"], max_steps=20)
    entry.checkpoint.unlink()
    (tmp_path / "slice.pt").rename(entry.checkpoint)
    state = run_chains([task], store, progress=False, requires_state=True)
    assert list(state.cells["status"]) == [Status.RAN] and len(list(store.root.glob("chain/*.old-*"))) == 2
    assert "stored with a checkpoint of step 20, not its last, needed for its full state" in capsys.readouterr().err
    assert state.table["teacher_nll"].tolist() == again.table["teacher_nll"].tolist()


def test_the_same_chain_twice_in_a_grid_is_computed_once(digits_data, tmp_path):
    """Two tasks of one store entry (in one batch they would take its lock twice): the first computes it, the
    second is given its outcome; one that asks for outputs the first does not keep fails with the reason."""
    store = ResultsStore(tmp_path)
    (task,) = tiny_tasks(digits_data, seeds=(0,))
    twice = [task, dataclasses.replace(task, name="again")]
    grid = run_chains(twice, store, progress=False, chains_per_batch=2)
    assert list(grid.cells["status"]) == [Status.RAN, Status.REUSED]
    assert grid.table["teacher_nll"].nunique() == 1 and len(store.entries("chain")) == 1
    other = run_chains([dataclasses.replace(task, keep_outputs=()), task], ResultsStore(tmp_path / "other"),
                       progress=False, chains_per_batch=2)
    assert list(other.cells["status"]) == [Status.RAN, Status.FAILED]
    assert "are the same chain with other keep_outputs" in other.cells["error"].iloc[1]


def test_interrupted_chain_resumes_in_the_store_and_batches_equal_single_runs(digits_data, tmp_path):
    store = ResultsStore(tmp_path)
    tasks = tiny_tasks(digits_data, seeds=(0, 1, 2))
    spec = build_chain(digits_data, tasks[1].config, tasks[1].students)
    entry = store.entry("chain", spec.record())
    run_engine(GPEDEngine([spec]), [entry.checkpoint], max_steps=30)  # killed at step 30
    grid = run_chains(tasks, store, progress=False)
    assert list(grid.cells["status"]) == [Status.RAN, Status.RESUMED, Status.RAN]
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
    entry = store.entry("chain", spec.record())
    entry.path.mkdir(parents=True)
    entry.checkpoint.write_bytes(b"not a checkpoint")
    grid = run_chains([bad, tasks[1]], store, progress=False)
    cells = grid.cells.set_index("cell")
    assert cells.loc["diverging", "status"] == Status.FAILED and "SGLD diverged" in cells.loc["diverging", "error"]
    assert cells.loc["s1", "status"] == Status.FAILED and "cannot be read" in cells.loc["s1", "error"]
    assert entry.checkpoint.read_bytes() == b"not a checkpoint"  # kept for inspection
    with pytest.raises(RuntimeError, match="2 chain"):
        grid.raise_if_failed()


def _worker(args):
    root, seeds, tag = args
    torch.set_num_threads(1)
    from conftest import make_digits_data  # the test data, rebuilt in the worker

    grid = run_chains(tiny_tasks(make_digits_data(), seeds=seeds, steps=40), ResultsStore(root), progress=False)
    return tag, list(grid.cells["status"]), grid.table["teacher_nll"].tolist()


@pytest.mark.slow  # about 25 s: in make test-slow
def test_four_processes_share_one_store_without_losing_or_overwriting_entries(tmp_path):
    """Four processes ask for overlapping chains at once: each chain is computed exactly once, the
    others wait for its lock and reuse it, and every entry is complete and readable."""
    jobs = [(str(tmp_path), seeds, k) for k, seeds in enumerate([(0, 1), (1, 2), (2, 0), (0, 1, 2)])]
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        outputs = pool.map(_worker, jobs)
    statuses = [s for _, st, _ in outputs for s in st]
    assert statuses.count(Status.RAN) == 3 and statuses.count(Status.REUSED) == len(statuses) - 3
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
    assert [o.status for o in grid.outcomes] == [Status.REUSED, Status.NOT_STORED]
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
        assert [o.status for o in grid.outcomes] == [Status.NOT_STORED] and grid.failed.empty  # no lock timeout
    finally:
        holder.kill()
        holder.wait(10)


def test_stored_executor_derives_nothing(digits_data, tmp_path):
    """run_derived with executor="stored" reads a stored derived entry back and reports a missing one."""
    store = ResultsStore(tmp_path)
    first, second = tiny_tasks(digits_data)
    items = [DerivedTask(t, "probe", {"n": 1}, lambda e, result, data: e.write_table(
        "summary", pd.DataFrame({"steps": [result.steps_done]})), code="code") for t in (first, second)]
    assert [o.status for o in run_derived(items[:1], store)] == [Status.RAN]
    outcomes = run_derived(items, store, executor="stored")
    assert [o.status for o in outcomes] == [Status.REUSED, Status.NOT_STORED]
    assert outcomes[0].entry.table("summary")["steps"].tolist() == [60] and outcomes[1].entry is None
    assert len(store.entries("probe")) == 1 and len(store.entries("chain")) == 1  # the second chain never ran


def test_a_derived_entry_whose_chain_lacks_its_students_skill_is_derived_again_from_the_chain_computed_again(
        digits_data, tmp_path):
    """A stored search or comparison of a chain stored before its students reported skill is not read back: the
    chain is computed again (set aside with what was derived from it) and the entry derived again from the new
    draw; ``executor="stored"`` still reads the stored one."""
    store = ResultsStore(tmp_path)
    (task,) = tiny_tasks(digits_data, seeds=(0,))
    item = DerivedTask(task, "probe", {"n": 1}, lambda e, result, data: e.write_table(
        "summary", result.summary[[c for c in result.summary.columns if c in ("teacher_nll", "skill")]]),
        code="code")
    (first,) = run_derived([item], store)
    assert first.status == Status.RAN and "skill" in first.entry.table("summary")
    assert [o.status for o in run_derived([item], store)] == [Status.REUSED]
    chain = first.chain.entry
    chain.write_table("summary", chain.table("summary").drop(columns=["skill", "student_nll_skill",
                                                                      "entropy_mae_skill"]))
    first.entry.write_table("summary", first.entry.table("summary").drop(columns=["skill"]))
    (stored,) = run_derived([item], store, executor="stored")
    assert stored.status == Status.REUSED and "skill" not in stored.entry.table("summary")
    (again,) = run_derived([item], store, progress=False)
    assert again.status == Status.RAN and again.chain.status == Status.RAN
    assert "skill" in again.entry.table("summary") and "skill" in chain.table("summary")
    assert len(list(store.root.glob("probe/*.old-*"))) == 1 and len(list(store.root.glob("chain/*.old-*"))) == 1
    assert [o.status for o in run_derived([item], store)] == [Status.REUSED]


def test_stale_lists_complete_entries_under_another_code_and_refuses_unknown_kinds(tmp_path, capsys):
    store = ResultsStore(tmp_path)
    codes = {kind: numerics.numerics_code(kind) for kind in numerics.KEYED_BY}

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
    make("newkind", {"a": 1}, "3" * 16)                              # a kind the numerics do not know
    assert store_cli.stale_entries(tmp_path) == ([old, old_toy], ["newkind"])
    assert store_cli.main(["stale", "--results", str(tmp_path)]) == 1
    assert "newkind" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        store_cli.main(["stale", "--results", str(tmp_path / "absent")])


def test_every_kind_of_committed_result_has_its_numerics():
    kinds = {p.parent.parent.name for p in (Path(__file__).resolve().parents[1] / "results").glob("*/*/entry.json")}
    assert kinds and kinds <= set(numerics.KEYED_BY)
