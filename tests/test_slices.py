"""Resumable slices (gped_kit.experiments.budget, gped_kit.cli.slices): a grid of chains stopped by
a budget at a checkpoint, packed, unpacked in a fresh folder and finished there gives bit for bit
the results of one uninterrupted run; packs are checked part by part and file by file.

The budget is spent deterministically: by steps, or by seconds read from a clock the test drives.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from gped_kit.cli import packs as P
from gped_kit.cli import slices as S
from gped_kit.cli import speedups as speedups_cli
from gped_kit.cli import units as units_cli
from gped_kit.cli.executors import LocalPapermillExecutor, NotebookRun, default_kernel_name
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.data.sources import DatasetNotFoundError, load_split
from gped_kit.engine import GPEDConfig, StudentConfig
from gped_kit.experiments.budget import Budget, BudgetReached
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.store import ResultsStore
from gped_kit.experiments.units import device_lock
from gped_kit.models.presets import ArchSpec

#: Columns that are wall-clock readings, equal between runs only by chance.
TIMING = ("elapsed_s", "iterations_per_s")


class Clock:
    """A clock the test sets."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------------------ the budget
def fake_engine(t: int, finished: bool = False) -> SimpleNamespace:
    return SimpleNamespace(t=t, finished=finished, resumed_from=None, K=1, num_runs=1)


def test_budget_in_seconds_stops_when_the_next_interval_would_pass_the_deadline():
    clock = Clock()
    budget = Budget(seconds=35, clock=clock)
    hook = budget.hook([None])
    for t, now in ((50, 10.0), (100, 20.0)):  # 25 s, then 15 s left: more than an interval (10 s)
        clock.now = now
        hook.on_checkpoint(fake_engine(t))
    assert budget.steps_done == 100 and budget.last_interval == 10.0 and not budget.spent()
    clock.now = 30.0  # 5 s left, less than the 10 s the last interval took
    with pytest.raises(BudgetReached, match="step 150") as stop:
        hook.on_checkpoint(fake_engine(150))
    assert stop.value.step == 150 and budget.spent()
    # the chain's last step is never a stop: it finishes and is stored
    Budget(seconds=0, clock=clock).hook([None]).on_checkpoint(fake_engine(200, finished=True))


def test_budget_in_steps_counts_iterations_from_where_the_batch_resumed():
    budget = Budget(steps=100)
    hook = budget.hook([None])
    resumed = SimpleNamespace(t=350, finished=False, resumed_from=300, K=1, num_runs=1)
    hook.on_checkpoint(resumed)  # 50 iterations computed here, not 350
    assert budget.steps_done == 50 and not budget.spent()
    with pytest.raises(BudgetReached):
        hook.on_checkpoint(SimpleNamespace(t=400, finished=False, resumed_from=300, K=1, num_runs=1))
    assert budget.steps_done == 100


def test_budget_rejects_bad_input():
    for kwargs, message in [({}, "give seconds, steps or both"), ({"seconds": -1}, "seconds=-1"),
                            ({"seconds": float("nan")}, "seconds=nan"), ({"steps": 1.5}, "steps=1.5"),
                            ({"steps": True}, "steps=True")]:
        with pytest.raises(ValueError, match=message):
            Budget(**kwargs)


