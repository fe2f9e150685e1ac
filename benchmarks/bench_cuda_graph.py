"""Benchmark: the engine's steps captured as one CUDA graph against the same steps run eagerly.

On a GPU an FCNN step is a few microseconds of arithmetic and hundreds of kernel launches, so the
eager loop is launch-bound (docs/benchmarks.md, "GPU"). This measures how much of that a CUDA graph
removes, before the engine grows a graph mode: for each K of ``--chains`` it builds the engine of
``benchmarks/bench_batched.py`` (FCNN teacher, M = 100, predictive U_s student with H = 100 and
M' = 100, the test-set ensemble every ``--eval-thinning`` steps), runs it eagerly to a step t0 that is
a multiple of the period P = lcm(H, eval_thinning), and captures P iterations of
:meth:`GPEDEngine.step` (teacher step, ensemble, distillation: every event of one period) into one
``torch.cuda.CUDAGraph``, with the chains' generators registered so that each replay draws new
random numbers. It reports:

* it/s per chain and in total, eager (``engine.step()`` in a loop) and replayed, and their ratio;
* whether one replay is **bit-identical** to P eager steps of a twin engine built from the same
  seeds (teacher samples, students with their Adam moments, ensemble sums). A replay reuses the
  values the capture saw for everything the engine computes on the host (step size and learning
  rate at t, Adam's bias corrections), so only the first replay is compared; a graph mode for the
  engine would keep those on the device.

CUDA only for the graph; on the CPU it times the eager loop and checks the twin comparison (the
harness's own test). Not a test: run it alone, e.g.
``python benchmarks/bench_cuda_graph.py --chains 1,24``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time

import torch
from bench_batched import synchronize, timed  # the same folder: run as python benchmarks/bench_cuda_graph.py

from gped_kit.core.sgld import SGLDConfig
from gped_kit.data.experiment import DataConfig, prepare_data
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig, resolve_device
from gped_kit.engine.spec import build_chain
from gped_kit.engine.state import tree_leaves


def build_engine(data, device: torch.device, chains: int, total: int, thinning: int, eval_thinning: int) -> GPEDEngine:
    """K FCNN chains (seeds 0..K-1, step sizes spread by +-20%) with a predictive U_s student each."""
    sgld = SGLDConfig()
    specs = []
    for k in range(chains):
        sampler = dataclasses.replace(sgld, step_size=sgld.step_size * (0.8 + 0.4 * k / 24))
        cfg = GPEDConfig(model="fcnn", sampler=sampler, num_iterations=total, burn_in=0, eval_thinning=eval_thinning,
                         log_every=10 ** 9, checkpoint_every=10 ** 9, progress=False, device=str(device), seed=k)
        specs.append(build_chain(data, cfg, [StudentConfig("predictive", "U_s", thinning=thinning, batch_size=100)]))
    return GPEDEngine(specs)


def generators(engine: GPEDEngine) -> list[torch.Generator]:
    """Every generator the engine's steps draw from."""
    s = engine.streams
    return [*s.data, *s.noise, *(g for gens in s.groups.values() for g in gens)]


def state_tensors(engine: GPEDEngine) -> list[torch.Tensor]:
    """The state a step changes: teacher samples and momenta, students (Adam included), ensemble sums."""
    return tree_leaves((engine.chain, engine.students, engine.ensemble))


def max_difference(a: GPEDEngine, b: GPEDEngine) -> float:
    return max(((x.float() - y.float()).abs().max().item() if x.numel() else 0.0)
               for x, y in zip(state_tensors(a), state_tensors(b)))


def steps(engine: GPEDEngine, n: int) -> None:
    for _ in range(n):
        engine.step()


def capture(engine: GPEDEngine, period: int) -> torch.cuda.CUDAGraph:
    """P eager steps on a side stream (CUDA's warm-up before capture), then P steps captured."""
    graph = torch.cuda.CUDAGraph()
    for gen in generators(engine):
        graph.register_generator_state(gen)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        steps(engine, period)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        steps(engine, period)
    return graph


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", default="1,24", help="comma-separated K")
    parser.add_argument("--thinning", type=int, default=100, help="H of the predictive U_s student")
    parser.add_argument("--eval-thinning", type=int, default=100)
    parser.add_argument("--replays", type=int, default=20, help="periods timed per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--test-size", type=int, default=None, help="keep the first n test images (default all)")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    for name in ("thinning", "eval_thinning", "replays", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    ks = sorted({int(k) for k in args.chains.split(",") if k.strip()})
    device = resolve_device(args.device)
    graphs = device.type == "cuda"

    data = prepare_data(DataConfig("mnist"))
    if args.test_size:
        data = dataclasses.replace(data, test_x=data.test_x[:args.test_size], test_y=data.test_y[:args.test_size])
    data = data.to(device)
    period = math.lcm(args.thinning, args.eval_thinning)
    total = period * (args.replays * args.repeats + 6) + 2
    name = torch.cuda.get_device_name(device) if graphs else f"CPU ({torch.get_num_threads()} threads)"
    print(f"device: {name}; torch {torch.__version__}; FCNN teacher, predictive U_s student (H = {args.thinning}, "
          f"M' = 100), ensemble every {args.eval_thinning} steps on {data.test_x.shape[0]} test images; "
          f"period P = {period} steps; {args.replays} periods x {args.repeats} repeats (medians)")
    print(f"{'chains':>6}{'eager it/s/chain':>18}{'graph it/s/chain':>18}{'graph it/s total':>18}{'graph/eager':>12}"
          f"{'capture s':>10}  first replay vs eager twin")
    for k in ks:
        engine = build_engine(data, device, k, total, args.thinning, args.eval_thinning)
        twin = build_engine(data, device, k, total, args.thinning, args.eval_thinning)
        for e in (engine, twin):
            steps(e, 2 * period)  # t0 = 2P: past the first ensemble and distillation events
        steps(twin, period)  # what the capture's warm-up does to the engine
        graph, capture_s, error = None, math.nan, ""
        if graphs:
            start = time.perf_counter()
            try:
                graph = capture(engine, period)
            except Exception as exc:  # noqa: BLE001 - a benchmark reports what capture refused and goes on
                error = f"capture failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            capture_s = time.perf_counter() - start
        else:
            steps(engine, period)
        if graph is not None:
            steps(twin, period)
            graph.replay()
            synchronize(device)
            diff = max_difference(engine, twin)
            check = "bit-identical" if diff == 0 else f"differs (max |diff| {diff:.3g})"
        elif graphs:
            check = error
        else:
            steps(twin, period)
            steps(engine, period)
            diff = max_difference(engine, twin)
            check = f"eager twins {'bit-identical' if diff == 0 else f'differ ({diff:.3g})'}; no graphs on the CPU"
        eager, replayed = [], []
        for _ in range(args.repeats):
            eager.append(period * args.replays / timed(device, lambda e=twin: steps(e, period * args.replays)))
            if graph is not None:
                replayed.append(period * args.replays / timed(
                    device, lambda g=graph: [g.replay() for _ in range(args.replays)]))
        e_rate = statistics.median(eager)
        g_rate = statistics.median(replayed) if replayed else math.nan
        print(f"{k:>6}{e_rate:>18.1f}{g_rate:>18.1f}{g_rate * k:>18.1f}{g_rate / e_rate:>11.1f}x{capture_s:>10.1f}  "
              f"{check}", flush=True)
        del engine, twin, graph
        if graphs:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
