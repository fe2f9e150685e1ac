"""Online estimators U of the distillation targets g_hat (Eqs. 9 and 10), as state and update.

* ``U_s`` (Eq. 9): ``g_hat_i <- g(y, x_i, theta_t)``, the current sample only; no state.
* ``U_o`` (Eq. 10): ``g_hat_i <- (m_i g_hat_i + g(theta_t)) / (m_i + 1)``, a running Monte Carlo
  mean per distillation input with visit count ``m_i``. It is kept as running sums and counts
  (``g_hat_i = sum_i / m_i``), the same estimate, which stays correct when an index occurs
  several times in one minibatch (drawn with replacement): each occurrence is one more visit
  with the same theta_t. Storage is ``|D'| x (D + 1)`` numbers and grows linearly with |D'|.
* ``U_s+U_o``: U_s on all target columns but the last, U_o on the last (Experiment 4's C+1
  student: "for distilling entropy ... we always use U_o").

Both estimators are unbiased after burn-in; U_o has lower variance. :func:`estimator_update_`
works for one chain and, unchanged, under ``torch.func.vmap`` over stacked states.

**Pooled samples** (:func:`pooled_estimator_update_`): a teacher pooled from K chains has K
current samples theta_t^(1..K) at each distillation step. U_s becomes their mean,
``g_hat_i <- (1/K) sum_k g(x_i, theta_t^(k))`` (Eq. 9 over the pooled samples: still unbiased,
1/K of the variance), and U_o adds all K to the running mean, ``sum_i += sum_k g(theta_t^(k))``,
``m_i += K`` (Eq. 10 with K samples per visit). With K = 1 both are exactly Eqs. 9 and 10.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .options import Estimator


class EstimatorState(NamedTuple):
    """U_o's running ``sums`` (n, D) and visit ``counts`` (n,); empty (0-row) tensors for U_s."""

    sums: torch.Tensor
    counts: torch.Tensor

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self)


def store_width(estimator: Estimator, dim: int) -> int:
    """Columns U keeps per input for a target of ``dim`` columns (0 for U_s)."""
    if estimator is Estimator.U_S:
        return 0
    if estimator is Estimator.U_O:
        return dim
    if dim < 2:
        raise ValueError(f"estimator 'U_s+U_o' splits the target's columns and needs at least 2, got {dim}; "
                         "use it with the 'predictive+entropy' target")
    return 1


def estimator_init(estimator: Estimator, num_examples: int, dim: int, device: torch.device | str = "cpu",
                   dtype: torch.dtype = torch.float32) -> EstimatorState:
    """The empty store of ``estimator`` for a distillation set of ``num_examples`` inputs and targets of
    ``dim`` columns."""
    width = store_width(estimator, dim)
    if width and num_examples < 1:
        raise ValueError(f"{estimator} store needs num_examples >= 1, got {num_examples}")
    rows = num_examples if width else 0
    return EstimatorState(torch.zeros(rows, width, device=device, dtype=dtype),
                          torch.zeros(rows, device=device, dtype=dtype))


def _online_update_(state: EstimatorState, index: torch.Tensor, value: torch.Tensor,
                    samples: int = 1) -> torch.Tensor:
    """Add ``value`` (the sum of ``samples`` samples' g per input) to the running sums of ``index``
    and ``samples`` to their counts; return the running means there. Written as ``scatter_add_``, which adds
    in the same order as ``index_add_`` (the same numbers on the CPU) and, unlike it, runs as one kernel under
    ``torch.func.vmap`` (``index_add_``'s batching rule loops over the chains)."""
    value = value.to(state.sums.dtype)
    state.sums.scatter_add_(0, index.unsqueeze(-1).expand_as(value), value)
    ones = torch.ones_like(index, dtype=state.counts.dtype)
    state.counts.scatter_add_(0, index, ones if samples == 1 else ones * samples)
    return state.sums[index] / state.counts[index].unsqueeze(-1)


def estimator_update_(estimator: Estimator, state: EstimatorState, index: torch.Tensor,
                      value: torch.Tensor) -> torch.Tensor:
    """Add the current sample's ``value`` = g(x_i, theta_t) (M', D) for the distillation inputs
    ``index`` (M',) to the store (in place) and return the targets g_hat_i (M', D)."""
    if estimator is Estimator.U_S:
        return value
    if estimator is Estimator.U_O:
        return _online_update_(state, index, value)
    return torch.cat([value[:, :-1], _online_update_(state, index, value[:, -1:])], dim=-1)


def pooled_estimator_update_(estimator: Estimator, state: EstimatorState, index: torch.Tensor,
                             values: torch.Tensor) -> torch.Tensor:
    """:func:`estimator_update_` for K pooled samples (see the module docstring): ``values``
    (K, M', D) are g(x_i, theta_t^(k)) of the K chains' current samples on the distillation inputs
    ``index`` (M',). U_s returns their mean over K; U_o adds their sum to the store and K to each
    visited input's count (per occurrence of an index) and returns the running means."""
    samples = values.shape[0]
    if estimator is Estimator.U_S:
        return values.mean(0)
    if estimator is Estimator.U_O:
        return _online_update_(state, index, values.sum(0), samples)
    return torch.cat([values[..., :-1].mean(0), _online_update_(state, index, values[..., -1:].sum(0), samples)],
                     dim=-1)


def estimates(state: EstimatorState, index: torch.Tensor | None = None) -> torch.Tensor:
    """U_o's current estimates for ``index`` (all inputs by default); NaN for never-visited inputs."""
    if index is None:
        return state.sums / state.counts.unsqueeze(-1)
    return state.sums[index] / state.counts[index].unsqueeze(-1)
