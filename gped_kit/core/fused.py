"""A function compiled with ``torch.compile`` where a compiler is available, and the same function eagerly where not.

The engine's counter-based draws and its fused SGLD update (:mod:`.philox`, :func:`.sgld.sgld_counter_update_`)
are written once, in tensor operations; ``torch.compile`` turns each into one fused loop on the CPU (C++) and
Triton kernels on CUDA, from the same code. :class:`Fused` runs a function so, and when compiling fails (no
C++ compiler for the CPU, no Triton for the GPU) warns once, naming the error, and runs it eagerly from then on:
the same computation in tens of element-wise kernels. The compiler may contract a product and a sum into one
rounding, so compiled and eager results agree to float32 round-off, not bit for bit.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch


class Fused:
    """``fn`` compiled (``fullgraph``, static shapes: one compilation per shape), or eager (``compiled=False``, or
    after a compilation failed); ``what`` names it in the warning."""

    def __init__(self, fn: Callable[..., Any], what: str, compiled: bool = True) -> None:
        self.eager = fn
        self.what = what
        self.compiled = compiled
        self._fn = torch.compile(fn, fullgraph=True, dynamic=False) if compiled else fn

    def __call__(self, *args: Any) -> Any:
        try:
            return self._fn(*args)
        except Exception as error:  # noqa: BLE001 -- any compiler failure: fall back to the same function, eager
            if not self.compiled:
                raise
            warnings.warn(f"{self.what} could not be compiled, so it runs eagerly (the same computation, slower): "
                          f"{type(error).__name__}: {error}", RuntimeWarning, stacklevel=2)
            self._fn, self.compiled = self.eager, False
            return self._fn(*args)

