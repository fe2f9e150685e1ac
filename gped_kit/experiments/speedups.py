"""Whether a faster numerics option distils what the default does: the check a profile's options wait for.

Two :class:`~gped_kit.engine.GPEDConfig` options make a chain faster on a GPU and change its numbers (:class:`Speedup`):
TF32 matrix products for the teacher's minibatch pass (``matmul_precision="tf32"``) and counter-based random numbers
(``random_numbers="counter"``). A profile takes one (its :class:`~gped_kit.experiments.paper.ChainSettings` field of
that name) only where its chains distil what the default's do. The check, :func:`speedup_check`:

1. Table 1's chain of the paper profile (``model``: the FCNN by default, with its four students: predictive and
   expected-entropy U_s and U_o), shortened to ``steps`` (10^5 by default), once per seed (three by default) with the
   default options and once with the option. Both sets go through the results store like every chain (reused when
   stored, resumed when stopped).
2. Per measure (the teacher's test NLL, each predictive student's NLL, each expected-entropy student's MAE; lower is
   better for all):

   * the *difference* of the option from the default. TF32 keeps a seed's random numbers, so the two chains of a
     seed are a pair, and the difference is the seeds' difference largest in size (every seed's TF32 chain has to
     stay within the spread of its float32 partner); counter-based numbers are other draws, so it is the
     difference of the means;
   * the *spread*: the default's chains' max - min over the seeds;
   * the verdict: ``identical`` (a difference of exactly 0, e.g. TF32 on a CPU, which has no TF32),
     :data:`~gped_kit.experiments.verdicts.NOT_SEPARABLE` (``|difference| < spread``,
     :func:`~gped_kit.experiments.verdicts.separable`), else ``better`` or ``worse``; ``no skill`` where a student
     is not known to beat the best constant prediction (skill below :data:`~gped_kit.core.targets.SKILL_FLOOR`, or
     not stored) in one of the chains, whose numbers then say nothing about distillation.

3. The option is adopted (:attr:`SpeedupCheck.adopt`) when no measure is ``worse`` or ``no skill`` and the option's
   chains ran at least :data:`MIN_SPEEDUP` times as fast (the median of their iterations per second over the
   default's, measured on one device in one batch layout): an option that changes the numbers has to pay for it.
   Otherwise :attr:`SpeedupCheck.reasons` says why not.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..core.options import Option, check_int, parse_option
from ..core.status import Status
from .budget import Budget
from .chains import ChainGrid, ChainTask, run_chains
from .experiment1.settings import PROFILES
from .experiment1.tasks import experiment1_tasks
from .settings import resolve_settings
from .store import ResultsStore
from .verdicts import NOT_SEPARABLE, lowest_known, separable, student_skill, unskilled


class Speedup(Option):
    """A faster numerics option of a chain (module docstring)."""

    TF32 = "tf32"
    COUNTER = "counter"

    @property
    def settings(self) -> dict[str, str]:
        """The chain settings that turn the option on (fields of :class:`~gped_kit.experiments.paper.ChainSettings`)."""
        return {"matmul_precision": "tf32"} if self is Speedup.TF32 else {"random_numbers": "counter"}

    @property
    def paired(self) -> bool:
        """Whether a seed's chain with the option draws the default chain's random numbers (a pair per seed)."""
        return self is Speedup.TF32


#: The models whose Table 1 chain the check can run.
MODELS = ("fcnn", "cnn_mnist")
#: The verdicts that keep an option (:attr:`SpeedupCheck.adopt`).
ACCEPTED = ("identical", NOT_SEPARABLE, "better")
#: The chains' length the check runs by default (the paper profile's chains, shortened).
DEFAULT_STEPS = 100_000
#: The least speed-up (the option's iterations per second over the default's) that adopts an option.
MIN_SPEEDUP = 1.05


def check_speedup_inputs(speedup: Speedup | str, steps: int, seeds: Sequence[int], model: str) -> Speedup:
    """The option as a :class:`Speedup`; ``ValueError`` naming the input otherwise (before any work)."""
    option = parse_option(Speedup, speedup, "speedup")
    check_int("steps", steps, 1)
    if model not in MODELS:
        raise ValueError(f"model={model!r} is not known; allowed: {list(MODELS)}")
    seeds = list(seeds)
    for i, seed in enumerate(seeds):
        check_int(f"seeds[{i}]", seed, 0)
    if len(set(seeds)) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={seeds!r}: give at least two different seeds, each once (the default's spread over "
                         "the seeds is what a difference is measured against)")
    return option


def speedup_tasks(speedup: Speedup | str, steps: int = DEFAULT_STEPS, seeds: Sequence[int] = (0, 1, 2),
                  model: str = "fcnn", overrides: Mapping[str, Any] | None = None, device: str = "auto",
                  data_root: str | None = None) -> tuple[list[ChainTask], list[ChainTask]]:
    """(the default's chains, the option's chains), one per seed in ``seeds`` order: Table 1's ``model`` chain of
    notebook 01's paper profile with ``num_iterations=steps`` and the settings ``overrides`` (e.g. a shorter
    burn-in for a rehearsal; not the option's own fields)."""
    option = check_speedup_inputs(speedup, steps, seeds, model)
    overrides = dict(overrides or {})
    clash = sorted(set(overrides) & {"matmul_precision", "random_numbers", "num_iterations", "table1_seeds"})
    if clash:
        raise ValueError(f"overrides: {clash[0]!r} is set by the check itself (give steps, seeds or the speedup)")
    base = {**overrides, "num_iterations": steps, "table1_seeds": tuple(seeds)}
    default = resolve_settings(PROFILES, "paper", base)
    faster = resolve_settings(PROFILES, "paper", {**base, **option.settings})
    name = f"{option.value} check"
    return ([dataclasses.replace(t, name=f"{name}, default, seed={t.config.seed}")
             for t in experiment1_tasks((model,), default, device=device, data_root=data_root)],
            [dataclasses.replace(t, name=f"{name}, {option.value}, seed={t.config.seed}")
             for t in experiment1_tasks((model,), faster, device=device, data_root=data_root)])


