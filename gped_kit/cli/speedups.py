"""Check whether a faster numerics option distils what the default does (:mod:`gped_kit.experiments.speedups`).

``tf32`` or ``counter``: Table 1's chain of the paper profile (the FCNN and its four students) shortened to
``--steps`` (10^5), on each ``--seeds`` (0 1 2) with the default options and with the option, through the store;
then the verdict per measure (the teacher's NLL, each student's NLL or entropy MAE, against the default's
seed-to-seed spread), the two sets' iterations per second and whether a profile may adopt the option. Run it on the
GPU the option is for, alone on the device (the same lock as ``units run``); read a verdict back later with
``--stored`` (nothing computed). ``--pack FOLDER`` packs the chains it wrote, as ``units run --pack`` does.

Usage::

    python -m gped_kit.cli.speedups tf32 --results results [--steps 100000] [--seeds 0 1 2] [--pack FOLDER]
    python -m gped_kit.cli.speedups counter --results results --stored

Exit status: 0 when every chain finished (whatever the verdict), 1 when one did not (failed, stopped by
``--budget-s``, not stored), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ..experiments.batching import check_chains_per_batch
from ..experiments.budget import Budget
from ..experiments.numerics import numerics_code
from ..experiments.speedups import DEFAULT_STEPS, MODELS, Speedup, speedup_check, speedup_tasks
from ..experiments.store import ResultsStore
from ..experiments.units import device_lock
from .packs import (
    PackError,
    add_pack_arguments,
    check_pack_options,
    next_sequence,
    pack_written,
    resume_into,
    resume_sources,
)
from .parameters import plain_overrides
from .slices import (
    GRAPH_CHOICES,
    with_graph,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.speedups", description=__doc__.split("\n\n")[0])
    parser.add_argument("speedup", choices=Speedup.allowed(), help="the option to check")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="each chain's T (default: %(default)s)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="at least two (default: 0 1 2)")
    parser.add_argument("--model", choices=MODELS, default="fcnn", help="Table 1's model (default: %(default)s)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of notebook 01's paper profile for both sets, e.g. -p burn_in=100")
    parser.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    parser.add_argument("--data-root", default=None, help="the data root (default: $GPED_DATA_ROOT or the cache)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: %(default)s)")
    parser.add_argument("--graph", choices=sorted(GRAPH_CHOICES), default="auto",
                        help="CUDA graphs: auto (on for CUDA), on or off (default: %(default)s)")
    parser.add_argument("--chains-per-batch", default="auto",
                        help="chains computed as one batch, or auto (default: %(default)s)")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop at a checkpoint once this many seconds are spent (default: no limit)")
    parser.add_argument("--stored", action="store_true", help="judge the chains the store holds; compute nothing")
    parser.add_argument("--lock-dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the device's lock file is, shared with units run (default: %(default)s)")
    parser.add_argument("--pack", type=Path, default=None, metavar="FOLDER",
                        help="pack every store file this run wrote into FOLDER (default: no pack)")
    add_pack_arguments(parser)
    return parser


def _chains_per_batch(text: str) -> int | str:
    """``--chains-per-batch`` as :func:`~gped_kit.experiments.batching.check_chains_per_batch` takes it."""
    try:
        return check_chains_per_batch("--chains-per-batch", int(text) if text.lstrip("-").isdigit() else text)
    except ValueError as exc:  # named as the user typed it
        raise ValueError(f"--chains-per-batch={text!r}: {str(exc).split(': ', 1)[1]}") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:  # every input is checked before any work
        overrides = plain_overrides(args.param, "a setting applies to both sets of chains; give KEY=VALUE")
        chains_per_batch = _chains_per_batch(args.chains_per_batch)
        if args.budget_s is not None and not args.budget_s > 0:
            raise ValueError(f"--budget-s={args.budget_s!r}: give a number of seconds > 0")
        speedup_tasks(args.speedup, args.steps, args.seeds, args.model, overrides, "cpu", args.data_root)
        check_pack_options(args)
        sources = resume_sources(args.resume)
        if args.stored and (args.pack is not None or sources):
            raise ValueError("--stored computes nothing: it takes no --pack or --resume")
    except (ValueError, PackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store = ResultsStore(args.results)
    graph = GRAPH_CHOICES[args.graph]
    common = dict(steps=args.steps, seeds=args.seeds, model=args.model, overrides=overrides, device=args.device,
                  data_root=args.data_root, chains_per_batch=chains_per_batch, prepare=lambda t: with_graph(t, graph))
    if args.stored:  # no --resume, no --pack
        check = speedup_check(args.speedup, store, executor="stored", progress=False, **common)
    else:
        budget = Budget(seconds=args.budget_s) if args.budget_s is not None else None
        # the device's lock first: a second run on the device is refused before it unpacks anything (unpacking
        # waits for the entries another process is computing)
        try:
            with device_lock(args.device, args.lock_dir):
                before, previous = resume_into(store.root, sources)
                check = speedup_check(args.speedup, store, budget=budget, **common)
        except RuntimeError as exc:  # another run holds the device, a pack does not verify (PackError), ...
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(check.text())
    print(check.rates.to_string(index=False))
    code = 0 if check.complete else 1
    if args.pack is not None:
        info = {"sequence": next_sequence(previous), "run": f"speedups {args.speedup}", "steps": args.steps,
                "seeds": list(args.seeds), "model": args.model, "overrides": overrides,
                "code": numerics_code("chain"), "complete": check.complete, "adopt": check.adopt}
        keep = bool(args.keep)  # finished chains' checkpoints only when asked for
        code = max(code, pack_written(store.root, before, args, info, keep))
    return code


if __name__ == "__main__":
    sys.exit(main())
