"""A function compiled with ``torch.compile`` where a compiler is available, and the same function eagerly where not.

The engine's counter-based draws and its fused SGLD updates (:mod:`.philox`, :func:`.sgld.sgld_counter_update_`,
:func:`.sgld.sgld_fused_update_`)
are written once, in tensor operations; ``torch.compile`` turns each into one fused loop on the CPU (C++) and
Triton kernels on CUDA, from the same code. :class:`Fused` runs a function so, and when compiling fails (no
C++ compiler for the CPU, no Triton for the GPU) warns once, naming the error, and runs it eagerly from then on:
the same computation in tens of element-wise kernels. The compiler may contract a product and a sum into one
rounding, so compiled and eager results agree to float32 round-off, not bit for bit. With ``exact=True`` it may
not: Inductor's C++ is built with ``-ffp-contract=off`` whatever the environment says, and Triton's fusion of a
multiply and an add is turned off (``emulate_precision_casts``), so element-wise arithmetic gives eager PyTorch's
numbers bit for bit; a torch without these options (:func:`exact_options`) runs an exact function eagerly, with a
warning.

Under a Python dispatch mode (``torch.utils.flop_counter.FlopCounterMode``, which ``torch.compile`` does not trace)
the function runs eagerly for that call, so the mode sees its operators.

Shapes are static (one compilation per shape: a batch of chains has its shapes for its whole run), which is
faster than one dynamic-shape kernel (half the time for K = 12 FCNN chains on a 2-core CPU). A process that runs
many shapes (a notebook's grid) would reach Dynamo's default of 8 compilations per function and, with
``fullgraph``, fail and fall back to eager mid-run, so a call that fails is tried once more allowing up to
:data:`MAX_SHAPES` (the limit is raised only for that call: the calls that find their compiled code pay nothing).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch._dynamo.config as dynamo_config
import torch._inductor.config as inductor_config
from torch.utils._python_dispatch import is_in_torch_dispatch_mode

#: Compilations (shapes) a fused function may have in one process before it runs eagerly.
MAX_SHAPES = 256


def exact_options() -> dict[str, Any] | None:
    """Inductor's options under which no multiply and add are contracted into one rounding (its C++ built with
    ``-ffp-contract=off``, Triton without FP fusion); None where this torch has no such options (its C++ may then
    contract them, so an exact function is not compiled)."""
    contract = getattr(inductor_config.cpp, "enable_floating_point_contract_flag", None)
    if not isinstance(contract, str) or not hasattr(inductor_config, "emulate_precision_casts"):
        return None
    return {"emulate_precision_casts": True, "cpp.enable_floating_point_contract_flag": "off"}


class Fused:
    """``fn`` compiled (``fullgraph``, static shapes: one compilation per shape), or eager (``compiled=False``, or
    after a compilation failed); ``what`` names it in the warning; ``exact``: no product and sum contracted into
    one rounding (module docstring)."""

    def __init__(self, fn: Callable[..., Any], what: str, compiled: bool = True, exact: bool = False) -> None:
        self.eager = fn
        self.what = what
        options = exact_options() if exact else None
        if compiled and exact and options is None:
            warnings.warn(f"{what} runs eagerly (the same numbers, slower): torch {torch.__version__} cannot compile "
                          "it without contracting a multiply and an add into one rounding, which would change its "
                          "numbers", RuntimeWarning, stacklevel=2)
            compiled = False
        self.compiled = compiled
        self._fn = torch.compile(fn, fullgraph=True, dynamic=False, options=options) if compiled else fn

    def __call__(self, *args: Any) -> Any:
        if is_in_torch_dispatch_mode(include_infra_modes=False):  # e.g. FlopCounterMode: it sees the eager operators
            return self.eager(*args)
        try:
            return self._fn(*args)
        except Exception:  # noqa: BLE001 -- a compiler failure: tried again below, then eager
            if not self.compiled:
                raise
        try:  # a new shape past Dynamo's default number of compilations: compile it under a higher limit
            with dynamo_config.patch(recompile_limit=MAX_SHAPES, accumulated_recompile_limit=MAX_SHAPES * 4):
                return self._fn(*args)
        except Exception as error:  # noqa: BLE001 -- any compiler failure: fall back to the same function, eager
            warnings.warn(f"{self.what} could not be compiled, so it runs eagerly (the same computation, slower): "
                          f"{type(error).__name__}: {error}", RuntimeWarning, stacklevel=2)
            self._fn, self.compiled = self.eager, False
            return self._fn(*args)
