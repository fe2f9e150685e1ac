import torch
from torch import nn
from torch.nn import functional as F

from gped_kit import losses
from gped_kit.models import ArchSpec, build_network


def test_cross_entropy_matches_torch_for_hard_and_soft_targets():
    raw = torch.randn(5, 4)
    y = torch.tensor([0, 3, 1, 1, 2])
    assert torch.allclose(losses.cross_entropy(F.one_hot(y, 4).float(), raw), F.cross_entropy(raw, y, reduction="none"))
    soft = torch.softmax(torch.randn(5, 4), -1)
    assert torch.allclose(losses.cross_entropy(soft, raw), F.cross_entropy(raw, soft, reduction="none"))


def test_cross_entropy_gradient_is_linear_in_the_target():
    """Why U_s is enough for the predictive target: the mean of single-sample gradients equals the
    gradient at the mean target."""
    raw = torch.randn(3, 4, requires_grad=True)
    samples = torch.softmax(torch.randn(10, 3, 4), -1)
    grads = [torch.autograd.grad(losses.cross_entropy(s, raw).sum(), raw)[0] for s in samples]
    at_mean = torch.autograd.grad(losses.cross_entropy(samples.mean(0), raw).sum(), raw)[0]
    assert torch.allclose(torch.stack(grads).mean(0), at_mean, atol=1e-6)


def test_absolute_and_squared_error():
    a, b = torch.tensor([[1.0, 2.0], [0.0, 0.0]]), torch.tensor([[0.5, 3.0], [0.0, -2.0]])
    assert torch.allclose(losses.absolute_error(a, b), torch.tensor([1.5, 2.0]))
    assert torch.allclose(losses.squared_error(a, b), torch.tensor([1.25, 4.0]))


def test_group_lasso_sums_unit_and_channel_norms_of_hidden_layers():
    net = build_network(ArchSpec("cnn_mnist", k1=0.5, k2=0.5), (1, 28, 28), 10)
    layers = [m for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    manual = sum(
        sum(float(layer.weight.detach()[j].pow(2).sum().sqrt()) for j in range(layer.weight.shape[0]))
        for layer in layers[:-1]
    )
    assert abs(float(losses.group_lasso(net).detach()) - manual) < 1e-3
    with torch.no_grad():
        layers[-1].weight.mul_(100.0)  # the output layer is not a group
    assert abs(float(losses.group_lasso(net).detach()) - manual) < 1e-3


def test_dirichlet_nll_is_the_mean_negative_dirichlet_log_density_of_the_samples():
    """Eq. 11: with ln pi averaged over samples, the loss equals the average of -ln Dir(pi_m | alpha)."""
    raw = torch.randn(3, 4, dtype=torch.float64)
    pi = torch.softmax(torch.randn(6, 3, 4, dtype=torch.float64), -1)  # 6 samples, 3 inputs
    for temperature in (1.0, 2.5):
        alpha = (raw / temperature).exp()
        expected = -torch.stack([torch.distributions.Dirichlet(alpha).log_prob(p) for p in pi]).mean(0)
        assert torch.allclose(losses.dirichlet_nll(pi.log().mean(0), raw, temperature), expected)


def test_dirichlet_nll_gradient_is_linear_in_the_mean_log_target():
    raw = torch.randn(2, 3, requires_grad=True)
    logs = torch.log_softmax(torch.randn(5, 2, 3), -1)
    grads = []
    for t in logs:
        (g,) = torch.autograd.grad(losses.dirichlet_nll(t, raw, 2.5).sum(), raw)
        grads.append(g)
    (g_mean,) = torch.autograd.grad(losses.dirichlet_nll(logs.mean(0), raw, 2.5).sum(), raw)
    assert torch.allclose(torch.stack(grads).mean(0), g_mean, atol=1e-5)
