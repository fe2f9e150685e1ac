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


class SegmentRates(NamedTuple):
    """The learning rates of several students whose parameters lie one after another in one buffer per part
    (a distillation group's students, which take their Adam steps together: :func:`adam_update_`):
    ``views[i]`` is the view of the update's ``grads`` buffer over student i's segment, shaped to broadcast
    against its learning rates ``lrs[i]`` (e.g. ``(R, P_i)`` against ``(R, 1)``)."""

    views: tuple[torch.Tensor, ...]
    lrs: tuple[torch.Tensor, ...]


def adam_update_(params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor], state: AdamState,
                 lr: torch.Tensor | SegmentRates, correction1: float | torch.Tensor,
                 correction2_sqrt: float | torch.Tensor, betas: tuple[float, float] = BETAS, eps: float = EPS) -> None:
    """One Adam update of ``params`` in place (see the module docstring).

    ``lr`` is a 0-d tensor (per chain under vmap); ``correction1``/``correction2_sqrt`` come from
    :func:`bias_corrections` for this update's step number (host floats, or the same values as
    0-d float32 tensors on the device: :mod:`gped_kit.engine.values`). ``grads`` are used as scratch space
    (overwritten), so the update allocates nothing and uses only operations that ``vmap``
    batches natively. The mappings may instead be :class:`~gped_kit.core.flat.FlatTensors` of K
    chains (``lr`` then of shape (K, 1)): the same operations, once over each whole buffer.

    Several students that step together (the same update count, so the same bias corrections) may share
    one buffer per part: the mappings are then :class:`~gped_kit.core.flat.FlatTensors` over those buffers
    and ``lr`` a :class:`SegmentRates` giving each student's segment and learning rates. Per element this is
    the one-student update operation by operation (``theta <- theta + (-lr_i / c1) m / (sqrt(v) / c2 +
    eps)``, each operation rounded as there), so it computes the same numbers bit for bit; the element-wise
    kernels run once over all the students instead of once per student (the learning rate's product once
    per student).
    """
    if isinstance(lr, SegmentRates):
        neg_correction1 = -correction1
        neg_steps = [rate / neg_correction1 for rate in lr.lrs]
    else:
        neg_step = lr / (-correction1)
    with torch.no_grad():
        operands = units(params, grads, state.exp_avg, state.exp_avg_sq)
        if isinstance(lr, SegmentRates) and len(operands) != 1:
            raise ValueError("adam_update_ with SegmentRates needs the students' shared buffers (FlatTensors), got "
                             f"{len(operands)} tensors per part")
        for theta, grad, m, v in operands:
            direction = _direction_(grad, m, v, correction2_sqrt, betas, eps)
            if isinstance(lr, SegmentRates):
                for view, step in zip(lr.views, neg_steps):
                    view.mul_(step)
            else:
                direction.mul_(neg_step)
            theta.add_(direction)


def _direction_(grad: torch.Tensor, m: torch.Tensor, v: torch.Tensor, correction2_sqrt: float | torch.Tensor,
                betas: tuple[float, float], eps: float) -> torch.Tensor:
    """Adam's moments updated in place and its direction ``m / (sqrt(v) / c2 + eps)`` written into ``grad``
    (returned): ``m <- beta1 m + (1 - beta1) g``, ``v <- beta2 v + (1 - beta2) g^2``, then the denominator in
    grad's memory, its reciprocal, times m."""
    beta1, beta2 = betas
    m.mul_(beta1).add_(grad, alpha=1 - beta1)
    v.mul_(beta2).add_(grad.mul_(grad), alpha=1 - beta2)
    step = grad.copy_(v).sqrt_().div_(correction2_sqrt).add_(eps)  # the denominator, in grad's memory
    return step.reciprocal_().mul_(m)
