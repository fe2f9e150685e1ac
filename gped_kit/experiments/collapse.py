"""A pooled teacher's chain that collapsed to chance-level predictions: found, named and stopped.

A pooled teacher (``GPEDConfig.num_chains`` K > 1) averages the samples of K chains into one ensemble.
A chain whose network died (e.g. every ReLU unit off after a too-large step of a cyclical schedule's
exploration phase) predicts the uniform distribution from then on: its own ensemble's test NLL sits at
log C (2.3026 for C = 10; the likelihood's ``chance_nll``), where it stays. It raises no NaN, so the
engine's divergence check does not see it, yet its samples are a quarter of a 4-chain pool's and pull
the pooled NLL far up. Observed: notebook 01's former ``cpu30`` profile, CNN-MNIST, seed 2: chain 2 at
2.3011 from the first exploration phase (cyclical BAOA, epsilon_0 = 0.6) while its peers reached
0.043-0.052; the pooled teacher 0.291.

Chance level alone is no sign of failure (at masking rate 0.8 the paper's own teacher NLL is 2.298);
a chain at chance *while another chain of the same pool, on the same data, is far below it* is. The
rule (:func:`collapsed_chains`): chain k's ensemble NLL is at least :data:`CHANCE_FRACTION` of the chance
level and the pool's best chain is at most :data:`HEALTHY_FRACTION` of it.

Where it acts: :class:`CollapseHook` stops a chain that the kit's experiments compute (every
notebook's chains, :func:`~gped_kit.experiments.chains.run_chains`) at the first log point that shows
the collapse, with :class:`ChainCollapsed` naming the chain, the step, the NLLs and the likely cause;
:func:`check_history` does the same for a stored chain read back, so a result made before this check
is not used either. Only teachers whose likelihood has a chance level are checked (categorical, log C;
a Gaussian's NLL depends on the scale of y and has none); a single chain is not (nothing to compare it
with). The engine itself does not check: checking there would change the numerics code whose
fingerprint keys every stored result, and is left for its next planned change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

#: A chain's ensemble NLL at or above this fraction of the chance level counts as chance level.
CHANCE_FRACTION = 0.95
#: ... when another chain of the same pool is at or below this fraction of it.
HEALTHY_FRACTION = 0.5
_CHAIN_COLUMN = re.compile(r"^teacher_nll_chain(\d+)$")


class ChainCollapsed(FloatingPointError):
    """A pooled teacher's chain predicts at chance level while another chain of its pool does not."""


def chain_nlls(row: Mapping[str, Any]) -> dict[int, float]:
    """The per-chain ensemble NLLs of one history row (``teacher_nll_chain<k>``), NaN ones left out."""
    out = {}
    for name, value in row.items():
        match = _CHAIN_COLUMN.match(str(name))
        if match and value is not None and not (isinstance(value, float) and math.isnan(value)):
            out[int(match.group(1))] = float(value)
    return out


def collapsed_chains(nlls: Mapping[int, float], chance: float | None) -> dict[int, float]:
    """The chains of ``nlls`` (chain -> ensemble test NLL) at chance level (>= ``CHANCE_FRACTION`` x
    ``chance``, the likelihood's ``chance_nll``: log C for C classes) while the best chain is at most
    ``HEALTHY_FRACTION`` x ``chance``; empty for fewer than two chains or no chance level (None)."""
    if len(nlls) < 2 or chance is None:
        return {}
    if min(nlls.values()) > HEALTHY_FRACTION * chance:
        return {}
    return {k: v for k, v in sorted(nlls.items()) if v >= CHANCE_FRACTION * chance}


def collapse_message(label: str, step: int, nlls: Mapping[int, float], collapsed: Mapping[int, float],
                     chance: float, sampler: str = "") -> str:
    """The error's text: which chain, when, its NLL against chance and against its best peer, the
    likely cause and the way out."""
    best = min(nlls, key=nlls.get)
    chains = ", ".join(f"chain {k} at {v:.4f}" for k, v in collapsed.items())
    return (f"{label}: the pooled teacher's {chains} predicts at chance level ({chance:.4f}) at step {step:,}, "
            f"while chain {best} reached {nlls[best]:.4f} on the same data: the collapsed chain's samples would "
            f"pull the pooled ensemble towards the uniform distribution. Likely cause: a step too large for this "
            f"model{f' ({sampler})' if sampler else ''} killed its network (e.g. every ReLU unit off) early in the "
            f"chain. Lower the sampler's step size (for a cyclical schedule its exploration peak), or pool fewer, "
            f"longer chains.")


def check_history(history: pd.DataFrame, chance: float | None, label: str, sampler: str = "") -> None:
    """Raise :class:`ChainCollapsed` at the first step of a stored chain's ``history`` whose per-chain
    NLLs show a collapsed chain (:func:`collapsed_chains`, ``chance`` the likelihood's chance-level NLL);
    nothing for a single chain or a likelihood without a chance level."""
    if history is None or history.empty or not any(_CHAIN_COLUMN.match(str(c)) for c in history.columns):
        return
    for step, row in history.groupby("step", sort=True).first().iterrows():
        nlls = chain_nlls(row.to_dict())
        collapsed = collapsed_chains(nlls, chance)
        if collapsed:
            raise ChainCollapsed(collapse_message(label, int(step), nlls, collapsed, chance, sampler))


def sampler_text(config: Any) -> str:
    """A short description of a chain configuration's sampler for the message (its class and step size,
    and the schedule when not constant)."""
    sampler = getattr(config, "sampler", None)
    if sampler is None:
        return ""
    text = f"{type(sampler).__name__} step_size={getattr(sampler, 'step_size', '?')}"
    schedule = getattr(sampler, "schedule", None)
    return text + (f", schedule={schedule!r}" if schedule not in (None, "constant") else "")


class CollapseHook:
    """Stops the loop at the first log point where a pooled run has a collapsed chain
    (:func:`collapsed_chains`), raising :class:`ChainCollapsed`; ``labels`` name the runs."""

    def __init__(self, labels: Sequence[str], samplers: Sequence[str] = ()) -> None:
        self.labels, self.samplers = list(labels), list(samplers)

    def on_log(self, engine: Any, rows: list[list[dict]]) -> None:
        chance = engine.chains[0].likelihood.chance_nll(engine.num_outputs) if getattr(engine, "pooled", False) \
            else None
        if chance is None:
            return
        for r, run_rows in enumerate(rows):
            if not run_rows:
                continue
            nlls = chain_nlls(run_rows[0])
            collapsed = collapsed_chains(nlls, chance)
            if collapsed:
                label = self.labels[r] if r < len(self.labels) else f"run {r}"
                sampler = self.samplers[r] if r < len(self.samplers) else ""
                raise ChainCollapsed(collapse_message(label, int(run_rows[0].get("step", engine.t)), nlls, collapsed,
                                                      chance, sampler))

    def on_checkpoint(self, engine: Any) -> None:
        return None

    def on_end(self, engine: Any) -> None:
        return None
