"""Short versions of every kind of computation the results store holds, for the golden tests.

Each *probe* computes a few stored results through the same code path as the notebooks (``run_chains``,
``run_experiment3``, ``run_experiment4``, ``run_comparison``, ``spiral_run``, ``run_toy``) into a
scratch store, in a few seconds on a CPU, and :func:`numbers` reads back every number they stored: each
numeric column of each table and the mean and mean absolute value of each stored array, timing columns
aside. ``tests/test_golden.py`` compares them with the values recorded for the current numerics
versions (:mod:`gped_kit.experiments.numerics`).

What the probes cover: FCNN and CNN-MNIST teachers on masked MNIST under SGLD (constant and polynomial
step sizes, with a warm-up, and with counter-based random numbers), SGHMC, SGNHT and BAOA, a pooled cyclical BAOA
teacher; every built-in classification target with U_s and U_o (predictive, entropy and its squared-error
variant, marginal variance, the C+1 student with either entropy loss, EnD2), a dropout student, the
learning-rate halving, group l1/l2, the input generators and derivative matching; a Gaussian regression
chain with both regression targets; an Experiment 3 search, an Experiment 4 evaluation, the comparison on
MNIST-like digits, the spiral, and both thesis toys.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from conftest import make_digits_data
from torch import nn

from gped_kit.baselines.endd import ENDD
from gped_kit.baselines.hydra import HydraConfig
from gped_kit.core.baoa import BAOAConfig
from gped_kit.core.sghmc import SGHMCConfig
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.sgnht import SGNHTConfig
from gped_kit.core.status import Status
from gped_kit.data.container import GPEDData
from gped_kit.data.experiment import DataConfig
from gped_kit.engine import GPEDConfig, StudentConfig
from gped_kit.experiments import comparison as C
from gped_kit.experiments import experiment4 as E4
from gped_kit.experiments import thesis
from gped_kit.experiments.chains import ChainTask, run_chains
from gped_kit.experiments.experiment3 import SearchSettings, run_experiment3, search_students
from gped_kit.experiments.numerics import DISCRETE_VALUES
from gped_kit.experiments.settings import resolve_settings
from gped_kit.experiments.store import ResultsStore
from gped_kit.models.presets import ArchSpec
from gped_kit.toys import LogRegConfig, MoGConfig


def is_timing(column: str) -> bool:
    """Whether a table's column measures time (``elapsed_s``, ``iterations_per_s``, ``search_seconds``,
    ``latency_ms``, ...), which differs run to run, not a result."""
    return column.endswith(("seconds", "elapsed_s", "per_s")) or column.startswith("latency_ms")


#: Masked MNIST, small: the data's preparation (subsampling, masks, the test subset) is part of a chain's numbers.
MNIST = DataConfig("mnist", labelled_size=300, mask_size=8, test_size=500)
#: The paper's SGLD with eta N as in Table 1 (eta = 4e-6 for N = 60,000), so that 40 steps already learn.
SGLD = SGLDConfig(step_size=2e-4, prior_precision=10.0, batch_size=50)


def _chain(model, sampler, students, *, data=MNIST, steps: int = 40, burn_in: int = 10, num_chains: int = 1,
           **config) -> ChainTask:
    cfg = GPEDConfig(model=model, sampler=sampler, num_iterations=steps, burn_in=burn_in, eval_thinning=5,
                     log_every=20, checkpoint_every=steps, num_chains=num_chains, progress=False, device="cpu",
                     **config)
    return ChainTask(data, cfg, tuple(students), keep_outputs=("test",))


def _run(tasks: list[ChainTask]) -> Callable[[ResultsStore], None]:
    def run(store: ResultsStore) -> None:
        grid = run_chains(tasks, store, progress=False)
        grid.raise_if_failed()
    return run


def _fcnn_students() -> list[StudentConfig]:
    """Every built-in classification target with U_s and U_o, a dropout student, the lr halving, group l1/l2."""
    small = ArchSpec("fcnn", k1=0.25, k2=0.25)
    return [
        StudentConfig("predictive", "U_s", arch=ArchSpec("fcnn", dropout=0.5), thinning=2, batch_size=50,
                      lr_halving_epochs=0.2),
        StudentConfig("predictive", "U_o", arch=small, thinning=3, batch_size=50, regularizer="group_lasso",
                      reg_weight=1e-3),
        StudentConfig("entropy", "U_s", arch=small, thinning=2, batch_size=50),
        StudentConfig("entropy", "U_o", arch=small, thinning=2, batch_size=50),
        StudentConfig("entropy-sq", "U_o", arch=small, thinning=2, batch_size=50),
        StudentConfig("marginal_variance", "U_o", arch=small, thinning=2, batch_size=50),
        StudentConfig("predictive+entropy", "U_s", arch=small, thinning=2, batch_size=50),
        StudentConfig("predictive+entropy-sq", "U_s+U_o", arch=small, thinning=2, batch_size=50),
        StudentConfig(ENDD, "U_o", arch=small, thinning=2, batch_size=50),
    ]


def _input_students() -> list[StudentConfig]:
    """The thesis' input generators and derivative matching."""
    small = ArchSpec("fcnn", k1=0.25, k2=0.25)
    return [StudentConfig("predictive", "U_s", arch=small, thinning=2, batch_size=50, input_generator=generator,
                          input_noise_std=0.3, name=f"KD-{generator}") for generator in ("resample", "perturb", "noise")
            ] + [StudentConfig("predictive", "U_s", arch=small, thinning=2, batch_size=50, derivative_weight=1.0,
                               name="KD-derivatives")]


