"""Notebook 07 (GPED beside EnD2, Hydra, KD and the thesis' online distillation, on one posterior) as an
:class:`~gped_kit.experiments.frame.Experiment`: its summary and claims, what a run stores and its row of the
README's claims table."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...core.status import Status
from ..chains import ChainTask
from ..frame import (
    SCALED_CHAIN,
    AfterChains,
    Experiment,
    Summary,
    chain_summaries,
    check_executor,
    derived_rows,
    task_chains,
)
from ..numerics import numerics_code
from ..store import ResultsStore
from ..verdicts import HYDRA, OURS, Claim, artifact_table, link, number, profile_evidence, verdict
from .artifacts import ARTIFACTS, CHECKS
from .run import ComparisonRun, SpiralRun, run_comparison, spiral_run
from .settings import PROFILES, ZERO_MU, ComparisonSettings
from .tasks import comparison_task, spiral_task

#: The tables notebook 07 writes to ``figures/`` (``.csv`` and ``.md``), per profile; the README's row reads the
#: MNIST comparison.
MNIST_TABLE = ARTIFACTS["mnist"].file
#: Each method's model uncertainty (MU) against the long-chain teacher's, and the zero-MU baseline.
MU_SPLIT_TABLE = ARTIFACTS["mu_split"].file
#: The Hydra paper's Table 2 (MNIST, test NLL, mean of n = 3 runs), the reference of notebook 07.
HYDRA_TABLE2_MNIST_NLL = {"ensemble (M = 50)": 0.0439, "Hydra": 0.0465, "KD": 0.0497, "prior networks": 0.0521}


@dataclass
class ComparisonRuns:
    """Notebook 07's two stored runs: the MNIST comparison and the spiral (None when not stored)."""

    mnist: ComparisonRun | None
    spiral: SpiralRun | None


def mu_mae(table: pd.DataFrame, method: str, eval_set: str, ref: str) -> float:
    """A method's mean |MU - MU_ref| on ``eval_set`` against ``ref`` (``"snapshots"`` or ``"teacher"``)
    from a comparison table (:func:`~.compute.comparison_table`); NaN without the row."""
    row = table[(table["method"] == method) & (table["eval_set"] == eval_set)]
    return float(row[f"mu_mae_{ref}"].iloc[0]) if len(row) else float("nan")


#: Notebook 07's claims, in the order its checks print them, with what the papers report.
COMPARISON_CLAIMS = (
    ("Hydra's MU is the closest to its snapshot ensemble's", "on MNIST test, shifted and rotated; Prior Networks "
     "closest on Fashion-MNIST (Hydra paper, Table 1)"),
    ("GPED's MU is the closest to the long-chain teacher's", "not reported"),
    ("Hydra within 1 point of its snapshot ensemble's test accuracy", "True (Hydra paper, Table 2)"),
    ("Hydra's MU closer to the snapshot ensemble than EnD2's on the MNIST test set", "True (Hydra paper, Table 1)"),
    ("pure-noise distillation inputs give a worse student than resampled D'", "True (the thesis)"),
    ("spiral: Hydra's MU map closer to its snapshots than GPED's and EnD2's", "not reported"),
    ("GPED's MU closer to the teacher's than predicting zero on the MNIST test set", "not reported"),
)


