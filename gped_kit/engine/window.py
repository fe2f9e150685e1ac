"""The teacher ensemble over its most recent samples: is the chain still moving?

The ensemble of Algorithm 1 averages every kept sample since burn-in; while the chain is still
converging, early samples drag the average. :class:`RecentWindow` also tracks the ensemble over
a trailing window that always covers between the most recent half and three quarters of the
kept samples, from two saved copies of the running sums (no per-sample storage): at each log point
with ``n`` samples, the pending copy (taken at ``n_p`` samples) becomes the window's start once
``n_p <= n / 2``, and a new pending copy is taken. The window's start is reported with each
row, so the fraction is never guessed. Comparing ``teacher_nll`` with ``teacher_recent_nll``
shows whether the chain has settled (they agree) or is still improving (recent is lower).
"""

from __future__ import annotations

import torch


class RecentWindow:
    """Saved running sums of the ensemble's targets on the test rows (see the module docstring)."""

    def __init__(self) -> None:
        self.start_count = 0
        self.start_sums: dict[str, torch.Tensor] | None = None  # None: zeros (the window starts at sample 0)
        self.pending_count = -1
        self.pending_sums: dict[str, torch.Tensor] | None = None

    def advance(self, count: int, sums: dict[str, torch.Tensor]) -> None:
        """At a log point with ``count`` samples and running ``sums`` (chain axis first, test
        rows): move the window's start forward when the pending copy is old enough."""
        if count == 0:
            return
        if self.pending_sums is None or 2 * self.pending_count <= count:
            if self.pending_sums is not None:
                self.start_count, self.start_sums = self.pending_count, self.pending_sums
            self.pending_count, self.pending_sums = count, {n: s.clone() for n, s in sums.items()}

    def means(self, k: int, count: int, sums: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Chain k's ensemble means over the window's samples ``start_count + 1 .. count``."""
        n = count - self.start_count
        if n <= 0:
            return {}
        if self.start_sums is None:
            return {name: s[k] / n for name, s in sums.items()}
        return {name: (s[k] - self.start_sums[name][k]) / n for name, s in sums.items()}

    def state_dict(self, k: int) -> dict:
        """Chain k's part, for checkpoints (tensors and plain data)."""
        def part(sums: dict[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
            return {} if sums is None else {n: s[k].detach().clone() for n, s in sums.items()}
        return {"start_count": self.start_count, "start_sums": part(self.start_sums),
                "pending_count": self.pending_count, "pending_sums": part(self.pending_sums)}

    def load_state_dict(self, k: int, state: dict, like: dict[str, torch.Tensor]) -> None:
        """Restore chain k's part; ``like`` are the running sums' (chain axis first) test rows."""
        def put(current: dict[str, torch.Tensor] | None, saved: dict[str, torch.Tensor]) -> dict | None:
            if not saved:
                return None
            out = current if current is not None else {n: torch.zeros_like(s) for n, s in like.items()}
            for n, s in saved.items():
                out[n][k].copy_(s)
            return out
        self.start_count, self.pending_count = state["start_count"], state["pending_count"]
        self.start_sums = put(self.start_sums, state["start_sums"])
        self.pending_sums = put(self.pending_sums, state["pending_sums"])