def _regression_data() -> GPEDData:
    """A cubic with noisier right half, from uniform draws and arithmetic only: no transcendental function,
    whose last bits may differ between CPUs, so the data's checksum (in the key) is the same everywhere."""
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(200, 1, generator=gen) * 4 - 2
    noise = (torch.rand(200, generator=gen) - 0.5) * (0.2 + 0.8 * (x[:, 0] > 0).float())
    y = x[:, 0] * (1 - x[:, 0] ** 2 / 6) + noise
    return GPEDData.from_tensors((x, y), (x[:50], y[:50]))


def _regression_net(out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, out))


def _digits() -> GPEDData:
    """The tests' 8x8 digits (real data, small networks)."""
    return make_digits_data(600)


def _search(store: ResultsStore) -> None:
    task = ChainTask(_digits(), GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50),
                                           num_iterations=120, burn_in=40, eval_thinning=10, log_every=60,
                                           checkpoint_every=120, progress=False, device="cpu"),
                     search_students("fcnn", [0.05, 0.5], [0.05, 0.5], [1e-3, 1e-2], thinning={"predictive": 2}))
    result = run_experiment3(task, SearchSettings(finetune_epochs=1.0, latency_batch_size=8, latency_repeats=1),
                             store, progress=False)
    if result.status not in (Status.RAN, Status.REUSED):
        raise RuntimeError(f"search: {result.status}: {result.error}")


def _experiment4(store: ResultsStore) -> None:
    s = dataclasses.replace(E4.PROFILES["default"], num_iterations=120, burn_in=60, eval_thinning=10, log_every=60,
                            checkpoint_every=120, largest_k=(0.5, 0.5), ndcg_trials=5)
    task = E4.experiment4_task("fcnn", s, device="cpu")
    digits = _digits()
    data = dataclasses.replace(digits, ood_x={"flipped": digits.test_x.flip(3)})
    E4.run_experiment4([ChainTask(data, dataclasses.replace(task.config, progress=False), task.students,
                                  name="digits")], store, s, progress=False).raise_if_failed()


def _comparison(store: ResultsStore) -> None:
    digits = _digits()
    data = dataclasses.replace(digits, ood_x={"mnist_rotated60": digits.test_x.flip(3)},
                               ood_y={"mnist_rotated60": digits.test_y})
    s = dataclasses.replace(C.PROFILES["default"], hydra=HydraConfig(head_hidden=(16,), phase1_steps=20,
                                                                     phase2_steps=40))
    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, batch_size=50), num_iterations=80,
                     burn_in=30, eval_thinning=10, log_every=40, checkpoint_every=80, progress=False, device="cpu",
                     num_snapshots=4)
    task = ChainTask(data, cfg, C.comparison_students("fcnn", s), name="digits")
    C.run_comparison(s, store, task=task, progress=False)


def _spiral(store: ResultsStore) -> None:
    s = resolve_settings(C.PROFILES, "default", {
        "spiral.data.labelled_size": 200, "spiral.num_iterations": 60, "spiral.burn_in": 20,
        "spiral.num_snapshots": 3, "spiral.hydra": HydraConfig(head_hidden=(16,), phase1_steps=20, phase2_steps=40)})
    C.spiral_run(s, store, device="cpu", progress=False)


def _toys(store: ResultsStore) -> None:
    thesis.run_toy(MoGConfig(num_data=20, num_samples=600, burn_in=100, num_distill_samples=100, minibatch_size=100,
                             grid_size=101), store)
    thesis.run_toy(LogRegConfig(num_samples=200, burn_in=50, num_iterations=30, grid_size=5, num_test=20,
                                generators=("resample", "noise"),
                                losses=("cross_entropy", "derivative_square_error")), store)