def comparison_claims(table: pd.DataFrame, kd: pd.DataFrame, spiral: pd.DataFrame) -> pd.DataFrame:
    """Notebook 07's claims on the MNIST comparison ``table``, its KD students ``kd``
    (:func:`~gped_kit.experiments.comparison.kd_variants`) and the spiral's table: one row per claim of
    :data:`COMPARISON_CLAIMS` with ``ours`` (``"k of n"`` for the evaluation sets where a method's MU
    is the closest, with ``sets`` naming them; True/False for the others) and ``paper`` (what the Hydra
    paper or the thesis reports)."""
    sets = list(dict.fromkeys(table["eval_set"]))
    hydra_best = [s for s in sets if mu_mae(table, "Hydra", s, "snapshots") < min(
        mu_mae(table, "GPED", s, "snapshots"), mu_mae(table, "EnD2", s, "snapshots"))]
    gped_best = [s for s in sets if mu_mae(table, "GPED", s, "teacher") < min(
        mu_mae(table, "Hydra", s, "teacher"), mu_mae(table, "EnD2", s, "teacher"))]
    acc = table[table["eval_set"] == "test"].set_index("method")["accuracy"]
    kd_nll = kd.set_index("student")["student_nll"]
    gped_test = table[(table["eval_set"] == "test") & (table["method"] == "GPED")]["mu_mae_teacher"]
    ours = [
        (f"{len(hydra_best)} of {len(sets)}", str(hydra_best)),
        (f"{len(gped_best)} of {len(sets)}", str(gped_best)),
        (bool(abs(acc["Hydra"] - acc["Snapshot ensemble"]) < 0.01), ""),
        (bool(mu_mae(table, "Hydra", "test", "snapshots") < mu_mae(table, "EnD2", "test", "snapshots")), ""),
        (bool(kd_nll["KD (noise inputs)"] > kd_nll["KD"]), ""),
        (bool(mu_mae(spiral, "Hydra", "grid", "snapshots") < min(mu_mae(spiral, "GPED", "grid", "snapshots"),
                                                                 mu_mae(spiral, "EnD2", "grid", "snapshots"))), ""),
        (bool(len(gped_test) and gped_test.iloc[0] < mu_mae(table, ZERO_MU, "test", "teacher")), ""),
    ]
    return pd.DataFrame([{"claim": claim, "ours": value, "sets": where, "paper": paper}
                         for (claim, paper), (value, where) in zip(COMPARISON_CLAIMS, ours)])


#: The test-set columns of every method that notebook 07's profiles are compared on.
COMPARISON_TEST_COLUMNS = ("method", "accuracy", "nll", "brier", "mu_mean", "mu_mae_snapshots", "mu_mae_teacher")


#: The test-set columns of every method that notebook 07's profiles are compared on.
COMPARISON_TEST_COLUMNS = ("method", "accuracy", "nll", "brier", "mu_mean", "mu_mae_snapshots", "mu_mae_teacher")


def comparison_summary(experiment: Experiment, store: ResultsStore, settings: ComparisonSettings, *,
                       profile: str = "default", seed: int = 0, device: str = "auto", data_root: str | None = None,
                       executor: str = "local", recompute: bool = False, progress: bool = True,
                       task: ChainTask | None = None) -> Summary:
    """The Hydra paper's Tables 1, 2 and 5 on one posterior: the MNIST comparison (:func:`~.run.run_comparison`,
    ``task`` as there) and the spiral (:func:`~.run.spiral_run`); ``run`` is a :class:`ComparisonRuns`. With
    ``executor="stored"`` a run the store lacks is None and listed in ``missing``; otherwise a failure raises
    as those functions do. Tables (when both are there): ``test`` (every method on the MNIST test set:
    :data:`COMPARISON_TEST_COLUMNS`) and ``claims`` (:func:`comparison_claims`)."""
    stored = check_executor(executor, recompute)
    kwargs = {"seed": seed, "device": device, "recompute": recompute, "progress": progress, "executor": executor}
    runs: dict[str, ComparisonRun | SpiralRun | None] = {}
    missing = []
    for name, run in (("comparison", lambda: run_comparison(settings, store, data_root=data_root, task=task,
                                                            **kwargs)),
                      ("spiral", lambda: spiral_run(settings, store, **kwargs))):
        try:
            runs[name] = run()
        except RuntimeError as exc:  # run_comparison / spiral_run raise unless their entry is there
            if not (stored and f": {Status.NOT_STORED}:" in str(exc)):
                raise
            runs[name] = None
            missing.append(f"{str(exc).split(': ')[0]}: {Status.NOT_STORED}")
    out, spiral = runs["comparison"], runs["spiral"]
    tables = {}
    if out is not None and spiral is not None:
        table = out.table
        tables["test"] = table[table["eval_set"] == "test"][list(COMPARISON_TEST_COLUMNS)].reset_index(drop=True)
        tables["claims"] = comparison_claims(table, out.kd_variants, spiral.table)
    return Summary(experiment, profile, settings, ComparisonRuns(out, spiral), tables, missing)


def _tasks(settings: ComparisonSettings, *, seed: int, device: str, data_root: str | None) -> list[ChainTask]:
    """Notebook 07's MNIST comparison chain, then the spiral's."""
    return [comparison_task(settings, seed=seed, device=device, data_root=data_root),
            spiral_task(settings, seed=seed, device=device)]


