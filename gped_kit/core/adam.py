"""Adam (Kingma and Ba, 2015, Algorithm 1) as explicit state and an in-place update.

The students of Algorithm 1 are trained with Adam (Appendix A.2). ``torch.optim.Adam`` owns
its parameters and reads its step count back to the host, so it can neither run under
``torch.func.vmap`` over a batch of chains nor give each chain its own learning rate; this
module keeps the moments as plain tensors next to the parameters and applies the same update::

    m <- beta1 m + (1 - beta1) g                (exp_avg, as torch's lerp)
    v <- beta2 v + (1 - beta2) g^2              (exp_avg_sq)
    theta <- theta - lr / (1 - beta1^k) * m / (sqrt(v) / sqrt(1 - beta2^k) + eps)

with k the number of updates so far (the bias corrections are host floats: every chain of a
batch has taken the same number of steps; the learning rate is a per-chain tensor). The
result equals ``torch.optim.Adam``'s up to float round-off (the tests compare them).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .flat import units

BETAS = (0.9, 0.999)
EPS = 1e-8


class AdamState(NamedTuple):
    """First and second moments per parameter name (no weight decay, no amsgrad)."""

    exp_avg: dict[str, torch.Tensor]
    exp_avg_sq: dict[str, torch.Tensor]


def adam_init(params: dict[str, torch.Tensor]) -> AdamState:
    """Zero moments shaped like ``params`` (and in the same memory format)."""
    return AdamState({k: torch.zeros_like(p) for k, p in params.items()},
                     {k: torch.zeros_like(p) for k, p in params.items()})


def bias_corrections(step: int, betas: tuple[float, float] = BETAS) -> tuple[float, float]:
    """``(1 - beta1^k, sqrt(1 - beta2^k))`` for update ``k = step`` (1 for the first), as host floats."""
    if step < 1:
        raise ValueError(f"Adam step={step!r}: the first update is step 1")
    return 1.0 - betas[0] ** step, (1.0 - betas[1] ** step) ** 0.5


def adam_update_(params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor], state: AdamState,
                 lr: torch.Tensor, correction1: float | torch.Tensor, correction2_sqrt: float | torch.Tensor,
                 betas: tuple[float, float] = BETAS, eps: float = EPS) -> None:
    """One Adam update of ``params`` in place (see the module docstring).

    ``lr`` is a 0-d tensor (per chain under vmap); ``correction1``/``correction2_sqrt`` come from
    :func:`bias_corrections` for this update's step number (host floats, or the same values as
    0-d float32 tensors on the device: :mod:`gped_kit.engine.values`). ``grads`` are used as scratch space
    (overwritten), so the update allocates nothing and uses only operations that ``vmap``
    batches natively. The mappings may instead be :class:`~gped_kit.core.flat.FlatTensors` of K
    chains (``lr`` then of shape (K, 1)): the same operations, once over each whole buffer.
    """
    beta1, beta2 = betas
    neg_step = lr / (-correction1)
    with torch.no_grad():
        for theta, grad, m, v in units(params, grads, state.exp_avg, state.exp_avg_sq):
            m.mul_(beta1).add_(grad, alpha=1 - beta1)
            v.mul_(beta2).add_(grad.mul_(grad), alpha=1 - beta2)
            step = grad.copy_(v).sqrt_().div_(correction2_sqrt).add_(eps)  # the denominator, in grad's memory
            theta.add_(step.reciprocal_().mul_(m).mul_(neg_step))
