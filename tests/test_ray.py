"""Grids on a real local Ray cluster (issue 16): the same store entries as a local run, failures
recorded while the grid goes on, and a worker killed mid-cell retried by Ray and resumed from
the cell's last checkpoint, ending with the store an uninterrupted run writes."""

import threading
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.status import Status
from gped_kit.engine import GPEDConfig, StudentConfig
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.executors import RayExecutor
from gped_kit.experiments.store import ResultsStore

# Real Ray clusters started by the tests (about a minute): in `make test-slow`, which CI runs after `make test`.
pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")  # installed by the set-up ('.[cluster]'), so CI runs these

# Columns that say when, where and how long: not part of the numbers.
VOLATILE = ("elapsed_s", "iterations_per_s", "seconds", "wall_s", "host", "device", "torch_version", "run_key",
            "store_status", "cell")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of this machine: the head and one worker process at a time (1 CPU)."""
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def task(data, seed=0, num_iterations=400, step_size=5e-5, checkpoint_every=50, name=None):
    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=step_size, prior_precision=10.0, batch_size=25),
                     num_iterations=num_iterations, burn_in=20, eval_thinning=5, log_every=50,
                     checkpoint_every=checkpoint_every, progress=False, device="cpu", seed=seed)
    return ChainTask(data, cfg, (StudentConfig("predictive", "U_s", thinning=2, batch_size=20),
                                 StudentConfig("entropy", "U_o", thinning=3, batch_size=20)), name=name)


def stored(outcome) -> dict[str, pd.DataFrame]:
    out = {}
    for name in ("summary", "history"):
        frame = outcome.entry.table(name)
        out[name] = frame.drop(columns=[c for c in frame.columns if c in VOLATILE])
    return out


def assert_same_tables(a, b, exact=True):
    """Equal tables; ``exact=False``: up to floating-point round-off (a Ray task with one CPU runs
    torch with one thread, this process with two: sums are reduced in another order)."""
    for name in ("summary", "history"):
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=exact, rtol=1e-3, atol=1e-4)


def test_ray_grid_equals_local_and_records_failures(cluster, digits_data, tmp_path):
    tasks = [task(digits_data, seed=0), task(digits_data, seed=1),
             task(digits_data, seed=2, step_size=5.0, name="diverges")]  # a real failure: recorded, not retried
    local = run_chains(tasks, ResultsStore(tmp_path / "local"), progress=False)
    remote = run_chains(tasks, ResultsStore(tmp_path / "ray"), progress=False, executor="ray")
    assert list(remote.cells["status"]) == list(local.cells["status"]) == [Status.RAN, Status.RAN, Status.FAILED]
    assert "diverged" in remote.outcomes[2].error
    for a, b in zip(local.outcomes[:2], remote.outcomes[:2]):
        assert a.entry.key == b.entry.key
        assert_same_tables(stored(a), stored(b), exact=False)
    again = run_chains(tasks[:2], ResultsStore(tmp_path / "ray"), progress=False, executor=RayExecutor())
    assert list(again.cells["status"]) == [Status.REUSED, Status.REUSED]


def _worker_running(name: str):
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if cmdline.startswith(f"ray::{name}"):
            return proc
    return None


def test_killed_worker_is_retried_and_resumes_from_the_last_checkpoint(cluster, digits_data, tmp_path):
    long = task(digits_data, seed=3, num_iterations=3_000, checkpoint_every=100)
    # the uninterrupted run, on the cluster too (same thread count, so equal to the last bit)
    reference = run_chains([long], ResultsStore(tmp_path / "uninterrupted"), progress=False,
                           executor="ray").outcomes[0]

    store = ResultsStore(tmp_path / "ray")
    entry = store.entry("chain", reference.entry.record, reference.entry.code)
    killed: dict[str, int] = {}

    def kill_when_checkpointed() -> None:
        deadline = time.time() + 300
        while time.time() < deadline and not Path(entry.checkpoint).exists():
            time.sleep(0.05)
        proc = _worker_running("compute_batch")
        if proc is not None:
            killed["pid"] = proc.pid
            proc.kill()

    killer = threading.Thread(target=kill_when_checkpointed, daemon=True)
    killer.start()
    outcome = run_chains([long], store, progress=False, executor="ray").outcomes[0]
    killer.join(timeout=5)
    assert "pid" in killed, "the worker was not found mid-cell"
    print(f"killed Ray worker {killed['pid']} after the first checkpoint; Ray retried the cell: {outcome.status}")
    # the retry found the checkpoint the killed worker left and went on from there
    assert outcome.status == Status.RESUMED and outcome.entry.key == reference.entry.key
    assert_same_tables(stored(reference), stored(outcome))


def test_notebooks_as_ray_tasks(cluster, tmp_path):
    """``python -m gped_kit.cli.batch --executor ray``: each notebook a Ray task; a failing one is
    reported failed with its error, the other runs, outputs and the summary are written."""
    import nbformat  # noqa: PLC0415

    from gped_kit.cli import batch  # noqa: PLC0415

    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for name, source in (("good", "value = 6 * 7\nprint('answer', value)"), ("bad", "raise ValueError('boom')")):
        nb = nbformat.v4.new_notebook()
        params = nbformat.v4.new_code_cell("profile = 'default'")
        params.metadata["tags"] = ["parameters"]
        nb.cells = [params, nbformat.v4.new_code_cell(source)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, str(notebooks / f"{name}.ipynb"))
    out = tmp_path / "out"
    status = batch.main(["--notebook-dir", str(notebooks), "--output-dir", str(out), "--executor", "ray",
                         "--kernel", "python3"])
    summary = pd.read_csv(out / "batch_summary.csv").set_index("notebook")
    assert status == 1
    assert summary.loc["good.ipynb", "status"] == Status.RAN and summary.loc["bad.ipynb", "status"] == Status.FAILED
    assert "boom" in summary.loc["bad.ipynb", "error"]
    executed = nbformat.read(str(out / "good.ipynb"), as_version=4)
    assert "answer 42" in executed.cells[-1].outputs[0]["text"]


def test_searches_as_ray_tasks_equal_local_and_stored_ones_start_nothing(cluster, digits_data, tmp_path):
    """Entries derived from a chain's full state (Experiment 3's search here; Experiment 4 and the
    comparison use the same path, :func:`run_derived`): each missing one is a Ray task that runs
    its chain and the search on the worker; the store ends as a local run's; a stored search is
    read back on the driver without a Ray task; a failure is recorded and the other goes on."""
    from gped_kit.experiments import derived as derived_module  # noqa: PLC0415
    from gped_kit.experiments.experiment3 import SearchSettings, run_searches, search_students  # noqa: PLC0415

    def search_task(seed, step_size=5e-5):
        cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=step_size, prior_precision=10.0, batch_size=25),
                         num_iterations=300, burn_in=100, eval_thinning=10, log_every=100, checkpoint_every=100,
                         progress=False, device="cpu", seed=seed)
        students = search_students("fcnn", [0.05, 1], [1], [1e-2], thinning={"predictive": 2})
        name = f"search seed={seed}" + (" diverges" if step_size > 1 else "")
        return ChainTask(digits_data, cfg, students, name=name)

    tasks = [search_task(0), search_task(1, step_size=5.0)]
    settings = SearchSettings(finetune_epochs=2.0, latency_batch_size=8, latency_repeats=1)
    local = run_searches(tasks, settings, ResultsStore(tmp_path / "local"), progress=False)
    remote = run_searches(tasks, settings, ResultsStore(tmp_path / "ray"), progress=False, executor="ray")
    assert [r.status for r in local] == [r.status for r in remote] == [Status.RAN, Status.FAILED]
    assert remote[0].chain_status == Status.RAN and "diverged" in remote[1].error
    assert remote[0].entry.key == local[0].entry.key
    numbers = ["student_nll", "student_accuracy", "params", "flops", "units_removed"]
    pd.testing.assert_frame_equal(remote[0].table[["student", "stage", *numbers]],
                                  local[0].table[["student", "stage", *numbers]], rtol=1e-3, atol=1e-4)
    with pytest.MonkeyPatch.context() as mp:  # stored: read back on the driver, no chain, no Ray task
        mp.setattr(derived_module, "compute_derived", None)
        mp.setattr(derived_module, "run_chains", None)
        again = run_searches(tasks[:1], settings, ResultsStore(tmp_path / "ray"), progress=False, executor="ray")
    assert again[0].status == Status.REUSED and again[0].table.equals(remote[0].table)
