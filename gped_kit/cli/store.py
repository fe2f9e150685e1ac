"""The results store from the command line: which entries does this checkout no longer ask for, which
does it ask for that the store lacks, and moving entries made before keys followed numerics versions.

After a numerics version is bumped (:mod:`gped_kit.experiments.numerics`, docs/store.md), the store holds
the results of that kind twice: under the old version and under the new. No notebook of the new code asks
for the old entries; they are *superseded*, and the merge of such a change removes them from git::

    python -m gped_kit.cli.store stale                     # one entry folder per line
    git rm -r -q $(python -m gped_kit.cli.store stale)     # after the new entries are all in

An entry is stale when its numerics code differs from the one its kind is keyed by under this checkout
(:func:`~gped_kit.experiments.numerics.numerics_code`); incomplete entries (checkpoints of chains in
progress) are never listed, and neither are entries of a kind the numerics do not know, which are named on
standard error with exit status 1, so that a new kind of result cannot be removed by mistake.

Before that merge, the other half of the question: is every result the notebooks show stored under the new
numerics? ::

    python -m gped_kit.cli.store missing                   # every notebook, every profile it shows
    python -m gped_kit.cli.store missing 06 --profile seeds

lists, per notebook and profile (its experiment's ``shown_profiles``), what a completed run would have stored
and the store lacks under this checkout's numerics (:meth:`gped_kit.experiments.frame.Experiment.missing`:
chains, searches, evaluations,
comparisons, toys), with the batch command that computes it; exit status 1 when anything is missing.
Chains of data sets absent here (CIFAR-10 offline) are not expected.

A store made before keys followed numerics versions (keyed by code fingerprints) keeps its results::

    python -m gped_kit.cli.store rekey

moves every entry made by the code whose numbers version 1 declares
(:data:`~gped_kit.experiments.numerics.LEGACY_CODES`) to its version-1 key, chains first (the derived
entries' tables name their chain's key), without recomputing anything; entries of other code are left
where they are (``stale`` lists them).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from ..experiments.frame import absent_datasets, batch_command
from ..experiments.numerics import KEYED_BY, LEGACY_CODES, numerics_code
from ..experiments.registry import NOTEBOOKS, notebook
from ..experiments.store import ResultsStore


def stale_entries(results: Path) -> tuple[list[Path], list[str]]:
    """The complete entry folders of ``results`` whose numerics code is not their kind's under this checkout
    (in the store's order: by kind, then key), and the kinds found that the numerics do not know."""
    current = {kind: numerics_code(kind) for kind in KEYED_BY}
    entries = ResultsStore(results).entries()
    unknown = sorted({e.kind for e in entries if e.kind not in current})
    return [e.path for e in entries if e.kind in current and e.code != current[e.kind]], unknown


def missing_results(results: Path, notebooks: Sequence[str] = (), profiles: Sequence[str] = (),
                    absent: Collection[str] = ()) -> dict[tuple[str, str], list[str]]:
    """Per (notebook, profile), what a completed run would have stored and ``results`` lacks under this
    code (:meth:`~gped_kit.experiments.frame.Experiment.missing`; empty lists included). ``notebooks``:
    names or numbers (default: every registered notebook with profiles); ``profiles``: the profiles to
    check (default: each notebook's ``shown_profiles``); a
    profile a notebook does not have is a ``ValueError`` naming the ones it has."""
    entries = [notebook(name) for name in notebooks] if notebooks else [e for e in NOTEBOOKS.values() if e.profiles]
    store = ResultsStore(results)
    out: dict[tuple[str, str], list[str]] = {}
    for entry in entries:
        if not entry.profiles:
            raise ValueError(f"notebook {entry.name!r} has no profiles and stores nothing of its own")
        for profile in profiles or entry.shown_profiles:
            if profile not in entry.profiles:
                raise ValueError(f"--profile {profile!r}: notebook {entry.name} has the profiles "
                                 f"{sorted(entry.profiles)}")
            out[(entry.name, profile)] = entry.missing(store, entry.settings(profile), absent)
    return out


def rekey_store(results: Path, legacy: Mapping[str, str] = LEGACY_CODES) -> dict[str, dict[str, str]]:
    """Move the entries of ``results`` made by the code fingerprints ``legacy`` (per kind) to their keys under
    this checkout's numerics (:meth:`~gped_kit.experiments.store.ResultsStore.rekey`), chains first so that the
    derived entries' tables can name their chain's new key; per kind, {old key: new key}."""
    store = ResultsStore(results)
    moved: dict[str, dict[str, str]] = {}
    chain_keys: dict[str, str] = {}
    for kind in sorted(legacy, key=lambda k: (k != "chain", k)):
        moved[kind] = store.rekey(kind, legacy[kind], key_map=chain_keys)
        if kind == "chain":
            chain_keys = dict(moved[kind])
    return moved


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.store", description="The results store: "
                                     "entries this code no longer asks for, or asks for and lacks.")
    sub = parser.add_subparsers(dest="command", required=True)
    stale = sub.add_parser("stale", help="list the entry folders superseded under this checkout's numerics")
    stale.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    rekey = sub.add_parser("rekey", help="move the entries made before keys followed numerics versions to their "
                                         "version-1 keys, without recomputing")
    rekey.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    missing = sub.add_parser("missing", help="list what the notebooks' profiles need and the store lacks under "
                                             "this checkout's numerics")
    missing.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                         help="notebook names or numbers (default: every notebook with profiles)")
    missing.add_argument("--profile", action="append", default=[], dest="profiles",
                         help="a profile to check (repeatable; default: the profiles each notebook shows)")
    missing.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(f"--results {str(args.results)!r}: no such folder")
    if args.command == "rekey":
        for kind, keys in rekey_store(args.results).items():
            print(f"{kind}: {len(keys)} entries of {LEGACY_CODES[kind]} now keyed by {numerics_code(kind)}")
        return 0
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
        print(f"kinds of result the numerics do not know (none of their entries listed): {', '.join(unknown)}; "
              "add them to gped_kit.experiments.numerics.KEYED_BY", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
