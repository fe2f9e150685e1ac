import itertools

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from gped_kit.core import losses
from gped_kit.models.presets import ArchSpec, build_network


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
    assert abs(float(losses.group_lasso(dict(net.named_parameters()), net).detach()) - manual) < 1e-3
    with torch.no_grad():
        layers[-1].weight.mul_(100.0)  # the output layer is not a group
    assert abs(float(losses.group_lasso(dict(net.named_parameters()), net).detach()) - manual) < 1e-3


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


# ----------------------------------------------------------------------------- derivative matching
# Papamakarios' thesis, Eq. 2.18 (Section 2.2.2) and Eqs. 3.24-3.26 (Section 3.3.1).


def _linear_softmax(weight: torch.Tensor, bias: torch.Tensor):
    return lambda x: F.log_softmax(x @ weight.T + bias, dim=-1)


def test_input_gradients_of_a_linear_softmax_are_analytic():
    """d/dx log p_i(x) = W_i - sum_j p_j(x) W_j for p = softmax(W x + b)."""
    torch.manual_seed(0)
    weight, bias = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    x = torch.randn(6, 3, dtype=torch.float64)
    p = torch.softmax(x @ weight.T + bias, -1)
    expected = weight[None, :, :] - (p @ weight)[:, None, :]            # (B, C, D)
    jac = losses.input_gradients(_linear_softmax(weight, bias), x)
    assert jac.shape == (6, 4, 3)
    assert torch.allclose(jac, expected)
    v = losses.rademacher(6, 4, torch.Generator().manual_seed(1), dtype=torch.float64)
    projected = losses.input_gradients(_linear_softmax(weight, bias), x, v)
    assert projected.shape == x.shape
    assert torch.allclose(projected, torch.einsum("bc,bcd->bd", v, expected))
    # the tensor form (log outputs computed from x by the caller) gives the same, and keeps the graph
    xg = x.clone().requires_grad_(True)
    log_p = _linear_softmax(weight, bias)(xg)
    assert torch.allclose(losses.input_gradients(log_p, xg, v), projected)
    assert torch.allclose(losses.input_gradients(log_p, xg), expected)


def test_input_gradients_work_on_image_shaped_inputs_per_example():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    x = torch.randn(5, 1, 4, 4)
    jac = losses.input_gradients(lambda z: F.log_softmax(net(z), -1), x)
    assert jac.shape == (5, 3, 1, 4, 4)
    single = losses.input_gradients(lambda z: F.log_softmax(net(z), -1), x[2:3])
    assert torch.allclose(jac[2:3], single, atol=1e-6)   # each example's own gradient


def test_rademacher_projection_is_unbiased_for_the_squared_frobenius_norm():
    """E_v ||v^T (J_s - J_t)||^2 = ||J_s - J_t||_F^2: exactly, averaging over all 2^C sign vectors,
    and within Monte Carlo error with random draws from losses.rademacher."""
    torch.manual_seed(0)
    c = 4
    w_s, b_s = torch.randn(c, 3, dtype=torch.float64), torch.randn(c, dtype=torch.float64)
    w_t, b_t = torch.randn(c, 3, dtype=torch.float64), torch.randn(c, dtype=torch.float64)
    x = torch.randn(5, 3, dtype=torch.float64)
    exact = losses.derivative_square_error(losses.input_gradients(_linear_softmax(w_s, b_s), x),
                                           losses.input_gradients(_linear_softmax(w_t, b_t), x))
    signs = torch.tensor(list(itertools.product((-1.0, 1.0), repeat=c)), dtype=torch.float64)
    total = torch.zeros(5, dtype=torch.float64)
    for v in signs:
        vb = v.expand(5, c)
        total += losses.derivative_square_error(losses.input_gradients(_linear_softmax(w_s, b_s), x, vb),
                                                losses.input_gradients(_linear_softmax(w_t, b_t), x, vb))
    assert torch.allclose(total / len(signs), exact)
    gen = torch.Generator().manual_seed(3)
    draws = torch.stack([
        losses.derivative_square_error(losses.input_gradients(_linear_softmax(w_s, b_s), x, v),
                                       losses.input_gradients(_linear_softmax(w_t, b_t), x, v))
        for v in (losses.rademacher(5, c, gen, dtype=torch.float64) for _ in range(4000))])
    stderr = draws.std(0) / len(draws) ** 0.5
    assert ((draws.mean(0) - exact).abs() < 4 * stderr + 1e-9).all()
    values = losses.rademacher(1000, 3, gen)
    assert set(values.unique().tolist()) == {-1.0, 1.0} and abs(float(values.mean())) < 0.1


def test_derivative_square_error_is_zero_only_for_matching_gradients():
    torch.manual_seed(0)
    weight, bias = torch.randn(3, 2), torch.randn(3)
    x = torch.randn(8, 2)
    teacher = losses.input_gradients(_linear_softmax(weight, bias), x)
    same = losses.input_gradients(_linear_softmax(weight.clone(), bias.clone()), x)
    assert losses.derivative_square_error(same, teacher).shape == (8,)
    assert torch.allclose(losses.derivative_square_error(same, teacher), torch.zeros(8))
    other = losses.input_gradients(_linear_softmax(weight + 0.1 * torch.randn(3, 2), bias), x)
    assert (losses.derivative_square_error(other, teacher) > 0).all()
    # a common shift of every row of W (and of b) leaves log-softmax and its gradients unchanged
    shifted = losses.input_gradients(_linear_softmax(weight + torch.tensor([0.7, -0.2]), bias + 1.5), x)
    assert torch.allclose(losses.derivative_square_error(shifted, teacher), torch.zeros(8), atol=1e-10)


