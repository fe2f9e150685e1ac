"""Test-time cost of a student (paper 003, Section 3.3 and Experiment 3): storage, computation, latency.

The paper plots every student's test performance against its computation ("FLOPS") and its
storage ("number of parameters"); Experiment 3 searches for students on that speed-storage-
accuracy trade-off. This module gives the three costs of any network:

* **parameters**: the number of scalar parameters (weights and biases), the storage cost;
* **FLOPs per input**: counted by PyTorch's own :class:`torch.utils.flop_counter.FlopCounterMode`
  on a forward pass of one input. Its convention is **FLOPs = 2 x multiply-accumulates (MACs)**
  of the matrix multiplications and convolutions (``aten.mm``/``addmm``/``convolution``); bias
  additions, ReLUs and pooling are *not* counted (they are a few per cent of the total for the
  paper's networks). :func:`count_macs` is that number halved. The paper does not say which
  convention its "FLOPS" use (its base CNN-MNIST student, 385,600 MACs = 771,200 FLOPs by this
  count, is given as about 0.48e6), so compare *ratios* between students with the paper (e.g.
  "6.4x the FLOPS of the base student"), which both conventions give alike;
* **latency**: the measured wall-clock time of one forward pass over a batch, the median of
  repeated timings after warm-up runs, with ``torch.cuda.synchronize`` around each timing on a
  GPU. It depends on the machine and its load, unlike the other two.

:func:`analytic_macs` recomputes the multiply-accumulates from the layer shapes alone; the tests
check the counter against it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .presets import count_parameters, inference_network

#: How :func:`network_cost` times a network (the ``latency_layout`` column): as it is readied for inference.
LATENCY_LAYOUT = "inference"

__all__ = ["count_parameters", "count_flops", "count_macs", "analytic_macs", "measure_latency", "Latency",
           "LATENCY_LAYOUT", "network_cost", "layer_widths", "describe_architecture"]


def _check_input_shape(input_shape: tuple[int, ...]) -> tuple[int, ...]:
    shape = tuple(input_shape)
    if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
        raise ValueError(f"input_shape={input_shape!r}: expected the shape of one input, e.g. (channels, height, "
                         "width) or (features,), of positive integers")
    return shape


def _device_of(net: nn.Module) -> torch.device:
    param = next(net.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def count_flops(net: nn.Module, input_shape: tuple[int, ...]) -> int:
    """FLOPs of one forward pass of ONE input of shape ``input_shape`` (e.g. ``(C, H, W)``), counted by PyTorch's
    :class:`~torch.utils.flop_counter.FlopCounterMode`: FLOPs = 2 x MACs of every matrix
    multiplication and convolution; bias additions, activations and pooling are not counted.
    The network is run in eval mode (dropout off) without gradients; its mode is restored."""
    shape = _check_input_shape(input_shape)
    was_training = net.training
    net.eval()
    try:
        x = torch.zeros((1, *shape), device=_device_of(net))
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            net(x)
    finally:
        net.train(was_training)
    return int(counter.get_total_flops())


def count_macs(net: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Multiply-accumulates per input: :func:`count_flops` / 2 (PyTorch counts 2 FLOPs per MAC)."""
    return count_flops(net, input_shape) // 2


