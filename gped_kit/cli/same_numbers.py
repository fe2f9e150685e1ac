"""Does a code change leave the numbers unchanged? One notebook's chains under two versions of the code, or
under this checkout against the committed store.

Stored results are keyed by declared numerics versions (:mod:`gped_kit.experiments.numerics`), so a change
that moves a number must bump one; the golden tests check that on short probes within the tolerance two CPUs
need. Two checks go further.

**Bit for bit, on this machine** (``--old REV``): the same chains under an older revision (checked out into a
temporary worktree) and under this checkout, each into its own scratch store, every stored table compared
bit for bit, timing columns aside. A refactor that claims to keep the numbers keeps them exactly here::

    python -m gped_kit.cli.same_numbers --old main                       # notebook 00's chain
    python -m gped_kit.cli.same_numbers --old main~2 --notebook 07_hydra_comparison --chains 0
    python -m gped_kit.cli.same_numbers --old main -p num_iterations=200 --notebook 01_experiment1

**Against the committed store** (``--stored``): this checkout recomputes the chains into a scratch store and
compares each chain's final numbers (its ``summary`` table) with the committed entry of the same key, made on
another machine, within :data:`~gped_kit.experiments.numerics.LONG_CHAIN_TOLERANCE` (a chain of thousands of
steps amplifies last-bit differences between CPUs to percents, so this checks statistics, not digits)::

    python -m gped_kit.cli.same_numbers --stored --notebook 10_samplers --chains 0,4

Exit status 0 when every table agrees, 1 when one differs (the first differing column and row are
printed), 2 on usage errors. With ``--old`` the two sides run one after another, never side by side (two
torch processes on two cores slow each other), in subprocesses whose ``PYTHONPATH`` is their tree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

# Absolute imports: a side runs this file by its path with the other tree first on PYTHONPATH, so that
# the kit it imports is that tree's (an older revision need not have this module).
from gped_kit.cli.parameters import plain_overrides
from gped_kit.experiments.chains import run_chains
from gped_kit.experiments.numerics import LONG_CHAIN_TOLERANCE
from gped_kit.experiments.registry import notebook as registered_notebook
from gped_kit.experiments.store import ResultsStore

#: Columns that measure time, not results: left out of the comparison.
TIMING_COLUMNS = ("elapsed_s", "iterations_per_s", "seconds")
#: The tables a chain entry stores.
CHAIN_TABLES = ("summary", "history")


def run_side(store_root: Path, notebook: str, profile: str, overrides: Mapping[str, Any],
             chains: Sequence[int] | None) -> dict[int, str]:
    """Run ``notebook``'s chains (``profile`` with ``overrides``; those at positions ``chains``, all
    when None) into the store at ``store_root`` with the code this process imported; returns
    ``{position: entry directory}``."""
    entry = registered_notebook(notebook)
    settings = entry.settings(profile, dict(overrides))
    tasks = entry.chain_tasks(settings, device="cpu")
    positions = list(range(len(tasks))) if chains is None else list(chains)
    check_positions(positions, len(tasks), notebook, profile)
    grid = run_chains([tasks[i] for i in positions], ResultsStore(store_root), progress=False)
    out = {}
    for position, outcome in zip(positions, grid.outcomes):
        if outcome.entry is None or outcome.error:
            raise RuntimeError(f"chain {position} ({outcome.task.label}) did not finish: {outcome.error}")
        out[position] = str(outcome.entry.path)
    return out


def check_positions(positions: Sequence[int], count: int, notebook: str, profile: str) -> None:
    """``ValueError`` naming the positions outside ``0 .. count - 1``."""
    bad = [i for i in positions if not 0 <= i < count]
    if bad:
        raise ValueError(f"--chains {bad}: {notebook} has {count} chains under profile {profile!r} "
                         f"(positions 0 to {count - 1})")


def compare_tables(old: pd.DataFrame, new: pd.DataFrame, tolerance: Mapping[str, float] | None = None) -> str | None:
    """None when the two tables agree (:data:`TIMING_COLUMNS` aside): bit for bit, or with ``tolerance``
    (numpy ``isclose``'s ``atol`` and ``rtol``) within it in every numeric column and exactly in the others;
    else the first difference, in words. Columns only ``new`` has are numbers this checkout adds (e.g. a new
    metric; stored results of the same numerics version lack them, docs/store.md) and are not compared;
    a column only ``old`` has is a difference."""
    old = old.drop(columns=[c for c in TIMING_COLUMNS if c in old])
    new = new.drop(columns=[c for c in TIMING_COLUMNS if c in new] + [c for c in new if c not in old])
    if list(old.columns) != list(new.columns):
        return f"columns differ: {sorted(set(old.columns) ^ set(new.columns))}"
    if len(old) != len(new):
        return f"{len(old)} rows against {len(new)}"
    for column in old.columns:
        a, b = old[column], new[column]
        if tolerance is not None and pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            same = pd.Series(np.isclose(b.astype(float), a.astype(float), equal_nan=True, **tolerance), index=a.index)
        else:
            same = (a == b) | (a.isna() & b.isna())
        if not same.all():
            row = int((~same).to_numpy().nonzero()[0][0])
            within = "" if tolerance is None else f" (beyond atol {tolerance['atol']:g} + rtol {tolerance['rtol']:g})"
            return f"column {column!r}, row {row}: {a.iloc[row]!r} (old) against {b.iloc[row]!r} (new){within}"
    return None


def largest_difference(old: pd.DataFrame, new: pd.DataFrame) -> str:
    """The largest absolute and relative difference over the numeric columns both tables have, in words."""
    columns = [c for c in old.columns if c in new and c not in TIMING_COLUMNS
               and pd.api.types.is_numeric_dtype(old[c]) and pd.api.types.is_numeric_dtype(new[c])]
    a, b = old[columns].astype(float).to_numpy(), new[columns].astype(float).to_numpy()
    diff = np.nan_to_num(np.abs(a - b))
    rel = np.nan_to_num(diff / np.maximum(np.abs(a), 1e-12))
    return f"largest difference {diff.max():.2e} absolute, {rel.max():.2%} relative" if diff.size else "no numbers"


def compare_entries(old_dir: Path, new_dir: Path, tables: Sequence[str] = CHAIN_TABLES,
                    tolerance: Mapping[str, float] | None = None) -> dict[str, str | None]:
    """:func:`compare_tables` for each of ``tables`` of two entry directories."""
    return {name: compare_tables(pd.read_csv(Path(old_dir) / f"{name}.csv"), pd.read_csv(Path(new_dir) / f"{name}.csv"),
                                 tolerance) for name in tables}


def _without_skill(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` without its skill columns: each is 1 - error / constant of two columns compared themselves, and
    it multiplies their relative difference by constant / (constant - error) (3x at a skill of 0.25), so the
    long-chain tolerance of the errors does not fit it; the bit-for-bit comparisons keep it."""
    return table.drop(columns=[c for c in table.columns if str(c).endswith("skill")])


def against_store(results: Path, args: argparse.Namespace, overrides: Mapping[str, Any]) -> int:
    """``--stored``: the chains recomputed by this checkout into a scratch store, each chain's ``summary``
    compared with the committed entry of the same key in ``results`` within the long-chain tolerance."""
    differing = 0
    with tempfile.TemporaryDirectory(prefix="gped-same-numbers-") as scratch:
        print("this checkout, recomputing ...", flush=True)
        new = run_side(Path(scratch), args.notebook, args.profile, overrides, args.chains)
        for position, path in sorted(new.items()):
            stored = results / "chain" / Path(path).name
            if not (stored / "entry.json").exists():
                print(f"chain {position}: not in {results} (key {Path(path).name}): nothing to compare with")
                differing += 1
                continue
            old, fresh = (_without_skill(pd.read_csv(stored / "summary.csv")),
                          _without_skill(pd.read_csv(Path(path) / "summary.csv")))
            difference = compare_tables(old, fresh, LONG_CHAIN_TOLERANCE)
            differing += difference is not None
            print(f"chain {position} summary: {'within tolerance' if difference is None else difference} "
                  f"({largest_difference(old, fresh)})")
    print(f"within atol {LONG_CHAIN_TOLERANCE['atol']:g} + rtol {LONG_CHAIN_TOLERANCE['rtol']:g} of the store"
          if not differing else f"{differing} chain(s) differ from the store")
    return 1 if differing else 0


def _side(tree: Path, store: Path, args: argparse.Namespace) -> dict[int, str]:
    # run by path with the tree as the working directory (first on sys.path under -c), not with -m
    code = f"import runpy; runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
    command = [sys.executable, "-c", code, "--run-side", str(store),
               "--notebook", args.notebook, "--profile", args.profile]
    command += [item for text in args.param for item in ("-p", text)]
    if args.chains is not None:
        command += ["--chains", ",".join(map(str, args.chains))]
    env = {**os.environ, "PYTHONPATH": str(tree), "GPED_PROGRESS": "off"}
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the side in {tree} failed:\n{done.stderr.strip()[-2000:]}")
    return {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}


def _chains(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--chains {text!r}: comma-separated positions, e.g. 0,2") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.same_numbers",
                                     description="Run one notebook's chains under an older revision and under this "
                                                 "checkout, on this machine, and compare their tables bit for bit; "
                                                 "or (--stored) under this checkout against the committed store.")
    parser.add_argument("--old", help="the git revision to compare with (a branch, tag or commit)")
    parser.add_argument("--stored", nargs="?", const="results", default=None, metavar="RESULTS",
                        help="compare with the committed store instead (default folder: %(const)s)")
    parser.add_argument("--notebook", default="00_quickstart", help="registered notebook (default: %(default)s)")
    parser.add_argument("--profile", default="default", help="its profile (default: %(default)s)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the profile, e.g. num_iterations=200 (repeatable)")
    parser.add_argument("--chains", type=_chains, default=None, help="positions of the chains to run (default: all)")
    parser.add_argument("--run-side", default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        overrides = plain_overrides(args.param, "give KEY=VALUE; the notebook is --notebook")
        entry = registered_notebook(args.notebook)
        tasks = entry.chain_tasks(entry.settings(args.profile, overrides))  # checked before anything runs
        if not tasks:
            raise ValueError(f"--notebook {args.notebook}: it runs no chain of the store; e.g. 00_quickstart does")
        check_positions(args.chains or [], len(tasks), args.notebook, args.profile)
    except ValueError as exc:
        parser.error(str(exc))
    if args.run_side is not None:
        print(json.dumps(run_side(Path(args.run_side), args.notebook, args.profile, overrides, args.chains)))
        return 0
    if args.stored is not None and args.old:
        parser.error("give --old or --stored, not both")
    if args.stored is not None:
        if not (Path(args.stored) / "chain").is_dir():
            parser.error(f"--stored {args.stored!r}: no chain entries there")
        return against_store(Path(args.stored), args, overrides)
    if not args.old:
        parser.error("--old is required: the git revision to compare this checkout with (or --stored)")
    here = Path(__file__).resolve().parents[2]
    known = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.old}^{{commit}}"], cwd=here,
                           capture_output=True, text=True)
    if known.returncode != 0:
        parser.error(f"--old {args.old!r} is not a revision of the repository at {here}")
    with tempfile.TemporaryDirectory(prefix="gped-same-numbers-") as scratch:
        tree = Path(scratch) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), known.stdout.strip()], cwd=here,
                       check=True)
        try:
            print(f"old: {args.old} ({known.stdout.strip()[:10]}) ...", flush=True)
            old = _side(tree, Path(scratch) / "store-old", args)
            print("new: this checkout ...", flush=True)
            new = _side(here, Path(scratch) / "store-new", args)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=here, check=False)
        differing = 0
        for position in sorted(old):
            for table, difference in compare_entries(Path(old[position]), Path(new[position])).items():
                differing += difference is not None
                print(f"chain {position} {table}: {'identical' if difference is None else difference}")
    print("same numbers" if not differing else f"{differing} table(s) differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