def test_derivative_square_error_rejects_shape_mismatch_and_bad_projection():
    with pytest.raises(ValueError, match="shapes differ"):
        losses.derivative_square_error(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="projection"):
        losses.input_gradients(lambda x: F.log_softmax(x, -1), torch.zeros(2, 3), torch.ones(2, 2))
    with pytest.raises(ValueError, match="require grad"):
        losses.input_gradients(torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="batch_size"):
        losses.rademacher(0, 3)


def _fit_by_derivative_matching(teacher_fn, student, num_classes, steps=1500, seed=0, sgd=False):
    """Train ``student`` on the derivative square error only, inputs x ~ N(0, I), one Rademacher
    projection of the class axis per example (one backward pass per side)."""
    gen = torch.Generator().manual_seed(seed)
    opt = (torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9) if sgd
           else torch.optim.Adam(student.parameters(), lr=0.03))
    for _ in range(steps):
        x = torch.randn(64, 2, generator=gen, dtype=torch.float64)
        v = losses.rademacher(64, num_classes, gen, dtype=torch.float64)
        teacher_grad = losses.input_gradients(teacher_fn, x, v)
        student_grad = losses.input_gradients(lambda z: F.log_softmax(student(z), -1), x, v, create_graph=True)
        loss = losses.derivative_square_error(student_grad, teacher_grad).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return student


def test_derivative_matching_alone_recovers_a_logistic_teacher():
    """Thesis Proposition 3.1: for binary classification, matching d/dx log p(y|x) for both
    classes determines p(y=1|x) when it is not constant. A logistic student (two logits, the
    y = 0 logit fixed at 0) trained on derivatives only, with one Rademacher projection per
    example, recovers the teacher's weight vector *and* its bias."""
    w_true, b_true = torch.tensor([1.5, -2.0], dtype=torch.float64), 0.5

    def teacher(x):
        z = x @ w_true + b_true
        return torch.stack([F.logsigmoid(-z), F.logsigmoid(z)], 1)

    class Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(2, dtype=torch.float64))
            self.b = nn.Parameter(torch.zeros((), dtype=torch.float64))

        def forward(self, x):
            z = x @ self.w + self.b
            return torch.stack([torch.zeros_like(z), z], 1)

    student = _fit_by_derivative_matching(teacher, Logistic(), num_classes=2)
    assert torch.allclose(student.w.detach(), w_true, atol=0.05)
    assert abs(float(student.b.detach()) - b_true) < 0.05


def test_derivative_matching_identifies_a_softmax_teacher_up_to_a_common_shift():
    """Proposition 2.1: derivatives of log-softmax outputs identify the class probabilities, so a
    linear-softmax student recovers W and b up to adding the same vector to every row of W and the
    same number to every b_i -- which changes nothing (the usual softmax redundancy, not a
    weakness of derivative matching). The gradient along that shift is exactly zero, so the
    row-means of W and b stay at their initial values while the centred W and b match the teacher."""
    torch.manual_seed(0)
    w_true = torch.tensor([[2.0, 0.0], [-1.0, 1.5], [0.0, -2.0]], dtype=torch.float64)
    b_true = torch.tensor([0.3, -0.4, 0.2], dtype=torch.float64)
    student = nn.Linear(2, 3).double()
    with torch.no_grad():
        student.weight.normal_()
        student.bias.normal_()
    mean_w0, mean_b0 = student.weight.detach().mean(0).clone(), student.bias.detach().mean().clone()
    # plain SGD (with momentum): linear in the gradient, so a zero gradient component stays zero
    # (Adam's per-coordinate scaling would move the row-means although their gradient is 0)
    student = _fit_by_derivative_matching(_linear_softmax(w_true, b_true), student, num_classes=3, steps=2000,
                                          sgd=True)
    w, b = student.weight.detach(), student.bias.detach()
    assert torch.allclose(w - w.mean(0), w_true - w_true.mean(0), atol=0.05)
    assert torch.allclose(b - b.mean(), b_true - b_true.mean(), atol=0.05)
    assert torch.allclose(w.mean(0), mean_w0, atol=1e-6)    # not identifiable: never moves
    assert torch.allclose(b.mean(), mean_b0, atol=1e-6)


def test_derivative_matching_cannot_identify_the_bias_of_a_constant_teacher():
    """Proposition 3.1's condition: where t(x) is constant (teacher weight vector 0) every
    input-gradient vanishes, so any student with w = 0 has zero derivative square error whatever
    its bias: the bias (the constant's value) is not identifiable from derivatives alone,
    whereas cross-entropy identifies it."""
    x = torch.randn(32, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    b_true = torch.tensor(1.2, dtype=torch.float64)

    def logistic(w, b):
        return lambda z: torch.stack([F.logsigmoid(-(z @ w + b)), F.logsigmoid(z @ w + b)], 1)

    zero = torch.zeros(2, dtype=torch.float64)
    teacher = losses.input_gradients(logistic(zero, b_true), x)
    for b in (-2.0, 0.0, 3.0):
        student = losses.input_gradients(logistic(zero, torch.tensor(b, dtype=torch.float64)), x)
        assert float(losses.derivative_square_error(student, teacher).max()) == 0.0
        target = torch.stack([torch.sigmoid(-b_true), torch.sigmoid(b_true)]).expand(32, 2)
        ce = losses.cross_entropy(target, logistic(zero, torch.tensor(b, dtype=torch.float64))(x))
        ce_true = losses.cross_entropy(target, logistic(zero, b_true)(x))
        assert (ce > ce_true).all()   # cross-entropy does tell the biases apart
