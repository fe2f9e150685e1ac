"""The results store from the command line: which entries does this checkout's code no longer ask for,
and which does it ask for that the store lacks?

After a change that re-keys results (docs/store.md: a change to the numerics code re-keys every chain),
the store holds each result twice: under the old code and under the new. No notebook of the new code
asks for the old entries; they are *superseded*, and the merge of such a change removes them from git::

    python -m gped_kit.cli.store stale                     # one entry folder per line
    git rm -r -q $(python -m gped_kit.cli.store stale)     # after the new entries are all in

An entry is stale when its code differs from the fingerprint its kind is keyed by under this checkout
(:data:`gped_kit.experiments.registry.RESULT_CODES`); incomplete entries (checkpoints of chains in progress)
are never listed, and neither are entries of a kind the registry does not know, which are named on standard
error with exit status 1, so that a new kind of result cannot be removed by mistake.

Before that merge, the other half of the question: is every result the notebooks show stored under the new
code? ::

    python -m gped_kit.cli.store missing                   # every notebook, every profile it shows
    python -m gped_kit.cli.store missing 06 --profile seeds

lists, per notebook and profile (:data:`gped_kit.experiments.summaries.SHOWN_PROFILES`; ``default`` for a
notebook that shows one), what a completed run would have stored and the store lacks under this checkout's
code (:meth:`gped_kit.experiments.registry.Notebook.missing`: chains, searches, evaluations, comparisons,
toys), with the batch command that computes it; exit status 1 when anything is missing. Chains of data sets
absent here (CIFAR-10 offline) are not expected.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Callable

from ..experiments.registry import NOTEBOOKS, RESULT_CODES, absent_datasets, notebook
from ..experiments.store import ResultsStore
from ..experiments.summaries import SHOWN_PROFILES, batch_command


def stale_entries(results: Path, codes: Mapping[str, Callable[[], str]] = RESULT_CODES,
                  ) -> tuple[list[Path], list[str]]:
    """The complete entry folders of ``results`` whose code is not their kind's current code (in the
    store's order: by kind, then key), and the kinds found that ``codes`` does not know."""
    current = {kind: code() for kind, code in codes.items()}
    entries = ResultsStore(results).entries()
    unknown = sorted({e.kind for e in entries if e.kind not in current})
    return [e.path for e in entries if e.kind in current and e.code != current[e.kind]], unknown


def missing_results(results: Path, notebooks: Sequence[str] = (), profiles: Sequence[str] = (),
                    absent: Collection[str] = ()) -> dict[tuple[str, str], list[str]]:
    """Per (notebook, profile), what a completed run would have stored and ``results`` lacks under this
    code (:meth:`~gped_kit.experiments.registry.Notebook.missing`; empty lists included). ``notebooks``:
    names or numbers (default: every registered notebook with profiles); ``profiles``: the profiles to
    check (default: each notebook's :data:`SHOWN_PROFILES`, ``("default",)`` where it shows none); a
    profile a notebook does not have is a ``ValueError`` naming the ones it has."""
    entries = [notebook(name) for name in notebooks] if notebooks else [e for e in NOTEBOOKS.values() if e.profiles]
    store = ResultsStore(results)
    out: dict[tuple[str, str], list[str]] = {}
    for entry in entries:
        if not entry.profiles:
            raise ValueError(f"notebook {entry.name!r} has no profiles and stores nothing of its own")
        for profile in profiles or SHOWN_PROFILES.get(entry.name, ("default",)):
            if profile not in entry.profiles:
                raise ValueError(f"--profile {profile!r}: notebook {entry.name} has the profiles "
                                 f"{sorted(entry.profiles)}")
            out[(entry.name, profile)] = entry.missing(store, entry.settings(profile), absent)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.store", description="The results store: "
                                     "entries this code no longer asks for, or asks for and lacks.")
    sub = parser.add_subparsers(dest="command", required=True)
    stale = sub.add_parser("stale", help="list the entry folders superseded under this checkout's code")
    stale.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    missing = sub.add_parser("missing", help="list what the notebooks' profiles need and the store lacks under "
                                             "this checkout's code")
    missing.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                         help="notebook names or numbers (default: every notebook with profiles)")
    missing.add_argument("--profile", action="append", default=[], dest="profiles",
                         help="a profile to check (repeatable; default: the profiles each notebook shows)")
    missing.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(f"--results {str(args.results)!r}: no such folder")
    if args.command == "missing":
        try:
            absent = absent_datasets()
            gaps = missing_results(args.results, args.notebooks, args.profiles, absent)
        except ValueError as exc:
            parser.error(str(exc))
        if absent:
            print(f"data sets absent here (their chains are not expected): {', '.join(sorted(absent))}",
                  file=sys.stderr)
        for (name, profile), lines in gaps.items():
            if lines:
                print(f"{name}, profile {profile}: {len(lines)} missing ({batch_command(name, profile)})")
                print("\n".join(f"    {line}" for line in lines))
        total = sum(map(len, gaps.values()))
        print(f"{total} missing in {sum(bool(v) for v in gaps.values())} of {len(gaps)} notebook profiles"
              if total else f"complete: all {len(gaps)} notebook profiles stored under this code")
        return 1 if total else 0
    found, unknown = stale_entries(args.results)
    for path in found:
        print(path.as_posix())
    if unknown:
        print(f"kinds of result the registry does not know (none of their entries listed): {', '.join(unknown)}; "
              "add them to gped_kit.experiments.registry.RESULT_CODES", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
