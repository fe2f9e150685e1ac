"""The results store from the command line: which entries does this checkout's code no longer ask for?

After a change that re-keys results (docs/store.md: a change to the numerics code re-keys every chain),
the store holds each result twice: under the old code and under the new. No notebook of the new code
asks for the old entries; they are *superseded*, and the merge of such a change removes them from git::

    python -m gped_kit.cli.store stale                     # one entry folder per line
    git rm -r -q $(python -m gped_kit.cli.store stale)     # after the new entries are all in

An entry is stale when its code differs from the fingerprint its kind is keyed by under this checkout
(:data:`gped_kit.experiments.registry.RESULT_CODES`); incomplete entries (checkpoints of chains in progress)
are never listed, and neither are entries of a kind the registry does not know, which are named on standard
error with exit status 1, so that a new kind of result cannot be removed by mistake.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Callable

from ..experiments.registry import RESULT_CODES
from ..experiments.store import ResultsStore


def stale_entries(results: Path, codes: Mapping[str, Callable[[], str]] = RESULT_CODES,
                  ) -> tuple[list[Path], list[str]]:
    """The complete entry folders of ``results`` whose code is not their kind's current code (in the
    store's order: by kind, then key), and the kinds found that ``codes`` does not know."""
    current = {kind: code() for kind, code in codes.items()}
    entries = ResultsStore(results).entries()
    unknown = sorted({e.kind for e in entries if e.kind not in current})
    return [e.path for e in entries if e.kind in current and e.code != current[e.kind]], unknown


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.store",
                                     description="The results store: entries this code no longer asks for.")
    sub = parser.add_subparsers(dest="command", required=True)
    stale = sub.add_parser("stale", help="list the entry folders superseded under this checkout's code")
    stale.add_argument("--results", type=Path, default=Path("results"), help="the store (default: %(default)s)")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(f"--results {str(args.results)!r}: no such folder")
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
