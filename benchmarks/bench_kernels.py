"""Benchmark: kernels per step of the engine, counted with torch.profiler, event by event.

A step of Algorithm 1 on a GPU is bound by kernel launches long before FLOPs (docs/benchmarks.md),
so the number of kernels a step launches is the first thing to know about the engine. This script
builds the paper profile's FCNN chain of Table 1 (784-400-400-10, M = M' = 100, SGLD; four
students: predictive U_s and U_o every H = 100 steps, entropy U_s and U_o every H = 10; the
test-set ensemble every 100 steps) on synthetic MNIST-shaped data (no data set needed), runs each
of the engine's events (:meth:`GPEDEngine.teacher_step`, :meth:`~GPEDEngine.distill_group`,
:meth:`~GPEDEngine.accumulate`) under the profiler, and prints the kernels of each and their mean
per step over the event schedule's period. ``--chains K`` counts a batch of K chains; ``--random-numbers counter``
the engine with counter-based random numbers (``GPEDConfig(random_numbers="counter")``: compiled draws of the
minibatch indices, the SGLD noise inside one compiled update, :func:`gped_kit.core.sgld.sgld_counter_update_`).

What is counted: on CUDA the device kernels the profiler records (exact); on the CPU the leaf ATen
operators that compute and call no computing operator, each one kernel, and each matrix product
or convolution as one (:data:`MATMUL`), and each loop a compiled function runs (``torch.compile``'s C++
kernels, profiled under their names ``..._cpp_fused_...``) as one; views, allocations and metadata operators
are not counted (:data:`NO_KERNEL`). The script runs one thread on the CPU (with more, the engine draws the
chains' noise on a thread pool, whose operators the profiler does not record).
Counts do not depend on the machine's speed, so they compare across
machines and commits (run it on two checkouts to compare engines)::

    python benchmarks/bench_kernels.py [--device cuda] [--chains 1] [--random-numbers counter]
"""

from __future__ import annotations

import argparse
from typing import Callable

import torch
import torch._inductor.config as inductor_config
from torch.profiler import ProfilerActivity, profile

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.container import GPEDData
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, resolve_device
from gped_kit.engine.spec import build_chain

#: ATen operators that run no compute kernel of their own (views, allocation, metadata).
NO_KERNEL = frozenset({
    "aten::view", "aten::as_strided", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze",
    "aten::expand", "aten::reshape", "aten::_reshape_alias", "aten::alias", "aten::detach", "aten::detach_",
    "aten::t", "aten::transpose", "aten::permute", "aten::empty", "aten::empty_strided", "aten::empty_like",
    "aten::resize_", "aten::lift_fresh", "aten::result_type", "aten::unbind", "aten::split", "aten::narrow",
    "aten::flatten", "aten::view_as", "aten::expand_as", "aten::numpy_T", "aten::_unsafe_view",
    "aten::requires_grad_", "aten::set_", "aten::unflatten", "aten::movedim", "aten::contiguous",
    "aten::is_nonzero", "aten::to", "aten::_to_copy", "aten::broadcast_tensors", "aten::chunk",
    "aten::squeeze_", "aten::unsqueeze_", "aten::zeros_like", "aten::ones_like", "aten::resolve_conj",
    "aten::resolve_neg", "aten::_has_compatible_shallow_copy_type", "aten::is_same_size",
})

#: Matrix products: one kernel each, whatever helper operators they call on the CPU.
MATMUL = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_convolution",
                    "aten::convolution_backward", "aten::mkldnn_convolution"})

#: The paper profile's students of Table 1 (Appendix A.2).
PAPER_STUDENTS = (StudentConfig("predictive", "U_s", thinning=100), StudentConfig("predictive", "U_o", thinning=100),
                  StudentConfig("entropy", "U_s", thinning=10), StudentConfig("entropy", "U_o", thinning=10))


