"""Benchmark (make bench): the engine against a plain PyTorch loop doing the same work, and where the time goes.

The paper's FCNN chain (784-400-400-10, M = 100, SGLD at Appendix A.2's step) with a predictive U_s
student (H = 100, M' = 100) and the test-set ensemble every 100 steps, on MNIST (synthetic
MNIST-shaped data with ``--synthetic``), timed in one process, interleaved (each repeat times every
loop once, so machine noise hits all alike), medians over repeats:

* **plain loop**: the same work as a plain PyTorch loop a user would write: Eq. 7 tensor by tensor
  with ``torch.randn`` noise, the student with ``torch.optim.Adam``, the ensemble as softmax sums
  over the test set in chunks of 500, and at each timed segment's end the student's test outputs
  and the ensemble's NLL (the engine's log point);
* **engine, 1 chain** and **engine, K chains** (one batch), eager; on CUDA also in graph mode
  (``GPEDConfig.graph``, periods replayed as CUDA graphs);
* **K plain loops** and **K one-chain engines, one after another** (what a batch replaces).

Columns: iterations per second per chain and chain-steps per second in total; the ratio to the plain
loop(s) doing the same work; kernels per step (``bench_kernels.count_kernels`` over one period of
the event schedule, eager); and the share of the float32 bound: the teacher's FLOPs per step,
``2 M (3 x 477,600 - 784 x 400)`` = 223.8 MFLOP at M = 100 (forward, weight gradients, and input
gradients of layers 2 and 3: autograd computes none for the first layer's inputs), over the rate
of a large float32 matmul measured in the same run. Not a test: run it on a quiet machine (two
torch processes on two cores slow each other ~10x)::

    python benchmarks/bench_engine.py [--chains 12] [--steps 1000] [--repeats 3] [--device cuda]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
from typing import Callable

import torch
from bench_batched import achievable_flops, timed  # the same folder: run as python benchmarks/bench_engine.py
from bench_kernels import count_kernels, synthetic_mnist
from torch.nn import functional as F

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.container import GPEDData
from gped_kit.data.experiment import DataConfig, prepare_data
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, resolve_device
from gped_kit.engine.spec import build_chain
from gped_kit.models.presets import ArchSpec, build_network

#: Multiply-adds of the FCNN teacher per example: 784 x 400 + 400 x 400 + 400 x 10.
FCNN_MACS = 784 * 400 + 400 * 400 + 400 * 10


def teacher_flops(batch_size: int) -> int:
    """FLOPs of one SGLD step's forward and backward pass of the FCNN teacher on M examples: the
    forward pass and the weight gradients (2 M MACS each) and the input gradients of layers 2 and 3
    (the first layer's are never computed)."""
    return 2 * batch_size * (3 * FCNN_MACS - 784 * 400)


class PlainLoop:
    """Algorithm 1 for one chain and one predictive U_s student as a plain PyTorch loop (module docstring)."""

    def __init__(self, data: GPEDData, sgld: SGLDConfig, thinning: int, eval_thinning: int, seed: int) -> None:
        device = data.train_x.device
        torch.manual_seed(seed)
        self.teacher = build_network(ArchSpec("fcnn"), data.input_shape, data.num_classes).to(device)
        self.student = build_network(ArchSpec("fcnn"), data.input_shape, data.num_classes).to(device)
        self.optimizer = torch.optim.Adam(self.student.parameters(), lr=1e-3)
        self.data, self.sgld, self.device = data, sgld, device
        self.thinning, self.eval_thinning = thinning, eval_thinning
        self.gen = torch.Generator(device).manual_seed(seed)
        self.sums = torch.zeros(data.test_x.shape[0], data.num_classes, device=device)
        self.count = 0
        self.t = 0

    def steps(self, n: int) -> None:
        d, sgld = self.data, self.sgld
        N, M = d.train_x.shape[0], sgld.batch_size
        eta, tau = sgld.step_size, sgld.prior_precision
        params = list(self.teacher.parameters())
        for _ in range(n):
            idx = torch.randint(N, (M,), device=self.device, generator=self.gen)
            grads = torch.autograd.grad(F.cross_entropy(self.teacher(d.train_x[idx]), d.train_y[idx]), params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p.add_(g * N + tau * p, alpha=-0.5 * eta)
                    p.add_(torch.randn(p.shape, device=self.device, generator=self.gen), alpha=math.sqrt(eta))
            t = self.t
            if t > 0 and t % self.eval_thinning == 0:
                with torch.no_grad():
                    for start in range(0, d.test_x.shape[0], 500):
                        chunk = d.test_x[start:start + 500]
                        self.sums[start:start + 500] += F.softmax(self.teacher(chunk), dim=-1)
                self.count += 1
            if t > 0 and t % self.thinning == 0:
                idx = torch.randint(d.distill_x.shape[0], (100,), device=self.device, generator=self.gen)
                inputs = d.distill_x[idx]
                with torch.no_grad():
                    targets = F.softmax(self.teacher(inputs), dim=-1)
                loss = -(targets * F.log_softmax(self.student(inputs), dim=-1)).sum(-1).mean()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            self.t = t + 1
        self.log()

    def log(self) -> list[float]:
        """The log point: the ensemble's test NLL and the student's, read to the host."""
        d = self.data
        with torch.no_grad():
            ensemble = (self.sums / max(self.count, 1)).clamp_min(1e-12).log()
            student = torch.cat([F.log_softmax(self.student(d.test_x[s:s + 500]), dim=-1)
                                 for s in range(0, d.test_x.shape[0], 500)])
            return [F.nll_loss(ensemble, d.test_y).item(), F.nll_loss(student, d.test_y).item()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="timed iterations per segment (a multiple of 100)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chains", type=int, default=12, help="K, the batch of chains")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--synthetic", action="store_true", help="MNIST-shaped random data (no data set needed)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 steps x 1 repeat, K = 2")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.repeats, args.chains = 200, 1, 2
    if args.steps % 100 or args.steps < 100 or args.repeats < 1 or args.chains < 2:
        parser.error("--steps must be a positive multiple of 100, --repeats >= 1 and --chains >= 2")
    device = resolve_device(args.device)
    data = synthetic_mnist(device) if args.synthetic else prepare_data(DataConfig("mnist")).to(device)
    sgld, H, E, K = SGLDConfig(), 100, 100, args.chains
    total = args.steps * (args.repeats + 2) + 2

    def engine(chains: int, graph: bool) -> GPEDEngine:
        specs = []
        for k in range(chains):
            sampler = dataclasses.replace(sgld, step_size=sgld.step_size * (0.8 + 0.4 * k / K))
            cfg = GPEDConfig(model="fcnn", sampler=sampler,
                             num_iterations=total, burn_in=0, eval_thinning=E, log_every=10 ** 9,
                             checkpoint_every=10 ** 9, progress=False, device=str(device), seed=k, graph=graph)
            specs.append(build_chain(data, cfg, [StudentConfig("predictive", "U_s", thinning=H, batch_size=100)]))
        return GPEDEngine(specs)

    def advance(e: GPEDEngine, n: int) -> None:
        e.run(stop=e.t + n)  # a log point at the segment's end

    graphs = [False, True] if device.type == "cuda" else [False]
    loops: dict[str, tuple[int, str, Callable[[int], None], Callable[[], int] | None]] = {}
    plain = PlainLoop(data, sgld, H, E, seed=0)
    plains = [PlainLoop(data, sgld, H, E, seed=k) for k in range(K)]
    one_plain, k_plain = "plain loop", f"{K} plain loops, one after another"
    loops[one_plain] = (1, one_plain, plain.steps, lambda: count_kernels(lambda: plain.steps(H), device))
    loops[k_plain] = (K, k_plain, lambda n: [p.steps(n) for p in plains], None)
    for graph in graphs:
        mode = "graph" if graph else "eager"
        one = engine(1, graph)
        count = None if graph else (lambda e=one: count_kernels(lambda: advance(e, H), device))
        loops[f"engine, 1 chain, {mode}"] = (1, one_plain, lambda n, e=one: advance(e, n), count)
        batch = engine(K, graph)
        count = None if graph else (lambda e=batch: count_kernels(lambda: advance(e, H), device))
        loops[f"engine, {K} chains, {mode}"] = (K, k_plain, lambda n, e=batch: advance(e, n), count)
        if not graph:
            singles = [engine(1, graph) for _ in range(K)]
            loops[f"{K} engines, one after another, {mode}"] = (K, k_plain,
                                                               lambda n, es=singles: [advance(e, n) for e in es], None)

    for _, _, fn, _ in loops.values():
        fn(2 * H)  # warm-up, past the first distillation and ensemble steps (graphs: warmed up and captured)
    kernels = {name: (c() / H if c is not None else math.nan) for name, (_, _, _, c) in loops.items()}
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.repeats):
        for name, (k, _, fn, _) in loops.items():
            rates[name].append(args.steps / timed(device, lambda fn=fn: fn(args.steps)))
    flop_rate = achievable_flops(device, 8192 if device.type == "cuda" else 1024)
    flops = teacher_flops(sgld.batch_size)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; FCNN teacher (M = {sgld.batch_size}), predictive U_s student "
          f"(H = {H}, M' = 100), ensemble every {E} steps on {data.test_x.shape[0]} test images; {args.steps} steps "
          f"x {args.repeats} repeats (medians)")
    print(f"float32 matmul rate {flop_rate / 1e9:,.1f} GFLOP/s; teacher {flops / 1e6:.1f} MFLOP per step")
    print(f"{'loop':<38}{'chains':>7}{'it/s/chain':>12}{'steps/s total':>15}{'vs plain':>10}{'kernels/step':>14}"
          f"{'of bound':>10}")
    for label, (k, reference, _, _) in loops.items():
        per = statistics.median(rates[label])
        ref = statistics.median(rates[reference])
        print(f"{label:<38}{k:>7}{per:>12.1f}{per * k:>15.1f}{per / ref:>9.2f}x{kernels[label]:>14.1f}"
              f"{100 * per * k * flops / flop_rate:>9.2f}%")
    seq = statistics.median(rates[f"{K} engines, one after another, eager"])
    bat = statistics.median(rates[f"engine, {K} chains, eager"])
    print(f"K = {K}: batched / one after another = {bat / seq:.2f}x (eager)")


if __name__ == "__main__":
    main()
