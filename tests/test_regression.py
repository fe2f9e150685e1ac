"""A known answer for the Gaussian likelihood: GPED on Bayesian linear regression.

y = w x + b + eps, eps ~ N(0, sigma^2) with sigma^2 known, prior N(0, 1/tau) on (w, b). The
posterior is Gaussian with precision A = tau I + Phi^T Phi / sigma^2 (Phi = [x, 1]) and mean
m = A^-1 Phi^T y / sigma^2; full-batch SGLD (Eq. 7) with step eta has the same stationary mean and
the stationary covariance S = (A (I - eta A / 4))^-1 of its discretisation. So at an input x the
posterior predictive has mean phi^T m, epistemic variance phi^T S phi and aleatoric variance sigma^2.
Students that can represent these functions must distil them: a linear student the predictive mean,
a student with a quadratic-form output the two variances.
"""

import math

import pytest
import torch
from torch import nn

from gped_kit.core.likelihoods import Categorical, Gaussian
from gped_kit.core.sgld import SGLDConfig
from gped_kit.core.targets import regression_moments
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, StudentConfig, distill


def shifted_linear(offset: float) -> nn.Linear:
    """A linear map of one input with its bias started ``offset`` above PyTorch's initial value: a student
    whose labels lie far from 0 starts near them (as one would start it from the labels' mean)."""
    layer = nn.Linear(1, 1)
    with torch.no_grad():
        layer.bias.add_(offset)
    return layer


