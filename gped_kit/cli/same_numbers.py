"""Does a code change leave the numbers unchanged? One notebook's chains under two versions of the code.

A change to the numerics code (``core``, ``engine``, ``models``, ``data``, ``baselines``) re-keys every
stored chain (docs/store.md), so the committed entries cannot tell whether it also changed a result; nor
can a recomputation compared with them, because this project's machines differ in the low-order bits
from one host to the next. This tool runs the same chains under the old code (a git revision, checked
out into a temporary worktree) and under the code of this checkout, on this machine, each into its own
scratch store, and compares every stored table bit for bit, timing columns aside::

    python -m gped_kit.cli.same_numbers --old main                       # notebook 00's chain
    python -m gped_kit.cli.same_numbers --old main~2 --notebook 07_hydra_comparison --chains 0
    python -m gped_kit.cli.same_numbers --old main -p num_iterations=200 --notebook 01_experiment1

Exit status 0 when every table of every chain is identical, 1 when one differs (the first differing
column and row are printed), 2 on usage errors. The two sides run one after another, never side by side
(two torch processes on two cores slow each other), in subprocesses whose ``PYTHONPATH`` is their tree.
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

import pandas as pd

# Absolute imports: a side runs this file by its path with the other tree first on PYTHONPATH, so that
# the kit it imports is that tree's (an older revision need not have this module).
from gped_kit.cli.batch import parse_override
from gped_kit.experiments.chains import run_chains
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


def compare_tables(old: pd.DataFrame, new: pd.DataFrame) -> str | None:
    """None when the two tables are identical bit for bit (:data:`TIMING_COLUMNS` aside); else the first
    difference, in words."""
    old = old.drop(columns=[c for c in TIMING_COLUMNS if c in old])
    new = new.drop(columns=[c for c in TIMING_COLUMNS if c in new])
    if list(old.columns) != list(new.columns):
        return f"columns differ: {sorted(set(old.columns) ^ set(new.columns))}"
    if len(old) != len(new):
        return f"{len(old)} rows against {len(new)}"
    for column in old.columns:
        a, b = old[column], new[column]
        same = (a == b) | (a.isna() & b.isna())
        if not same.all():
            row = int((~same).to_numpy().nonzero()[0][0])
            return f"column {column!r}, row {row}: {a.iloc[row]!r} (old) against {b.iloc[row]!r} (new)"
    return None


def compare_entries(old_dir: Path, new_dir: Path, tables: Sequence[str] = CHAIN_TABLES) -> dict[str, str | None]:
    """:func:`compare_tables` for each of ``tables`` of two entry directories."""
    return {name: compare_tables(pd.read_csv(Path(old_dir) / f"{name}.csv"), pd.read_csv(Path(new_dir) / f"{name}.csv"))
            for name in tables}


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
                                                 "checkout, on this machine, and compare their tables bit for bit.")
    parser.add_argument("--old", help="the git revision to compare with (a branch, tag or commit)")
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
        overrides = {}
        for text in args.param:
            override = parse_override(text)
            if override.notebook is not None:
                raise ValueError(f"-p {text!r}: give KEY=VALUE; the notebook is --notebook")
            overrides[override.key] = override.value
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
    if not args.old:
        parser.error("--old is required: the git revision to compare this checkout with")
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