# ------------------------------------------------------------------------------ pack / unpack
def write_store(root: Path) -> dict[str, bytes]:
    """A small store: an incomplete entry with a 3 MiB checkpoint-like file, a complete one."""
    rng = np.random.default_rng(0)
    files = {"chain/aaaa/checkpoint.pt": rng.bytes(3 * P.MIB),
             "chain/bbbb/summary.csv": b"a,b\n1,2\n",
             "chain/bbbb/entry.json": json.dumps({"complete": True}).encode()}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def test_pack_cuts_parts_and_unpack_restores_every_file(tmp_path):
    files = write_store(tmp_path / "a")
    order = P.changed_files(tmp_path / "a", {}, keep_final_checkpoints=False)
    assert order == ["chain/aaaa/checkpoint.pt", "chain/bbbb/summary.csv", "chain/bbbb/entry.json"]  # entry.json last
    manifest = P.pack(tmp_path / "a", order, tmp_path / "out", {"sequence": 3, "notebook": "x"}, part_bytes=P.MIB)
    meta = json.loads(manifest.read_text())
    assert manifest.name.startswith("slice-003-") and meta["notebook"] == "x" and len(meta["parts"]) == 4
    assert all(p["bytes"] <= P.MIB for p in meta["parts"])
    actions = P.unpack([tmp_path / "out"], tmp_path / "b")
    assert sorted(actions) == sorted((rel, "written") for rel in files)
    for rel, data in files.items():
        assert (tmp_path / "b" / rel).read_bytes() == data
    assert {a for _, a in P.unpack([tmp_path / "out"], tmp_path / "b")} == {"same"}


def test_unpack_refuses_damaged_or_missing_parts_and_pack_refuses_too_many(tmp_path):
    write_store(tmp_path / "a")
    order = P.changed_files(tmp_path / "a", {}, keep_final_checkpoints=False)
    with pytest.raises(P.PackError, match=r"over the limit of 3 files.*chain/aaaa/checkpoint.pt \(3.0 MiB\)"):
        P.pack(tmp_path / "a", order, tmp_path / "big", {}, part_bytes=P.MIB, max_files=3)
    assert list((tmp_path / "big").iterdir()) == []  # nothing half-written is left
    manifest = P.pack(tmp_path / "a", order, tmp_path / "out", {}, part_bytes=P.MIB)
    part = tmp_path / "out" / json.loads(manifest.read_text())["parts"][1]["name"]
    data = bytearray(part.read_bytes())
    data[100] ^= 1
    part.write_bytes(bytes(data))
    with pytest.raises(P.PackError, match=rf"part {part.name} is damaged"):
        P.unpack([tmp_path / "out"], tmp_path / "b")
    part.unlink()
    with pytest.raises(P.PackError, match=rf"part {part.name} is missing; bring all 4 parts"):
        P.unpack([manifest], tmp_path / "b")
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").rglob("*.pt"))


def test_unpack_keeps_complete_entries_and_further_checkpoints(tmp_path):
    src, dst = tmp_path / "a", tmp_path / "b"
    for root, t in ((src, 100), (dst, 150)):  # the store here is further on than the pack
        (root / "chain" / "cccc").mkdir(parents=True)
        torch.save({"format": 2, "t": t}, root / "chain" / "cccc" / "checkpoint.pt")
    write_store(src)
    (dst / "chain" / "bbbb").mkdir(parents=True)
    (dst / "chain" / "bbbb" / "summary.csv").write_text("a,b\n9,9\n")
    (dst / "chain" / "bbbb" / "entry.json").write_text(json.dumps({"complete": True}))
    P.pack(src, P.changed_files(src, {}, keep_final_checkpoints=False), tmp_path / "out", {})
    actions = dict(P.unpack([tmp_path / "out"], dst))
    assert actions["chain/cccc/checkpoint.pt"] == "kept (the store's checkpoint is further on)"
    assert actions["chain/bbbb/summary.csv"] == "kept (the store's entry is complete)"
    assert actions["chain/aaaa/checkpoint.pt"] == "written"
    assert (dst / "chain" / "bbbb" / "summary.csv").read_text() == "a,b\n9,9\n"
    actions = dict(P.unpack([tmp_path / "out"], dst, overwrite=True))
    assert actions["chain/bbbb/summary.csv"] == "replaced"
    assert sorted(a for a in actions.values() if a == P.SET_ASIDE) == [P.SET_ASIDE] * 2  # bbbb and cccc, whole


