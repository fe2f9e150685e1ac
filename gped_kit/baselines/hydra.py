"""Hydra (Tran et al., 2020; paper 002): a multi-head student that keeps the ensemble's diversity.

A shared body and M light heads; head m distils ensemble member m. With an SGLD teacher the
"members" are M posterior samples kept during the chain (``GPEDConfig.num_snapshots``,
evenly thinned after burn-in), and their logits on the distillation inputs D' are cached once
(:func:`snapshot_logits`), so training never re-runs the members.

Training has the paper's two phases (Section 2, "Training with multi-head growth"):

1. body + one head (the "Hinton head") on the knowledge-distillation loss against the members'
   mean prediction, both sides softened by the temperature T (Eq. 1 with Eq. 2's softmax at T);
2. the head is cloned M times and head m is trained against member m with Eq. 4,
   ``-(T^2 / M) sum_m sum_c p_T(c | x, theta_m) log p_T(c | x, body, head_m)``
   (Eq. 3 up to the members' constant entropies; T^2 keeps gradient magnitudes as at T = 1).

Predictions use T = 1: the mixture over heads ``(1/M) sum_m p(y | x, head_m)`` is the
predictive distribution, and every posterior expectation E_theta[g] is the average over heads
of the per-head g: the expected entropy, hence the knowledge uncertainty, and the marginal
variance E_theta[p (1 - p)] per class (:func:`hydra_marginal_variance`, the kit's
``marginal_variance`` target). The variance over heads of p (:func:`hydra_epistemic_variance`)
is a different quantity: p_bar (1 - p_bar) = E_m[p_m (1 - p_m)] + Var_m(p_m).

The paper's MNIST student: body = the member network without its last layer, each head an MLP
[100, 100, C]; :class:`HydraConfig` defaults to that shape on top of the teacher's body.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from ..core import targets, uncertainty
from ..core.options import check_int, check_positive
from ..engine.checkpoint import CheckpointError, unreadable_reason
from ..files import atomic_path
from ..models.presets import ArchSpec, build_network, count_parameters
from ..progress import Progress


@dataclass(frozen=True)
class HydraConfig:
    """Hydra's shape and training (paper 002, Sections 2-3).

    ``head_hidden`` are the hidden widths of each head (the paper's MNIST heads: (100, 100));
    ``temperature`` is T of Eqs. 2-4 (the paper does not state its value; 2.0 is ours);
    ``phase1_steps`` / ``phase2_steps`` are Adam steps of minibatches of ``batch_size``
    distillation inputs, resampled from D' without noise: the targets are the members' logits
    cached on the clean inputs D' (:func:`snapshot_logits`), so perturbed inputs would be paired
    with targets computed elsewhere.
    """

    head_hidden: tuple[int, ...] = (100, 100)
    temperature: float = 2.0
    phase1_steps: int = 1_000
    phase2_steps: int = 2_000
    batch_size: int = 100
    lr: float = 1e-3
    seed: int = 0
    log_every: int = 250

    def __post_init__(self) -> None:
        object.__setattr__(self, "head_hidden", tuple(self.head_hidden))
        for i, width in enumerate(self.head_hidden):
            check_int(f"HydraConfig.head_hidden[{i}]", width, 1)
        check_positive("HydraConfig.temperature", self.temperature)
        for name in ("phase1_steps", "phase2_steps", "seed"):
            check_int(f"HydraConfig.{name}", getattr(self, name), 0)
        for name in ("batch_size", "log_every"):
            check_int(f"HydraConfig.{name}", getattr(self, name), 1)
        check_positive("HydraConfig.lr", self.lr)


class Heads(nn.Module):
    """M MLP heads evaluated as one batched computation (``torch.baddbmm`` per layer).

    Layer l holds weights (M, d_in, d_out) and biases (M, 1, d_out); ReLU between layers.
    ``forward(h)`` maps shared features (B, d) to raw outputs (M, B, C).
    """

    def __init__(self, num_heads: int, widths: list[int]) -> None:
        super().__init__()
        if num_heads < 1:
            raise ValueError(f"num_heads={num_heads!r}: must be >= 1")
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for d_in, d_out in zip(widths[:-1], widths[1:]):
            layer = nn.Linear(d_in, d_out)  # PyTorch's default initialisation, shared by all heads
            self.weights.append(nn.Parameter(layer.weight.detach().t().expand(num_heads, -1, -1).clone()))
            self.biases.append(nn.Parameter(layer.bias.detach().expand(num_heads, 1, -1).clone()))

    @property
    def num_heads(self) -> int:
        return self.weights[0].shape[0]

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        z = features.unsqueeze(0).expand(self.num_heads, -1, -1)
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            z = torch.baddbmm(b, z, w)
            if i < len(self.weights) - 1:
                z = F.relu(z)
        return z

    def cloned(self, num_heads: int) -> Heads:
        """``num_heads`` copies of head 0 (phase 2's initialisation from the Hinton head)."""
        widths = [self.weights[0].shape[1]] + [w.shape[2] for w in self.weights]
        out = Heads(num_heads, widths).to(self.weights[0].device)
        with torch.no_grad():
            for dst, src in zip([*out.weights, *out.biases], [*self.weights, *self.biases]):
                dst.copy_(src[:1].expand_as(dst))
        return out


class HydraNet(nn.Module):
    """Shared body + :class:`Heads`; ``forward(x)`` gives raw outputs (M, B, C)."""

    def __init__(self, body: nn.Module, heads: Heads) -> None:
        super().__init__()
        self.body = body
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads(self.body(x))

    @torch.no_grad()
    def head_probs(self, x: torch.Tensor, batch_size: int = 2_500) -> torch.Tensor:
        """Per-head class probabilities at T = 1, (M, N, C)."""
        self.eval()
        return torch.cat([F.softmax(self(x[i:i + batch_size]), dim=-1) for i in range(0, x.shape[0], batch_size)],
                         dim=1)

    @torch.no_grad()
    def head_log_probs(self, x: torch.Tensor, batch_size: int = 2_500) -> torch.Tensor:
        """Per-head class log-probabilities at T = 1, (M, N, C): what a target's ``g`` takes."""
        self.eval()
        return torch.cat([F.log_softmax(self(x[i:i + batch_size]), dim=-1)
                          for i in range(0, x.shape[0], batch_size)], dim=1)


def build_hydra(arch: ArchSpec | str, input_shape: tuple[int, ...], num_classes: int, num_heads: int,
                head_hidden: tuple[int, ...] = (100, 100)) -> HydraNet:
    """A Hydra on ``arch``: the body is ``arch``'s network without its last linear layer, each
    head an MLP ``head_hidden + (num_classes,)`` on the body's features."""
    net = build_network(arch, input_shape, num_classes)
    last = net[-1]
    if not isinstance(last, nn.Linear):
        raise ValueError(f"the last layer of {arch!r} is {type(last).__name__}, expected nn.Linear")
    body = nn.Sequential(*list(net)[:-1])
    return HydraNet(body, Heads(num_heads, [last.in_features, *head_hidden, num_classes]))


@torch.no_grad()
def snapshot_logits(snapshots: torch.Tensor, arch: ArchSpec | str, input_shape: tuple[int, ...],
                    num_classes: int, x: torch.Tensor, batch_size: int = 2_500) -> torch.Tensor:
    """Raw outputs of every kept posterior sample on ``x``: (S, N, C).

    ``snapshots`` is (S, P), each row a teacher's parameters flattened in ``named_parameters()``
    order, the order of ``torch.nn.utils.vector_to_parameters`` (``GPEDResult.snapshots``).
    """
    net = build_network(arch, input_shape, num_classes).to(x.device)
    if snapshots.dim() != 2 or snapshots.shape[1] != count_parameters(net):
        raise ValueError(f"snapshots of shape {tuple(snapshots.shape)} do not fit {arch!r} "
                         f"({count_parameters(net)} parameters per row)")
    net.eval()
    out = torch.empty(snapshots.shape[0], x.shape[0], num_classes, device=x.device)
    for s, theta in enumerate(snapshots):
        nn.utils.vector_to_parameters(theta.to(x.device), net.parameters())
        for i in range(0, x.shape[0], batch_size):
            out[s, i:i + batch_size] = net(x[i:i + batch_size])
    return out


def hydra_loss(student_raw: torch.Tensor, member_raw: torch.Tensor, temperature: float) -> torch.Tensor:
    """Eq. 4: ``-(T^2/M) sum_m sum_c softmax(z_m/T)_c log softmax(head_m/T)_c``, mean over inputs.

    ``student_raw`` and ``member_raw`` are (M, B, C); minimising it minimises Eq. 3's average KL."""
    target = F.softmax(member_raw / temperature, dim=-1)
    return -(temperature ** 2) * (target * F.log_softmax(student_raw / temperature, dim=-1)).sum(-1).mean()


def knowledge_distillation_loss(student_raw: torch.Tensor, member_raw: torch.Tensor,
                                temperature: float) -> torch.Tensor:
    """Phase 1 (Eq. 1 at temperature T, times T^2): cross-entropy of one head (1, B, C) against the
    members' mean softened prediction ``(1/M) sum_m softmax(z_m/T)`` (members (M, B, C))."""
    target = F.softmax(member_raw / temperature, dim=-1).mean(0)
    return -(temperature ** 2) * (target * F.log_softmax(student_raw[0] / temperature, dim=-1)).sum(-1).mean()


@dataclass
class HydraResult:
    """A trained Hydra, its loss history (one row per log point) and what it cost."""

    net: HydraNet
    history: list[dict]
    seconds: float
    cache_bytes: int


def train_hydra(member_logits: torch.Tensor, distill_x: torch.Tensor, arch: ArchSpec | str,
                input_shape: tuple[int, ...], config: HydraConfig = HydraConfig(),
                progress: bool | str = True) -> HydraResult:
    """Train a Hydra with one head per member in the paper's two phases.

    ``member_logits`` (M, N', C) are the members' raw outputs on the distillation inputs
    ``distill_x`` (N', ...) (:func:`snapshot_logits`); minibatches index both, so the members
    are never re-run. Returns the trained network in eval mode.
    """
    if member_logits.dim() != 3 or member_logits.shape[1] != distill_x.shape[0]:
        raise ValueError(f"member_logits must be (M, N', C) with N' = {distill_x.shape[0]} distillation "
                         f"inputs, got shape {tuple(member_logits.shape)}")
    device = distill_x.device
    num_members, n, num_classes = member_logits.shape
    gen = torch.Generator(device).manual_seed(config.seed)
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        torch.manual_seed(config.seed)
        net = build_hydra(arch, input_shape, num_classes, 1, config.head_hidden).to(device)
    history: list[dict] = []
    started = time.perf_counter()
    bar = Progress(config.phase1_steps + config.phase2_steps, "Hydra", "step", mode=progress)

    def phase(name: str, steps: int, loss_fn, offset: int) -> None:
        optimizer = torch.optim.Adam(net.parameters(), lr=config.lr)
        loss_sum = torch.zeros((), device=device)
        last_logged = 0
        for step in range(1, steps + 1):
            idx = torch.randint(n, (config.batch_size,), device=device, generator=gen)
            net.train()
            loss = loss_fn(net(distill_x[idx]), member_logits[:, idx], config.temperature)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach()
            if step % config.log_every == 0 or step == steps:
                value = float(loss_sum) / (step - last_logged)
                if not math.isfinite(value):
                    raise FloatingPointError(f"Hydra {name} diverged at step {step} (loss {value}); "
                                             f"lower HydraConfig.lr={config.lr:g}")
                history.append({"phase": name, "step": step, "loss": value})
                loss_sum.zero_()
                bar.update(offset + step, phase=name, loss=value)
                last_logged = step

    try:
        phase("phase1", config.phase1_steps, knowledge_distillation_loss, 0)
        net.heads = net.heads.cloned(num_members)
        phase("phase2", config.phase2_steps, hydra_loss, config.phase1_steps)
    finally:
        bar.close()
    net.eval()
    return HydraResult(net, history, time.perf_counter() - started,
                       cache_bytes=member_logits.numel() * member_logits.element_size())


def hydra_uncertainties(net: HydraNet, x: torch.Tensor) -> uncertainty.Uncertainties:
    """Total / expected data / knowledge uncertainty of the head mixture on ``x``."""
    return uncertainty.from_samples(net.head_probs(x))


def marginal_variance_from_samples(log_probs: torch.Tensor) -> torch.Tensor:
    """The marginal variance E[p(y = c | x, theta) (1 - p(y = c | x, theta))], (N, C), of an explicit
    ensemble: the mean over members of :func:`gped_kit.core.targets.marginal_variance_g` applied to
    each member's log-probabilities ``log_probs`` (S, N, C) (heads, snapshots)."""
    if log_probs.dim() != 3:
        raise ValueError(f"log_probs must be (S, N, C), got shape {tuple(log_probs.shape)}")
    return targets.marginal_variance_g(log_probs).mean(0)


def epistemic_variance_from_samples(probs: torch.Tensor) -> torch.Tensor:
    """The epistemic variance of p: Var over members of p(y = c | x, theta_m), (N, C), from
    ``probs`` (S, N, C). Not the marginal variance: with p_bar the members' mean,
    ``marginal variance = p_bar (1 - p_bar) - epistemic variance``."""
    if probs.dim() != 3:
        raise ValueError(f"probs must be (S, N, C), got shape {tuple(probs.shape)}")
    return probs.var(0, unbiased=False)


def hydra_marginal_variance(net: HydraNet, x: torch.Tensor) -> torch.Tensor:
    """The marginal-variance posterior expectation (the ``marginal_variance`` target):
    mean over heads of p_m (1 - p_m) with p_m = p(y = c | x, head_m), (N, C)."""
    return marginal_variance_from_samples(net.head_log_probs(x))


def hydra_epistemic_variance(net: HydraNet, x: torch.Tensor) -> torch.Tensor:
    """Var over heads of p(y = c | x, head_m), (N, C): the epistemic variance of p
    (:func:`epistemic_variance_from_samples`), not the marginal variance."""
    return epistemic_variance_from_samples(net.head_probs(x))


def save_hydra(result: HydraResult, path: str | Path) -> None:
    """Write a trained Hydra (weights, loss history, seconds, cache bytes, number of heads) to ``path``
    atomically; only tensors and plain values, so :func:`load_hydra` reads it with ``weights_only``."""
    with atomic_path(path) as tmp:
        torch.save({"state": result.net.state_dict(), "history": result.history, "seconds": result.seconds,
                    "cache_bytes": result.cache_bytes, "num_heads": result.net.heads.num_heads}, tmp)


def load_hydra(path: str | Path, arch: ArchSpec | str, input_shape: tuple[int, ...], num_classes: int,
               config: HydraConfig, device: torch.device | str = "cpu") -> HydraResult:
    """A Hydra written by :func:`save_hydra`, rebuilt on ``arch`` with ``config``'s head shape, in eval mode.
    An unreadable file raises :class:`~gped_kit.engine.checkpoint.CheckpointError` (torch's error chained)."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # noqa: BLE001 -- missing, truncated, foreign objects: all unusable
        raise CheckpointError(f"trained Hydra {path} cannot be read: {unreadable_reason(exc)}. Recompute the entry "
                              "that holds it (recompute=True) to train it again; torch's own message is chained as "
                              "the cause.") from exc
    net = build_hydra(arch, input_shape, num_classes, state["num_heads"], config.head_hidden).to(device)
    net.load_state_dict(state["state"])
    net.eval()
    return HydraResult(net, state["history"], state["seconds"], state["cache_bytes"])
