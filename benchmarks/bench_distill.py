"""Benchmark: Algorithm 1's distillation + evaluation overhead over a bare SGLD loop.

Times, in one process and interleaved (bare, full, bare, full, ...) so that machine noise hits
both alike:

* **bare**: the teacher alone, the SGLD loop of Eq. 7 (minibatch draw, forward, backward,
  update) with no students and no evaluation;
* **full**: :class:`gped_kit.distill.GPEDRun` with the same teacher, batch size and seed, a
  predictive student (U_s) with thinning H, the test-set ensemble accumulated every
  ``eval_thinning`` steps and a history row every ``log_every`` steps.

Both start after burn-in so that every distillation/evaluation cost is included. Prints
iterations per second for both and their ratio; the issue's target is an overhead of at most
25% (ratio >= 0.8) for the FCNN with H = 100. Not a test: run it on a quiet machine.

    python benchmarks/bench_distill.py --steps 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.nn import functional as F

from gped_kit.data import DataConfig, prepare_data
from gped_kit.distill import GPEDConfig, GPEDRun, StudentConfig, resolve_device
from gped_kit.samplers import SGLDConfig


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_bare(run: GPEDRun, steps: int) -> float:
    """Iterations per second of the bare SGLD loop on ``run``'s teacher."""
    data, dev = run.data, run.device
    N, M = data.train_x.shape[0], run.config.sgld.batch_size
    synchronize(dev)
    start = time.perf_counter()
    for t in range(steps):
        idx = torch.randint(N, (M,), device=dev, generator=run.gen_data)
        loss = F.cross_entropy(run.teacher(data.train_x[idx]), data.train_y[idx])
        run.sgld.step(loss, t)
    synchronize(dev)
    return steps / (time.perf_counter() - start)


def time_full(run: GPEDRun, steps: int) -> float:
    """Iterations per second of ``steps`` more iterations of Algorithm 1."""
    synchronize(run.device)
    start = time.perf_counter()
    run.run(max_steps=steps)
    synchronize(run.device)
    return steps / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="fcnn")
    parser.add_argument("--steps", type=int, default=2000, help="timed iterations per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--thinning", type=int, default=100, help="H of the predictive student")
    parser.add_argument("--eval-thinning", type=int, default=100)
    parser.add_argument("--log-every", type=int, default=1000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--labelled-size", type=int, default=None)
    args = parser.parse_args(argv)

    device = resolve_device(args.device)
    data = prepare_data(DataConfig("mnist", labelled_size=args.labelled_size), device=device)
    total = args.steps * (args.repeats + 1) + 2
    cfg = GPEDConfig(model=args.model, sgld=SGLDConfig(), num_iterations=total, burn_in=0,
                     eval_thinning=args.eval_thinning, log_every=args.log_every, progress=False,
                     device=str(device))
    students = [StudentConfig("predictive", "U_s", thinning=args.thinning)]
    bare_run = GPEDRun(data, cfg, [])
    full_run = GPEDRun(data, cfg, students)
    # warm-up (allocator, kernels, first Adam step); burn_in=0 so distillation is on from t = 1
    time_bare(bare_run, min(200, args.steps))
    full_run.run(max_steps=args.steps)

    bare, full = [], []
    for _ in range(args.repeats):
        bare.append(time_bare(bare_run, args.steps))
        full.append(time_full(full_run, args.steps))
    b, f = statistics.median(bare), statistics.median(full)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; model {args.model}; M = M' = 100; H = {args.thinning}; "
          f"eval_thinning = {args.eval_thinning}; log_every = {args.log_every}; {args.steps} steps x {args.repeats} repeats")
    print(f"{'loop':<34}{'it/s (median)':>14}{'  all repeats'}")
    print(f"{'bare SGLD':<34}{b:>14.1f}  {', '.join(f'{v:.1f}' for v in bare)}")
    print(f"{'GPED (distill + eval)':<34}{f:>14.1f}  {', '.join(f'{v:.1f}' for v in full)}")
    overhead = b / f - 1
    print(f"ratio GPED / bare = {f / b:.3f}  (overhead {100 * overhead:.1f}% ; target <= 25%: "
          f"{'met' if overhead <= 0.25 else 'NOT met'})")


if __name__ == "__main__":
    main()