def fake_entry(root: Path, key: str, files: dict[str, bytes], complete: bool = True) -> Path:
    """A chain entry ``chain/<key>`` of the store at ``root`` with ``files`` (and entry.json when ``complete``)."""
    path = root / "chain" / key
    path.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (path / name).write_bytes(data)
    if complete:
        (path / "entry.json").write_text(json.dumps({"complete": True, "made": key + str(sorted(files))}))
    return path


def pack_of(root: Path, out: Path) -> Path:
    """Pack every file of the store at ``root`` into ``out``."""
    return P.pack(root, P.changed_files(root, {}, keep_final_checkpoints=True), out, {"sequence": 1})


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but locks, by relative path."""
    return {f.relative_to(folder).as_posix(): f.read_bytes() for f in sorted(folder.rglob("*"))
            if f.is_file() and f.suffix != ".lock"}


def test_unpack_keeps_a_complete_entry_whole_and_adds_none_of_the_packs_files(tmp_path):
    """Another draw's pack (its own summary and arrays) unpacked into a store that has the entry complete without
    arrays: nothing of it is written, so two draws never mix in one entry."""
    fake_entry(tmp_path / "other", "bbbb", {"summary.csv": b"nll\n999\n", "arrays.npz": b"draw 2"})
    fake_entry(tmp_path / "other", "eeee", {"summary.csv": b"nll\n1\n"})
    pack_of(tmp_path / "other", tmp_path / "out")
    store = fake_entry(tmp_path / "store", "bbbb", {"summary.csv": b"nll\n2\n"}).parents[1]
    before = files_of(store)
    actions = dict(P.unpack([tmp_path / "out"], store))
    assert {rel: a for rel, a in actions.items() if rel.startswith("chain/bbbb/")} == {
        f"chain/bbbb/{name}": P.KEPT_COMPLETE for name in ("arrays.npz", "summary.csv", "entry.json")}
    assert actions["chain/eeee/summary.csv"] == "written"  # an entry the store lacks is placed
    assert {rel: data for rel, data in files_of(store).items() if "bbbb" in rel} == before
    assert not list(store.rglob("*.tmp"))


def test_unpack_overwrite_sets_the_stores_entry_aside_whole(tmp_path, capsys):
    """``--overwrite``: the store's complete entry is set aside as ``<key>.old-<time>-<id>`` (the store's own
    naming) with every file it had, and the pack's entry takes its place alone (no file of the old draw left)."""
    fake_entry(tmp_path / "other", "bbbb", {"summary.csv": b"nll\n999\n", "arrays.npz": b"draw 2"})
    pack_of(tmp_path / "other", tmp_path / "out")
    store = fake_entry(tmp_path / "store", "bbbb", {"summary.csv": b"nll\n2\n", "calibration.csv": b"c\n"}).parents[1]
    old_files = files_of(store / "chain" / "bbbb")
    assert S.main(["unpack", str(tmp_path / "out"), "--results", str(store), "--overwrite"]) == 0
    out = capsys.readouterr().out
    (old,) = (store / "chain").glob("bbbb.old-*")
    assert f"the store's entry chain/bbbb set aside as chain/{old.name}" in out and "1 set aside" in out
    assert files_of(old) == old_files
    assert files_of(store / "chain" / "bbbb") == files_of(tmp_path / "other" / "chain" / "bbbb")
    # the same pack again: the same entry, nothing set aside twice
    assert {a for _, a in P.unpack([tmp_path / "out"], store, overwrite=True)} == {P.SAME}
    assert len(list((store / "chain").glob("bbbb.old-*"))) == 1


#: Another process computing an entry: holds its lock until the file ``argv[2]`` appears.
HOLDER = """import pathlib, sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
while not pathlib.Path(sys.argv[2]).exists():
    time.sleep(0.05)
time.sleep(0.3)
lock.release()
"""


