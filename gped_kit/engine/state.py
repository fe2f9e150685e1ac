"""The state of Algorithm 1 as plain tensors: typed containers, stacked along a chain axis.

* :class:`ChainState`: the teacher's parameters theta_t and buffers, the sampler's extra state,
  its per-chain step coefficients and the running sum of minibatch NLLs since the last log.
* :class:`StudentState`: a student's parameters phi and buffers, Adam's moments, its current
  learning rate, its estimator store (U_o's sums and counts) and its running loss sum.
* :class:`EnsembleState`: the teacher ensemble's running sums of every target g on the
  evaluation sets (the test set, then the further sets), one Monte Carlo estimate per input.

Every tensor has a leading chain axis of size K (the chains of a batch, K >= 1), so a batch is
one set of tensors; :func:`chain_view` gives one chain's views (no copies). The step functions
of :mod:`gped_kit.engine.steps` update these containers in place, for one chain or under
``torch.func.vmap`` over the chain axis. Host-side counters (the step t, Adam's step count,
ensemble sample count) live with the engine, not here: they are the same for every chain.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import torch

from ..core.adam import AdamState
from ..core.estimators import EstimatorState


class ChainState(NamedTuple):
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    sampler: dict[str, torch.Tensor]
    coefficients: torch.Tensor
    train_nll_sum: torch.Tensor


class StudentState(NamedTuple):
    params: dict[str, torch.Tensor]
    buffers: dict[str, torch.Tensor]
    adam: AdamState
    lr: torch.Tensor
    store: EstimatorState
    loss_sum: torch.Tensor


class EnsembleState(NamedTuple):
    sums: dict[str, torch.Tensor]


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` to the tensors of ``tree`` (and the matching leaves of ``rest``), keeping the
    structure of named tuples, tuples, lists and dicts."""
    if isinstance(tree, torch.Tensor):
        return fn(tree, *rest)
    if isinstance(tree, dict):
        return {k: tree_map(fn, v, *(r[k] for r in rest)) for k, v in tree.items()}
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(tree_map(fn, v, *(r[i] for r in rest)) for i, v in enumerate(tree)))
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, v, *(r[i] for r in rest)) for i, v in enumerate(tree))
    raise TypeError(f"tree_map: unsupported node {type(tree).__name__}")


def tree_leaves(tree: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    tree_map(out.append, tree)
    return out


def stack(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack per-chain tensors along a new leading axis, each chain's slice with the first tensor's
    exact strides (e.g. conv weights trained channels-last on the CPU: oneDNN picks its kernels by
    the strides, and a slice that is channels-last in another way can run half as fast)."""
    first = tensors[0]
    dense = first.is_contiguous() or (first.dim() == 4 and first.is_contiguous(memory_format=torch.channels_last))
    if first.dim() and first.numel() and dense:
        out = torch.empty_strided((len(tensors), *first.shape), (first.numel(), *first.stride()),
                                  dtype=first.dtype, device=first.device)
        for row, t in zip(out, tensors):
            row.copy_(t)
        return out
    return torch.stack(list(tensors))


def stack_trees(trees: Sequence[Any]) -> Any:
    """One tree whose tensors stack the matching tensors of ``trees`` (:func:`stack`)."""
    return tree_map(lambda *ts: stack(ts), trees[0], *trees[1:])


def chain_view(tree: Any, k: int) -> Any:
    """Chain ``k``'s slice of every tensor of a stacked tree (views: writes go to the stack)."""
    return tree_map(lambda t: t[k], tree)


def init_chain_state(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                     sampler_state: dict[str, torch.Tensor], num_coefficients: int) -> ChainState:
    """A chain's state from its initial values (copied), with ``num_coefficients`` zero sampler
    coefficients (filled per chain by the engine) and a zero NLL sum."""
    device = next(iter(params.values())).device
    return ChainState({k: v.clone() for k, v in params.items()}, {k: v.clone() for k, v in buffers.items()},
                      sampler_state, torch.zeros(num_coefficients, device=device), torch.zeros((), device=device))


def init_student_state(params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], lr: float,
                       store: EstimatorState) -> StudentState:
    """A student's state: copied initial values, zero Adam moments, learning rate ``lr``."""
    params = {k: v.clone() for k, v in params.items()}
    device = next(iter(params.values())).device
    return StudentState(params, {k: v.clone() for k, v in buffers.items()},
                        AdamState({k: torch.zeros_like(v) for k, v in params.items()},
                                  {k: torch.zeros_like(v) for k, v in params.items()}),
                        torch.tensor(float(lr), device=device), store, torch.zeros((), device=device))


def flat(params: dict[str, torch.Tensor], chain_axis: bool = True) -> torch.Tensor:
    """All parameters as one vector per chain, in ``named_parameters()`` order (the order of
    ``torch.nn.utils.vector_to_parameters``): ``(K, P)`` for stacked parameters."""
    if chain_axis:
        first = next(iter(params.values()))
        return torch.cat([p.reshape(first.shape[0], -1) for p in params.values()], dim=1)
    return torch.cat([p.reshape(-1) for p in params.values()])
