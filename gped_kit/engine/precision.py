"""The precision of the teacher's minibatch matrix products (``GPEDConfig.matmul_precision``).

On a GPU with tensor cores, float32 matrix products may run in TF32 (10-bit mantissa inputs, float32
accumulation), several times faster than full float32. PyTorch keeps them in full float32 by default
(``torch.backends.cuda.matmul.allow_tf32`` False) and lets cuDNN's convolutions use TF32
(``torch.backends.cudnn.allow_tf32`` True), which the kit leaves as PyTorch sets it.

``"highest"`` (the default) keeps the matrix products in float32; ``"tf32"`` allows TF32 for the teacher's
forward and backward pass on its minibatch only (the SGLD gradient, Eq. 7), the step that dominates a chain's
FLOPs, while the ensemble, the students and every evaluation stay in float32. The switch is set around that
pass and restored after it, on the host: a CUDA graph captures the kernels as they were launched, so replays
keep it. On the CPU it changes nothing. It is part of a result's key (another precision is another
computation); adopting ``"tf32"`` for the paper profile is a question for a GPU measurement (a chain's
teacher and student NLL against the seed-to-seed spread of float32 chains).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

#: The allowed values of ``GPEDConfig.matmul_precision``.
MATMUL_PRECISIONS = ("highest", "tf32")


def check_matmul_precision(value: object, name: str = "GPEDConfig.matmul_precision") -> str:
    """``value`` if it is one of :data:`MATMUL_PRECISIONS`, else a ``ValueError`` naming ``name``."""
    if value not in MATMUL_PRECISIONS:
        raise ValueError(f"{name}={value!r} is not known; allowed: {list(MATMUL_PRECISIONS)} ('highest': float32 "
                         "matrix products, the default; 'tf32': TF32 for the teacher's minibatch pass on CUDA)")
    return str(value)


@contextlib.contextmanager
def teacher_matmul_precision(precision: str, device: torch.device) -> Iterator[None]:
    """Within the block, CUDA float32 matrix products use ``precision`` (module docstring); the previous
    setting is restored after it, also on an error. A no-op on the CPU and for ``"highest"``."""
    if device.type != "cuda" or precision == "highest":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
