"""Ensemble Distribution Distillation (EnD2; Malinin et al., 2020) as a GPED target (paper 003, A.3-A.4).

EnD2 distils the *distribution* of the teacher's categoricals pi(x, theta) into a prior network:
a student whose outputs are the concentrations alpha = exp(raw) of a Dirichlet over pi, trained
with the Dirichlet negative log-likelihood of the samples (Eq. 11,
:func:`gped_kit.core.losses.dirichlet_nll`). The loss depends on the samples only through
E_m[ln pi_m], so it fits Algorithm 1 as a target with g = ln pi_T: U_s uses one sample's
log-probabilities, U_o their running mean. The teacher sample is heated (temperature T = 2.5,
fixed, Appendix A.4) and mixed with the uniform distribution (``smoothing``) so ln pi stays
finite. The student's linked output is ``[alpha / alpha_0, alpha_0]`` (the Dirichlet's mean,
i.e. its predictive distribution, and its precision); its uncertainties come in closed form
(:func:`gped_kit.core.uncertainty.from_dirichlet_output`), as does its marginal variance
(:func:`dirichlet_marginal_variance`). It reports the student's NLL, accuracy and NLL gap, not a
``target_mae`` (its output is not an estimate of E[g]).
"""

from __future__ import annotations

import math

import torch

from ..core import losses
from ..core.targets import Target, dirichlet_head
from ..core.uncertainty import from_dirichlet_output

ENDD_TEMPERATURE = 2.5  # Appendix A.4: fixed training temperature of the prior networks
ENDD_SMOOTHING = 1e-3  # pi is mixed with the uniform distribution so ln pi stays finite


def dirichlet_marginal_variance(output: torch.Tensor, num_classes: int) -> torch.Tensor:
    """E[pi_c (1 - pi_c)] under the student's Dirichlet, from its linked output
    ``[alpha/alpha_0, alpha_0]``: ``alpha_c (alpha_0 - alpha_c) / (alpha_0 (alpha_0 + 1))``, (N, C)."""
    alpha = output[:, :num_classes] * output[:, num_classes:]
    alpha0 = alpha.sum(-1, keepdim=True)
    return alpha * (alpha0 - alpha) / (alpha0 * (alpha0 + 1))


def endd_output_at_temperature(output: torch.Tensor, num_classes: int, temperature: float) -> torch.Tensor:
    """A prior network's linked output ``[alpha/alpha_0, alpha_0]`` (alpha = exp(raw), the link's
    T = 1) re-read at evaluation temperature ``temperature``: alpha_T = exp(raw / T) = alpha^(1/T),
    returned in the same layout (N, C+1). T = 1 gives the output back (up to round-off); T = 2.5 is
    the Dirichlet the Eq. 11 loss was trained on (Appendix A.4), whose mean is the *heated*
    predictive. Computed in float64 from alpha = (alpha/alpha_0) * alpha_0, returned in the
    output's dtype. Every quantity read off the Dirichlet (its mean, hence NLL and accuracy; total,
    data and knowledge uncertainty) changes with T; the argmax, hence accuracy, does not."""
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature={temperature!r}: must be finite and > 0")
    if output.dim() != 2 or output.shape[1] != num_classes + 1:
        raise ValueError(f"expected EnD2 outputs of shape (N, {num_classes + 1}), got {tuple(output.shape)}")
    log_alpha = (output[:, :num_classes].double() * output[:, num_classes:].double()).log()
    alpha = (log_alpha / temperature).exp()
    alpha0 = alpha.sum(-1, keepdim=True)
    return torch.cat([alpha / alpha0, alpha0], dim=-1).to(output.dtype)


def heated_label(label: str, temperature: float) -> str:
    """The label of EnD2 student ``label`` read at evaluation temperature ``temperature``:
    ``"EnD2"`` -> ``"EnD2 (tau = 2.5)"``; the method part of an Experiment 4 label:
    ``"EnD2-U_s-base"`` -> ``"EnD2 (tau = 2.5)-U_s-base"``. The temperature is tau (printed τ), so that
    T stays the chain length."""
    method, sep, rest = label.partition("-")
    return f"{method} (tau = {temperature:g}){sep}{rest}"


def is_heated(label: str) -> bool:
    """True when ``label`` names an EnD2 student read at another evaluation temperature
    (:func:`heated_label`)."""
    return " (tau = " in label


def endd_target(temperature: float = ENDD_TEMPERATURE, smoothing: float = ENDD_SMOOTHING) -> Target:
    """The EnD2 baseline as a GPED target (paper 003, Appendix A.3-A.4).

    g = ln pi_T with pi_T = (1 - smoothing) softmax(ln p / T) + smoothing / C, the teacher
    sample's class distribution at training temperature T (Malinin et al. heat both the
    ensemble and the prior network; at test time T = 1). The loss is Eq. 11 with
    alpha = exp(raw / T); the link is :func:`~gped_kit.core.targets.dirichlet_head`, outputs
    ``[alpha/alpha_0, alpha_0]`` at T = 1.
    """
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"endd temperature={temperature!r}: must be finite and > 0")
    if not 0 <= smoothing < 1:
        raise ValueError(f"endd smoothing={smoothing!r}: must lie in [0, 1)")
    name = "endd" if (temperature, smoothing) == (ENDD_TEMPERATURE, ENDD_SMOOTHING) else \
        f"endd-T{temperature:g}-s{smoothing:g}"

    def g(log_probs: torch.Tensor) -> torch.Tensor:
        pi = torch.softmax(log_probs / temperature, dim=-1)
        return (pi * (1 - smoothing) + smoothing / pi.shape[-1]).log()

    return Target(name, g, out_dim=lambda c: c, link=dirichlet_head,
                  loss=lambda target, raw: losses.dirichlet_nll(target, raw, temperature),
                  predictive_classes=True, estimates_g=False, decomposition=from_dirichlet_output,
                  marginal_variance=dirichlet_marginal_variance, at_temperature=endd_output_at_temperature,
                  training_temperature=temperature)


#: EnD2 with the paper's settings.
ENDD = endd_target()