def synthetic_mnist(device: torch.device, n_train: int = 60_000, n_distill: int = 60_000,
                    n_test: int = 10_000) -> GPEDData:
    """MNIST-shaped data (uniform pixels, random labels): the kernels a step runs do not depend on
    the pixels, only on the shapes."""
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(n_train, 1, 28, 28, generator=gen)
    y = torch.randint(10, (n_train,), generator=gen)
    distill = torch.rand(n_distill, 1, 28, 28, generator=gen)
    test_x, test_y = torch.rand(n_test, 1, 28, 28, generator=gen), torch.randint(10, (n_test,), generator=gen)
    return GPEDData(x, y, distill, test_x, test_y, 10).to(device)


def count_kernels(fn: Callable[[], None], device: torch.device) -> int:
    """The kernels ``fn()`` launches (see the module docstring)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    events = prof.events()
    if device.type == "cuda":
        return sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)

    def kernels(event) -> int:  # an operator's kernels: its own if it computes and calls no computing operator
        if event.name in MATMUL:
            return 1
        inner = sum(kernels(c) for c in event.cpu_children if c.name.startswith("aten::"))
        return inner or int(event.name not in NO_KERNEL)

    top = [e for e in events if e.name.startswith("aten::")
           and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
    compiled = sum(1 for e in events if "cpp_fused" in e.name)  # a compiled function's C++ loops
    return sum(kernels(e) for e in top) + compiled


def engine_for(device: torch.device, chains: int, random_numbers: str = "generators") -> GPEDEngine:
    data = synthetic_mnist(device)
    specs = [build_chain(data, GPEDConfig(model="fcnn", sampler=SGLDConfig(), num_iterations=1_000,
                                          burn_in=1, eval_thinning=100, log_every=1_000, progress=False,
                                          device=str(device), seed=k, random_numbers=random_numbers),
                         PAPER_STUDENTS) for k in range(chains)]
    return GPEDEngine(specs)


def kernels_by_event(device: torch.device, chains: int = 1,
                     random_numbers: str = "generators") -> list[tuple[str, float, int]]:
    """Table 1's paper chain (K = ``chains`` as one batch): each event's label, how often it runs per step and
    its kernels (:func:`count_kernels`), after a warm-up of every event. On the CPU counted on one thread (the
    noise draws' thread pool, which the profiler misses, is then not used); the thread count is restored after."""
    threads = torch.get_num_threads()
    inductor_config.cpp.enable_kernel_profile = True  # name each compiled C++ loop in the profile (counted above)
    torch.set_num_threads(1)  # the CPU's noise draws run on a thread pool with more threads, which the profiler misses
    try:
        engine = engine_for(device, chains, random_numbers)
        groups = list(engine.chains[0].groups)
        for key in groups:  # warm-up: the first call of each event allocates and compiles nothing counted later
            engine.distill_group(key)
        engine.teacher_step()
        engine.accumulate()
        rows = [("teacher step", 1.0, count_kernels(engine.teacher_step, device))]
        for key in groups:
            students = len(engine.chains[0].groups[key])
            rows.append((f"distillation group H = {key.thinning} ({students} students)", 1 / key.thinning,
                         count_kernels(lambda: engine.distill_group(key), device)))
        rows.append(("ensemble on the test set", 1 / engine.config.eval_thinning,
                     count_kernels(engine.accumulate, device)))
    finally:
        torch.set_num_threads(threads)
    return rows


def per_step(rows: list[tuple[str, float, int]]) -> float:
    """The mean kernels per step over the event schedule's period."""
    return sum(n * rate for _, rate, n in rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--chains", type=int, default=1, help="K chains as one batch")
    parser.add_argument("--random-numbers", choices=["generators", "counter"], default="generators",
                        help="GPEDConfig.random_numbers: each stream's generator (the default) or counter-based, "
                             "compiled draws")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    rows = kernels_by_event(device, args.chains, args.random_numbers)
    what = "CUDA kernels" if device.type == "cuda" else "computing ATen operators (one kernel each)"
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"device: {name}; torch {torch.__version__}; FCNN 784-400-400-10, paper profile's 4 students; "
          f"K = {args.chains}; random numbers: {args.random_numbers}; counting {what}")
    print(f"{'event':<46}{'kernels':>9}{'per step':>10}")
    for label, rate, n in rows:
        print(f"{label:<46}{n:>9}{n * rate:>10.2f}")
    print(f"{'mean per step':<46}{'':>9}{per_step(rows):>10.2f}")


if __name__ == "__main__":
    main()
