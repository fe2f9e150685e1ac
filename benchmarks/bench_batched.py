"""Benchmark: K GPED chains as one vmapped computation against one chain at a time.

Times, in one process, on real MNIST with the FCNN teacher (M = 100) and a predictive U_s
student (H = 100 as in the paper, M' = 100), interleaved (each repeat times every engine once,
so machine noise hits all alike), medians over repeats:

* **naive loop**: a plain PyTorch single-chain SGLD loop (model, cross-entropy, autograd, Eq. 7
  update): no students, no evaluation, no bookkeeping;
* **GPEDEngine, 1 chain**: the kit's engine with one chain (its student, the test-set ensemble
  every ``eval_thinning`` steps, a history row at the end of each timed segment); with one chain
  the step functions run directly (no vmap);
* **GPEDEngine, 1 chain, vmapped**: the same chain forced through ``torch.func.vmap`` (what a
  batch of one costs);
* **GPEDEngine K**: K chains as one batch (seeds 0..K-1, step sizes spread by +-20%), for each K
  of ``--chains``;
* **K x GPEDEngine, one after another**: ``--sequential-chains`` single-chain engines run in turn,
  against the batch of the same K.

Reports SGLD iterations per second per chain and in total, ratios, and the share of the
device's float32 matmul rate (a large matmul timed in the same process) that the teacher's own
FLOPs reach, counted as 3 x 2 x M x (784*400 + 400*400 + 400*10) per SGLD step (forward, and
backward for inputs and weights), plus each batch's memory (:meth:`GPEDEngine.memory_bytes`).
Not a test: run it on a quiet machine (two torch processes on two cores slow each other
~10x), e.g. ``python benchmarks/bench_batched.py --steps 200 --repeats 3``; ``--quick`` is a
smoke run.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time

import torch
from torch.nn import functional as F

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.experiment import DataConfig, prepare_data
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, resolve_device
from gped_kit.engine.spec import build_chain
from gped_kit.models.presets import ArchSpec, build_network

FCNN_MACS = 784 * 400 + 400 * 400 + 400 * 10


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def achievable_flops(device: torch.device, size: int, repeats: int = 3) -> float:
    """FLOP/s of a ``size`` x ``size`` float32 matmul (2 size^3 FLOPs), best of ``repeats``."""
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    a @ b
    synchronize(device)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(4):
            a @ b
        synchronize(device)
        best = min(best, (time.perf_counter() - start) / 4)
    return 2 * size ** 3 / best


class Naive:
    """A plain single-chain SGLD loop (Eq. 7) in PyTorch, no students."""

    def __init__(self, data, device, sgld: SGLDConfig, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.net = build_network(ArchSpec("fcnn"), data.input_shape, data.num_classes).to(device)
        self.params = list(self.net.parameters())
        self.x, self.y = data.train_x.to(device), data.train_y.to(device)
        self.sgld, self.device = sgld, device
        self.gen = torch.Generator(device).manual_seed(seed)

    def steps(self, n: int) -> None:
        N, M = self.x.shape[0], self.sgld.batch_size
        eta, tau = self.sgld.step_size, self.sgld.prior_precision
        for _ in range(n):
            idx = torch.randint(N, (M,), device=self.device, generator=self.gen)
            loss = F.cross_entropy(self.net(self.x[idx]), self.y[idx])
            grads = torch.autograd.grad(loss, self.params)
            with torch.no_grad():
                for p, g in zip(self.params, grads):
                    p.add_(g * N + tau * p, alpha=-0.5 * eta)
                    p.add_(torch.randn(p.shape, device=self.device, generator=self.gen), alpha=math.sqrt(eta))


def timed(device: torch.device, fn) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def fmt_bytes(n: float) -> str:
    return f"{n / 2 ** 30:.2f} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:.1f} MiB"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500, help="timed SGLD iterations per segment")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chains", default="1,4,12,24", help="comma-separated K for the batched engine")
    parser.add_argument("--sequential-chains", type=int, default=12,
                        help="K single-chain engines timed one after another against the batch of the same K (0: skip)")
    parser.add_argument("--thinning", type=int, default=100, help="H of the predictive U_s student")
    parser.add_argument("--eval-thinning", type=int, default=100)
    parser.add_argument("--labelled-size", type=int, default=None)
    parser.add_argument("--test-size", type=int, default=None, help="keep the first n test images (default all)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads on the CPU")
    parser.add_argument("--matmul-size", type=int, default=None, help="size of the matmul measuring the FLOP rate")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 20 steps x 2 repeats, K in 1,4, 4 sequential chains, 1,000 test images")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.repeats, args.chains = 20, 2, "1,4"
        args.sequential_chains = min(args.sequential_chains, 4)
        args.test_size = args.test_size or 1000
    if args.threads:
        torch.set_num_threads(args.threads)
    chains = sorted({int(k) for k in args.chains.split(",") if k.strip()})

    device = resolve_device(args.device)
    data = prepare_data(DataConfig("mnist", labelled_size=args.labelled_size))
    if args.test_size:
        data = dataclasses.replace(data, test_x=data.test_x[:args.test_size], test_y=data.test_y[:args.test_size])
    data = data.to(device)
    sgld = SGLDConfig()
    M = sgld.batch_size
    warmup = max(args.thinning, args.eval_thinning) + 1
    total = warmup + args.steps * (args.repeats + 1) + 2

    def chain(k: int):
        sampler = dataclasses.replace(sgld, step_size=sgld.step_size * (0.8 + 0.4 * k / 24))
        cfg = GPEDConfig(model="fcnn", sampler=sampler,
                         num_iterations=total, burn_in=0, eval_thinning=args.eval_thinning, log_every=10 ** 9,
                         checkpoint_every=10 ** 9, progress=False, device=str(device), seed=k)
        return build_chain(data, cfg, [StudentConfig("predictive", "U_s", thinning=args.thinning, batch_size=100)])

    def advance(engine: GPEDEngine, n: int) -> None:
        engine.run(stop=engine.t + n)  # logs one history row per chain at the segment's end

    engines: dict[str, tuple[int, callable]] = {}
    naive = Naive(data, device, sgld)
    engines["naive loop (no students)"] = (1, naive.steps)
    single = GPEDEngine([chain(0)])
    engines["GPEDEngine, 1 chain"] = (1, lambda n: advance(single, n))
    forced = GPEDEngine([chain(0)], use_vmap=True)
    engines["GPEDEngine, 1 chain, vmapped"] = (1, lambda n: advance(forced, n))
    batches: dict[int, GPEDEngine] = {}
    ks = args.sequential_chains
    for k in sorted(set(chains) - {1} | ({ks} if ks > 1 else set())):
        batches[k] = GPEDEngine([chain(i) for i in range(k)])
        engines[f"GPEDEngine, {k} chains"] = (k, lambda n, b=batches[k]: advance(b, n))
    if ks:
        sequential = [GPEDEngine([chain(i)]) for i in range(ks)]

        def run_sequential(n: int) -> None:
            for e in sequential:
                advance(e, n)

        engines[f"{ks} x GPEDEngine, one after another"] = (ks, run_sequential)

    warm_times = {name: timed(device, lambda fn=fn: fn(warmup)) for name, (_, fn) in engines.items()}
    rates: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.repeats):
        for name, (k, fn) in engines.items():
            rates[name].append(args.steps / timed(device, lambda fn=fn: fn(args.steps)))  # per chain

    flop_rate = achievable_flops(device, args.matmul_size or (8192 if device.type == "cuda" else 1024))
    step_flops = 3 * 2 * M * FCNN_MACS
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; FCNN teacher (M = {M}), predictive U_s student "
          f"(H = {args.thinning}, M' = 100); eval_thinning = {args.eval_thinning}; |D| = {data.train_x.shape[0]}, "
          f"test set {data.test_x.shape[0]}; {args.steps} steps x {args.repeats} repeats (medians)")
    print(f"float32 matmul rate: {flop_rate / 1e9:.1f} GFLOP/s; teacher FLOPs per SGLD step: {step_flops / 1e6:.1f} M")
    base = statistics.median(rates["GPEDEngine, 1 chain"])
    print(f"{'engine':<40}{'chains':>7}{'it/s/chain':>12}{'it/s total':>12}{'vs 1 chain':>11}{'FLOP rate':>11}"
          f"{'warm-up s':>10}")
    for label, (k, _) in engines.items():
        per = statistics.median(rates[label])
        tot = per * k
        utilisation = 100 * tot * step_flops / flop_rate
        print(f"{label:<40}{k:>7}{per:>12.1f}{tot:>12.1f}{tot / base:>10.2f}x{utilisation:>10.2f}%"
              f"{warm_times[label]:>10.1f}")
    vm = statistics.median(rates["GPEDEngine, 1 chain, vmapped"])
    print(f"one chain vmapped / direct = {vm / base:.2f}x")
    if ks > 1:
        seq = statistics.median(rates[f"{ks} x GPEDEngine, one after another"]) * ks
        bat = statistics.median(rates[f"GPEDEngine, {ks} chains"]) * ks
        print(f"K = {ks}: batched / one after another, total rate = {bat / seq:.2f}x (all repeats, it/s total: batched "
              f"{', '.join(f'{v * ks:.1f}' for v in rates[f'GPEDEngine, {ks} chains'])}; one after another "
              f"{', '.join(f'{v * ks:.1f}' for v in rates[f'{ks} x GPEDEngine, one after another'])})")
    print("\nmemory of each batch (GPEDEngine.memory_bytes):")
    for k, b in {1: single, **batches}.items():
        print(f"  K={k:<3} " + ", ".join(f"{key} {fmt_bytes(v)}" for key, v in b.memory_bytes().items()))


if __name__ == "__main__":
    main()
