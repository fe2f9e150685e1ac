"""Costs of a student (gped_kit.models.cost): parameters, FLOPs per input from PyTorch's counter against
analytic multiply-accumulate counts worked out by hand here, latency, architecture strings."""

import pytest
import torch
from torch import nn

from gped_kit.models.cost import (
    LATENCY_LAYOUT,
    analytic_macs,
    count_flops,
    count_macs,
    describe_architecture,
    layer_widths,
    measure_latency,
    network_cost,
)
from gped_kit.models.presets import ArchSpec, build_network, count_parameters, cpu_training_layout
from gped_kit.models.pruning import prune


def cnn_mnist_macs(c1: int, c2: int, f: int, out: int = 10) -> int:
    """28x28 -> conv k4 (25x25) -> pool (12x12) -> conv k4 (9x9) -> pool (4x4) -> FC -> out."""
    return c1 * 1 * 16 * 25 * 25 + c2 * c1 * 16 * 9 * 9 + (c2 * 16) * f + f * out


def cnn_mnist_params(c1: int, c2: int, f: int, out: int = 10) -> int:
    return c1 * (16 + 1) + c2 * (c1 * 16 + 1) + f * (c2 * 16 + 1) + out * (f + 1)


def cnn_cifar_macs(c1: int, c2: int, f1: int, f2: int, out: int = 10) -> int:
    """32x32x3 -> conv k5 (28x28) -> pool (14x14) -> conv k5 (10x10) -> pool (5x5) -> FC -> FC -> out."""
    return c1 * 3 * 25 * 28 * 28 + c2 * c1 * 25 * 10 * 10 + (c2 * 25) * f1 + f1 * f2 + f2 * out


@pytest.mark.parametrize("k1,k2", [(1, 1), (0.5, 2), (2, 0.5), (3, 3)])
def test_cnn_mnist_flops_are_twice_the_hand_counted_macs(k1, k2):
    arch = ArchSpec("cnn_mnist", k1, k2)
    w = arch.hidden_widths()
    net = build_network(arch, (1, 28, 28), 10)
    macs = cnn_mnist_macs(w["conv0"], w["conv1"], w["fc0"])
    assert count_flops(net, (1, 28, 28)) == 2 * macs
    assert count_macs(net, (1, 28, 28)) == macs == analytic_macs(net, (1, 28, 28))
    assert count_parameters(net) == cnn_mnist_params(w["conv0"], w["conv1"], w["fc0"])


def test_base_cnn_mnist_student_numbers():
    # the paper's base student: ~0.03e6 parameters; 385,600 MACs = 771,200 FLOPs by PyTorch's count
    net = build_network("cnn_mnist", (1, 28, 28), 10)
    cost = network_cost(net, (1, 28, 28))
    assert cost["params"] == 29_880 and cost["macs"] == 385_600 and cost["flops"] == 771_200
    assert cost["architecture"] == "Conv(10,k4)-Conv(20,k4)-FC(80)-FC(10)" and cost["widths"] == "10-20-80-10"
    assert "latency_ms" not in cost


@pytest.mark.parametrize("k1,k2,dropout", [(1, 1, 0.5), (0.5, 1.5, 0.0)])
def test_fcnn_flops_and_params(k1, k2, dropout):
    net = build_network(ArchSpec("fcnn", k1, k2, dropout), (1, 28, 28), 10)
    h1, h2 = int(400 * k1), int(400 * k2)
    assert count_flops(net, (1, 28, 28)) == 2 * (784 * h1 + h1 * h2 + h2 * 10)
    assert count_parameters(net) == 785 * h1 + (h1 + 1) * h2 + (h2 + 1) * 10
    assert net.training  # the counter restores the mode


def test_cnn_cifar10_flops():
    arch = ArchSpec("cnn_cifar10", 1.5, 0.5)
    w = arch.hidden_widths()
    net = build_network(arch, (3, 32, 32), 10)
    assert count_flops(net, (3, 32, 32)) == 2 * cnn_cifar_macs(w["conv0"], w["conv1"], w["fc0"], w["fc1"])


def test_flops_do_not_depend_on_weights_and_count_padded_convs():
    net = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 5))
    assert analytic_macs(net, (2, 8, 8)) == 3 * 2 * 9 * 4 * 4 + 48 * 5
    assert count_macs(net, (2, 8, 8)) == analytic_macs(net, (2, 8, 8))


def test_latency_is_positive_and_restores_mode():
    net = build_network("cnn_mnist", (1, 28, 28), 10).train()
    lat = measure_latency(net, (1, 28, 28), batch_size=8, repeats=3, warmup=1)
    assert lat.median_ms > 0 and lat.q25_ms <= lat.median_ms <= lat.q75_ms
    assert lat.batch_size == 8 and lat.repeats == 3 and lat.device == "cpu" and net.training
    cost = network_cost(net, (1, 28, 28), latency_batch_size=4, latency_repeats=2)
    assert cost["latency_ms"] > 0 and cost["latency_batch_size"] == 4


def test_every_network_is_timed_in_its_inference_layout_and_left_as_it_was():
    """A pruned copy of a CPU network (built in the default layout) is timed in the channels-last layout its
    source ran in, as :func:`inference_network` readies both; the network itself keeps its layout and mode."""
    source = cpu_training_layout(build_network("cnn_mnist", (1, 28, 28), 10))
    pruned = prune(source, eps=0.0)  # nothing removed: the same function, built afresh
    conv = [m for m in pruned if isinstance(m, nn.Conv2d)][1]  # one of many input channels: the layouts differ
    assert not conv.weight.is_contiguous(memory_format=torch.channels_last)
    seen = []
    conv.register_forward_pre_hook(
        lambda module, _: seen.append(module.weight.is_contiguous(memory_format=torch.channels_last)))
    measure_latency(pruned.train(), (1, 28, 28), batch_size=4, repeats=2, warmup=1)
    assert seen == [True] * 3
    cost = network_cost(pruned, (1, 28, 28), latency_batch_size=4, latency_repeats=1)
    assert cost["latency_layout"] == LATENCY_LAYOUT
    assert pruned.training and not conv.weight.is_contiguous(memory_format=torch.channels_last)


def test_bad_arguments():
    net = build_network("fcnn", (1, 28, 28), 10)
    with pytest.raises(ValueError, match="input_shape"):
        count_flops(net, (0, 28))
    with pytest.raises(ValueError, match="input_shape"):
        count_flops(net, ())
    # feature vectors are inputs too (the FCNN flattens): the same FLOPs as for the image
    assert count_flops(build_network("fcnn", (784,), 10), (784,)) == count_flops(net, (1, 28, 28))
    with pytest.raises(ValueError, match="repeats=0"):
        measure_latency(net, (1, 28, 28), repeats=0)
    with pytest.raises(TypeError, match="BatchNorm"):
        analytic_macs(nn.Sequential(nn.BatchNorm2d(1)), (1, 4, 4))


def test_layer_widths_and_description():
    net = build_network(ArchSpec("cnn_cifar10", 0.5, 2), (3, 32, 32), 11)
    assert layer_widths(net) == [8, 16, 400, 100, 11]
    assert describe_architecture(net) == "Conv(8,k5)-Conv(16,k5)-FC(400)-FC(100)-FC(11)"
    assert torch.is_tensor(next(net.parameters()))
