"""The paper's work in units that finish within a wall-time budget (docs/gpu.md, "Work units").

``plan`` prints the units of the paper profile in the order of what they settle (Table 1's seed 0, then its
seeds 1 and 2, Experiment 2's MNIST grid, notebooks 06, 07 and 10; :mod:`gped_kit.experiments.units`), each
sized from the measured rates (:mod:`gped_kit.experiments.rates`) to finish within ``--budget-s``, with its
predicted seconds, the running total and the job (the run of ``run``) that takes it. It only plans: nothing is
computed.

``run`` runs as many units as fit ``--budget-s`` one after another in this one process (one process on the
device: a second ``run`` on the same device is refused), each through the store, and records each finished
unit's rate in the store (``<results>/units/rates-*.csv``) so that the next plan is made from it. It stops
before a unit predicted to take longer than the time left; what finished is complete in the store (commit it,
or copy it off the machine), and nothing partial needs to survive.

For a store the next job cannot see (node-local scratch, a fresh instance), ``run --pack FOLDER`` packs every
store file the run wrote (the complete entries, the rate file; with ``--slices`` the checkpoints of chains that
stopped) into FOLDER as :mod:`~gped_kit.cli.slices` packs do: compressed tar parts and a manifest with SHA-256
checksums, which ``python -m gped_kit.cli.slices unpack FOLDER --results results`` verifies and merges into a
store, and ``run --resume FOLDER`` unpacks before it plans (so what finished is done, and a stopped chain
resumes from its checkpoint).

Usage::

    python -m gped_kit.cli.units plan --profile paper --budget-s 3300 --device-kind nvidia-h200
    python -m gped_kit.cli.units run --budget-s 3300 --results results [--pack FOLDER] [--resume FOLDER]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..core.status import Status
from ..experiments import registry
from ..experiments.numerics import numerics_code
from ..experiments.rates import RateTable, device_kind, slug
from ..experiments.store import ResultsStore
from ..experiments.units import (
    PAPER_NOTEBOOKS,
    PLANNED,
    SLICE,
    TOO_LONG,
    Plan,
    RunReport,
    UnitList,
    check_overrides,
    device_lock,
    paper_units,
    plan_units,
    run_units,
    shard,
)
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
    deterministic_convolutions,
    with_graph,
)

#: The checkout whose ``docs/device-runs`` hold the committed GPU runs' records.
CHECKOUT = Path(__file__).resolve().parents[2]


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def plan_text(plan: Plan, markdown: bool = False) -> str:
    """The plan as a table (plain text, or Markdown with ``markdown``), the rates' sources as footnotes, the
    notes and the total."""
    bases: dict[str, list[str]] = {}
    rows = []
    cumulative = 0.0
    for i, p in enumerate(plan.units, start=1):
        runs = p.status in (PLANNED, SLICE)
        cumulative += (p.seconds or 0.0) if runs else 0.0
        rate = ""
        if p.rate is not None:
            uses = bases.setdefault(p.rate.basis, [])
            if p.rate.differs and p.rate.differs not in uses:
                uses.append(p.rate.differs)
            how = "assumed" if p.rate.assumed else "measured"
            rate = f"{p.rate.chain_steps_per_s:,.0f} {how} [{list(bases).index(p.rate.basis) + 1}]"
        rows.append({"order": i, "unit": p.unit.name, "chains": p.unit.chains, "steps": f"{p.unit.steps:,}",
                     "status": p.status, "chain-steps/s": rate,
                     "predicted s": "" if p.seconds is None else f"{p.seconds:,.0f}",
                     "cumulative s": f"{cumulative:,.0f}" if runs else "", "job": "" if p.job is None else p.job,
                     "settles": p.unit.settles})
    table = pd.DataFrame(rows)
    if markdown:
        lines = ["| " + " | ".join(table.columns) + " |", "|" + "|".join(" --- " for _ in table.columns) + "|"]
        lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in table.itertuples(index=False)]
        text = "\n".join(lines)
    else:
        with pd.option_context("display.width", 250, "display.max_columns", 20, "display.max_colwidth", 60):
            text = table.to_string(index=False)
    out = [text, ""]
    if bases:
        out += ["Rates (chain-steps/s), each from one measurement; 'assumed' where it is used for another workload:",
                *([""] if markdown else [])]
        out += [f"[{n}] {basis}" + (f"; assumed for: {'; '.join(uses)}" if uses else "")
                for n, (basis, uses) in enumerate(bases.items(), start=1)]
        out.append("")
    for p in plan.units:
        if p.status not in (PLANNED, "done") and p.note:
            out.append(f"{p.unit.name}: {p.status}: {p.note}")
    if any(p.unit.needs_state for p in plan.runnable):
        names = sorted({p.unit.notebook for p in plan.runnable if p.unit.needs_state})
        out.append(f"{', '.join(names)} derive their results from their chains' full state: keep the store's "
                   "checkpoints of those chains (chain/<key>/checkpoint.pt) until the notebook has run "
                   "(python -m gped_kit.cli.batch NOTEBOOK --profile paper, on the same store)")
    out += plan.notes
    if markdown:  # one list item a line, not one paragraph
        out = out[:2] + [f"- {line}" if line and not line.startswith("Rates (") else line for line in out[2:]]
    budget = "no budget (every unit in one job)" if plan.budget_s is None else f"jobs of {plan.budget_s:,.0f} s"
    assumed = sum(1 for p in plan.runnable if p.rate is not None and p.rate.assumed)
    out.append("")
    out.append(f"Predicted time on {plan.device}: {plan.total_s:,.0f} s ({_clock(plan.total_s)}) for "
               f"{len(plan.runnable)} units, {sum(p.unit.chains for p in plan.runnable)} chains, in {plan.jobs} "
               f"job(s) ({budget}); {assumed} of the {len(plan.runnable)} units' rates are assumed (no measurement "
               "of exactly that workload on that device)")
    return "\n".join(out)


def _positive(name: str, value: float | int | None, integer: bool = False) -> None:
    if value is None:
        return
    ok = (isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value))
    if not ok or value <= 0:
        kind = "an integer >= 1" if integer else "a finite number of seconds > 0"
        raise ValueError(f"{name}={value!r}: must be {kind}")


def _shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard={text!r}: give INDEX/COUNT, e.g. 0/4 (SLURM: "
                         "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)") from None
    if not 0 <= index < count:
        raise ValueError(f"--shard={text!r}: INDEX must be at least 0 and less than COUNT")
    return index, count


def _notebooks(names: Sequence[str] | None) -> tuple[str, ...]:
    if not names:
        return PAPER_NOTEBOOKS
    out = []
    for name in names:
        stem = registry.notebook(name).name
        if stem not in PAPER_NOTEBOOKS:
            raise ValueError(f"--notebook {name!r} has no units; allowed: {', '.join(PAPER_NOTEBOOKS)}")
        out.append(stem)
    return tuple(n for n in PAPER_NOTEBOOKS if n in out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.units",
                                     description="The paper's work in units that finish (docs/gpu.md).")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("plan", "print the units in order with their predicted times (computes nothing)"),
                       ("run", "run as many units as fit the budget, one after another, into the store")):
        p = sub.add_parser(name, help=text)
        p.add_argument("--profile", default="paper", help="the notebooks' profile (default: %(default)s)")
        p.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a setting of the notebooks' profile, e.g. num_iterations=1000 (repeatable)")
        p.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
        p.add_argument("--budget-s", type=float, default=None, required=name == "run",
                       help="wall time of a job in seconds" + (" (required)" if name == "run" else
                                                               " (default: none, every unit in one job)"))
        p.add_argument("--notebook", action="append", default=[], dest="notebooks",
                       help=f"only this notebook's units (repeatable; default: {', '.join(PAPER_NOTEBOOKS)})")
        p.add_argument("--max-chains", type=int, default=None,
                       help="at most this many chains in one unit (default: the device's batch cap)")
        p.add_argument("--slices", action="store_true",
                       help="run a chain that alone takes longer than a job as resumable slices")
        p.add_argument("--shard", default=None, metavar="INDEX/COUNT",
                       help="only every COUNT-th unit from INDEX (0-based): the tasks of a job array")
        p.add_argument("--data-root", default=None, help="the data root (default: $GPED_DATA_ROOT or the cache)")
        p.add_argument("--device-runs", type=Path, default=CHECKOUT,
                       help="the checkout whose docs/device-runs records give rates (default: this one)")
        if name == "plan":
            p.add_argument("--device-kind", default=None,
                           help="plan for this device, e.g. nvidia-h200 or cpu (default: this machine's)")
            p.add_argument("--markdown", action="store_true", help="the table in Markdown")
        else:
            p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: %(default)s)")
            p.add_argument("--graph", choices=sorted(GRAPH_CHOICES), default="auto",
                           help="CUDA graphs: auto (on for CUDA), on or off (default: %(default)s)")
            p.add_argument("--deterministic", action="store_true",
                           help="cuDNN's deterministic convolution kernels (CUDA CNN chains reproducible)")
            p.add_argument("--lock-dir", type=Path, default=Path(tempfile.gettempdir()),
                           help="where the device's lock file is (default: %(default)s)")
            p.add_argument("--pack", type=Path, default=None, metavar="FOLDER",
                           help="pack every store file this run wrote into FOLDER (parts and a manifest, for "
                                "python -m gped_kit.cli.slices unpack; default: no pack)")
            add_pack_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:  # every input is checked before any work
        _positive("--budget-s", args.budget_s)
        _positive("--max-chains", args.max_chains, integer=True)
        where = _shard(args.shard)
        notebooks = _notebooks(args.notebooks)
        overrides = plain_overrides(args.param, "a setting applies to every notebook; give KEY=VALUE")
        check_overrides(overrides, notebooks, args.profile)
        if args.command == "plan":
            kind = slug(args.device_kind) if args.device_kind is not None else device_kind("auto")[0]
            if not kind:
                raise ValueError(f"--device-kind={args.device_kind!r}: give a device's name, e.g. nvidia-h200 or cpu")
            device = "auto"
        else:
            kind, device = device_kind(args.device)[0], args.device
            check_pack_options(args)
            sources = resume_sources(args.resume)
    except (ValueError, PackError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store = ResultsStore(args.results)
    if args.command == "plan":
        units, chosen, rates = _units(args, overrides, store, device, notebooks, where)
        plan = plan_units(chosen, rates, kind, args.budget_s, args.max_chains, args.slices)
        plan.notes = units.notes
        print(plan_text(plan, args.markdown))
        return 0
    # the device's lock first: a second run on the device is refused before it unpacks anything (unpacking waits
    # for the entries another process is computing) or plans
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(device_lock(device, args.lock_dir))
            before, previous = resume_into(store.root, sources)
        except RuntimeError as exc:  # another run holds the device, or a pack does not verify (PackError)
            print(f"error: {exc}", file=sys.stderr)
            return 1
        units, chosen, rates = _units(args, overrides, store, device, notebooks, where)
        status = _run(args, chosen, units.notes, store, rates, device)
    if status is None:
        return 1
    report, code = status
    if args.pack is not None:
        code = max(code, _pack(args, overrides, store, before, previous, report))
    return code


def _units(args: argparse.Namespace, overrides: dict, store: ResultsStore, device: str,
           notebooks: tuple[str, ...], where: tuple[int, int] | None) -> tuple[UnitList, list, RateTable]:
    """The paper's units (those the store has done marked), the ones this job takes, and the rates."""
    units = paper_units(args.profile, overrides, store=store, device=device, data_root=args.data_root,
                        notebooks=notebooks)
    chosen = units.units if where is None else shard(units.units, *where)
    rates = RateTable.read(store.root, args.device_runs if (args.device_runs / "docs").is_dir() else None)
    return units, chosen, rates


