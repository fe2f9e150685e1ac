"""Benchmark (make bench): the engine against a plain PyTorch loop doing the same work, and where the time goes.

The paper's FCNN chain (784-400-400-10, M = 100, SGLD at Appendix A.2's step) with a predictive U_s
student (H = 100, M' = 100) and the test-set ensemble every 100 steps, on MNIST (synthetic
MNIST-shaped data with ``--synthetic``), timed in one process, interleaved (each repeat times every
loop once, so machine noise hits all alike), medians over repeats:

* **plain loop**: the same work as a plain PyTorch loop a user would write: Eq. 7 tensor by tensor
  with ``torch.randn`` noise, the student with ``torch.optim.Adam``, the ensemble as softmax sums
  over the test set in chunks of 500, and at each timed segment's end the student's test outputs and, for the
  ensemble and the student, the test NLL, accuracy and expected calibration error (torchmetrics): the engine's
  log point, which also reports a trailing window's ensemble and the best constant prediction's NLL;
* **engine, 1 chain** and **engine, K chains** (one batch) for each K of ``--chains``, eager; on CUDA
  also in graph mode (``GPEDConfig.graph``, periods replayed as CUDA graphs); with ``--random-numbers counter``
  the engines draw counter-based (``GPEDConfig(random_numbers="counter")``: compiled draws of the minibatch
  indices, the SGLD noise inside one compiled update; compiled during the warm-up, not timed; the plain loop
  keeps ``torch.randint`` and ``torch.randn``);
* **K one-chain engines, one after another** (what a batch replaces, the K = 12 goal's reference): measured
  on the CPU; on CUDA derived from the one-chain engine's rate (K independent chains one after another take K
  times one chain's time), labelled so, because measuring them would take K times as long;
* **K plain loops, one after another**: derived from the plain loop's rate on every device, labelled so (no
  goal refers to them, and measuring them would take K times one plain loop's time).

**Nothing one-off is timed**: before the timed repeats every loop runs two distillation periods and, on
CUDA, one whole segment more, so graph mode has warmed up and captured every event pattern a segment
holds; the script checks that no graph was captured during the timed repeats and says so if one was.

Columns: iterations per second per chain and chain-steps per second in total; the ratio to the plain
loop(s) doing the same work (the goals' two ratios are also printed for each repeat, so a run shows its own
spread; on a busy machine they move between runs); kernels per step
(``bench_kernels.count_kernels`` over one period of the event schedule, eager); and the share of the
float32 bound: the teacher's FLOPs per step,
``2 M (3 x 477,600 - 784 x 400)`` = 223.8 MFLOP at M = 100, over the rate of a large float32 matmul
measured in the same run. Then the **paper configuration's FLOPs per step** (Table 1's chain: four
students, predictive U_s and U_o every 100 steps, entropy U_s and U_o every 10; the ensemble every 100),
counted by ``FlopCounterMode`` over one period and split into teacher, ensemble and students; the **paper
chain's rate**: one such chain timed alone as the engines above (in graph mode on CUDA); and a
**profiler summary of one period** of the one-chain engine (replayed in graph mode on CUDA): the top
operators or kernels and their time, printed and written to ``--trace-out``.

Defaults: on the CPU 100-step segments x 3 repeats and K = 12 (``make bench`` within about 3 minutes on a 2-core
CPU; ``--long``: 1,000-step segments);
on CUDA 2,000-step segments x 3 repeats and K = 24 and 48. On the CPU the header names ``GOMP_SPINCOUNT``, which
the Makefile sets to 30,000 (how long an idle OpenMP worker spins; with libgomp's default, 300,000, a batch's noise
draws on the thread pool share the cores with a spinning worker). Not a test: run it on a quiet machine (two
torch processes on two cores slow each other ~10x; two on one GPU deliver less than one after another)::

    python benchmarks/bench_engine.py [--chains 12] [--steps 1000] [--repeats 3] [--device cuda] [--long]
                                      [--random-numbers counter]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
from pathlib import Path
from typing import Callable

import torch
from bench_batched import achievable_flops, timed  # the same folder: run as python benchmarks/bench_engine.py
from bench_kernels import count_kernels, synthetic_mnist
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from gped_kit.core import metrics
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
        """The log point: the ensemble's and the student's test NLL, accuracy and expected calibration error
        (:mod:`gped_kit.core.metrics`, as the engine reports them), read to the host."""
        d = self.data
        with torch.no_grad():
            ensemble = self.sums / self.count if self.count else torch.full_like(self.sums, 1 / self.sums.shape[1])
            student = torch.cat([F.log_softmax(self.student(d.test_x[s:s + 500]), dim=-1)
                                 for s in range(0, d.test_x.shape[0], 500)])
            out = []
            for probs in (ensemble, student.exp()):  # the kit's metrics: a running mean may pass 1 by round-off
                out += [metrics.nll(probs, d.test_y), metrics.accuracy(probs, d.test_y), metrics.ece(probs, d.test_y)]
            return out


#: Table 1's students in the paper profile: predictive every 100 steps, entropy every 10, each with U_s and U_o.
PAPER_STUDENTS = tuple(StudentConfig(target, estimator, thinning=h, batch_size=100)
                       for target, h in (("predictive", 100), ("entropy", 10)) for estimator in ("U_s", "U_o"))


def engine_flops(e: GPEDEngine, steps: int) -> float:
    """FLOPs per step of ``steps`` engine steps (no log point), counted by ``FlopCounterMode``."""
    counter = FlopCounterMode(display=False)
    with counter:
        for _ in range(steps):
            e.step()
    return counter.get_total_flops() / steps


def paper_flops(data: GPEDData, device: torch.device, period: int = 100) -> dict[str, float]:
    """The paper configuration's FLOPs per step, split: the teacher's SGLD step, the test-set ensemble (every 100
    steps) and the four students' distillation (teacher statistics on S' and the students' Adam steps)."""

    def build(students: tuple, eval_thinning: int) -> GPEDEngine:
        cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(), num_iterations=10 * period, burn_in=0,
                         eval_thinning=eval_thinning, log_every=10 ** 9, checkpoint_every=10 ** 9, progress=False,
                         device=str(device), graph=False)
        e = GPEDEngine([build_chain(data, cfg, list(students))])
        for _ in range(period):  # past the first events
            e.step()
        return e

    teacher = engine_flops(build((), 10 ** 9), period)
    with_ensemble = engine_flops(build((), period), period)
    total = engine_flops(build(PAPER_STUDENTS, period), period)
    return {"teacher": teacher, "ensemble": with_ensemble - teacher, "students": total - with_ensemble,
            "total": total}