def analytic_macs(net: nn.Sequential, input_shape: tuple[int, int, int]) -> int:
    """Multiply-accumulates per input from the layer shapes of a Conv2d/MaxPool2d/Flatten/Linear
    stack (ReLU and Dropout leave shapes alone): a Conv2d adds C_out (C_in / groups) k_h k_w H_out
    W_out, a Linear in x out. A cross-check of :func:`count_flops` (which should be twice this)."""
    c, h, w = _check_input_shape(input_shape)
    macs = 0
    for module in net:
        if isinstance(module, nn.Conv2d):
            kh, kw = module.kernel_size
            (sh, sw), (ph, pw), (dh, dw) = module.stride, module.padding, module.dilation
            h = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
            w = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
            c_in, c = c, module.out_channels
            macs += c * (c_in // module.groups) * kh * kw * h * w
        elif isinstance(module, nn.MaxPool2d):
            k = module.kernel_size if isinstance(module.kernel_size, int) else module.kernel_size[0]
            s = module.stride if isinstance(module.stride, int) else module.stride[0]
            h, w = (h - k) // s + 1, (w - k) // s + 1
        elif isinstance(module, nn.Linear):
            macs += module.in_features * module.out_features
        elif not isinstance(module, (nn.ReLU, nn.Dropout, nn.Identity, nn.Flatten)):
            raise TypeError(f"analytic_macs: no rule for {type(module).__name__}")
    return macs


@dataclass(frozen=True)
class Latency:
    """Measured forward-pass time of one batch: median and quartiles over ``repeats`` timings (ms)."""

    median_ms: float
    q25_ms: float
    q75_ms: float
    batch_size: int
    repeats: int
    device: str


def measure_latency(net: nn.Module, input_shape: tuple[int, int, int], batch_size: int = 100,
                    repeats: int = 20, warmup: int = 3) -> Latency:
    """Wall-clock time of one forward pass over a batch of ``batch_size`` inputs on the network's
    device (eval mode, ``torch.inference_mode``): ``warmup`` untimed passes, then ``repeats``
    timed ones; the median is reported (robust to a busy machine). On CUDA every timing is
    bracketed by ``torch.cuda.synchronize`` so that it covers the kernels, not just their launch.
    Every network is timed as :func:`~gped_kit.models.presets.inference_network` readies it for inference
    (on the CPU a convolutional network in channels-last layout, about 3x faster there), so that networks
    built in another layout (e.g. a pruned copy) are timed like the others; ``net`` itself is left as it was."""
    shape = _check_input_shape(input_shape)
    for name, value, low in (("batch_size", batch_size, 1), ("repeats", repeats, 1), ("warmup", warmup, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"measure_latency: {name}={value!r} must be an integer >= {low}")
    device = _device_of(net)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    x = torch.rand((batch_size, *shape), generator=torch.Generator().manual_seed(0)).to(device)
    was_training = net.training
    timed = inference_network(net)
    times = []
    try:
        with torch.inference_mode():
            for _ in range(warmup):
                timed(x)
            sync()
            for _ in range(repeats):
                start = time.perf_counter()
                timed(x)
                sync()
                times.append((time.perf_counter() - start) * 1e3)
    finally:
        net.train(was_training)
    quartiles = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
    return Latency(statistics.median(times), quartiles[0], quartiles[2], batch_size, repeats, str(device))


def layer_widths(net: nn.Module) -> list[int]:
    """Output widths of the Conv2d and Linear layers in order (channels or units; the last is the
    output layer)."""
    return [m.out_channels if isinstance(m, nn.Conv2d) else m.out_features
            for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def describe_architecture(net: nn.Module) -> str:
    """A compact description, e.g. ``Conv(20,k4)-Conv(40,k4)-FC(160)-FC(10)``."""
    parts = []
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            parts.append(f"Conv({m.out_channels},k{m.kernel_size[0]})")
        elif isinstance(m, nn.Linear):
            parts.append(f"FC({m.out_features})")
    return "-".join(parts)


def network_cost(net: nn.Module, input_shape: tuple[int, int, int], latency_batch_size: int | None = None,
                 latency_repeats: int = 20) -> dict:
    """All costs of ``net`` as one dict: ``params``, ``flops`` (per input, 2 x MACs), ``macs``,
    ``architecture``, ``widths`` and, if ``latency_batch_size`` is given, ``latency_ms`` (median per
    batch of that size) with ``latency_batch_size``, ``latency_device`` and ``latency_layout`` (``"inference"``:
    timed as :func:`measure_latency` does, in the layout :func:`~gped_kit.models.presets.inference_network` gives)."""
    flops = count_flops(net, input_shape)
    out = {"params": count_parameters(net), "flops": flops, "macs": flops // 2,
           "architecture": describe_architecture(net), "widths": "-".join(map(str, layer_widths(net)))}
    if latency_batch_size is not None:
        lat = measure_latency(net, input_shape, latency_batch_size, latency_repeats)
        out.update(latency_ms=lat.median_ms, latency_batch_size=lat.batch_size, latency_device=lat.device,
                   latency_layout=LATENCY_LAYOUT)
    return out
