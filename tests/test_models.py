import pytest
import torch

from gped_kit.models.presets import (
    EVAL_CHUNK_BYTES,
    EVAL_CHUNK_SIZE,
    ArchSpec,
    OutputHead,
    build_network,
    count_parameters,
    cpu_training_layout,
    eval_chunk_rows,
    eval_chunks,
    flat_parameters,
    inference_network,
    scaled_width,
    widest_activation,
)


def test_teacher_parameter_counts_match_appendix_a2():
    # FCNN 784-400-400-10 (Balan et al.): 784*400+400 + 400*400+400 + 400*10+10
    assert count_parameters(build_network("fcnn", (1, 28, 28), 10)) == 478_410
    # CNN-MNIST: conv(1->10,k4) + conv(10->20,k4) + FC(20*4*4 -> 80) + FC(80 -> 10)
    assert count_parameters(build_network("cnn_mnist", (1, 28, 28), 10)) == (
        (16 * 10 + 10) + (160 * 20 + 20) + (320 * 80 + 80) + (80 * 10 + 10))
    # CNN-CIFAR10: conv(3->16,k5) + conv(16->32,k5) + FC(32*5*5 -> 200) + FC(200 -> 50) + FC(50 -> 10)
    assert count_parameters(build_network("cnn_cifar10", (3, 32, 32), 10)) == (
        (75 * 16 + 16) + (400 * 32 + 32) + (800 * 200 + 200) + (200 * 50 + 50) + (50 * 10 + 10))


def test_width_multipliers_use_the_floor_rule():
    assert scaled_width(20, 0.7) == 14 and scaled_width(10, 0.35) == 3 and scaled_width(80, 1.5) == 120
    assert ArchSpec("cnn_mnist", k1=0.35, k2=1.5).hidden_widths() == {"conv0": 3, "conv1": 7, "fc0": 120}
    assert ArchSpec("fcnn", k1=2, k2=0.5).hidden_widths() == {"fc0": 800, "fc1": 200}
    assert ArchSpec("cnn_cifar10", k1=0.5, k2=2).hidden_widths() == {"conv0": 8, "conv1": 16, "fc0": 400, "fc1": 100}


@pytest.mark.parametrize("family,shape", [("fcnn", (1, 28, 28)), ("cnn_mnist", (1, 28, 28)),
                                          ("cnn_cifar10", (3, 32, 32))])
def test_forward_shapes_and_heads(family, shape):
    net = build_network(ArchSpec(family, dropout=0.5 if family == "fcnn" else 0.0), shape, 11)
    out = net(torch.rand(4, *shape))
    assert out.shape == (4, 11)
    both = OutputHead("softmax+exp", 10)(out)
    assert torch.allclose(both[:, :10].sum(-1), torch.ones(4)) and (both[:, 10] > 0).all()


def test_bad_architectures_raise_clear_errors():
    with pytest.raises(ValueError, match="family='resnet'.*allowed"):
        ArchSpec("resnet")
    with pytest.raises(ValueError, match="k1=0"):
        ArchSpec("fcnn", k1=0)
    with pytest.raises(ValueError, match="width 0"):
        ArchSpec("cnn_mnist", k1=0.05)
    with pytest.raises(ValueError, match="dropout"):
        ArchSpec("fcnn", dropout=1.0)
    with pytest.raises(ValueError, match="too small"):
        build_network("cnn_mnist", (1, 8, 8), 10)
    with pytest.raises(ValueError, match="kind='sigmoid'"):
        OutputHead("sigmoid", 10)


@pytest.mark.parametrize("family,shape", [("fcnn", (1, 28, 28)), ("cnn_mnist", (1, 28, 28)),
                                          ("cnn_cifar10", (3, 32, 32))])
def test_inference_network_computes_the_same_function_and_leaves_the_network_alone(family, shape):
    torch.manual_seed(0)
    net = build_network(ArchSpec(family), shape, 10)
    x = torch.randn(7, *shape)
    formats = [p.is_contiguous() for p in net.parameters()]
    fast = inference_network(net)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), net(x), rtol=1e-5, atol=1e-5)
    assert [p.is_contiguous() for p in net.parameters()] == formats  # the training layout is untouched
    assert not fast.training
    if family == "fcnn":
        assert fast is net  # nothing to gain: no copy


