"""Figure 3 of paper 003 (the masking manipulation, Appendix A.1): test images with one random
m x m zero square each (:func:`gped_kit.data.transforms.apply_square_mask`, seeded, so the same
images and squares come back every time), one column per mask size m with its masking rate
r = m^2 / (H W)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import Rectangle

from ..data.transforms import apply_square_mask, masking_rate


def _as_nchw(images: torch.Tensor) -> torch.Tensor:
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
    if images.dim() == 3:
        images = images.unsqueeze(1)
    if images.dim() != 4 or images.shape[0] == 0 or images.shape[1] not in (1, 3):
        raise ValueError(f"images must be a non-empty (N, H, W) or (N, C, H, W) tensor with C in (1, 3), "
                         f"got shape {tuple(images.shape)}")
    return images


def select_examples(images: torch.Tensor, num_examples: int, seed: int) -> torch.Tensor:
    """``num_examples`` images drawn without replacement with a CPU generator seeded by ``seed``
    (the same images for the same arguments), as (k, C, H, W)."""
    images = _as_nchw(images)
    if not 1 <= num_examples <= images.shape[0]:
        raise ValueError(f"num_examples={num_examples} must lie in [1, {images.shape[0]}] (the number of images)")
    idx = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(int(seed)))[:num_examples]
    return images[idx.to(images.device)].cpu().clone()


def square_mask_region(images: torch.Tensor, mask_size: int, seed: int) -> torch.Tensor:
    """Boolean (N, 1, H, W) map of the square that ``apply_square_mask(images, mask_size, seed)``
    zeroes (its positions depend only on N, H, W, m and the seed)."""
    images = _as_nchw(images)
    n, _, h, w = images.shape
    ones = torch.ones((n, 1, h, w), dtype=torch.uint8)
    return apply_square_mask(ones, mask_size, seed) == 0


def pixel_max(images: torch.Tensor) -> float:
    """The white level of ``images``: 255 for uint8, else the larger of 1 and their maximum."""
    return 255.0 if images.dtype == torch.uint8 else float(max(1.0, images.max().item()))


def show_masked_image(ax: plt.Axes, image: torch.Tensor, region: torch.Tensor, mask_size: int, vmax: float,
                outline: bool) -> None:
    """Draw one (C, H, W) image in grey (or RGB), with the red border of ``region`` if ``outline``."""
    img = image[0] if image.shape[0] == 1 else image.permute(1, 2, 0)
    ax.imshow(img.numpy(), cmap="gray", vmin=0, vmax=vmax, interpolation="nearest")
    if outline and mask_size > 0:
        rows, cols = torch.nonzero(region, as_tuple=True)
        ax.add_patch(Rectangle((int(cols.min()) - 0.5, int(rows.min()) - 0.5), mask_size, mask_size,
                               fill=False, edgecolor="red", linewidth=1, clip_on=False))
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def plot_masked_examples(images: torch.Tensor, mask_sizes: Sequence[int], seed: int = 0,
                         outline: bool = True, axes_size: float = 1.3) -> plt.Figure:
    """Figure 3 of the paper as a grid: one row per image, one column per mask size m, each
    image with one random m x m zero square (``apply_square_mask(images, m, seed)``); column
    titles give m and r = m^2 / (H W). ``outline`` draws the square's border in red (masked
    pixels are 0, the background colour, so a square over the background is otherwise invisible).
    """
    images = _as_nchw(images).cpu()
    mask_sizes = [int(m) for m in mask_sizes]
    if not mask_sizes:
        raise ValueError("mask_sizes must not be empty")
    n, _, h, w = images.shape
    bad = [m for m in mask_sizes if not 0 <= m <= min(h, w)]
    if bad:
        raise ValueError(f"mask sizes {bad} lie outside [0, {min(h, w)}] for {h}x{w} images")
    vmax = pixel_max(images)
    fig, axes = plt.subplots(n, len(mask_sizes), figsize=(axes_size * len(mask_sizes), axes_size * n + 0.4),
                             squeeze=False)
    for j, m in enumerate(mask_sizes):
        masked = apply_square_mask(images, m, seed)
        region = square_mask_region(images, m, seed)
        for i in range(n):
            show_masked_image(axes[i, j], masked[i], region[i, 0], m, vmax, outline)
        axes[0, j].set_title(f"m = {m}\nr = {masking_rate(m, h, w):.3f}", fontsize=9)
    fig.tight_layout()
    return fig
