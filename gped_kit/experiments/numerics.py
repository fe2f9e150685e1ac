"""The numerics version of every kind of stored result: what a key says about the code that computed it.

An entry of the results store (:mod:`gped_kit.experiments.store`) is keyed by its kind, the record of
its configuration (with the data's identity) and its *numerics code* (:func:`numerics_code`): the
declared versions in :data:`NUMERICS` of the numerics it is computed with, its own kind's and those of
the results it is derived from (:data:`KEYED_BY`: a search is keyed by the chain's version and the
search's). The code's text does not count, so a change that leaves every number as it was -- a renamed
variable, merged helpers, a flat parameter buffer, a faster kernel with the same result -- re-keys
nothing, and the stored results stay valid.

**The one rule: a change that moves a number bumps its kind's version.** The golden tests
(``tests/test_golden.py``, in ``make test``) compute a short version of every kind of result the store
holds and compare its numbers with the values recorded for the current versions
(``tests/golden/<kind>-v<version>/``); when numbers move under an unchanged version they fail, naming
the kind and the version to bump. Bumping a version re-keys every result of that kind (and of the kinds
keyed by it), so they are recomputed instead of reused; the golden values of the new version are
recorded by the next run of the golden tests (docs/store.md, "Changing the numerics").

Version 1 of each kind is the numerics of the code fingerprints in :data:`LEGACY_CODES`, which keyed
the store before versions did; ``python -m gped_kit.cli.store rekey`` moves entries made by that code
to their version-1 keys without recomputing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: The declared numerics version of each kind of computation; what each covers:
#:
#: * ``chain``: Algorithm 1's chains and their students -- the samplers, targets, estimators, losses,
#:   metrics and uncertainties of ``core``, the engine, the models, the data's preparation and the
#:   baselines (EnD2 students);
#: * ``search``: Experiment 3's searches on a chain -- pruning, fine-tuning and the cost counts of
#:   ``models.cost`` and ``models.pruning``, with ``experiment3.settings/tasks/finetune/search``;
#: * ``experiment4``: Experiment 4's downstream evaluation of a chain's students;
#: * ``comparison``: Hydra trained on a chain's snapshots and the comparison tables, on MNIST and the
#:   spiral (``baselines.hydra``, ``experiments.comparison``);
#: * ``toy``: the thesis' toy posteriors and their online and batch distillation (``toys``, ``core``).
NUMERICS: Mapping[str, int] = MappingProxyType({
    "chain": 1,
    "search": 1,
    "experiment4": 1,
    "comparison": 1,
    "toy": 1,
})

#: The kinds of stored result (the store's ``<kind>/`` folders) and the numerics each is keyed by: its
#: own, after those of the results it is derived from.
KEYED_BY: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "chain": ("chain",),
    "search": ("chain", "search"),
    "experiment4": ("chain", "experiment4"),
    "comparison": ("chain", "comparison"),
    "spiral": ("chain", "comparison"),
    "toy": ("toy",),
})

#: Per kind of stored result, the code fingerprint (SHA-256 of the numerics modules' syntax trees, the
#: keys of gped-kit up to 2026-11-27) whose numbers are version 1 of :data:`KEYED_BY`'s numerics.
LEGACY_CODES: Mapping[str, str] = MappingProxyType({
    "chain": "7e136db62c6c177f",
    "search": "9847ffb6c59de4c4",
    "experiment4": "073e1aea0222cba0",
    "comparison": "cc0746bfab10822d",
    "spiral": "cc0746bfab10822d",
    "toy": "efd7c5598d549a98",
})


def check_kind(kind: str) -> str:
    """``kind`` if it is a kind of stored result; ``ValueError`` naming the kinds otherwise."""
    if kind not in KEYED_BY:
        raise ValueError(f"kind={kind!r} is not a kind of stored result; allowed: {sorted(KEYED_BY)}")
    return kind


def numerics_code(kind: str) -> str:
    """The numerics code of ``kind``'s entries under this checkout, e.g. ``"chain=1,search=1"``: the
    versions of :data:`KEYED_BY` ``[kind]``, read from :data:`NUMERICS`."""
    return ",".join(f"{part}={NUMERICS[part]}" for part in KEYED_BY[check_kind(kind)])


def version_parts(kind: str) -> dict[str, int]:
    """The versions ``kind``'s entries are keyed by under this checkout (``{"chain": 1, "search": 1}``)."""
    return {part: NUMERICS[part] for part in KEYED_BY[check_kind(kind)]}


__all__ = ["NUMERICS", "KEYED_BY", "LEGACY_CODES", "check_kind", "numerics_code", "version_parts"]