def test_cpu_training_layout_keeps_the_function_and_flat_parameters_the_order():
    torch.manual_seed(0)
    net = build_network(ArchSpec("cnn_mnist"), (1, 28, 28), 10)
    reference = torch.nn.utils.parameters_to_vector(net.parameters()).detach().clone()
    x = torch.randn(5, 1, 28, 28)
    with torch.no_grad():
        before = net(x)
    assert cpu_training_layout(net) is net
    assert not net[3].weight.is_contiguous()  # 20 x 10 x 4 x 4 weights now channels-last
    with torch.no_grad():
        torch.testing.assert_close(net(x), before, rtol=1e-5, atol=1e-5)
    assert torch.equal(flat_parameters(net), reference)  # same values, same order
    assert inference_network(net) is net  # already in the fast layout: no copy
    fcnn = build_network(ArchSpec("fcnn"), (1, 28, 28), 10)
    assert cpu_training_layout(fcnn) is fcnn and all(p.is_contiguous() for p in fcnn.parameters())


def test_the_automatic_evaluation_chunk_follows_the_widest_activation_chains_and_device():
    """The widest activation per row, from shapes alone: the FCNN's flattened image (784), CNN-MNIST's first
    convolution (10 x 25 x 25); the chunk fits the device's budget over all chains, in multiples of 500 and at
    least 500; a network that cannot run on the meta device gets 500."""
    fcnn, cnn = build_network("fcnn", (1, 28, 28), 10), build_network("cnn_mnist", (1, 28, 28), 10)
    assert widest_activation([fcnn], (1, 28, 28)) == 784
    assert widest_activation([cnn], (1, 28, 28)) == 10 * 25 * 25
    assert widest_activation([fcnn, cnn], (1, 28, 28)) == 10 * 25 * 25
    assert all(not p.is_meta for p in fcnn.parameters())  # measured on a copy
    assert eval_chunk_rows(784, 1, "cpu") == EVAL_CHUNK_BYTES["cpu"] // (784 * 4) // 500 * 500 == 5_000
    assert eval_chunk_rows(10 * 25 * 25, 1, "cpu") == EVAL_CHUNK_SIZE  # the CNNs keep 500 rows on the CPU
    assert eval_chunk_rows(784, 24, "cuda") == 14_000 and eval_chunk_rows(784, 48, "cpu") == EVAL_CHUNK_SIZE
    assert eval_chunk_rows(None, 1, "cuda") == EVAL_CHUNK_SIZE

    class HostOnly(torch.nn.Module):
        def forward(self, x):
            return torch.from_numpy(x.numpy())

    assert widest_activation([HostOnly()], (3,)) is None


def test_larger_chunks_keep_the_last_small_chunk_of_500_row_chunks():
    """Rows past the last whole 500 stay a chunk of their own (where the CPU rounds a small chunk's rows
    differently), so a larger chunk computes every row in a chunk of at least 500 rows or in the same last chunk
    as 500-row chunks; 500 itself and sizes not a multiple of 500 chunk as plain ranges."""
    assert eval_chunks(0, 10_000, 5_000) == [(0, 5_000), (5_000, 10_000)]
    assert eval_chunks(0, 10_010, 5_000) == [(0, 5_000), (5_000, 10_000), (10_000, 10_010)]
    assert eval_chunks(100, 2_120, 1_500) == [(100, 1_600), (1_600, 2_100), (2_100, 2_120)]
    assert eval_chunks(0, 1_210, 500) == [(0, 500), (500, 1_000), (1_000, 1_210)]
    assert eval_chunks(0, 130, 64) == [(0, 64), (64, 128), (128, 130)]
    assert eval_chunks(0, 20, 5_000) == [(0, 20)] and eval_chunks(7, 7, 5_000) == []
