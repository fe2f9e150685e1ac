"""The comparison table read for the notebook: each method's model-uncertainty error split into its two
heads (:func:`mu_error_split`), the long-chain teacher's own quality beside every method's
(:func:`comparison_teacher_lines`), Hydra given another budget (:func:`hydra_config_for_steps`) and the
references named by their size (:func:`reference_names`). Nothing here computes a stored result."""

from __future__ import annotations

import dataclasses

import pandas as pd

from ...baselines import hydra
from ...baselines.endd import ENDD_TEMPERATURE, heated_label
from ...core.options import check_int
from .settings import SNAPSHOTS, TEACHER, ZERO_MU

#: Methods with an uncertainty decomposition (KD students have the predictive only), and the zero-MU baseline.
MU_METHODS = ("Long-chain teacher", "Snapshot ensemble", "GPED", "GPED (squared error)", "GPED (absolute error)",
              "GPED (every step)", "EnD2", heated_label("EnD2", ENDD_TEMPERATURE), "Hydra", ZERO_MU)


#: Columns of :func:`mu_error_split`.
MU_SPLIT_COLUMNS = ("eval_set", "method", "mu_mae_teacher", "total_mae_teacher", "entropy_mae_teacher",
                    "mu_bias_teacher", "total_bias_teacher", "data_bias_teacher", "total_mean", "data_mean",
                    "mu_mean", "teacher_total_mean", "teacher_data_mean", "teacher_mu_mean", "skill", "mu_skill")


def mu_error_split(table: pd.DataFrame) -> pd.DataFrame:
    """Each method's model-uncertainty error split into its two heads, per evaluation set, from a
    :func:`comparison_table`: its mean |Delta MU| against the long-chain teacher, the predictive
    head's total-entropy error and the entropy head's expected-entropy error (mean absolute and
    signed: MU bias = total bias - E[H] bias, :func:`head_errors`), its own mean total, E[H] and MU,
    and the teacher's (``teacher_*``), its skill over the best constant prediction (``skill``, ``mu_skill``:
    :func:`~.compute.method_skill`; NaN in a table stored without it). Rows: the methods of :data:`MU_METHODS`
    present, teacher first, the zero-MU baseline last."""
    rows = table[table["method"].isin(MU_METHODS)].copy()
    teacher = table[table["method"] == TEACHER].set_index("eval_set")
    for col in ("total_mean", "data_mean", "mu_mean"):
        rows[f"teacher_{col}"] = rows["eval_set"].map(teacher[col]) if col in teacher else float("nan")
    rows["order"] = rows["method"].map({m: i for i, m in enumerate(MU_METHODS)})
    rows = rows.sort_values(["eval_set", "order"], key=lambda c: c.map(
        {e: i for i, e in enumerate(dict.fromkeys(table["eval_set"]))}) if c.name == "eval_set" else c, kind="stable")
    return rows.reindex(columns=list(MU_SPLIT_COLUMNS)).reset_index(drop=True)


#: Quantities on which the long-chain teacher has a value of its own (:func:`comparison_teacher_lines`).
TEACHER_QUANTITIES = ("accuracy", "nll", "total_mean", "data_mean", "mu_mean")


def comparison_teacher_lines(table: pd.DataFrame) -> pd.DataFrame:
    """The long-chain teacher's own quality next to every method's: one row per (evaluation set,
    method, quantity of :data:`TEACHER_QUANTITIES`) with ``value``, ``teacher`` (the teacher's on that
    set) and ``minus_teacher`` = value - teacher (for NLL: the NLL gap). The mean |Delta MU| of a
    method against the teacher is ``mu_mae_teacher`` in the table itself."""
    quantities = [q for q in TEACHER_QUANTITIES if q in table]
    long = table.melt(id_vars=["eval_set", "method"], value_vars=quantities, var_name="quantity",
                      value_name="value").dropna(subset=["value"])
    teacher = long[long["method"] == TEACHER].set_index(["eval_set", "quantity"])["value"].rename("teacher")
    out = long[long["method"] != TEACHER].join(teacher, on=["eval_set", "quantity"])
    out["minus_teacher"] = out["value"] - out["teacher"]
    return out.reset_index(drop=True)


def hydra_config_for_steps(config: hydra.HydraConfig, steps: int) -> hydra.HydraConfig:
    """``config`` with ``steps`` training steps in all, split between the two phases in ``config``'s
    ratio (phase 1 rounded, phase 2 the rest): e.g. Hydra given the GPED student's number of updates,
    :func:`~gped_kit.engine.config.student_updates`, so that both get the same budget of steps and inputs."""
    check_int("steps", steps, 1)
    total = config.phase1_steps + config.phase2_steps
    phase1 = round(steps * config.phase1_steps / total) if total else 0
    return dataclasses.replace(config, phase1_steps=phase1, phase2_steps=steps - phase1)


def reference_names(table: pd.DataFrame) -> dict[str, str]:
    """The references named by their size, from a comparison table's ``num_iterations`` and
    ``num_snapshots`` columns: ``{"Long-chain teacher": "teacher, T = 4,000", "Snapshot ensemble":
    "snapshot ensemble, S = 20"}`` (a column that is absent leaves that name as it is)."""
    names = {}
    if "num_iterations" in table and table["num_iterations"].notna().any():
        names[TEACHER] = f"teacher, T = {int(table['num_iterations'].dropna().iloc[0]):,}"
    if "num_snapshots" in table and table["num_snapshots"].notna().any():
        names[SNAPSHOTS] = f"snapshot ensemble, S = {int(table['num_snapshots'].dropna().iloc[0])}"
    return names


def named_references(table: pd.DataFrame) -> pd.DataFrame:
    """A copy of a comparison table whose reference methods are named by their size
    (:func:`reference_names`), for display; the stored names stay as they are."""
    return table.assign(method=table["method"].replace(reference_names(table)))