def _pack(args: argparse.Namespace, overrides: dict, store: ResultsStore, before: dict, previous: list,
          report: RunReport) -> int:
    """Pack what the run wrote into ``args.pack`` (module docstring, :func:`~gped_kit.cli.packs.pack_written`)."""
    keep = args.keep if args.keep is not None else any(o.planned.unit.needs_state for o in report.outcomes)
    info = {"sequence": next_sequence(previous), "run": "units", "profile": args.profile,
            "overrides": overrides, "code": numerics_code("chain"),
            "budget": {"seconds": args.budget_s, "left_s": round(report.left_s, 1)},
            "complete": report.remaining is not None and not report.remaining.runnable,
            "units": [{"unit": o.planned.unit.name, "statuses": list(o.statuses), "seconds": round(o.seconds, 1),
                       "entries": list(o.entries)} for o in report.outcomes]}
    return pack_written(store.root, before, args, info, keep)


def _run(args: argparse.Namespace, units: list, notes: list[str], store: ResultsStore, rates: RateTable,
         device: str) -> tuple[RunReport, int] | None:
    """Run the units (the caller holds the device's lock) and print what happened: the report and the exit
    status (None: the run could not start)."""
    graph = GRAPH_CHOICES[args.graph]
    try:
        with deterministic_convolutions(args.deterministic):
            report = run_units(units, store, rates, args.budget_s, device=device, max_chains=args.max_chains,
                               slices=args.slices, prepare=lambda t: with_graph(t, graph))
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    for note in notes:
        print(note)
    finished = [o for o in report.outcomes if o.finished]
    print(f"{len(finished)} of {len(report.outcomes)} unit(s) finished; {report.left_s:,.0f} s of the budget left")
    for o in report.outcomes:
        for error in o.errors:
            print(f"  {o.planned.unit.name}: {error}")
    written = [e for o in report.outcomes for e in o.entries]
    if written:
        print(f"store entries complete ({len(written)}): commit them, or copy them off this machine:")
        print("\n".join(f"  {e}" for e in written))
    if report.rates_file is not None:
        print(f"rates recorded in {report.rates_file}")
    if report.stopped_before is not None:
        p = report.stopped_before
        print(f"stopped before {p.unit.name}: predicted {p.seconds:,.0f} s, {max(report.left_s, 0):,.0f} s left")
    left = [] if report.remaining is None else report.remaining.runnable
    too_long = [] if report.remaining is None else [p for p in report.remaining.units if p.status == TOO_LONG]
    for p in too_long:
        print(f"not run: {p.unit.name}: {p.note}")
    print(f"{len(left)} unit(s) left, predicted {sum(p.seconds or 0 for p in left):,.0f} s: run again"
          if left else "no unit left in this plan")
    failed = any(s == Status.FAILED for o in report.outcomes for s in o.statuses)
    return report, 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