def test_unpack_holds_the_entry_lock_and_waits_for_another_process(tmp_path, capsys):
    """An entry another process computes (it holds ``<kind>/<key>.lock``, as the store's writers do) is not
    written under it: unpack waits for the lock, or times out naming it with nothing of that entry written."""
    fake_entry(tmp_path / "other", "bbbb", {"summary.csv": b"nll\n1\n"})
    pack_of(tmp_path / "other", tmp_path / "out")
    store = tmp_path / "store"
    (store / "chain" / "bbbb").mkdir(parents=True)  # being computed: incomplete
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store / "chain" / "bbbb.lock"), str(tmp_path / "go")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(P.PackError, match=r"chain/bbbb: another process still holds its lock .*bbbb\.lock"):
            P.unpack([tmp_path / "out"], store, lock_timeout=0.2)
        assert files_of(store) == {}  # nothing placed, nothing staged left
        (tmp_path / "go").touch()  # the other process finishes in 0.3 s
        actions = P.unpack([tmp_path / "out"], store)  # waits for it
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
    assert "waiting for chain/bbbb: another process holds its lock" in capsys.readouterr().err
    assert actions == [("chain/bbbb/summary.csv", "written"), ("chain/bbbb/entry.json", "written")]


@pytest.mark.parametrize("command", ["units", "speedups"])
def test_a_run_refused_its_device_unpacks_nothing(command, tmp_path, monkeypatch, capsys):
    """``units run --resume`` / ``speedups --resume`` take the device's lock before they unpack: a second run on a
    device is refused at once, without waiting for entry locks or writing into the store."""
    fake_entry(tmp_path / "other", "bbbb", {"summary.csv": b"nll\n1\n"})
    pack_of(tmp_path / "other", tmp_path / "out")
    monkeypatch.setattr(speedups_cli, "speedup_tasks", lambda *a, **k: None)
    monkeypatch.setattr(units_cli, "paper_units", lambda *a, **k: pytest.fail("work started"))
    common = ["--device", "cpu", "--lock-dir", str(tmp_path), "--results", str(tmp_path / "store"),
              "--resume", str(tmp_path / "out")]
    with device_lock("cpu", tmp_path):
        if command == "units":
            assert units_cli.main(["run", "--budget-s", "10", *common]) == 1
        else:
            assert speedups_cli.main(["tf32", *common]) == 1
    assert "another `units run` holds cpu" in capsys.readouterr().err
    assert not (tmp_path / "store").exists() or files_of(tmp_path / "store") == {}