def chain_measures(table: pd.DataFrame) -> pd.DataFrame:
    """One row per (chain, measure) of a chain grid's summary table (:attr:`ChainGrid.table`, with ``seed``):
    ``seed``, ``measure`` (``teacher NLL``, ``<student> NLL`` or ``<student> entropy MAE``), ``value`` and
    ``skill`` (NaN for the teacher)."""
    rows = []
    for seed, chain in table.groupby("seed", sort=True):
        rows.append({"seed": int(seed), "measure": "teacher NLL", "value": float(chain["teacher_nll"].iloc[0]),
                     "skill": math.nan})
        skills = student_skill(chain)
        for i, row in chain.iterrows():
            predictive = row["target"] == "predictive"
            column = "student_nll" if predictive else "entropy_mae"
            rows.append({"seed": int(seed), "measure": f"{row['student']} {'NLL' if predictive else 'entropy MAE'}",
                         "value": float(row[column]), "skill": float(skills[i])})
    return pd.DataFrame(rows, columns=["seed", "measure", "value", "skill"])


def compare_measures(default: pd.DataFrame, option: pd.DataFrame, paired: bool) -> pd.DataFrame:
    """The verdict per measure (module docstring) from two :func:`chain_measures` tables: ``measure``,
    ``default`` and ``option`` (means over the seeds), ``difference``, ``spread`` (the default's max - min),
    ``seeds``, ``lowest_skill`` (over both sets' chains) and ``verdict``."""
    rows = []
    for measure, ours in default.groupby("measure", sort=False):
        theirs = option[option["measure"] == measure]
        if paired:
            both = ours.merge(theirs, on="seed", suffixes=("_default", "_option"))
            each = both["value_option"] - both["value_default"]
            difference = float(each.loc[each.abs().idxmax()]) if len(both) else math.nan
            seeds = len(both)
        else:
            difference = float(theirs["value"].mean() - ours["value"].mean()) if len(theirs) else math.nan
            seeds = min(len(ours), len(theirs))
        spread = float(ours["value"].max() - ours["value"].min())
        student = measure != "teacher NLL"  # the teacher needs no skill; a student counts only with it known
        skill = lowest_known(pd.concat([ours["skill"], theirs["skill"]])) if student else math.nan
        rows.append({"measure": measure, "default": float(ours["value"].mean()),
                     "option": float(theirs["value"].mean()) if len(theirs) else math.nan,
                     "difference": difference, "spread": spread, "seeds": seeds, "lowest_skill": skill,
                     "verdict": _verdict(difference, spread, skill, student)})
    return pd.DataFrame(rows, columns=["measure", "default", "option", "difference", "spread", "seeds",
                                       "lowest_skill", "verdict"])


def _verdict(difference: float, spread: float, skill: float, student: bool) -> str:
    if student and unskilled(skill):
        return "no skill"
    if math.isnan(difference):
        return "missing"
    if difference == 0.0:
        return "identical"
    if not separable(difference, spread):
        return NOT_SEPARABLE
    return "better" if difference < 0 else "worse"


