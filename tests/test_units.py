"""Work units (gped_kit.experiments.units, .rates, gped_kit.cli.units): the paper profile's units in the order of
what they settle, complete units skipped, the planner's sizing and jobs against a rate table with known answers,
a run of tiny chains that finishes units into the store, records their rates and stops before a unit that would
not finish in the time left, and bad input refused before any work."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pandas as pd
import pytest

from gped_kit.cli import packs as P
from gped_kit.cli import slices as S
from gped_kit.cli import units as cli
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.engine import GPEDConfig, StudentConfig
from gped_kit.experiments import units as U
from gped_kit.experiments.chains import ChainTask
from gped_kit.experiments.rates import (
    Measurement,
    RateTable,
    Workload,
    device_run_measurements,
    interval_rates,
    run_device,
    slug,
    store_measurements,
)
from gped_kit.experiments.store import ResultsStore
from gped_kit.models.presets import ArchSpec

ROOT = Path(__file__).resolve().parents[1]
STUDENTS = (StudentConfig("predictive", thinning=3, arch=ArchSpec("fcnn", dropout=0.5)),
            StudentConfig("entropy", "U_o", thinning=5))


def digits_task(data, seed: int, students=STUDENTS, steps: int = 40) -> ChainTask:
    config = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=steps,
                        burn_in=10, eval_thinning=10, log_every=20, checkpoint_every=20, progress=False,
                        device="cpu", seed=seed)
    return ChainTask(data, config, students, name=f"digits seed {seed}")


def digits_units(data, steps: int = 40) -> list[U.WorkUnit]:
    """Unit A: two chains of two students (one batch); unit B: one chain of one student (another workload)."""
    a = U.units_of([digits_task(data, 0, steps=steps), digits_task(data, 1, steps=steps)], "digits", "tiny",
                   "A first", 0)
    b = U.units_of([digits_task(data, 2, STUDENTS[:1], steps=steps)], "digits", "tiny", "B next", 1, start=1)
    assert len(a) == len(b) == 1 and a[0].chains == 2
    return a + b


def table(*rows: tuple[str, int, int, float]) -> RateTable:
    """Rates on the CPU for digits FCNN chains: (device, students, chains, chain-steps/s)."""
    return RateTable([Measurement(device, Workload("digits", "fcnn", students, chains), rate, "units", "test")
                      for device, students, chains, rate in rows])


# ------------------------------------------------------------------------------ the paper profile's units
def test_paper_units_come_in_the_order_of_what_they_settle():
    listed = U.paper_units(absent={"cifar10"})
    names = [u.name for u in listed.units]
    assert names[:7] == ["01 fcnn N=60000 m=0 seed=0", "01 cnn_mnist N=60000 m=0 seed=0",
                         "01 fcnn N=60000 m=0 seed=1 + 1 more", "01 cnn_mnist N=60000 m=0 seed=1 + 1 more",
                         "01 U_s vs U_o ablation fcnn seed=0",
                         "02 fcnn N=10000 m=0 seed=0 + 22 more", "02 cnn_mnist N=10000 m=0 seed=0 + 22 more"]
    assert [u.settles for u in listed.units[:6]] == [U.SETTLES[0], U.SETTLES[0], U.SETTLES[1], U.SETTLES[1],
                                                     U.SETTLES[U.ABLATION], "Experiment 2's MNIST grid (Tables 5, 6)"]
    assert [t.config.seed for t in listed.units[2].tasks] == [1, 2]
    # the ablation at the paper's length: Table 1's FCNN teacher of seed 0, four predictive students at H = 100
    (ablation,) = listed.units[4].tasks
    assert ablation.config == listed.units[0].tasks[0].config and len(ablation.students) == 4
    notebooks = [u.notebook for u in listed.units]
    assert notebooks == sorted(notebooks)  # 01, 02, 06, 07, 10
    assert notebooks[7:] == ["06_experiment4_uncertainty"] * 2 + ["07_hydra_comparison"] * 2 + ["10_samplers"] * 5
    assert [u.needs_state for u in listed.units[7:11]] == [True] * 4
    assert all(u.steps == 1_000_000 for u in listed.units[:10]) and not any(any(u.done) for u in listed.units)
    # Table 1's chains N = 60,000, m = 0 are one unit's, not notebook 02's again; CIFAR-10 absent: said so
    assert sum(u.chains for u in listed.units if u.notebook == "02_experiment2_mnist") == 46
    assert any("2 chain(s) are an earlier notebook's" in n for n in listed.notes)
    assert sum("cifar10 not under the data root" in n for n in listed.notes) == 2
    # the same tasks as the notebook builds: notebook 01 with seed=1 keys its chain as Table 1's seed 1 here
    seed1 = U.paper_units(absent={"cifar10"}, notebooks=("01_experiment1",), seeds=(1,))
    assert seed1.units[0].tasks[0] == listed.units[2].tasks[0]
    with_cifar = U.paper_units(absent=(), notebooks=("01_experiment1",))
    assert [u.settles for u in with_cifar.units][-1] == U.SETTLES[-1] and with_cifar.units[-1].chains == 3


def test_shard_splits_units_by_their_order():
    units = [U.WorkUnit(f"u{i}", "nb", "p", (object(),), "x", (0, i)) for i in range(5)]  # type: ignore[arg-type]
    assert [u.name for u in U.shard(units, 1, 2)] == ["u1", "u3"]
    assert sum(len(U.shard(units, i, 3)) for i in range(3)) == 5
    with pytest.raises(ValueError, match="0 <= INDEX < COUNT"):
        U.shard(units, 2, 2)


# ------------------------------------------------------------------------------ rates
def test_rates_fall_back_with_a_label_and_count_batching_only_as_measured():
    rates = table(("cpu", 2, 1, 100.0), ("cpu", 2, 4, 800.0))
    exact = rates.rate("cpu", Workload("digits", "fcnn", 2, 4))
    assert exact.chain_steps_per_s == 800 and not exact.assumed and exact.label.startswith("measured:")
    more = rates.rate("cpu", Workload("digits", "fcnn", 2, 8))  # beyond what was measured: no further gain
    assert more.chain_steps_per_s == 800 and more.assumed and "8 chains (batching gains beyond 4 chains" in more.label
    fewer = rates.rate("cpu", Workload("digits", "fcnn", 2, 2))  # K = 2 from K = 1, the nearer one not above
    assert fewer.chain_steps_per_s == 100
    elsewhere = rates.rate("nvidia-h200", Workload("digits", "fcnn", 2, 1))
    assert elsewhere.assumed and elsewhere.label.startswith("assumed from") and "nvidia-h200" in elsewhere.label
    above = table(("cpu", 2, 4, 800.0)).rate("cpu", Workload("digits", "fcnn", 2, 2))
    assert above.chain_steps_per_s == 400 and "at the iterations/s of 4" in above.label
    assert RateTable().rate("cpu", Workload("digits", "fcnn", 2, 1)) is None
    with pytest.raises(ValueError, match="chain_steps_per_s=0"):
        table(("cpu", 2, 1, 0.0))


def test_rates_from_the_committed_gpu_runs_are_the_chains_alone():
    found = {m.workload.model: m for m in device_run_measurements(ROOT)}
    assert set(found) == {"fcnn", "cnn_mnist"} and {m.device for m in found.values()} == {"nvidia-h200"}
    assert 5_000 < found["fcnn"].chain_steps_per_s < 5_600  # the record: a median of 5,300 it/s alone (4,779-5,338)
    assert 2_400 < found["cnn_mnist"].chain_steps_per_s < 2_800  # about half of it
    assert found["fcnn"].workload == Workload("mnist", "fcnn", 4, 1) and "alone" in found["fcnn"].where
    history = pd.DataFrame({"step": [10, 20, 30], "elapsed_s": [1.0, 2.0, 2.5], "student": ["s"] * 3})
    assert list(interval_rates(history)) == [10.0, 20.0]
    assert run_device(Path("2026-11-26-nvidia-h200-2")) == "nvidia-h200" and slug("NVIDIA H200") == "nvidia-h200"


# ------------------------------------------------------------------------------ the planner
def test_planner_sizes_units_to_the_jobs_with_known_answers(digits_data):
    tasks = [digits_task(digits_data, s, steps=1_000) for s in range(5)]
    (unit,) = U.units_of(tasks, "digits", "tiny", "all", 0)
    rates = table(("cpu", 2, 1, 100.0))  # 10 s a chain, no batching gain measured
    plan = U.plan_units([unit], rates, "cpu", budget_s=25)
    assert [(p.unit.chains, p.seconds, p.job) for p in plan.units] == [(2, 20, 1), (2, 20, 2), (1, 10, 3)]
    assert plan.total_s == 50 and plan.jobs == 3
    assert [p.unit.tasks for p in plan.units] == [tuple(tasks[:2]), tuple(tasks[2:4]), tuple(tasks[4:])]
    # a measured batch of 2 at 400 chain-steps/s: pairs take 5 s, three chains 7.5 s (no gain beyond 2 counted),
    # one chain alone 10 s: more than a job of 9 s, yet two together fit
    faster = U.plan_units([unit], table(("cpu", 2, 1, 100.0), ("cpu", 2, 2, 400.0)), "cpu", budget_s=9)
    assert [(p.unit.chains, p.seconds, p.job) for p in faster.units] == [(3, 7.5, 1), (2, 5, 2)]
    whole = U.plan_units([unit], rates, "cpu")  # no budget: one unit, up to the cap
    assert [(p.unit.chains, p.seconds, p.job) for p in whole.units] == [(5, 50, 1)]
    assert [p.unit.chains for p in U.plan_units([unit], rates, "cpu", max_chains=2).units] == [2, 2, 1]
    # a chain longer than a job: reported with its time, run as slices only when asked
    (long,) = U.plan_units([unit], rates, "cpu", budget_s=8).units
    assert long.status == U.TOO_LONG and long.seconds == 10 and long.job is None and "--slices" in long.note
    sliced = U.plan_units([unit], rates, "cpu", budget_s=8, slices=True).units
    # each over two jobs (8 + 2 s), and a slice starts a job: jobs 1-2, 3-4, ...
    assert [(p.status, p.job) for p in sliced] == [(U.SLICE, job) for job in (1, 3, 5, 7, 9)]
    assert U.plan_units([unit], RateTable(), "cpu", budget_s=25).units[0].status == U.NO_RATE
    done = U.plan_units([U.WorkUnit(unit.name, "digits", "tiny", unit.tasks, "all", done=(True,) * 2 + (False,) * 3)],
                        rates, "cpu", budget_s=25)
    assert [(p.status, p.unit.chains) for p in done.units] == [(U.DONE, 2), (U.PLANNED, 2), (U.PLANNED, 1)]
    with pytest.raises(ValueError, match="budget_s=-1"):
        U.plan_units([unit], rates, "cpu", budget_s=-1)
    with pytest.raises(ValueError, match="max_chains=0"):
        U.plan_units([unit], rates, "cpu", max_chains=0)


# ------------------------------------------------------------------------------ running units
def test_run_finishes_units_records_rates_and_stops_before_one_that_would_not_fit(digits_data, tmp_path):
    units = digits_units(digits_data)
    store = ResultsStore(tmp_path / "store")
    # A: 2 x 40 steps at 8 chain-steps/s = 10 s; B: 40 steps at 40/95 = 95 s, more than is left after A
    rates = table(("cpu", 2, 2, 8.0), ("cpu", 1, 1, 40 / 95))
    lines: list[str] = []
    offset = [0.0]

    def say(line: str) -> None:  # 20 s pass after each unit, whatever the tiny chains really took
        lines.append(line)
        offset[0] += 20.0 * line.startswith("  ")

    report = U.run_units(units, store, rates, budget_s=100, device="cpu", progress=False, say=say,
                         clock=lambda: time.monotonic() + offset[0])
    (a,) = report.outcomes
    assert a.planned.unit.name == units[0].name and a.statuses == (Status.RAN, Status.RAN) and a.finished and a.recorded
    assert report.stopped_before is not None and report.stopped_before.unit.name == units[1].name
    assert len(a.entries) == 2 and all((Path(e) / "entry.json").is_file() for e in a.entries)
    assert "predicted 10 s" in lines[0]
    with open(report.rates_file, newline="") as f:
        (row,) = csv.DictReader(f)
    assert (row["device"], row["model"], row["students"], row["chains"], row["steps"], row["status"]) == (
        "cpu", "fcnn", "2", "2", "40", "finished")
    # the file rounds both to 0.01: compare the seconds the rate implies with the stored ones within that rounding
    assert 80 / float(row["chain_steps_per_s"]) == pytest.approx(float(row["seconds"]), abs=0.006)
    # the next plan reads the rate back from the store, beside the chains' entries
    again = RateTable.read(store.root)
    assert {m.source for m in again.measurements} == {"units", "store"}
    measured = again.rate("cpu", Workload("digits", "fcnn", 2, 2))
    assert measured.label.startswith("measured: fcnn on digits, 2 students, 2 chains on cpu")
    assert "[units:" in measured.label
    assert {m.workload for m in store_measurements(store.root)} == {Workload("digits", "fcnn", 2, 2)}
    # complete units are marked done and not run again; B now fits
    marked = U.mark_done(units, store)
    assert [m.done for m in marked] == [(True, True), (False,)]
    second = U.run_units(marked, store, table(("cpu", 1, 1, 1_000.0)), budget_s=100, device="cpu",
                         progress=False, say=lambda _: None)
    assert [o.planned.unit.name for o in second.outcomes] == [units[1].name] and second.stopped_before is None
    assert second.outcomes[0].statuses == (Status.RAN,)
    assert all(m.complete for m in U.mark_done(units, store))


def test_one_run_on_a_device_at_a_time(tmp_path):
    with U.device_lock("cpu", tmp_path) as path:
        with pytest.raises(RuntimeError, match="another `units run` holds cpu"):
            with U.device_lock("cpu", tmp_path):
                pass
        assert path.parent == tmp_path
    with U.device_lock("cpu", tmp_path):  # released
        pass


def test_run_packs_what_it_wrote_and_a_fresh_store_resumed_from_the_pack_has_it_done(digits_data, tmp_path,
                                                                                       monkeypatch, capsys):
    """``units run --pack``: the complete entries and the rate file, verified and merged by ``slices unpack`` into
    a fresh store file for file; ``--resume`` unpacks before planning, so a second run on a fresh store finds the
    unit done, runs nothing, and packs everything again (the newest pack alone holds the state)."""
    units = digits_units(digits_data)[:1]

    def paper_units(profile, overrides, *, store, **_):
        return U.UnitList(U.mark_done(units, store))

    monkeypatch.setattr(cli, "paper_units", paper_units)
    monkeypatch.setattr(cli.RateTable, "read", classmethod(lambda cls, *a: table(("cpu", 2, 2, 1_000.0))))
    run = ["run", "--budget-s", "600", "--device", "cpu", "--lock-dir", str(tmp_path)]
    assert cli.main([*run, "--results", str(tmp_path / "a"), "--pack", str(tmp_path / "pack1")]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 unit(s) finished" in out and "packed " in out
    (manifest,) = P.read_manifests([tmp_path / "pack1"])
    info = manifest[1]
    assert info["run"] == "units" and info["complete"] and info["units"][0]["statuses"] == [Status.RAN] * 2
    packed = {row["path"] for row in info["files"]}
    entries = [f.relative_to(tmp_path / "a").as_posix() for f in (tmp_path / "a").rglob("*") if f.is_file()]
    assert any(p.startswith("units/rates-") for p in packed)
    assert sum(p.endswith("/entry.json") for p in packed) == 2
    assert not any(p.endswith("checkpoint.pt") for p in packed)  # finished chains: their checkpoints stay out
    assert packed == {p for p in entries if not p.endswith((".lock", "checkpoint.pt"))}

    assert S.main(["unpack", str(tmp_path / "pack1"), "--results", str(tmp_path / "b")]) == 0
    for rel in packed:
        assert (tmp_path / "b" / rel).read_bytes() == (tmp_path / "a" / rel).read_bytes()

    capsys.readouterr()
    assert cli.main([*run, "--results", str(tmp_path / "c"), "--resume", str(tmp_path / "pack1"),
                     "--resume", str(tmp_path / "absent"), "--pack", str(tmp_path / "pack2")]) == 0
    out = capsys.readouterr().out
    assert "unpacked 1 pack(s)" in out and "0 of 0 unit(s) finished" in out and "no unit left" in out
    (second,) = P.read_manifests([tmp_path / "pack2"])
    assert second[1]["sequence"] == 2 and {row["path"] for row in second[1]["files"]} == packed


def test_a_pack_over_its_limits_keeps_the_complete_entries_and_leaves_the_checkpoints_out(digits_data, tmp_path,
                                                                                         monkeypatch, capsys):
    units = digits_units(digits_data)[:1]
    monkeypatch.setattr(cli, "paper_units", lambda profile, overrides, *, store, **_: U.UnitList(units))
    monkeypatch.setattr(cli.RateTable, "read", classmethod(lambda cls, *a: table(("cpu", 2, 2, 1_000.0))))
    run = ["run", "--budget-s", "600", "--device", "cpu", "--lock-dir", str(tmp_path), "--keep-final-checkpoints"]
    assert cli.main([*run, "--results", str(tmp_path / "a"), "--pack", str(tmp_path / "whole")]) == 0
    (whole,) = P.read_manifests([tmp_path / "whole"])
    checkpoints = {r["path"] for r in whole[1]["files"] if r["path"].endswith("checkpoint.pt")}
    assert len(checkpoints) == 2
    # a limit half the checkpoints' size below the whole pack: a pack with them is over it (another run's files
    # differ in a few bytes: times), one without them fits (checkpoints of float tensors hardly compress)
    raw = sum(r["bytes"] for r in whole[1]["files"] if r["path"] in checkpoints)
    limit = (whole[1]["bytes"] - raw / 2) / 2**20
    capsys.readouterr()
    assert cli.main([*run, "--results", str(tmp_path / "b"), "--pack", str(tmp_path / "cut"),
                     "--max-mib", str(limit)]) == 1
    captured = capsys.readouterr()
    assert "2 checkpoint(s) left out of the pack, the complete entries and the rates packed" in captured.err
    (cut,) = P.read_manifests([tmp_path / "cut"])
    def chain_files(manifest: dict) -> set[str]:
        return {r["path"] for r in manifest["files"] if r["path"].startswith("chain/")}

    assert chain_files(cut[1]) == chain_files(whole[1]) - checkpoints  # the same chains' keys, no checkpoints
    assert sum(r["path"].startswith("units/rates-") for r in cut[1]["files"]) == 1
    assert cut[1]["bytes"] <= limit * 2**20


@pytest.mark.parametrize("extra, message", [
    (["--part-mib", "0.5"], "--part-mib=0.5: a pack's parts must be at least 1 MiB"),
    (["--max-files", "0"], "--max-files=0: must be an integer >= 1"),
    (["--max-mib", "-1"], "--max-mib=-1.0: must be a number of MiB > 0"),
])
def test_run_refuses_bad_pack_options_before_any_work(extra, message, capsys, monkeypatch):
    monkeypatch.setattr(cli, "paper_units", lambda *a, **k: pytest.fail("work started"))
    assert cli.main(["run", "--budget-s", "10", "--pack", "out", *extra]) == 2
    assert message in capsys.readouterr().err


def test_run_refuses_a_resume_folder_of_foreign_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "paper_units", lambda *a, **k: pytest.fail("work started"))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "slice-001.json").write_text('{"kind": "something else"}')
    assert cli.main(["run", "--budget-s", "10", "--resume", str(tmp_path / "in")]) == 2
    assert "is not a slice manifest" in capsys.readouterr().err


# ------------------------------------------------------------------------------ the command line
@pytest.mark.parametrize("argv, message", [
    (["plan", "--budget-s", "-5"], "--budget-s=-5.0: must be a finite number of seconds > 0"),
    (["plan", "--budget-s", "nan"], "--budget-s=nan"),
    (["plan", "--max-chains", "0"], "--max-chains=0: must be an integer >= 1"),
    (["plan", "--profile", "huge"], "profile='huge' is not a profile of 01_experiment1"),
    (["plan", "-p", "num_iteration=5"], "override 'num_iteration' is not a setting"),
    (["plan", "-p", "01:num_iterations=5"], "a setting applies to every notebook"),
    (["plan", "-p", "num_iterations=0"], "num_iterations"),
    (["plan", "--notebook", "04"], "--notebook '04' has no units"),
    (["plan", "--device-kind=!!"], "--device-kind='!!'"),
    (["run", "--budget-s", "10", "--shard", "3/2"], "--shard='3/2': INDEX must be"),
    (["run", "--budget-s", "10", "--shard", "x"], "give INDEX/COUNT"),
    (["run", "--budget-s", "10", "--device", "tpu"], "device='tpu' is not known"),
])
def test_bad_input_is_named_before_any_work(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(cli, "paper_units", lambda *a, **k: pytest.fail("work started"))
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_run_needs_a_budget():
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["run"])


def test_plan_prints_the_table_the_rates_and_the_total(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(U, "absent_datasets", lambda root=None: frozenset({"cifar10"}))
    assert cli.main(["plan", "--notebook", "01", "--results", str(tmp_path), "--device-kind", "NVIDIA H200",
                     "--budget-s", "600"]) == 0
    out = capsys.readouterr().out
    assert "01 cnn_mnist N=60000 m=0 seed=0" in out and "Table 1, seeds 1 and 2" in out
    assert "measured [" in out and "assumed [" in out and "device run: docs/device-runs/" in out
    assert "Predicted time on nvidia-h200:" in out and "jobs of 600 s" in out
    assert "3 chain(s) skipped: data set(s) cifar10" in out