def hand_pack(out: Path, members: dict[str, bytes]) -> Path:
    """A pack written by hand (not by :func:`P.pack`): members of any name."""
    out.mkdir(parents=True)
    buffer, rows = io.BytesIO(), []
    with gzip.GzipFile(fileobj=buffer, mode="wb") as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            rows.append({"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    data = buffer.getvalue()
    (out / "slice-001-x.tar.gz.000").write_bytes(data)
    part = {"name": "slice-001-x.tar.gz.000", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    manifest = {"format": P.PACK_FORMAT, "kind": "gped-kit slice", "sequence": 1, "files": rows, "parts": [part]}
    (out / "slice-001-x.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("name", [".", "./x", "chain/../x", "chain/k/../../x", "chain/k.lock", "chain/k.old-1/x"])
def test_unpack_refuses_a_member_outside_the_store_before_writing_anything(name, tmp_path):
    out = hand_pack(tmp_path / "pack", {"chain/k/fine.csv": b"a\n", name: b"x"})
    store = tmp_path / "deep" / "store"
    store.parent.mkdir()
    with pytest.raises(P.PackError, match=re.escape(f"file {name!r} is not one a pack holds")):
        P.unpack([out], store)
    assert not store.exists() and os.listdir(tmp_path / "deep") == []  # nothing written, not even beside the store


def test_unpack_and_resume_refuse_a_missing_source_or_a_foreign_file_in_one_line(tmp_path, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exit_:
        S.main(["unpack", str(tmp_path / "absent"), "--results", str(tmp_path / "store")])
    assert exit_.value.code == 2
    assert f"sources: '{tmp_path / 'absent'}' does not exist; give folders of packs" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("garbage")
    assert S.main(["unpack", str(tmp_path / "bad.json"), "--results", str(tmp_path / "store")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {tmp_path / 'bad.json'} is not a slice manifest (slice-*.json) of " \
        "format 1: Expecting value" in err
    monkeypatch.setattr(units_cli, "paper_units", lambda *a, **k: pytest.fail("work started"))
    assert units_cli.main(["run", "--budget-s", "10", "--resume", str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --resume {tmp_path / 'bad.json'}: {tmp_path / 'bad.json'} is not a slice manifest")
    assert not (tmp_path / "store").exists()


def test_changed_files_leaves_out_final_checkpoints_unless_asked(tmp_path):
    root = tmp_path / "s"
    write_store(root)
    before = P.store_state(root)
    (root / "chain" / "bbbb" / "checkpoint.pt").write_bytes(b"final")  # beside a complete entry
    (root / "chain" / "dddd").mkdir()
    (root / "chain" / "dddd.lock").write_bytes(b"")
    (root / "chain" / "dddd" / ".x.tmp").write_bytes(b"")
    (root / "chain" / "dddd" / "checkpoint.pt").write_bytes(b"running")
    assert P.changed_files(root, before, keep_final_checkpoints=False) == ["chain/dddd/checkpoint.pt"]
    assert P.changed_files(root, before, keep_final_checkpoints=True) == ["chain/bbbb/checkpoint.pt",
                                                                          "chain/dddd/checkpoint.pt"]


# ------------------------------------------------------------------------------ two slices == one run
def digits_tasks(data) -> list[ChainTask]:
    students = (StudentConfig("predictive", thinning=3, arch=ArchSpec("fcnn", dropout=0.5)),
                StudentConfig("entropy", "U_o", thinning=5))
    base = dict(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=120, burn_in=40,
                eval_thinning=10, log_every=20, checkpoint_every=20, progress=False, device="cpu")
    return [ChainTask(data, GPEDConfig(**base, seed=s), students, keep_outputs=("test",), name=f"seed {s}")
            for s in (0, 1, 2)]


def stored(root: Path) -> dict[str, dict]:
    """Every complete chain entry's tables and arrays, by key."""
    out = {}
    for entry in ResultsStore(root).entries("chain"):
        tables = {name: entry.table(name).drop(columns=[c for c in TIMING if c in entry.table(name)])
                  for name in ("summary", "history")}
        out[entry.key] = {**tables, "arrays": entry.arrays()}
    return out


def assert_same_results(a: dict[str, dict], b: dict[str, dict], arrays: bool = True) -> None:
    """The same entries with equal tables (timings aside) and equal arrays (which must exist when ``arrays``)."""
    assert sorted(a) == sorted(b) and a
    for key in a:
        for name in ("summary", "history"):
            pd.testing.assert_frame_equal(a[key][name], b[key][name], check_exact=True)
        assert sorted(a[key]["arrays"]) == sorted(b[key]["arrays"]) and (a[key]["arrays"] or not arrays)
        for name, value in a[key]["arrays"].items():
            assert np.array_equal(value, b[key]["arrays"][name]), (key, name)


def test_two_slices_in_fresh_folders_equal_one_uninterrupted_run(digits_data, tmp_path):
    tasks = digits_tasks(digits_data)
    whole = run_chains(tasks, ResultsStore(tmp_path / "whole"), chains_per_batch=2, progress=False)
    assert list(whole.cells["status"]) == [Status.RAN] * 3
    # slice 1 on "machine A": the first batch (seeds 0, 1) stops at step 40, the second is not reached
    store_a = ResultsStore(tmp_path / "a")
    before = P.store_state(store_a.root)
    first = run_chains(tasks, store_a, chains_per_batch=2, progress=False, budget=Budget(steps=30))
    assert list(first.cells["status"]) == [Status.STOPPED, Status.STOPPED, Status.NOT_STARTED]
    assert "stopped at step 40" in first.cells["error"].iloc[0]
    files = P.changed_files(store_a.root, before, keep_final_checkpoints=False)
    assert len(files) == 2 and all(f.endswith("checkpoint.pt") for f in files)
    P.pack(store_a.root, files, tmp_path / "pack1", {"sequence": 1})
    # slice 2 on "machine B": a fresh folder with the pack unpacked; a deadline the test's clock keeps far away
    store_b = ResultsStore(tmp_path / "b")
    P.unpack([tmp_path / "pack1"], store_b.root)
    second = run_chains(tasks, store_b, chains_per_batch=2, progress=False, budget=Budget(seconds=60, clock=Clock()))
    assert list(second.cells["status"]) == [Status.RESUMED, Status.RESUMED, Status.RAN]
    assert_same_results(stored(store_b.root), stored(tmp_path / "whole"))


def test_a_deterministic_slice_sets_cudnn_for_its_chains_only_and_says_so(digits_data, tmp_path, monkeypatch):
    (task,) = digits_tasks(digits_data)[:1]
    monkeypatch.setattr(S, "notebook_chain_tasks", lambda *args: SimpleNamespace(
        notebook="digits", needs_state=False, groups=[SimpleNamespace(tasks=[task], chains_per_batch=1)]))
    seen, run = [], S.run_chains

    def watched(*args, **kwargs):
        seen.append((torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark))
        return run(*args, **kwargs)

    monkeypatch.setattr(S, "run_chains", watched)
    before = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    for deterministic in (True, False):
        report = S.run_slice("digits", "default", {}, tmp_path / f"store-{deterministic}",
                             tmp_path / f"out-{deterministic}", max_steps=1_000, progress=False,
                             deterministic=deterministic)
        assert json.loads(report.manifest.read_text())["deterministic"] is deterministic
        assert (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark) == before  # restored
    assert seen == [(True, False), before]


def test_a_slice_with_chains_missing_data_is_not_done_and_exits_3(digits_data, tmp_path, monkeypatch, capsys):
    """A chain whose data set is absent never finishes: the slice says how many were skipped and why, does not
    call the notebook done (the log's line the loop of docs/gpu.md waits for, the manifest's ``complete``), and
    exits with status 3."""
    cifar = {"dataset": "cifar10", "model": "cnn_cifar10", "data_root": str(tmp_path / "empty")}
    (missing,) = S.notebook_chain_tasks("00_quickstart", "default", cifar).tasks

    def run(notebook: str, out: str, *extra: str) -> int:
        return S.main(["run", notebook, "--max-steps", "1000", "--results", str(tmp_path / "store"),
                       "--out", str(tmp_path / out), *extra])

    assert run("00_quickstart", "out0", *(a for k, v in cifar.items() for a in ("-p", f"{k}={v}"))) == 3
    assert S.MISSING_DATA_EXIT == 3
    out = capsys.readouterr().out
    assert "every chain of the notebook is done" not in out and "chain(s) left" not in out
    assert "1 chain(s) skipped for missing data (data set 'cifar10' (train) not found)" in out
    # beside a chain that finishes: the pack's manifest is not complete either
    (task,) = digits_tasks(digits_data)[:1]
    monkeypatch.setattr(S, "notebook_chain_tasks", lambda *args: S.NotebookChains(
        "digits", (S.ChainGroup((task, missing)),)))
    assert run("digits", "out1") == 3
    out = capsys.readouterr().out
    assert "every chain of the notebook is done" not in out and "1 chain(s) skipped for missing data" in out
    (manifest,) = (tmp_path / "out1").glob("slice-*.json")
    info = json.loads(manifest.read_text())
    assert info["complete"] is False and [c["status"] for c in info["cells"]] == [Status.RAN, Status.MISSING_DATA]
    # once every chain finished, the slice is done and exits 0
    monkeypatch.setattr(S, "notebook_chain_tasks", lambda *args: S.NotebookChains("digits", (S.ChainGroup((task,)),)))
    assert run("digits", "out2") == 0
    assert "every chain of the notebook is done" in capsys.readouterr().out


def test_a_budget_needs_the_local_executor(digits_data, tmp_path):
    with pytest.raises(ValueError, match="executor='local'"):
        run_chains(digits_tasks(digits_data)[:1], ResultsStore(tmp_path), budget=Budget(steps=1), executor="ray")


# ------------------------------------------------------------------------------ a notebook's chains
NOTEBOOK01 = {"num_iterations": 201, "burn_in": 100, "log_every": 50, "checkpoint_every": 50,
              "models": ["fcnn", "cnn_mnist"]}


def test_notebook_chain_tasks_are_the_notebooks_and_bad_parameters_are_named():
    chains = S.notebook_chain_tasks("01_experiment1", "paper", NOTEBOOK01)
    assert [t.label for t in chains.tasks] == ["fcnn N=60000 m=0 seed=0", "cnn_mnist N=60000 m=0 seed=0",
                                               "U_s vs U_o ablation fcnn seed=0"]
    assert chains.tasks[0].config.num_iterations == 201 and chains.groups[0].chains_per_batch == "auto"
    # the paper profile's U_s - U_o ablation: Table 1's FCNN teacher at the profile's length, four students at its H
    ablation = chains.tasks[2]
    assert ablation.config == chains.tasks[0].config and ablation.data == chains.tasks[0].data  # the same teacher
    assert sorted(s.label for s in ablation.students) == sorted(
        f"predictive-{u}-H100-{schedule}" for u in ("U_s", "U_o") for schedule in ("constant", "annealed"))
    without = S.notebook_chain_tasks("01_experiment1", "paper", {**NOTEBOOK01, "estimator_ablation": False})
    assert [t.label for t in without.tasks] == [t.label for t in chains.tasks[:2]]
    assert not chains.needs_state
    grid = S.notebook_chain_tasks("02_experiment2_mnist", "paper", {})
    assert len(grid.tasks) == 48 and grid.groups[0].chains_per_batch == "auto"  # the paper profile: no schedule check
    assert S.notebook_chain_tasks("05_experiment3_search", "default", {}).needs_state
    with pytest.raises(ValueError, match=r"no parameter\(s\) \['num_iteration'\]"):
        S.notebook_chain_tasks("01_experiment1", "paper", {"num_iteration": 5})
    with pytest.raises(ValueError, match="has no chains to slice"):
        S.notebook_chain_tasks("04_figure3_masking", "default", {})
    with pytest.raises(ValueError, match="profile='huge'"):
        S.notebook_chain_tasks("01_experiment1", "huge", {})


@pytest.mark.parametrize("extra, message", [
    (["--part-mib", "0.5"], "--part-mib=0.5: a pack's parts must be at least 1 MiB"),
    (["--max-files", "0"], "--max-files=0: must be an integer >= 1"),
    (["--max-mib", "0"], "--max-mib=0.0: must be a number of MiB > 0"),
    (["--minutes", "-1"], "--minutes=-1.0: must be a finite number of minutes >= 0"),
    (["--minutes", "nan"], "--minutes=nan: must be a finite number of minutes >= 0"),
    (["--max-steps", "-5"], "--max-steps=-5: must be an integer >= 0"),
])
def test_bad_pack_options_are_refused_before_any_work(extra, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(S, "run_slice", lambda *a, **k: pytest.fail("work started"))
    assert S.main(["run", "01_experiment1", "--out", str(tmp_path), "--max-steps", "10", *extra]) == 2
    assert message in capsys.readouterr().err


def test_graph_option_sets_how_chains_execute_not_their_key():
    """``--graph`` reaches every chain's configuration and leaves its record (the store's key) alone, so a
    slice in graph mode resumes an eager slice's chains and the other way round."""
    task = S.notebook_chain_tasks("01_experiment1", "paper", NOTEBOOK01).tasks[0]
    for text, graph in (("auto", None), ("on", True), ("off", False)):
        assert S.GRAPH_CHOICES[text] is graph
        changed = S.with_graph(task, graph)
        assert changed.config.graph is graph and changed.config.record() == task.config.record()
    args = S.build_parser().parse_args(["run", "01_experiment1", "--out", "x", "--minutes", "1", "--graph", "off"])
    assert S.GRAPH_CHOICES[args.graph] is False
    with pytest.raises(SystemExit):
        S.build_parser().parse_args(["run", "01_experiment1", "--out", "x", "--graph", "yes"])


def mnist_available() -> bool:
    try:
        load_split("mnist", "test")
        return True
    except DatasetNotFoundError:
        return False


@pytest.mark.slow
def test_notebook01_paper_profile_in_two_slices_then_papermill_reuses_them(tmp_path, capsys):
    """Items 2 and 3 of issue 30 on the CPU: notebook 01's paper profile (T scaled to 201) sliced by
    the command line, packed, unpacked in a fresh folder, finished there, equal to one
    uninterrupted run, and the notebook executed by papermill from the result recomputing nothing."""
    if not mnist_available():
        pytest.skip("MNIST is not available here")
    table1 = {**NOTEBOOK01, "estimator_ablation": False}  # Table 1's two chains (the ablation's: tested above)
    params = [arg for k, v in table1.items() for arg in ("-p", f"{k}={json.dumps(v)}")]
    run = ["run", "01_experiment1", "--profile", "paper", *params]
    assert S.main([*run, "--results", str(tmp_path / "a"), "--out", str(tmp_path / "out1"),
                   "--resume", str(tmp_path / "none"), "--max-steps", "100"]) == 0
    first = capsys.readouterr().out
    assert "stopped at step 100" in first and Status.NOT_STARTED in first and "2 chain(s) left" in first
    assert S.main([*run, "--results", str(tmp_path / "b"), "--out", str(tmp_path / "out2"),
                   "--resume", str(tmp_path / "out1"), "--minutes", "60"]) == 0
    second = capsys.readouterr().out
    assert "every chain of the notebook is done" in second and Status.RESUMED in second
    assert S.main([*run, "--results", str(tmp_path / "whole"), "--out", str(tmp_path / "out3"),
                   "--max-steps", "100000"]) == 0
    assert_same_results(stored(tmp_path / "b"), stored(tmp_path / "whole"), arrays=False)  # the notebook keeps none
    # here: the last pack alone holds everything (packs are cumulative); the notebook reuses it
    assert S.main(["unpack", str(tmp_path / "out2"), "--results", str(tmp_path / "results")]) == 0
    assert_same_results(stored(tmp_path / "results"), stored(tmp_path / "whole"), arrays=False)
    before = P.store_state(tmp_path / "results")
    output = tmp_path / "executed.ipynb"
    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "01_experiment1.ipynb"
    LocalPapermillExecutor(kernel_name=default_kernel_name(), progress="lines", timeout=600).execute(
        NotebookRun(notebook, {"profile": "paper", **table1, "results_dir": str(tmp_path / "results"),
                               "figures_dir": str(tmp_path / "figures")}, output, cwd=notebook.parent))
    text = "".join("".join(o.get("text", "")) for c in json.loads(output.read_text())["cells"]
                   for o in c.get("outputs", []))
    assert text.count(": reused (") == 2 and ": ran (" not in text and ": resumed (" not in text
    assert P.store_state(tmp_path / "results") == before  # nothing recomputed, nothing rewritten
    assert os.listdir(tmp_path / "figures")