@dataclass
class SpeedupCheck:
    """What :func:`speedup_check` found: the option, both chain grids, the verdict per measure (``table``) and the
    chains' rates (``rates``: one row per chain, with its device kind and iterations per second)."""

    speedup: Speedup
    default: ChainGrid
    option: ChainGrid
    table: pd.DataFrame
    rates: pd.DataFrame

    @property
    def complete(self) -> bool:
        """Every chain of both sets finished (ran, resumed or reused)."""
        return all(o.result is not None for o in self.default.outcomes + self.option.outcomes)

    @property
    def speed_ratio(self) -> float:
        """The option's median iterations per second over the default's; NaN unless every chain finished on one
        device, in one batch layout, and all of them in this run or all read back from the store (rates from
        different machines, layouts or runs do not compare)."""
        r = self.rates
        if not self.complete or r.empty or any(r[c].nunique() != 1 for c in ("device", "batched", "reused")):
            return math.nan
        by = r.groupby("chains")["iterations_per_s"].median()
        return float(by.get("option", math.nan) / by.get("default", math.nan))

    @property
    def reasons(self) -> list[str]:
        """Why the option is not adopted (empty when it is)."""
        out = []
        if not self.complete:
            out.append("not every chain finished")
        bad = self.table[~self.table["verdict"].isin(ACCEPTED)]
        out += [f"{r.measure}: {r.verdict}" for r in bad.itertuples()]
        ratio = self.speed_ratio
        if math.isnan(ratio):
            if self.complete:
                out.append("the chains' rates do not compare (several devices, batch layouts or runs)")
        elif ratio < MIN_SPEEDUP:
            out.append(f"not faster: {ratio:.2f}x the default's iterations per second (adopted from "
                       f"{MIN_SPEEDUP:.2f}x)")
        return out

    @property
    def adopt(self) -> bool:
        """Whether a profile may take the option (module docstring)."""
        return not self.reasons

    def text(self) -> str:
        """The verdict table in Markdown, with the rates and the decision."""
        ratio = self.speed_ratio
        rate = "not comparable" if math.isnan(ratio) else f"{ratio:.2f}x the default's"
        devices = ", ".join(sorted(self.rates["device"].dropna().unique())) if len(self.rates) else "none"
        decision = ("adopt" if self.adopt else "do not adopt: " + "; ".join(self.reasons))
        table = self.table.assign(**{c: self.table[c].map(lambda v: f"{v:.4g}")
                                     for c in ("default", "option", "difference", "spread", "lowest_skill")})
        return (f"{self.speedup.value} against the default ({len(self.default.outcomes)} seeds, device {devices}):\n\n"
                f"{table.to_markdown(index=False)}\n\niterations per second: {rate}\n\n{decision}")


def _rates(grid: ChainGrid, chains: str) -> list[dict[str, Any]]:
    rows = []
    for o in grid.outcomes:
        if o.result is None:
            continue
        summary = o.result.summary
        rows.append({"chains": chains, "seed": o.task.config.seed, "device": str(summary["device"].iloc[0]),
                     "batched": o.batched, "iterations_per_s": float(summary["iterations_per_s"].iloc[0]),
                     "status": str(o.status), "reused": o.status == Status.REUSED})
    return rows


def speedup_check(speedup: Speedup | str, store: ResultsStore, *, steps: int = DEFAULT_STEPS,
                  seeds: Sequence[int] = (0, 1, 2), model: str = "fcnn", overrides: Mapping[str, Any] | None = None,
                  device: str = "auto", data_root: str | None = None, chains_per_batch: int | str = "auto",
                  prepare: Callable[[ChainTask], ChainTask] | None = None, budget: Budget | None = None,
                  executor: str = "local", progress: bool = True) -> SpeedupCheck:
    """Run (or read back from ``store``) the default's and the option's chains (:func:`speedup_tasks`), the
    default's first, and judge the option (module docstring). ``prepare`` changes each task before it runs
    without changing its key (e.g. graph mode); ``budget`` and ``executor`` are :func:`run_chains`'s
    (``executor="stored"``: judge what the store holds, computing nothing)."""
    option = parse_option(Speedup, speedup, "speedup")
    default_tasks, option_tasks = speedup_tasks(option, steps, seeds, model, overrides, device, data_root)
    if prepare is not None:
        default_tasks, option_tasks = [prepare(t) for t in default_tasks], [prepare(t) for t in option_tasks]
    grids = [run_chains(tasks, store, chains_per_batch=chains_per_batch, progress=progress, budget=budget,
                        executor=executor) for tasks in (default_tasks, option_tasks)]
    default, faster = (_measures(g) for g in grids)
    table = (compare_measures(default, faster, option.paired) if len(default) else
             pd.DataFrame(columns=["measure", "default", "option", "difference", "spread", "seeds", "lowest_skill",
                                   "verdict"]))
    rates = pd.DataFrame(_rates(grids[0], "default") + _rates(grids[1], "option"),
                         columns=["chains", "seed", "device", "batched", "iterations_per_s", "status", "reused"])
    return SpeedupCheck(option, grids[0], grids[1], table, rates)


def _measures(grid: ChainGrid) -> pd.DataFrame:
    table = grid.table
    return chain_measures(table) if len(table) else pd.DataFrame(columns=["seed", "measure", "value", "skill"])