def _comparison_gaps(store: ResultsStore, settings: ComparisonSettings, tasks: Sequence[ChainTask],
                     absent: Collection[str], seed: int) -> list[str]:
    """The MNIST comparison table (derived from the chains of ``settings``) with every method, and the
    spiral's entry."""
    table = derived_rows(store, "comparison", "comparison", task_chains(chain_summaries(store), tasks))
    methods = {"Hydra", "GPED", "EnD2", "KD", "Snapshot ensemble", "Long-chain teacher"}
    have = set(table["method"]) if len(table) else set()
    gaps = [f"comparison: no rows for {sorted(methods - have)}"] if methods - have else []
    if not store.entries("spiral", code=numerics_code("spiral")):
        gaps.append("spiral: no complete entry")
    return gaps


def order_row(figures: Path, profile: str = "default") -> list[Claim]:
    """Rule: on the MNIST test set, NLL ensemble < Hydra < KD < EnD² (prior networks), as in the
    Hydra paper's Table 2; ``partly`` when some of the three adjacent pairs are in that order."""
    t = artifact_table(figures, ARTIFACTS["mnist"], profile=profile)
    if t is None:
        return []
    t = t[t["eval_set"] == "test"].set_index("method")["nll"]
    order = [m for m in ("Snapshot ensemble", "Hydra", "KD", "EnD2") if m in t.index]
    hits = sum(t[a] < t[b] for a, b in zip(order, order[1:]))
    shown = [m for m in ("Long-chain teacher", "Snapshot ensemble", "Hydra", "KD", "GPED", "EnD2") if m in t.index]
    return [Claim("Hydra paper: test NLL ensemble < Hydra < KD < prior networks (MNIST)",
                  verdict(hits, len(order) - 1), ", ".join(f"{m} {number(t[m])}" for m in shown),
                  "Hydra paper, Table 2: " + " < ".join(f"{k} {v}" for k, v in HYDRA_TABLE2_MNIST_NLL.items()),
                  link(f"{MNIST_TABLE.format(profile='default')}.md", "comparison") + ", notebook 07",
                  evidence=profile_evidence(profile, PROFILES[profile], 1), kind=HYDRA)]


def mu_row(figures: Path, profile: str = "default") -> list[Claim]:
    """Not a claim of the paper: each student's model uncertainty (MU) error against the long-chain teacher's
    on the MNIST test set (mean absolute error), beside the baseline that predicts zero MU; the verdict
    names the methods no better than predicting zero."""
    t = artifact_table(figures, ARTIFACTS["mu_split"], profile=profile)
    if t is None:
        return []
    t = t[t["eval_set"] == "test"].set_index("method")["mu_mae_teacher"]
    zero = t.get("Zero MU (baseline)")
    shown = [m for m in ("GPED", "EnD2", "Hydra", "Snapshot ensemble") if m in t.index]
    if zero is None or not shown:
        return []
    worse = [m for m in shown if t[m] >= zero]
    judged = (f"— ({', '.join(worse)} no better than predicting zero)" if worse
              else "— (every student better than predicting zero)")
    return [Claim("(ours) model uncertainty on MNIST test inputs: MAE against the long-chain teacher's, beside "
                  "predicting zero", judged,
                  ", ".join(f"{m} {number(t[m])}" for m in shown) + f", predicting zero {number(zero)}",
                  "not in the papers", link(f"{MU_SPLIT_TABLE.format(profile='default')}.md", "MU errors")
                  + ", notebook 07", evidence=profile_evidence(profile, PROFILES[profile], 1), kind=OURS)]


def readme_rows(figures: Path, profile: str = "default") -> list[Claim]:
    """Notebook 07's rows: the Hydra paper's order, then the model uncertainty against predicting zero."""
    return order_row(figures, profile) + mu_row(figures, profile)


# Hydra 20,000 + 60,000 -> 200 + 600 steps; the spiral's chain 100,000 -> 1,000 (B 100), its Hydra 50 + 200
EXPERIMENT = Experiment(
    "07_hydra_comparison", PROFILES, _tasks, summary=comparison_summary, shown_profiles=("default", "long"),
    after_chains=AfterChains.HYDRA, artifacts=ARTIFACTS, checks=CHECKS,
    description="KD, GPED, EnD² and Hydra on one chain; a 2-D spiral; the thesis' input generators",
    scaled_paper={**SCALED_CHAIN, "hydra.phase1_steps": 200, "hydra.phase2_steps": 600,
                  "spiral.num_iterations": 1_000, "spiral.burn_in": 100, "spiral.hydra.phase1_steps": 50,
                  "spiral.hydra.phase2_steps": 200},
    stored=_comparison_gaps, needs_chain_state=True, readme_rows=readme_rows, long_rows=readme_rows)