def paper_chain_rates(data: GPEDData, device: torch.device, graph: bool, random_numbers: str, steps: int,
                      repeats: int, period: int = 100) -> list[float]:
    """Iterations per second of one of Table 1's paper chains (FCNN, SGLD at Appendix A.2's step, the four
    students of :data:`PAPER_STUDENTS`, the ensemble every 100 steps), each of ``repeats`` segments of ``steps``
    steps ending at a log point, after a warm-up of two periods and, in graph mode, a whole segment (so that
    every event pattern is captured before the timing)."""
    cfg = GPEDConfig(model="fcnn", sampler=SGLDConfig(), num_iterations=steps * (repeats + 2) + 4 * period,
                     burn_in=0, eval_thinning=period, log_every=10 ** 9, checkpoint_every=10 ** 9, progress=False,
                     device=str(device), graph=graph, random_numbers=random_numbers)
    e = GPEDEngine([build_chain(data, cfg, list(PAPER_STUDENTS))])
    e.run(stop=2 * period + (steps if graph else 0))
    return [steps / timed(device, lambda: e.run(stop=e.t + steps)) for _ in range(repeats)]


def profile_period(e: GPEDEngine, device: torch.device, period: int, out: Path) -> str:
    """A ``torch.profiler`` summary of one period of ``e`` (replayed in graph mode), top operators or kernels by
    their GPU time (CUDA) or host time (CPU); written to ``out`` and returned."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        e.run(stop=e.t + period)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    key = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    table = prof.key_averages().table(sort_by=key, row_limit=20)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)
    return table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=None,
                        help="timed iterations per segment, a multiple of 100 (CPU 100, --long 1,000; CUDA 2,000)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chains", type=int, nargs="+", default=None,
                        help="each K, a batch of chains (CPU 12; CUDA 24 48)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--synthetic", action="store_true", help="MNIST-shaped random data (no data set needed)")
    parser.add_argument("--long", action="store_true", help="the CPU's long version: 1,000-step segments")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200 steps x 1 repeat, K = 2")
    parser.add_argument("--random-numbers", choices=["generators", "counter"], default="generators",
                        help="the engines' GPEDConfig.random_numbers: each stream's generator, or counter-based "
                             "compiled draws")
    parser.add_argument("--trace-out", type=Path, default=Path("outputs") / "bench_engine_profile.txt",
                        help="where the profiler summary of one period is written")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    cuda = device.type == "cuda"
    if args.quick:
        args.steps, args.repeats, args.chains = 200, 1, [2]
    args.steps = args.steps or (2000 if cuda else 1000 if args.long else 100)
    args.chains = args.chains or ([24, 48] if cuda else [12])
    if args.steps % 100 or args.steps < 100 or args.repeats < 1 or min(args.chains) < 2:
        parser.error(f"--steps must be a positive multiple of 100 (got {args.steps}), --repeats >= 1 (got "
                     f"{args.repeats}) and every --chains >= 2 (got {args.chains})")
    data = synthetic_mnist(device) if args.synthetic else prepare_data(DataConfig("mnist")).to(device)
    sgld, H, E = SGLDConfig(), 100, 100
    total = args.steps * (args.repeats + 2) + 4 * H

    def engine(chains: int, graph: bool, spread: int) -> GPEDEngine:
        specs = []
        for k in range(chains):
            sampler = dataclasses.replace(sgld, step_size=sgld.step_size * (0.8 + 0.4 * k / spread))
            cfg = GPEDConfig(model="fcnn", sampler=sampler,
                             num_iterations=total, burn_in=0, eval_thinning=E, log_every=10 ** 9,
                             checkpoint_every=10 ** 9, progress=False, device=str(device), seed=k, graph=graph,
                             random_numbers=args.random_numbers)
            specs.append(build_chain(data, cfg, [StudentConfig("predictive", "U_s", thinning=H, batch_size=100)]))
        return GPEDEngine(specs)

    def advance(e: GPEDEngine, n: int) -> None:
        e.run(stop=e.t + n)  # a log point at the segment's end

    graphs = [False, True] if cuda else [False]
    # name -> (chains, reference loop's name, the loop (None: derived), kernel counter, engine)
    loops: dict[str, tuple[int, str, Callable[[int], None] | None, Callable[[], int] | None,
                           GPEDEngine | None]] = {}
    plain = PlainLoop(data, sgld, H, E, seed=0)
    one_plain = "plain loop"
    loops[one_plain] = (1, one_plain, plain.steps, lambda: count_kernels(lambda: plain.steps(H), device), None)
    for K in args.chains:
        k_plain = f"{K} plain loops, one after another (derived)"
        loops[k_plain] = (K, k_plain, None, None, None)
    for graph in graphs:
        mode = "graph" if graph else "eager"
        one = engine(1, graph, 1)
        count = None if graph else (lambda e=one: count_kernels(lambda: advance(e, H), device))
        loops[f"engine, 1 chain, {mode}"] = (1, one_plain, lambda n, e=one: advance(e, n), count, one)
        for K in args.chains:
            reference = f"{K} plain loops, one after another (derived)"
            batch = engine(K, graph, K)
            count = None if graph else (lambda e=batch: count_kernels(lambda: advance(e, H), device))
            loops[f"engine, {K} chains, {mode}"] = (K, reference, lambda n, e=batch: advance(e, n), count, batch)
            if not graph:
                name = f"{K} engines, one after another, {mode}"
                if cuda:
                    loops[name + " (derived)"] = (K, reference, None, None, None)
                else:
                    singles = [engine(1, graph, K) for _ in range(K)]
                    loops[name] = (K, reference, lambda n, es=singles: [advance(e, n) for e in es], None, None)

    warm_up = args.steps + 2 * H if cuda else 2 * H  # on CUDA a whole segment: graph mode captures its patterns
    for _, _, fn, _, _ in loops.values():
        if fn is not None:
            fn(warm_up)
    captured = {name: len(e.graphs.graphs) for name, (*_, e) in loops.items() if e is not None and e.graphs}
    kernels = {name: (c() / H if c is not None else math.nan) for name, (_, _, _, c, _) in loops.items()}
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(args.repeats):
        for name, (k, _, fn, _, _) in loops.items():
            if fn is not None:
                rates[name].append(args.steps / timed(device, lambda fn=fn: fn(args.steps)))
    late = [name for name, n in captured.items() if len(loops[name][4].graphs.graphs) != n]
    one_rate = {mode: statistics.median(rates[f"engine, 1 chain, {mode}"]) for mode in ("eager",)}
    plain_rate = statistics.median(rates[one_plain])
    for name, (k, _, fn, _, _) in loops.items():
        if fn is None:  # K independent chains one after another: K times one chain's time, per chain the same rate
            base = plain_rate if name.startswith(f"{k} plain loops") else one_rate["eager"]
            rates[name] = [base / k]
    flop_rate = achievable_flops(device, 8192 if cuda else 1024)
    flops = teacher_flops(sgld.batch_size)
    name = torch.cuda.get_device_name(device) if cuda else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; FCNN teacher (M = {sgld.batch_size}), predictive U_s student "
          f"(H = {H}, M' = 100), ensemble every {E} steps on {data.test_x.shape[0]} test images; {args.steps} steps "
          f"x {args.repeats} repeats (medians), after a warm-up ({warm_up} steps); the engines' random numbers: "
          f"{args.random_numbers}" + ("" if cuda else f"; GOMP_SPINCOUNT {os.environ.get('GOMP_SPINCOUNT', 'unset')}"))
    print(f"float32 matmul rate {flop_rate / 1e9:,.1f} GFLOP/s; teacher {flops / 1e6:.1f} MFLOP per step")
    if late:
        print(f"note: graphs were captured during the timed repeats of {late}: their rates include a capture")
    print(f"{'loop':<48}{'chains':>7}{'it/s/chain':>12}{'steps/s total':>15}{'vs plain':>10}{'kernels/step':>14}"
          f"{'of bound':>10}")
    for label, (k, reference, _, _, _) in loops.items():
        per = statistics.median(rates[label])
        ref = statistics.median(rates[reference])
        print(f"{label:<48}{k:>7}{per:>12.1f}{per * k:>15.1f}{per / ref:>9.2f}x{kernels[label]:>14.1f}"
              f"{100 * per * k * flops / flop_rate:>9.2f}%")
    print("engine, 1 chain / plain loop, each repeat: "
          + " ".join(f"{e / p:.2f}x" for e, p in zip(rates["engine, 1 chain, eager"], rates[one_plain])))
    for K in args.chains:
        seq_rates = rates[next(n for n in loops if n.startswith(f"{K} engines, one after another"))]
        bat_rates = rates[f"engine, {K} chains, eager"]
        ratio = statistics.median(bat_rates) / statistics.median(seq_rates)
        each = " ".join(f"{b / q:.2f}x" for b, q in zip(bat_rates, seq_rates))
        print(f"K = {K}: batched / one after another = {ratio:.2f}x (eager)"
              + (" (one after another derived from one chain's rate)" if cuda else f", each repeat: {each}"))
    paper = paper_flops(data, device)
    print("paper configuration (Table 1's FCNN chain, four students, ensemble every 100), MFLOP per step: "
          + ", ".join(f"{part} {value / 1e6:.1f}" for part, value in paper.items()))
    mode = "graph" if cuda else "eager"
    paper_rates = paper_chain_rates(data, device, cuda, args.random_numbers, args.steps, args.repeats, H)
    print(f"Table 1's paper chain (FCNN, four students, the ensemble every 100), one chain, {mode}: "
          f"{statistics.median(paper_rates):,.1f} it/s (each repeat: "
          + ", ".join(f"{r:,.1f}" for r in paper_rates) + ")" + ("; the goal on a GPU: >= 8,000 it/s" if cuda else ""))
    e = loops[f"engine, 1 chain, {mode}"][4]
    table = profile_period(e, device, H, args.trace_out)
    print(f"profile of one period of the one-chain engine ({mode}; written to {args.trace_out}), top rows:")
    print("\n".join(table.splitlines()[:14]))


if __name__ == "__main__":
    main()
