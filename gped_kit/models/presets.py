"""Teacher and student architectures of the paper (Appendix A.2) with width multipliers.

Every network maps an input batch ``(B, C, H, W)`` to *raw* outputs ``(B, out_dim)``; the
meaning of those outputs (softmax probabilities, an exponentiated entropy, or both) is given
by an :class:`OutputHead`, which the distillation targets pick (:mod:`gped_kit.core.targets`).
These are presets: the engine takes any ``nn.Module`` (:mod:`gped_kit.models.build`).

Architectures (ReLU between all hidden layers):

* ``fcnn``:        Input(784) - FC(400*K1) - FC(400*K2) - FC(out)            (Balan et al., 2015)
* ``cnn_mnist``:   Conv(floor(10*K1), k4) - MaxPool2 - Conv(floor(20*K1), k4) - MaxPool2
                   - FC(floor(80*K2)) - FC(out)
* ``cnn_cifar10``: Conv(floor(16*K1), k5) - MaxPool2 - Conv(floor(32*K1), k5) - MaxPool2
                   - FC(floor(200*K2)) - FC(floor(50*K2)) - FC(out)

The paper writes ``floor(16*K1)`` for *both* CIFAR-10 student conv layers; we use
``floor(32*K1)`` for the second so that K1 = K2 = 1 recovers the teacher, as it does for the
other two families. Widths use the paper's floor rule for all families.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from ..core.targets import HEADS

ARCHITECTURES = ("fcnn", "cnn_mnist", "cnn_cifar10")

# Base widths (teacher, K = 1) and which multiplier scales each layer.
_BASE_WIDTHS = {
    "fcnn": {"fc": [(400, "k1"), (400, "k2")], "conv": []},
    "cnn_mnist": {"conv": [(10, "k1", 4), (20, "k1", 4)], "fc": [(80, "k2")]},
    "cnn_cifar10": {"conv": [(16, "k1", 5), (32, "k1", 5)], "fc": [(200, "k2"), (50, "k2")]},
}


def scaled_width(base: int, multiplier: float) -> int:
    """``floor(base * multiplier)`` robust to float round-off (e.g. 20 * 0.7 = 13.999...)."""
    return int(math.floor(base * multiplier + 1e-9))


@dataclass(frozen=True)
class ArchSpec:
    """A point in the paper's student search space (Appendix A.2).

    ``family`` is one of :data:`ARCHITECTURES`; ``k1`` multiplies the first group of layers
    (FCNN: first hidden layer; CNNs: every conv layer), ``k2`` the second (FCNN: second hidden
    layer; CNNs: every hidden fully connected layer). ``dropout`` is applied after each hidden
    fully connected layer (the paper uses 0.5 for FCNN students on MNIST).
    """

    family: str = "fcnn"
    k1: float = 1.0
    k2: float = 1.0
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.family not in ARCHITECTURES:
            raise ValueError(f"ArchSpec.family={self.family!r} is not known; allowed: {ARCHITECTURES}")
        for name in ("k1", "k2"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"ArchSpec.{name}={value!r}: width multipliers must be finite and > 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"ArchSpec.dropout={self.dropout!r}: must be in [0, 1)")
        for width in self.hidden_widths().values():
            if width < 1:
                raise ValueError(
                    f"ArchSpec(family={self.family!r}, k1={self.k1}, k2={self.k2}) gives a layer of width "
                    f"{width}; increase the multipliers"
                )

    def hidden_widths(self) -> dict[str, int]:
        """Widths of the hidden layers after applying the floor rule, keyed ``conv0``, ``fc0``..."""
        spec = _BASE_WIDTHS[self.family]
        mult = {"k1": self.k1, "k2": self.k2}
        widths = {f"conv{i}": scaled_width(b, mult[k]) for i, (b, k, _) in enumerate(spec["conv"])}
        widths.update({f"fc{i}": scaled_width(b, mult[k]) for i, (b, k) in enumerate(spec["fc"])})
        return widths


def build_network(arch: ArchSpec | str, input_shape: tuple[int, ...], out_dim: int) -> nn.Sequential:
    """Build the network for ``arch`` with ``out_dim`` raw outputs, on inputs of shape ``(C, H, W)``
    (the CNNs) or any shape (the FCNN flattens its input: images or feature vectors)."""
    if isinstance(arch, str):
        arch = ArchSpec(arch)
    spec = _BASE_WIDTHS[arch.family]
    if not input_shape or min(input_shape) < 1 or (spec["conv"] and len(input_shape) != 3):
        raise ValueError(f"input_shape={input_shape!r}: expected (channels, height, width)"
                         + ("" if spec["conv"] else " or (features,)"))
    if out_dim < 1:
        raise ValueError(f"out_dim={out_dim!r}: must be >= 1")
    widths = arch.hidden_widths()
    layers: list[nn.Module] = []
    channels, height, width = input_shape if spec["conv"] else (math.prod(input_shape), 1, 1)
    for i, (_, _, kernel) in enumerate(spec["conv"]):
        if height < kernel or width < kernel:
            raise ValueError(f"input {input_shape} too small for the {arch.family} conv layers")
        layers += [nn.Conv2d(channels, widths[f"conv{i}"], kernel), nn.ReLU(), nn.MaxPool2d(2)]
        channels = widths[f"conv{i}"]
        height, width = (height - kernel + 1) // 2, (width - kernel + 1) // 2
    layers.append(nn.Flatten())
    features = channels * height * width
    for i in range(len(spec["fc"])):
        layers += [nn.Linear(features, widths[f"fc{i}"]), nn.ReLU()]
        if arch.dropout > 0:
            layers.append(nn.Dropout(arch.dropout))
        features = widths[f"fc{i}"]
    layers.append(nn.Linear(features, out_dim))
    return nn.Sequential(*layers)


class OutputHead(nn.Module):
    """Output activation turning raw outputs into the distilled quantity (Appendix A.2, A.4).

    * ``softmax``: class probabilities (predictive distribution), ``num_classes`` outputs;
    * ``exp``: a positive scalar (expected entropy), 1 output; the raw output is its log;
    * ``softmax+exp``: the C+1 head of Experiment 4 (predictive and expected entropy);
    * ``dirichlet``: an EnD2 prior network, C raw outputs -> ``[alpha/alpha_0, alpha_0]``;
    * ``identity``: raw outputs (user-defined targets).

    ``nn.Sequential(build_network(...), OutputHead(kind, C))`` is a deployable student.
    """

    def __init__(self, kind: str, num_classes: int) -> None:
        super().__init__()
        if kind not in HEADS:
            raise ValueError(f"OutputHead kind={kind!r} is not known; allowed: {sorted(HEADS)}")
        self.kind = kind
        self.num_classes = num_classes

    def forward(self, raw: torch.Tensor) -> torch.Tensor:
        return HEADS[self.kind](raw)


#: Inputs per forward pass when a network is evaluated on a whole set (test set, OOD sets, D'), and the
#: granularity of the automatic chunk (:func:`eval_chunk_rows`). Measured on a 2-core CPU: 500 is ~1.6x faster
#: than 2,500 for the CNNs (the activations of a 500-image chunk stay in cache) and as fast for the FCNN.
EVAL_CHUNK_SIZE = 500

#: Bytes of the widest activation an automatic evaluation chunk may hold over all chains of a batch, per device
#: type (:func:`eval_chunk_rows`): on the CPU what keeps the CNNs at 500 rows, where they run fastest (the FCNN
#: gets 5,000: two chunks of the test set); on CUDA enough that the FCNN's test set is one chunk for 24 chains, so
#: that an ensemble update is a few kernels.
EVAL_CHUNK_BYTES = {"cpu": 16 * 2**20, "cuda": 2**30}


def widest_activation(nets: Sequence[nn.Module], row_shape: Sequence[int]) -> int | None:
    """Elements of the widest output any module of ``nets`` produces for one input row of shape
    ``row_shape``, from a forward pass on the ``meta`` device (shapes only, nothing computed); None when a
    network does not run there (an operator without a meta implementation, a forward pass that reads values)."""
    widest = 0

    def record(module: nn.Module, inputs: tuple, output: object) -> None:
        nonlocal widest
        if isinstance(output, torch.Tensor):
            widest = max(widest, output[0].numel())

    for net in nets:
        on_meta = all(t.is_meta for t in itertools.chain(net.parameters(), net.buffers()))
        meta = net if on_meta else copy.deepcopy(net).to("meta")
        handles = [m.register_forward_hook(record) for m in meta.modules()]
        try:
            with torch.no_grad():
                meta(torch.empty((1, *row_shape), device="meta"))
        except Exception:  # noqa: BLE001 -- whatever a user's network cannot do without values: size by default
            return None
        finally:
            for h in handles:
                h.remove()
    return widest or None


def eval_chunk_rows(widest: int | None, chains: int, device_type: str, dtype_bytes: int = 4) -> int:
    """The automatic evaluation chunk (``GPEDConfig.eval_batch_size=None``): the most rows, in multiples of
    :data:`EVAL_CHUNK_SIZE` and at least that, whose widest activation (``widest`` elements per row,
    :func:`widest_activation`) over ``chains`` chains fits :data:`EVAL_CHUNK_BYTES` of the device type
    (the CPU's for other types); :data:`EVAL_CHUNK_SIZE` when ``widest`` is unknown. Each row's result
    does not depend on the chunk it is computed in (beyond about 32 rows on the CPU), so the size moves
    no number."""
    if widest is None:
        return EVAL_CHUNK_SIZE
    budget = EVAL_CHUNK_BYTES.get(device_type, EVAL_CHUNK_BYTES["cpu"])
    rows = budget // (chains * widest * dtype_bytes)
    return max(EVAL_CHUNK_SIZE, rows // EVAL_CHUNK_SIZE * EVAL_CHUNK_SIZE)


def eval_chunks(start: int, stop: int, chunk: int) -> list[tuple[int, int]]:
    """The row ranges ``(a, b)`` in which rows ``start .. stop`` are evaluated, ``chunk`` rows at a time. When
    ``chunk`` is a multiple of :data:`EVAL_CHUNK_SIZE` the rows past the last whole 500 (what 500-row chunks leave
    to their last chunk) are a chunk of their own, so that every row is computed in a chunk of at least 500 rows
    or in the same last chunk as with 500-row chunks: on the CPU a matrix product rounds a row the same way in
    any chunk of about 32 rows or more, but not in smaller ones, so a larger automatic chunk moves no number."""
    if chunk % EVAL_CHUNK_SIZE:
        return [(a, min(a + chunk, stop)) for a in range(start, stop, chunk)]
    whole = start + (stop - start) // EVAL_CHUNK_SIZE * EVAL_CHUNK_SIZE
    return [(a, min(a + chunk, whole)) for a in range(start, whole, chunk)] + ([(whole, stop)] if whole < stop else [])


def _convolutional(net: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in net.modules())


def _channels_last(net: nn.Module) -> bool:
    return all(m.weight.is_contiguous(memory_format=torch.channels_last)
               for m in net.modules() if isinstance(m, nn.Conv2d))


def cpu_training_layout(net: nn.Module) -> nn.Module:
    """``net`` with its convolution weights in channels-last memory format when it has
    convolutions and lives on the CPU (in place; returned for chaining); otherwise unchanged.

    oneDNN's kernels for these narrow layers are faster on channels-last weights: a CNN-MNIST
    chain with four students ran 1.19x faster (26.0 s -> 21.9 s for 700 steps, 2-core CPU) and
    a forward pass over the test set 3x faster. The function computed is the same; the float
    round-off differs, as with any other kernel choice. Parameters are then not contiguous:
    flatten them with :func:`flat_parameters`, not ``parameters_to_vector``.
    """
    if _convolutional(net) and next(net.parameters()).device.type == "cpu":
        net.to(memory_format=torch.channels_last)
    return net


def flat_parameters(net: nn.Module) -> torch.Tensor:
    """All parameters as one detached vector, in ``parameters()`` order (the order of
    ``torch.nn.utils.vector_to_parameters``), whatever their memory format."""
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def inference_network(net: nn.Module) -> nn.Module:
    """``net`` ready for batched inference, in eval mode.

    On the CPU a network with convolutions is returned as an eval-mode *copy* in channels-last
    memory format: oneDNN runs these narrow convolutions about 3x faster that way (measured:
    CNN-MNIST over the 10,000 test images in chunks of 500, 0.49 s -> 0.26 s; 0.78 s with chunks
    of 2,500), and the training network's own layout, which the samplers, snapshots and pruning
    rely on, stays untouched. Otherwise (no convolutions, CUDA, or a network already in
    channels-last format, see :func:`cpu_training_layout`) it is ``net`` itself, switched to
    eval mode. The outputs are the same function of the same parameters.
    """
    net.eval()
    if not _convolutional(net) or next(net.parameters()).device.type != "cpu" or _channels_last(net):
        return net
    return copy.deepcopy(net).to(memory_format=torch.channels_last).eval()


def count_parameters(module: nn.Module) -> int:
    """Number of scalar parameters (storage cost in the paper's figures)."""
    return sum(p.numel() for p in module.parameters())
