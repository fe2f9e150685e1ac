"""The paper's data manipulations (Appendix A.1), all seeded through explicit CPU
``torch.Generator`` objects so that results do not depend on the device: labelled-set
subsampling, one uniformly placed m x m zero square per image (masking rate r = m^2 / (H W)),
and Gaussian input perturbation of distillation minibatches as in Bayesian Dark Knowledge.
"""

from __future__ import annotations

import numpy as np
import torch


def seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(int(seed))


def derive_seed(seed: int, stream: int) -> int:
    """An independent 63-bit seed for sub-stream ``stream`` of ``seed`` (numpy SeedSequence)."""
    return int(np.random.SeedSequence([int(seed), int(stream)]).generate_state(1, np.uint64)[0]) >> 1


def subsample_indices(n_total: int, size: int | None, seed: int) -> torch.Tensor:
    """Sorted random subset of ``range(n_total)`` of ``size`` without replacement (None: all)."""
    if size is None or size == n_total:
        return torch.arange(n_total)
    if not 1 <= size <= n_total:
        raise ValueError(f"subsample size={size} must be between 1 and n_total={n_total}")
    return torch.randperm(n_total, generator=seeded_generator(seed))[:size].sort().values


def masking_rate(mask_size: int, height: int, width: int) -> float:
    """Fraction of pixels covered by an m x m square: m^2 / (H W)."""
    return mask_size * mask_size / (height * width)


def mask_size_for_rate(rate: float, height: int, width: int) -> int:
    """The mask size m whose masking rate is nearest to ``rate`` (0 <= rate <= 1)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate={rate} must lie in [0, 1]")
    cands = range(min(height, width) + 1)
    return min(cands, key=lambda m: abs(masking_rate(m, height, width) - rate))


def apply_square_mask(images: torch.Tensor, mask_size: int, seed: int) -> torch.Tensor:
    """Zero one uniformly placed ``mask_size`` x ``mask_size`` square per image, all channels.

    ``images`` is (N, C, H, W) of any dtype; the result is a new tensor of the same dtype and
    device. Top-left corners are drawn from a CPU generator seeded with ``seed``, uniformly
    over rows 0..H-m and columns 0..W-m.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (N, C, H, W), got shape {tuple(images.shape)}")
    n, _, h, w = images.shape
    if not 0 <= mask_size <= min(h, w):
        raise ValueError(f"mask_size={mask_size} must lie in [0, {min(h, w)}] for {h}x{w} images")
    if mask_size == 0:
        return images.clone()
    gen = seeded_generator(seed)
    top = torch.randint(0, h - mask_size + 1, (n, 1), generator=gen).to(images.device)
    left = torch.randint(0, w - mask_size + 1, (n, 1), generator=gen).to(images.device)
    rows = torch.arange(h, device=images.device)
    cols = torch.arange(w, device=images.device)
    in_rows = (rows >= top) & (rows < top + mask_size)  # (N, H)
    in_cols = (cols >= left) & (cols < left + mask_size)  # (N, W)
    mask = in_rows[:, None, :, None] & in_cols[:, None, None, :]  # (N, 1, H, W)
    return images.masked_fill(mask, 0)


def perturb(x: torch.Tensor, std: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """``x + std * N(0, I)`` (Bayesian Dark Knowledge input noise); ``std == 0`` returns ``x``.

    Noise is drawn on ``generator``'s device (the global RNG of ``x.device`` if None) and moved
    to ``x.device``: a CPU generator gives device-independent results, a CUDA one is faster.
    """
    if std < 0:
        raise ValueError(f"noise std={std} must be >= 0")
    if not x.is_floating_point():
        raise TypeError(f"perturb needs a floating-point tensor, got {x.dtype}")
    if std == 0:
        return x
    device = generator.device if generator is not None else x.device
    noise = torch.randn(x.shape, generator=generator, device=device, dtype=x.dtype)
    return x + std * noise.to(x.device)