#: Every probe: a name and what it computes into a scratch store.
PROBES: dict[str, Callable[[ResultsStore], None]] = {
    "fcnn_sgld_targets": _run([_chain("fcnn", SGLD, _fcnn_students())]),
    "fcnn_sgld_inputs": _run([_chain("fcnn", dataclasses.replace(SGLD, schedule="polynomial", decay_steps=20.0,
                                                                 warmup_steps=5, warmup_factor=4.0),
                                     _input_students())]),
    "cnn_sgld": _run([_chain(ArchSpec("cnn_mnist", k1=0.5, k2=0.5), SGLD, [
        StudentConfig("predictive", "U_o", arch=ArchSpec("cnn_mnist", k1=0.25, k2=0.25), thinning=2, batch_size=50),
        StudentConfig("entropy", "U_s", arch=ArchSpec("cnn_mnist", k1=0.25, k2=0.25), thinning=2, batch_size=50)],
        steps=30)]),
    "fcnn_momentum_samplers": _run([
        _chain("fcnn", sampler, [StudentConfig("predictive", "U_o", arch=ArchSpec("fcnn", k1=0.25, k2=0.25),
                                               thinning=2, batch_size=50)], steps=30)
        for sampler in (SGHMCConfig(step_size=0.2, alpha=0.5, batch_size=50),
                        SGNHTConfig(step_size=0.2, alpha=0.5, batch_size=50),
                        BAOAConfig(step_size=0.2, alpha=0.5, batch_size=50))]),
    "fcnn_baoa_pooled_cyclical": _run([_chain(
        "fcnn", BAOAConfig(step_size=0.2, alpha=0.5, batch_size=50, schedule="cyclical", cycles=2, explore_fraction=0.5,
                           cycle_floor=1e-3),
        [StudentConfig("predictive", "U_s", arch=ArchSpec("fcnn", k1=0.25, k2=0.25), thinning=2, batch_size=50),
         StudentConfig("entropy", "U_o", arch=ArchSpec("fcnn", k1=0.25, k2=0.25), thinning=2, batch_size=50)],
        steps=40, num_chains=2, num_snapshots=2)]),
    "fcnn_counter_random_numbers": _run([
        _chain("fcnn", sampler, [StudentConfig("predictive", "U_o", arch=ArchSpec("fcnn", k1=0.25, k2=0.25),
                                               thinning=2, batch_size=50)], steps=30, random_numbers="counter")
        for sampler in (SGLD, dataclasses.replace(SGLD, schedule="polynomial", decay_steps=20.0),
                        SGHMCConfig(step_size=0.2, alpha=0.5, batch_size=50))]),
    "regression": _run([_chain(_regression_net, SGLDConfig(step_size=2e-5, prior_precision=1.0, batch_size=50), [
        StudentConfig("predictive_mean", "U_s", arch=_regression_net, thinning=1, batch_size=50, lr=5e-3),
        StudentConfig("predictive_variance", "U_o", arch=_regression_net, thinning=1, batch_size=50, lr=5e-3)],
        data=_regression_data(), steps=60, burn_in=20, likelihood="gaussian")]),
    "search": _search,
    "experiment4": _experiment4,
    "comparison": _comparison,
    "spiral": _spiral,
    "toys": _toys,
}


def numbers(store: ResultsStore) -> dict[str, tuple[str, pd.DataFrame]]:
    """Every number the store holds, per entry (``"<kind> <n>"``, in the store's order): the entry's key and
    a tidy table (``table``, ``row``, ``column``, then the number in ``value``, or in ``discrete`` for the
    values of :data:`~gped_kit.experiments.numerics.DISCRETE_VALUES`) of each numeric column of each of its
    tables (booleans as 0/1; timing columns, :func:`is_timing`, aside; a tidy table's columns are named with
    the row's ``metric``, e.g. ``value[auroc]``) and the mean and mean |value| of each stored array."""
    out = {}
    counts: dict[str, int] = {}
    for entry in store.entries():
        rows = []
        for name in entry.table_names():
            table = entry.table(name)
            metric = table["metric"].astype(str) if "metric" in table else None
            for column in table.columns:
                values = table[column]
                if is_timing(column) or not (pd.api.types.is_numeric_dtype(values)
                                             or pd.api.types.is_bool_dtype(values)):
                    continue
                for i, v in enumerate(values.astype(float)):
                    label = str(column) if metric is None else f"{column}[{metric.iloc[i]}]"
                    rows.append((name, i, label, float(v)))
        for name, array in sorted(entry.arrays().items()):
            a = np.asarray(array, dtype=np.float64)
            rows += [(f"arrays/{name}", 0, "mean", float(a.mean())), (f"arrays/{name}", 0, "abs_mean",
                                                                       float(np.abs(a).mean()))]
        frame = pd.DataFrame(rows, columns=["table", "row", "column", "value"])
        discrete = frame["column"].str.contains(DISCRETE_VALUES)
        frame["discrete"] = frame["value"].where(discrete)
        frame["value"] = frame["value"].mask(discrete)
        n = counts.get(entry.kind, 0)
        counts[entry.kind] = n + 1
        out[f"{entry.kind} {n}"] = (entry.key, frame)
    return out


def run_probe(name: str, root: Path) -> dict[str, tuple[str, pd.DataFrame]]:
    """Probe ``name`` computed into a scratch store at ``root``; its numbers (:func:`numbers`)."""
    store = ResultsStore(root)
    torch.manual_seed(0)
    PROBES[name](store)
    return numbers(store)
