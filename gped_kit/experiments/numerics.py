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
the store before versions did (later versions are listed with :data:`NUMERICS`);
``python -m gped_kit.cli.store rekey`` moves entries made by that code to their version-1 keys without
recomputing them.
"""

from __future__ import annotations

import re
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
#:
#: History: ``comparison`` 2 (2026-11-27): a student's updates in the budget columns (``train_steps``,
#: ``inputs_seen``) are the engine's own count, which leaves out a cyclical schedule's exploration phases
#: (the ``long`` profile's GPED students took 2,400 updates, not the 7,499 that version 1 wrote).
#: ``comparison`` 3 (2026-11-29): every distilled method's skill over the best constant prediction
#: (``comparison.method_skill``): a result without it counts no student, so version 2's are computed again.
#: ``toy`` 2 (2026-11-29): every toy student's skill over the best constant prediction (the logistic
#: regression's constant p(y = 1 | x), the mixture's constant density on the grid); the distances are unchanged.
#: ``toy`` 3 (2026-11-30): every logistic-regression student's derivative square error against p_MC on its own
#: generator's inputs (``dse_objective``): "DSE closer than CE" counts a comparison only where the DSE student
#: minimised its own loss below the CE student's, so a result without it judges none; the rest is unchanged.
NUMERICS: Mapping[str, int] = MappingProxyType({
    "chain": 1,
    "search": 1,
    "experiment4": 1,
    "comparison": 3,
    "toy": 3,
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


#: Values on a discrete grid: accuracies (counts of test inputs) and rank statistics (AUROC, nDCG), which a change
#: in the last bits of an output can move by a whole step (one input changing class or rank).
DISCRETE_VALUES = re.compile(r"accuracy|auroc|ndcg")

#: How far the same short computation (the golden probes: tens of steps) lies from itself on two CPUs, as
#: numpy ``isclose`` tolerances (|a - b| <= atol + rtol |b|), for the values on no discrete grid and on one
#: (:data:`DISCRETE_VALUES`). Measured with torch's AVX2 against its scalar kernels on one x86-64 CPU: at
#: most 6.6e-4 absolute and 1.4e-4 relative, and 1.7e-3 on the grid (two of 1,197 test inputs changing
#: class); these hold that with a margin of 3 to 4 (``tests/test_golden.py``).
SHORT_RUN_TOLERANCES: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "value": MappingProxyType({"atol": 1e-4, "rtol": 5e-4}),
    "discrete": MappingProxyType({"atol": 5e-3, "rtol": 0.0}),
})

#: How far a chain of thousands of steps lies from itself on two CPUs, in its final numbers (the ``summary``
#: table), as numpy ``isclose`` tolerances: a chain amplifies the last-bit differences of the first steps
#: (SG-MCMC is chaotic), so two hosts agree on its statistics, not its digits. Measured by recomputing
#: committed chains on another 2-core x86-64 host (notebook 00's 5,000 steps, two of notebook 10's
#: 3,000): at most 8.6e-3 absolute (a minibatch training loss of 0.23) and 5.2% relative (a dropout
#: student's NLL of 0.10); these hold that with a margin of 2 to 3
#: (``python -m gped_kit.cli.same_numbers --stored``).
LONG_CHAIN_TOLERANCE: Mapping[str, float] = MappingProxyType({"atol": 0.01, "rtol": 0.05})


def check_kind(kind: str) -> str:
    """``kind`` if it is a kind of stored result; ``ValueError`` naming the kinds otherwise."""
    if kind not in KEYED_BY:
        raise ValueError(f"kind={kind!r} is not a kind of stored result; allowed: {sorted(KEYED_BY)}")
    return kind


def numerics_code(kind: str) -> str:
    """The numerics code of ``kind``'s entries under this checkout, e.g. ``"chain=1,search=1"``: the
    versions of :data:`KEYED_BY` ``[kind]``, read from :data:`NUMERICS`."""
    return ",".join(f"{part}={NUMERICS[part]}" for part in KEYED_BY[check_kind(kind)])


__all__ = ["NUMERICS", "KEYED_BY", "LEGACY_CODES", "DISCRETE_VALUES", "SHORT_RUN_TOLERANCES", "LONG_CHAIN_TOLERANCE",
           "check_kind", "numerics_code"]
