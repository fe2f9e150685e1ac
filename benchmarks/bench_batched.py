"""Benchmark: many GPED chains as one batched computation (gped_kit.batched) against one chain at a time.

Times, in one process, on real MNIST with the FCNN teacher (M = 100) and a predictive U_s
student (H = 100 as in the paper, M' = 100), interleaved (each repeat times every engine once,
so machine noise hits all alike), medians over repeats:

* **naive**: a plain PyTorch single-chain SGLD loop (model, cross-entropy, autograd, Eq. 7
  update with ``randn_like`` noise): no students, no evaluation, no bookkeeping;
* **GPEDRun**: the sequential engine with one chain (its students, test-set ensemble every
  ``eval_thinning`` steps, a history row at the end of each timed segment);
* **batched K**: :class:`gped_kit.batched.BatchedGPED` over K chains (same configuration,
  seeds 0..K-1, step sizes spread by +-20%), for each K of ``--chains``;
* **K x GPEDRun**: ``--sequential-chains`` sequential runs one after the other, against the
  batched engine with the same K.

Reports SGLD iterations per second per chain and in total, the ratio of the batched total
rate to the sequential one, and the fraction of the device's achievable FLOP rate (a large
float32 matmul timed in the same process) that the teacher's own FLOPs reach, counted as
3 x 2 x M x (784*400 + 400*400 + 400*10) per SGLD step (forward, and backward for inputs and
weights). It also prints the stacked state's memory for the runs built here and for the
paper's Experiment-2 grid (24 FCNN cells, |D'| = 60,000, predictive and entropy students with
U_s and U_o). ``--compile`` adds the batched engine with ``torch.compile``'d steps.

Every chain here uses the same (unmasked) data object, which the batched engine stores once;
chains on different data cost only the extra data memory. Not a test: run it on a quiet
machine, e.g. ``python benchmarks/bench_batched.py --steps 500 --repeats 3`` on a GPU, or
``--quick`` for a smoke run (a few steps, K = 1 and 4, a 1,000-image test set).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time

import torch
from torch.nn import functional as F

from gped_kit.batched import BatchedGPED, batch_memory_bytes, memory_estimate
from gped_kit.data import DataConfig, prepare_data
from gped_kit.distill import GPEDConfig, GPEDRun, StudentConfig, resolve_device
from gped_kit.models import ArchSpec, build_network, count_parameters
from gped_kit.samplers import SGLDConfig

FCNN_MACS = 784 * 400 + 400 * 400 + 400 * 10


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def achievable_flops(device: torch.device, size: int, repeats: int = 3) -> float:
    """FLOP/s of a ``size`` x ``size`` float32 matmul (2 size^3 FLOPs), best of ``repeats``."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
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
                        help="K sequential GPEDRun chains timed against the batched engine with the same K (0: skip)")
    parser.add_argument("--thinning", type=int, default=100, help="H of the predictive U_s student")
    parser.add_argument("--eval-thinning", type=int, default=100)
    parser.add_argument("--log-every", type=int, default=10_000)
    parser.add_argument("--labelled-size", type=int, default=None)
    parser.add_argument("--test-size", type=int, default=None, help="keep the first n test images (default all)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads on the CPU")
    parser.add_argument("--matmul-size", type=int, default=None, help="size of the matmul measuring the FLOP rate")
    parser.add_argument("--compile", action="store_true", help="also time BatchedGPED(compile=True)")
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

    def build(k: int) -> GPEDRun:
        cfg = GPEDConfig(model="fcnn", sgld=dataclasses.replace(sgld, step_size=sgld.step_size * (0.8 + 0.4 * k / 24)),
                         num_iterations=total, burn_in=0, eval_thinning=args.eval_thinning,
                         log_every=args.log_every, checkpoint_every=10 ** 9, progress=False, device=str(device),
                         seed=k)
        return GPEDRun(data, cfg, [StudentConfig("predictive", "U_s", thinning=args.thinning, batch_size=100)])

    # ---------------------------------------------------------------- engines
    engines: dict[str, tuple[int, callable]] = {}
    naive = Naive(data, device, sgld)
    engines["naive loop (no students)"] = (1, naive.steps)
    single = build(0)
    engines["GPEDRun"] = (1, lambda n: single.run(max_steps=n))
    batched = {}
    for k in chains:
        batched[k] = BatchedGPED([build(i) for i in range(k)])
        engines[f"BatchedGPED K={k}"] = (k, lambda n, b=batched[k]: b.run(max_steps=n))
    if args.compile:
        k = chains[-1]
        compiled = BatchedGPED([build(i) for i in range(k)], compile=True)
        engines[f"BatchedGPED K={k} compiled"] = (k, lambda n, b=compiled: b.run(max_steps=n))
    if args.sequential_chains:
        ks = args.sequential_chains
        sequential = [build(i) for i in range(ks)]

        def run_sequential(n: int) -> None:
            for r in sequential:
                r.run(max_steps=n)

        engines[f"{ks} x GPEDRun, one after another"] = (ks, run_sequential)
        if ks not in batched:
            batched[ks] = BatchedGPED([build(i) for i in range(ks)])
            engines[f"BatchedGPED K={ks}"] = (ks, lambda n, b=batched[ks]: b.run(max_steps=n))

    # warm-up: allocator, first Adam steps, compilation; past burn-in (0) and one distillation step
    warm_times = {}
    for name, (_, fn) in engines.items():
        warm_times[name] = timed(device, lambda: fn(warmup))

    rates: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(args.repeats):
        for name, (k, fn) in engines.items():
            rates[name].append(args.steps / timed(device, lambda: fn(args.steps)))  # per chain

    flop_rate = achievable_flops(device, args.matmul_size or (8192 if device.type == "cuda" else 1024))
    step_flops = 3 * 2 * M * FCNN_MACS

    # ---------------------------------------------------------------- report
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; FCNN teacher (M = {M}), predictive U_s student "
          f"(H = {args.thinning}, M' = 100); eval_thinning = {args.eval_thinning}; |D| = {data.train_x.shape[0]}, "
          f"test set {data.test_x.shape[0]}; {args.steps} steps x {args.repeats} repeats (medians)")
    print(f"achievable float32 matmul rate: {flop_rate / 1e9:.1f} GFLOP/s; teacher FLOPs per SGLD step: "
          f"{step_flops / 1e6:.1f} M")
    base = statistics.median(rates["GPEDRun"])
    print(f"{'engine':<38}{'chains':>7}{'it/s/chain':>12}{'it/s total':>12}{'vs GPEDRun':>11}{'FLOP rate':>11}"
          f"{'warm-up s':>10}")
    for label, (k, _) in engines.items():
        per = statistics.median(rates[label])
        tot = per * k
        flops = 100 * tot * step_flops / flop_rate
        print(f"{label:<38}{k:>7}{per:>12.1f}{tot:>12.1f}{tot / base:>10.2f}x{flops:>10.2f}%{warm_times[label]:>10.1f}")
    if args.sequential_chains:
        ks = args.sequential_chains
        seq = statistics.median(rates[f"{ks} x GPEDRun, one after another"]) * ks
        bat = statistics.median(rates[f"BatchedGPED K={ks}"]) * ks
        print(f"K = {ks}: batched / sequential total rate = {bat / seq:.2f}x "
              f"(all repeats, it/s total: batched {', '.join(f'{v * ks:.1f}' for v in rates[f'BatchedGPED K={ks}'])}; "
              f"sequential {', '.join(f'{v * ks:.1f}' for v in rates[f'{ks} x GPEDRun, one after another'])})")

    print("\nstacked state (gped_kit.batched.batch_memory_bytes):")
    for k, b in batched.items():
        mem = batch_memory_bytes(b.runs)
        print(f"  K={k:<3} " + ", ".join(f"{key} {fmt_bytes(v)}" for key, v in mem.items()))
    p_teacher = count_parameters(single.teacher)
    p_pred = p_teacher
    p_ent = count_parameters(build_network(ArchSpec("fcnn"), (1, 28, 28), 1))
    grid = memory_estimate(
        num_chains=24, teacher_params=p_teacher, student_params=[p_pred, p_pred, p_ent, p_ent],
        store_dims=[10, 1], distill_size=60_000, eval_size=10_000, eval_dims=[10, 1],
        train_images=6 * (10_000 + 20_000 + 30_000 + 60_000), distill_sets=6, eval_sets=6, input_numel=784)
    print("  Experiment-2 grid (24 FCNN cells: N in 10k/20k/30k/60k x 6 masks; students predictive and entropy "
          "x U_s and U_o; |D'| = 60,000; 6 distinct D' and test sets):")
    print("    " + ", ".join(f"{key} {fmt_bytes(v)}" for key, v in grid.items()))


if __name__ == "__main__":
    main()
