"""Benchmark: Algorithm 1's distillation + evaluation overhead over a bare SGLD loop.

Times, in one process and interleaved (bare, full, bare, full, ...) so that machine noise hits
both alike:

* **bare**: a plain PyTorch single-chain SGLD loop of Eq. 7 (minibatch draw, forward, backward,
  update; :class:`bench_batched.Naive`), no students and no evaluation;
* **full**: the kit's :class:`~gped_kit.engine.GPEDEngine` on one chain with the same teacher,
  batch size and seed, a predictive student (U_s) with thinning H, the test-set ensemble
  accumulated every ``eval_thinning`` steps and a history row every ``log_every`` steps.

The full run starts after burn-in so that every distillation/evaluation cost is included.
Prints iterations per second for both and their ratio; the target is an overhead of at most 25%
(ratio >= 0.8) for the FCNN with H = 100. Not a test: run it on a quiet machine.

    python benchmarks/bench_distill.py --steps 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics

import torch
from bench_batched import Naive, timed

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.experiment import DataConfig, prepare_data
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, resolve_device
from gped_kit.engine.spec import build_chain


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    sgld = SGLDConfig()
    total = args.steps * (args.repeats + 1) + 2
    cfg = GPEDConfig(model="fcnn", sampler=sgld, num_iterations=total, burn_in=1, eval_thinning=args.eval_thinning,
                     log_every=args.log_every, progress=False, device=str(device))
    bare = Naive(data, device, sgld)
    full = GPEDEngine([build_chain(data, cfg, [StudentConfig("predictive", "U_s", thinning=args.thinning)])])
    # warm-up (allocator, kernels, first Adam step), past burn-in so distillation is on
    bare.steps(min(200, args.steps))
    full.run(stop=args.steps)

    bare_rates, full_rates = [], []
    for _ in range(args.repeats):
        bare_rates.append(args.steps / timed(device, lambda: bare.steps(args.steps)))
        full_rates.append(args.steps / timed(device, lambda: full.run(stop=full.t + args.steps)))
    b, f = statistics.median(bare_rates), statistics.median(full_rates)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; FCNN; M = M' = 100; H = {args.thinning}; "
          f"eval_thinning = {args.eval_thinning}; log_every = {args.log_every}; "
          f"{args.steps} steps x {args.repeats} repeats")
    print(f"{'loop':<34}{'it/s (median)':>14}{'  all repeats'}")
    print(f"{'bare SGLD':<34}{b:>14.1f}  {', '.join(f'{v:.1f}' for v in bare_rates)}")
    print(f"{'GPED (distill + eval)':<34}{f:>14.1f}  {', '.join(f'{v:.1f}' for v in full_rates)}")
    overhead = b / f - 1
    print(f"ratio GPED / bare = {f / b:.3f}  (overhead {100 * overhead:.1f}% ; target <= 25%: "
          f"{'met' if overhead <= 0.25 else 'NOT met'})")


if __name__ == "__main__":
    main()
