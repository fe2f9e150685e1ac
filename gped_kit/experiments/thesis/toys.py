"""Papamakarios' thesis toys (paper 001, Chapter 3) as stored runs: notebook ``08_thesis_toys``.

The numerics are :mod:`gped_kit.toys` (the Bayesian mixture of Gaussians of
Section 3.2.3 with batch and online EM, Appendix D; the 2-D Bayesian logistic regression of
Section 3.3.4 with cross-entropy and derivative matching students and the input generators).
This module holds what the notebook adds to them:

* its settings, :class:`ThesisToysSettings` (the data-set sizes and the two toys' configurations),
  and :data:`PROFILES` (``default``: a CPU in under a minute; ``paper``: the thesis' sizes), with
  :func:`mog_configs` / :func:`logreg_config` giving each run's configuration;
* stored runs, :func:`run_toy`: one entry of kind ``"toy"`` in the single results store per
  configuration, keyed by the configuration's record (:func:`toy_record`) **and the toys' numerics
  version** (:mod:`~gped_kit.experiments.numerics`), so a change to the toys' numbers recomputes the
  run instead of reusing arrays made by older numerics. An entry
  holds the run's table (``summary.csv``) and the figures' arrays (``arrays.npz``, float16 but
  for :data:`FLOAT32_ARRAYS`). A run computed now and one read back are the same
  :class:`~gped_kit.toys.ToyResult`: both are read from the entry;
* the analysis of the tables: :func:`online_vs_batch`, :func:`thesis_toys_claims` (the thesis'
  findings checked on our numbers) and :func:`mog_agreement` / :func:`logreg_agreement` (how far
  the online students are from the batch students).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...core.options import check_int
from ...core.schema import record
from ...core.status import Status
from ...toys import (
    INPUT_GENERATORS,
    LOSSES,
    LogRegConfig,
    MoGConfig,
    ToyResult,
    config_dict,
    run_logreg,
    run_mog,
)
from ..store import Entry, ResultsStore
from ..verdicts import NO_EVIDENCE, judged_verdict, no_evidence, unskilled

# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class ThesisToysSettings:
    """A profile of notebook ``08_thesis_toys``: the two toys' configurations, whose defaults are
    the thesis' sizes.

    Mixture of Gaussians (Section 3.2.3): one run per data-set size N in ``mog_sizes``, each with
    ``mog`` (:class:`~gped_kit.toys.MoGConfig`: S Gibbs samples after the burn-in,
    M draws from p_MC for batch EM, B chain samples per online EM iteration; Appendix D; its
    ``num_data`` and ``seed`` are replaced by N and the notebook's seed). Logistic regression
    (Section 3.3.4): ``logreg`` (:class:`~gped_kit.toys.LogRegConfig`: the bag of
    S slice-sampling samples, SGD iterations, minibatch, learning rate decayed linearly to 0, the
    ``perturb`` and ``noise`` generators' standard deviations; its ``seed`` is the notebook's).
    """

    mog_sizes: tuple[int, ...] = (2, 5, 10, 20, 50, 100, 200, 500, 1000)
    mog: MoGConfig = MoGConfig()
    logreg: LogRegConfig = LogRegConfig()

    def __post_init__(self) -> None:
        object.__setattr__(self, "mog_sizes", tuple(self.mog_sizes))
        if not self.mog_sizes:
            raise ValueError("mog_sizes=(): must name at least one data-set size N")
        for i, n in enumerate(self.mog_sizes):
            check_int(f"mog_sizes[{i}]", n, 1)
        for name, config, kind in (("mog", self.mog, MoGConfig), ("logreg", self.logreg, LogRegConfig)):
            if not isinstance(config, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {type(config).__name__}")


#: The notebook's profiles. ``default``: CPU, under a minute of compute; the logistic regression
#: students take 2,000 SGD iterations at learning rate 3 (measured: the thesis' 5,000 iterations
#: at learning rate 1 reach the same distances; 2,000 at 1 under-train) and a bag of S = 5,000
#: samples. ``paper``: the thesis' sizes (S = 10,000 MCMC samples, burn-in 1,000, M = 1,000 EM
#: samples, online minibatches of 100, N in {2, ..., 1000}; logistic regression 5,000 iterations
#: of minibatch 10 at learning rate 1 decayed linearly to 0).
PROFILES: dict[str, ThesisToysSettings] = {
    "default": ThesisToysSettings(mog_sizes=(2, 10, 100, 1000),
                                  mog=MoGConfig(num_samples=10_000, burn_in=1_000, num_distill_samples=1_000,
                                                minibatch_size=100),
                                  logreg=LogRegConfig(num_samples=5_000, burn_in=1_000, num_iterations=2_000,
                                                      batch_size=10, lr=3.0)),
    "paper": ThesisToysSettings(mog_sizes=(2, 5, 10, 20, 50, 100, 200, 500, 1000),
                                mog=MoGConfig(num_samples=10_000, burn_in=1_000, num_distill_samples=1_000,
                                              minibatch_size=100),
                                logreg=LogRegConfig(num_samples=10_000, burn_in=1_000, num_iterations=5_000,
                                                    batch_size=10, lr=1.0)),
}


def mog_configs(settings: ThesisToysSettings, seed: int = 0) -> list[MoGConfig]:
    """One mixture-of-Gaussians configuration per data-set size N of the profile."""
    return [dataclasses.replace(settings.mog, num_data=n, seed=seed) for n in settings.mog_sizes]


def logreg_config(settings: ThesisToysSettings, seed: int = 0) -> LogRegConfig:
    """The logistic-regression configuration of the profile, seeded by ``seed``."""
    return dataclasses.replace(settings.logreg, seed=seed)


# ----------------------------------------------------------------------------- stored runs

#: Arrays kept as float32 (the rest are float16): the evaluation grids (float16 cannot tell the
#: MoG grid's points apart beyond |x| = 32), the chain moments the notebook prints and the
#: students' weights.
FLOAT32_ARRAYS = frozenset({"grid", "grid_axis", "bag_mean", "bag_cov", "student_weights"})
#: Table columns holding lists (the MoG students' parameters), kept as JSON text in the CSV.
LIST_COLUMNS = ("student_weights", "student_means", "student_variances")
_TOY_NAMES = {MoGConfig: "mog", LogRegConfig: "logreg"}
_FLOAT16_MAX = float(np.finfo(np.float16).max)


def _check_config(config: Any) -> None:
    if type(config) not in _TOY_NAMES:
        raise ValueError(f"config={type(config).__name__}: allowed: MoGConfig or LogRegConfig")


def toy_record(config: MoGConfig | LogRegConfig) -> dict[str, Any]:
    """The record keying a toy run: which toy and the configuration's non-default fields."""
    _check_config(config)
    return {"toy": _TOY_NAMES[type(config)], "config": record(config)}


def compact_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays as stored: floats as float16, except :data:`FLOAT32_ARRAYS` and any array whose
    values exceed float16's range (float32); other dtypes unchanged."""
    out = {}
    for name, value in arrays.items():
        a = np.asarray(value)
        if a.dtype.kind == "f":
            finite = a[np.isfinite(a)]
            wide = name in FLOAT32_ARRAYS or (finite.size and float(np.abs(finite).max()) > _FLOAT16_MAX)
            a = a.astype(np.float32 if wide else np.float16)
        out[name] = a
    return out


def store_toy(entry: Entry, result: ToyResult) -> None:
    """Write a run's table (``summary``) and its arrays, compact (:func:`compact_arrays`)."""
    table = result.table.copy()
    for col in LIST_COLUMNS:
        if col in table.columns:
            table[col] = table[col].map(json.dumps)
    entry.write_table("summary", table)
    entry.write_arrays(compact_arrays(result.arrays), dtype=None)


def load_toy(entry: Entry, config: MoGConfig | LogRegConfig, status: Status = Status.REUSED) -> ToyResult:
    """The :class:`ToyResult` stored in ``entry`` (table exactly as computed; arrays as stored)."""
    table = entry.table("summary")
    for col in LIST_COLUMNS:
        if col in table.columns:
            table[col] = table[col].map(json.loads).astype(object)
    return ToyResult(table, entry.arrays(), config_dict(config), status=status, key=entry.key)


def run_toy(config: MoGConfig | LogRegConfig, store: ResultsStore, recompute: bool = False) -> ToyResult:
    """A toy run through the results store: computed (:func:`~gped_kit.toys.run_mog`
    or :func:`~gped_kit.toys.run_logreg`) and stored when the store has no entry
    for this configuration under the toys' numerics version, reused otherwise;
    ``recompute=True`` sets a stored entry aside and computes it again. Either way the result
    is read from the entry, so a reused run equals a computed one; ``status`` says which."""
    _check_config(config)

    def compute(entry: Entry) -> None:
        store_toy(entry, run_mog(config) if isinstance(config, MoGConfig) else run_logreg(config))

    entry, status = store.cached("toy", toy_record(config), None, compute,
                                 recompute=recompute)
    return load_toy(entry, config, status)


# ----------------------------------------------------------------------------- analysis


def online_vs_batch(table: pd.DataFrame, metric: str, keys: Sequence[str]) -> pd.DataFrame:
    """One row per ``keys`` with the batch and online values of ``metric``, their ratio
    online / batch, and the memory of each and its ratio online / batch."""
    for col in (*keys, "mode", metric, "memory_bytes"):
        if col not in table.columns:
            raise ValueError(f"online_vs_batch: column {col!r} missing; the table has {list(table.columns)}")
    wide = table.pivot_table(index=list(keys), columns="mode", values=[metric, "memory_bytes"], aggfunc="first")
    wide.columns = [f"{a}_{b}" for a, b in wide.columns]
    wide = wide.reset_index()
    wide[f"{metric}_ratio"] = wide[f"{metric}_online"] / wide[f"{metric}_batch"]
    wide["memory_ratio"] = wide["memory_bytes_online"] / wide["memory_bytes_batch"]
    return wide


#: The memory findings: they report measured ratios and hold by construction (an online method holds one
#: minibatch of samples where batch holds them all), so a count of the thesis' claims that hold leaves them out.
MOG_MEMORY_CLAIM = "MoG: online needs a fraction of the memory"
LOGREG_MEMORY_CLAIM = "LogReg: online needs a fraction of the memory"
BY_CONSTRUCTION = frozenset({MOG_MEMORY_CLAIM, LOGREG_MEMORY_CLAIM})


def _skilled(table: pd.DataFrame, metric: str) -> pd.Series:
    """Per row, whether its student is known to beat the best constant prediction on ``metric``
    (:func:`~gped_kit.experiments.verdicts.no_evidence`: its ``<metric>_skill`` at least
    :data:`~gped_kit.core.targets.SKILL_FLOOR`; a table stored without skill has no such student)."""
    return pd.Series([not no_evidence(row, metric) for _, row in table.iterrows()], index=table.index, dtype=bool)


def thesis_toys_claims(mog: pd.DataFrame, logreg: pd.DataFrame, metric: str = "mean_kl_test",
                       factor: float = 2.0, slack: float = 0.002) -> pd.DataFrame:
    """The thesis' findings checked on our numbers, one row per claim: ``claim``, what the
    ``thesis`` says, ``ours`` (the numbers), the ``metric`` they are (``kl_mc_to_student`` for the mixture,
    ``metric`` for the logistic regression, ``memory_ratio`` for the memory claims), ``holds`` (bool), ``count``
    of ``of`` comparisons, and
    ``no_evidence``, the comparisons left out because a student behind them does not beat the best constant
    prediction (its ``<metric>_skill``, :func:`~gped_kit.experiments.verdicts.no_evidence`; ``kl_mc_to_student``
    for the mixture). A claim holds when its word by :func:`~gped_kit.experiments.verdicts.judged_verdict` over
    the judged comparisons is ``yes``: it was judged in at least one comparison, holds in each, and no more
    comparisons are no evidence than are judged (1 judged beside 2 no evidence is
    :data:`~gped_kit.experiments.verdicts.NO_EVIDENCE`, not held).

    "Online ~ batch" holds for a comparison when the online student's distance is at most
    ``factor`` times the batch student's plus ``slack`` (KL on the MoG grid for ``mog``; ``metric``
    for ``logreg``); it needs both students. "Pure noise worse" needs only the best data-based student:
    that noise inputs teach nothing is the claim. "DSE closer than CE" needs both, and a DSE student that
    minimised its own loss (:func:`dse_minimised`): where SGD left its derivative square error above the CE
    student's, the comparison is of the optimiser, not of the losses (no evidence). Either table may be empty
    (its claims are then left out). The memory claims report the measured ratios; they hold by construction
    (online holds one minibatch), whatever the students learnt.
    """
    rows = []

    def add(claim: str, thesis: str, outcomes: Sequence[bool], ours: str, measure: str,
            judged: Sequence[bool] | None = None,
            why: str = "a student not known to beat the best constant prediction") -> None:
        judged = [True] * len(outcomes) if judged is None else list(judged)
        counted = [o for o, j in zip(outcomes, judged) if j]
        left_out = len(judged) - len(counted)
        if left_out:
            ours += f"; {left_out} no evidence ({why})"
        holds = judged_verdict(int(sum(counted)), len(counted), 0, left_out) == "yes"
        rows.append(dict(claim=claim, thesis=thesis, ours=ours, metric=measure, holds=holds,
                         count=int(sum(counted)), of=len(counted), no_evidence=left_out))

    def both_skilled(table: pd.DataFrame, keys: list[str], column: str) -> pd.Series:
        """Per ``keys`` (the rows of :func:`online_vs_batch`), whether both modes' students are skilled."""
        return table.assign(_skilled=_skilled(table, column)).groupby(keys)["_skilled"].all()

    if len(mog):
        w = online_vs_batch(mog, "kl_mc_to_student", ["num_data"])
        ok = list(w["kl_mc_to_student_online"] <= factor * w["kl_mc_to_student_batch"] + slack)
        judged = both_skilled(mog, ["num_data"], "kl_mc_to_student").reindex(w["num_data"]).fillna(False)
        add("MoG: online EM as close to p_MC as batch EM", "online close to batch (Figures 3.1-3.9)", ok,
            "KL(p_MC||q) online / batch per N: " + ", ".join(
                f"N={n}: {o:.4f}/{b:.4f}" for n, o, b in zip(w["num_data"], w["kl_mc_to_student_online"],
                                                              w["kl_mc_to_student_batch"])), "kl_mc_to_student",
            list(judged))
        add(MOG_MEMORY_CLAIM, "100 instead of 10,000 MCMC samples and 1,000 data samples",
            list(w["memory_ratio"] < 0.1), f"online / batch bytes: {w['memory_ratio'].max():.4f} at most",
            "memory_ratio")
    if len(logreg):
        for loss, label, thesis in (("cross_entropy", "cross-entropy", "equivalent in expectation (Eq. 3.40)"),
                                    ("derivative_square_error", "derivative square error",
                                     "online similar to batch although its loss differs (Section 3.3.3)")):
            rows_loss = logreg[logreg["loss"] == loss]
            if rows_loss["mode"].nunique() < 2:
                continue
            w = online_vs_batch(rows_loss, metric, ["generator"])
            judged = both_skilled(rows_loss, ["generator"], metric).reindex(w["generator"]).fillna(False)
            add(f"LogReg {label}: online as close to p_MC as batch", thesis,
                list(w[f"{metric}_online"] <= factor * w[f"{metric}_batch"] + slack),
                f"{metric} online / batch: " + ", ".join(
                    f"{g}: {o:.4f}/{b:.4f}" for g, o, b in zip(w["generator"], w[f"{metric}_online"],
                                                              w[f"{metric}_batch"])), metric, list(judged))
        if logreg["mode"].nunique() == 2:
            w = online_vs_batch(logreg, metric, ["loss", "generator"])
            add(LOGREG_MEMORY_CLAIM, "10 instead of 10,000 MCMC samples",
                list(w["memory_ratio"] < 0.1), f"online / batch bytes: {w['memory_ratio'].max():.4f} at most",
                "memory_ratio")
        gens = set(logreg["generator"])
        skilled = logreg.assign(_skilled=_skilled(logreg, metric))
        if "noise" in gens and gens & {"resample", "perturb"}:
            data_gens = [g for g in ("resample", "perturb") if g in gens]
            wide = logreg.pivot_table(index=["mode", "loss"], columns="generator", values=metric, aggfunc="first")
            best = wide[data_gens].idxmin(axis=1)
            known = skilled.set_index(["mode", "loss", "generator"])["_skilled"]
            judged = [bool(known.get((m, loss, g), False)) for (m, loss), g in best.items()]
            ratio = wide["noise"] / wide[data_gens].min(axis=1)
            add("Pure-noise inputs distil worse than data-based inputs",
                "Gaussian noise inputs far worse (Chapter 2, Tables 2.1-2.2)", list(ratio > 1),
                f"{metric} noise / best data-based generator: " + ", ".join(
                    f"{m} {('CE' if loss == 'cross_entropy' else 'DSE')}: {r:.1f}x" for (m, loss), r in ratio.items()),
                metric, judged)
        if set(logreg["loss"]) == set(LOSSES):
            wide = logreg.pivot_table(index=["mode", "generator"], columns="loss", values=metric, aggfunc="first")
            both = skilled.groupby(["mode", "generator"])["_skilled"].all().reindex(wide.index).fillna(False)
            minimised = dse_minimised(logreg).reindex(wide.index).fillna(False)
            better = wide["derivative_square_error"] < wide["cross_entropy"]
            add("Derivative square error closer to p_MC than cross-entropy",
                "DSE better than CE (Section 3.3.4, inputs N(0, 100 I))", list(better),
                f"{metric} DSE / CE: " + ", ".join(
                    f"{m} {g}: {d / c:.2f}" for (m, g), d, c in zip(wide.index, wide["derivative_square_error"],
                                                                     wide["cross_entropy"])), metric,
                list(both & minimised),
                why=f"{int((~minimised).sum())} whose DSE student did not minimise its own loss below the CE "
                    f"student's, {int((minimised & ~both).sum())} with a student not known to beat the best "
                    "constant prediction")
    return pd.DataFrame(rows, columns=["claim", "thesis", "ours", "metric", "holds", "count", "of", "no_evidence"])


def dse_minimised(logreg: pd.DataFrame) -> pd.Series:
    """Per (mode, generator) of the logistic regression's students, whether the derivative-square-error student
    ended with a lower derivative square error against p_MC (its ``dse_objective``, on its generator's inputs)
    than the cross-entropy student of the same mode and generator: whether it minimised its own loss at least as
    well as a student not trained on it. False where either is missing (a table stored without the column: not
    known)."""
    index = pd.MultiIndex.from_frame(logreg[["mode", "generator"]].drop_duplicates()) if len(logreg) else None
    if "dse_objective" not in logreg or index is None:
        return pd.Series(False, index=index, dtype=bool)
    wide = logreg.pivot_table(index=["mode", "generator"], columns="loss", values="dse_objective", aggfunc="first")
    if not {"derivative_square_error", "cross_entropy"} <= set(wide.columns):
        return pd.Series(False, index=wide.index, dtype=bool)
    return (wide["derivative_square_error"] <= wide["cross_entropy"]).astype(bool)


def skill_text(mog: pd.DataFrame, logreg: pd.DataFrame) -> str:
    """One sentence on whether the toys' students beat the best constant prediction: each toy's range of
    ``skill`` (a student's lowest, :mod:`gped_kit.toys`), and the students below
    :data:`~gped_kit.core.targets.SKILL_FLOOR` (or stored without skill) by name; their comparisons are left
    out of the claims (:func:`thesis_toys_claims`)."""
    parts, below = [], []
    for toy, table, name in (("the mixture of Gaussians", mog, lambda r: f"MoG N={r['num_data']} {r['mode']}"),
                             ("the logistic regression", logreg,
                              lambda r: f"LogReg {r['mode']} {r['loss']} {r['generator']}")):
        if table.empty:
            continue
        skill = table["skill"] if "skill" in table else pd.Series(np.nan, index=table.index)
        known = skill.dropna()
        if len(known):
            parts.append(f"{known.min():.2f} to {known.max():.2f} ({toy})")
        below += [name(r) for (_, r), k in zip(table.iterrows(), skill) if unskilled(k)]
    if not parts and not below:
        return "No toy student has run."
    are = "student is" if len(below) == 1 else "students are"
    text = ("Every student beats the best constant prediction" if not below else
            f"{len(below)} {are} {NO_EVIDENCE} (not known to beat the best constant prediction: "
            + ", ".join(below) + ")")
    return text + (f"; skill {' and '.join(parts)}." if parts else ".")


def mog_agreement(results: Sequence[ToyResult]) -> pd.DataFrame:
    """How far online EM's student is from batch EM's, per data-set size N (Section 3.2.3's
    "online close to batch" without going through p_MC): ``tv_online_batch`` = 0.5 int |q_online -
    q_batch| dx on the evaluation grid (trapezoid rule) and ``mean_difference`` = the largest
    |m_online - m_batch| of the students' component means, each sorted (Eq. 3.14's components are
    exchangeable), together with both students' KL(p_MC || q)."""
    rows = []
    for result in results:
        a, t = result.arrays, result.table.set_index("mode")
        grid = a["grid"].astype(float)
        tv = 0.5 * float(np.trapezoid(np.abs(a["online"].astype(float) - a["batch"].astype(float)), grid))
        means = {m: np.sort(np.asarray(t.loc[m, "student_means"], float)) for m in ("batch", "online")}
        rows.append(dict(num_data=int(t["num_data"].iloc[0]), tv_online_batch=tv,
                         mean_difference=float(np.abs(means["online"] - means["batch"]).max()),
                         kl_batch=float(t.loc["batch", "kl_mc_to_student"]),
                         kl_online=float(t.loc["online", "kl_mc_to_student"])))
    return pd.DataFrame(rows, columns=["num_data", "tv_online_batch", "mean_difference", "kl_batch", "kl_online"])


def logreg_agreement(result: ToyResult) -> pd.DataFrame:
    """How far each online logistic-regression student is from the batch student of the same loss
    and input generator: ``mean_abs_grid_online_batch`` = the mean |f_online(x) - f_batch(x)| of
    p(y = 1 | x) (Eq. 3.44) over the evaluation grid. With cross-entropy both minimise the same
    loss in expectation (Eq. 3.40), so they should agree."""
    table = result.table.reset_index(drop=True)
    grids = result.arrays["student_grids"].astype(float)
    index = {(r["mode"], r["loss"], r["generator"]): i for i, r in table.iterrows()}
    rows = []
    for loss in LOSSES:
        for g in INPUT_GENERATORS:
            if ("batch", loss, g) in index and ("online", loss, g) in index:
                diff = np.abs(grids[index[("online", loss, g)]] - grids[index[("batch", loss, g)]])
                rows.append(dict(loss=loss, generator=g, mean_abs_grid_online_batch=float(diff.mean()),
                                 max_abs_grid_online_batch=float(diff.max())))
    return pd.DataFrame(rows, columns=["loss", "generator", "mean_abs_grid_online_batch", "max_abs_grid_online_batch"])