class MomentsStudent(nn.Module):
    """Raw outputs (m, log e, log a): a linear mean (its bias started ``offset`` up), e = ||L [x, 1]||^2 (any PSD
    quadratic form of [x, 1], L started at 0.3 I), a constant a."""

    def __init__(self, offset: float = 0.0) -> None:
        super().__init__()
        self.mean = shifted_linear(offset)
        self.root = nn.Linear(2, 2, bias=False)
        self.log_a = nn.Parameter(torch.zeros(1))
        with torch.no_grad():
            self.root.weight.copy_(0.3 * torch.eye(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.root(torch.cat([x, torch.ones_like(x)], dim=1)).pow(2).sum(-1, keepdim=True) + 1e-8
        return torch.cat([self.mean(x), e.log(), self.log_a.expand(x.shape[0], 1)], dim=-1)


def linear_regression_data(n: int = 20, sigma2: float = 0.25, offset: float = 0.0) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor, GPEDData]:
    """y = 1.5 x - 0.5 + offset + N(0, sigma2) at n standard normal inputs (seed 0); D' is 60 points on
    [-2.5, 2.5], the test set 41 points on [-2, 2]. Returns x (n, 1), y (n,), the test inputs and the data."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(n, 1, generator=gen)
    y = 1.5 * x[:, 0] - 0.5 + offset + math.sqrt(sigma2) * torch.randn(n, generator=gen)
    x_distill = torch.linspace(-2.5, 2.5, 60).unsqueeze(1)
    x_test = torch.linspace(-2.0, 2.0, 41).unsqueeze(1)
    return x, y, x_test, GPEDData.from_tensors((x, y), (x_test, torch.zeros(41)), distill=x_distill)


@pytest.mark.parametrize(("offset", "tau"), [(0.0, 1.0), (1_000.0, 1e-4)])
def test_distilled_predictive_mean_and_variances_match_the_closed_form(offset, tau):
    """With labels near 0, and 1,000 above: there E[mu] is about 1,000 and Var[mu] about 0.07, which E[mu^2] -
    E[mu]^2 in float32 (a spacing of 0.06 at 10^6) rounded to 0 or to 1.6 (the targets' float64 values and
    sums keep it). The prior there is weak beside the data (tau = 1e-4): with tau = 1 it would hold b 14 below
    the labels, and the minibatches (drawn with replacement) would then spread the chain by their gradients'
    noise at those residuals, far beyond the closed form's."""
    n, sigma2, eta = 20, 0.25, 3e-3
    x, y, x_test, data = linear_regression_data(n, sigma2, offset)
    config = GPEDConfig(model=lambda out: nn.Linear(1, out), likelihood=Gaussian(noise_variance=sigma2),
                        sampler=SGLDConfig(step_size=eta, prior_precision=tau, batch_size=n),
                        num_iterations=4_000, burn_in=200, eval_thinning=2, log_every=2_000, progress=False,
                        device="cpu")
    # an epoch is N / M = 1 step here: the students' rate halves after 2,000 steps, so that Adam's jitter
    # ends below the Monte Carlo error of the targets
    common = dict(estimator="U_o", thinning=1, batch_size=30, lr=1e-2, lr_halving_epochs=2_000)
    students = [StudentConfig("predictive_mean", arch=lambda out: shifted_linear(offset), **common),
                StudentConfig("predictive_variance", arch=lambda out: MomentsStudent(offset), **common)]
    result = distill(data, config, students)

    phi = torch.cat([x, torch.ones(n, 1)], 1).double()
    A = tau * torch.eye(2, dtype=torch.float64) + phi.T @ phi / sigma2
    mean = torch.linalg.solve(A, phi.T @ y.double() / sigma2)
    evals, evecs = torch.linalg.eigh(A)
    chain_cov = evecs @ torch.diag(1 / (evals * (1 - eta * evals / 4))) @ evecs.T
    phi_test = torch.cat([x_test, torch.ones(41, 1)], 1).double()
    exact_mean = phi_test @ mean
    exact_epistemic = ((phi_test @ chain_cov) * phi_test).sum(1)
    posterior_epistemic = ((phi_test @ torch.linalg.inv(A)) * phi_test).sum(1)

    mean_student = result.student_outputs["test"]["predictive_mean-U_o"][:, 0].double()
    moments = regression_moments(result.student_outputs["test"]["predictive_variance-U_o"].double())
    # Tolerances: ~4 Monte Carlo standard errors of a chain of ~3,800 steps whose samples decorrelate in
    # ~2 / (eta a) ~ 3 steps. A wrong SGLD convention (eta vs eta / 2 on the gradient) would double the
    # variances; a biased estimator would shift the mean by a sizeable fraction of a posterior sd.
    scale = exact_epistemic.sqrt().max()  # one posterior standard deviation of the predictive mean
    assert (mean_student - exact_mean).abs().max() < 0.25 * scale
    assert (moments.mean[:, 0] - exact_mean).abs().max() < 0.25 * scale
    rel = ((moments.epistemic[:, 0] - exact_epistemic) / exact_epistemic).abs()
    assert rel.max() < 0.25, rel
    assert (moments.aleatoric[:, 0] - sigma2).abs().max() < 0.01 * sigma2
    # at this step size the discretisation's covariance is 3-12% above the posterior's: the students follow
    # the chain, not the exact posterior
    gap = (exact_epistemic - posterior_epistemic) / posterior_epistemic
    assert (gap > 0.02).all() and (gap < 0.15).all()
    # the teacher ensemble itself (no student) estimates the same moments
    ensemble = regression_moments(result.teacher_outputs["test"]["predictive_variance"].double())
    assert (ensemble.mean[:, 0] - exact_mean).abs().max() < 0.25 * scale
    assert ((ensemble.epistemic[:, 0] - exact_epistemic) / exact_epistemic).abs().max() < 0.25
    s = result.summary.set_index("student")
    assert {"teacher_nll", "teacher_rmse", "student_rmse", "mean_mae", "epistemic_mae", "aleatoric_mae"} <= set(s)
    assert s.loc["predictive_variance-U_o", "epistemic_mae"] < 0.25 * float(exact_epistemic.mean())


def test_heteroscedastic_gaussian_teacher_learns_the_noise_level():
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(400, 1, generator=gen) * 4 - 2
    noise_sd = 0.1 + 0.4 * (x[:, 0] > 0).float()  # noisier on the right
    y = torch.sin(x[:, 0]) + noise_sd * torch.randn(400, generator=gen)
    data = GPEDData.from_tensors((x, y), (x, y))
    net = lambda out: nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, out))  # noqa: E731
    config = GPEDConfig(model=net, likelihood="gaussian", sampler=SGLDConfig(step_size=2e-5, prior_precision=1.0,
                                                                             batch_size=50),
                        num_iterations=3_000, burn_in=1_000, eval_thinning=10, log_every=1_000, progress=False,
                        device="cpu")
    result = distill(data, config, [StudentConfig("predictive_variance", "U_o", arch=net, thinning=1, batch_size=50,
                                                  lr=5e-3, lr_halving_epochs=None)])
    ensemble = regression_moments(result.teacher_outputs["test"]["predictive_variance"])
    left, right = x[:, 0] < -0.2, x[:, 0] > 0.2
    assert ensemble.aleatoric[right].mean() > 4 * ensemble.aleatoric[left].mean()  # true ratio 25
    student = regression_moments(result.student_outputs["test"]["predictive_variance-U_o"])
    assert student.aleatoric[right].mean() > 4 * student.aleatoric[left].mean()


def test_the_likelihoods_say_what_labels_they_take_and_where_chance_lies():
    assert Categorical.integer_labels and not Gaussian.integer_labels
    assert Categorical().chance_nll(10) == math.log(10) and Categorical().chance_nll(1) is None
    assert Gaussian(1.0).chance_nll(3) is None and Gaussian().chance_nll(3) is None  # NLL depends on y's scale
