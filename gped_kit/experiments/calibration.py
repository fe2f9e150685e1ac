"""The calibration of a notebook's chains, read back from the results store: every finished chain stores
the reliability bins and expected calibration error of its teacher ensemble and of every student whose
target predicts classes (table ``calibration``, :meth:`gped_kit.engine.GPEDResult.calibration_table`);
these functions gather them for a notebook's chain tasks (notebooks 01 and 06) and summarise the ECE
over seeds. Chains stored before chains kept the table have none: :func:`chain_calibration` names them,
and ``recompute=True`` (the notebook's parameter) computes them again with it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from ..core.calibration import Calibration, calibrations_from_table
from .chains import ChainTask
from .frame import chain_summaries, task_chains
from .numerics import numerics_code
from .store import ResultsStore

#: The table every finished chain entry stores its calibration in.
CALIBRATION_TABLE = "calibration"


@dataclass
class ChainCalibration:
    """``bins``: the calibration tables of the tasks' stored chains, stacked, with each chain's ``model``,
    ``seed`` and store ``entry``; ``without_bins``: the labels of tasks whose chain is stored without one
    (made before chains kept it); ``not_stored``: those with no stored chain (e.g. an absent data set)."""

    bins: pd.DataFrame
    without_bins: list[str]
    not_stored: list[str]

    @property
    def missing_line(self) -> str:
        """One line naming the chains stored without bins and how to add them; empty when there are none."""
        if not self.without_bins:
            return ""
        return (f"no reliability bins stored for {len(self.without_bins)} chain(s): {', '.join(self.without_bins)} "
                "(stored before chains kept them); recompute=True computes them again")

    def ece(self, names: Mapping[str, str] | None = None) -> pd.DataFrame:
        """One row per (model, network): the ECE's mean and standard deviation over the seeds and their
        number. ``names`` renames networks (e.g. ``{"predictive-U_s": "U_s"}``) and keeps only those named
        (with ``"teacher"``)."""
        if self.bins.empty:
            return pd.DataFrame(columns=["model", "network", "ece_mean", "ece_std", "seeds"])
        per_chain = self.bins.drop_duplicates(["entry", "network"])[["model", "seed", "network", "ece"]]
        if names is not None:
            per_chain = per_chain[per_chain["network"].isin(["teacher", *names])]
            per_chain = per_chain.assign(network=per_chain["network"].map({"teacher": "teacher", **names}))
        out = per_chain.groupby(["model", "network"], sort=False)["ece"].agg(["mean", "std", "count"]).reset_index()
        if names is not None:  # the networks in the order asked for, the models in order of appearance
            rank = {name: i for i, name in enumerate(["teacher", *names.values()])}
            models = {model: i for i, model in enumerate(dict.fromkeys(out["model"]))}
            out = (out.assign(m=out["model"].map(models), n=out["network"].map(rank)).sort_values(["m", "n"])
                   .drop(columns=["m", "n"]))
        return out.rename(columns={"mean": "ece_mean", "std": "ece_std", "count": "seeds"}).reset_index(drop=True)

    def of(self, model: str, seed: int) -> pd.DataFrame:
        """The bins of ``model``'s chain of ``seed`` (empty when it has none)."""
        if self.bins.empty:
            return self.bins
        return self.bins[(self.bins["model"] == model) & (self.bins["seed"] == seed)]

    def calibrations(self, model: str, seed: int, names: Mapping[str, str]) -> dict[str, Calibration]:
        """The teacher's and the networks of ``names``' :class:`~gped_kit.core.calibration.Calibration` in
        ``model``'s chain of ``seed``, by their new names (``"teacher"`` first, then in ``names``' order), for
        :func:`~gped_kit.plotting.figures.plot_reliability`; empty when the chain has no stored bins."""
        rows = self.of(model, seed)
        found = calibrations_from_table(rows) if len(rows) else {}
        order = {"teacher": "teacher", **names}
        return {new: found[old] for old, new in order.items() if old in found}


def chain_calibration(store: ResultsStore, tasks: Sequence[ChainTask]) -> ChainCalibration:
    """The stored calibration of ``tasks``' chains (complete entries under this checkout's numerics); see
    :class:`ChainCalibration`."""
    summaries = chain_summaries(store)
    chains = [task_chains(summaries, [task]) for task in tasks]  # each task's complete chain entries
    every = set().union(*chains)
    found = store.load(CALIBRATION_TABLE, "chain", code=numerics_code("chain"), where=lambda e: e.key in every)
    have = set(found["entry"]) if len(found) else set()
    bins = [found[found["entry"].isin(keys)].assign(model=task.config.model_name, seed=task.config.seed)
            for task, keys in zip(tasks, chains) if keys & have]
    return ChainCalibration(pd.concat(bins, ignore_index=True) if bins else pd.DataFrame(),
                            [t.label for t, keys in zip(tasks, chains) if keys and not keys & have],
                            [t.label for t, keys in zip(tasks, chains) if not keys])
