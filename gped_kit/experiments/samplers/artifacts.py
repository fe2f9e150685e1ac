"""What notebook 10 writes to ``figures/`` and tests on its results (:mod:`gped_kit.experiments.artifacts`,
:mod:`gped_kit.experiments.checks`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare
from ..checks import Check, Role, declare_checks

ARTIFACTS = declare(
    Artifact("winners", Kind.TABLE, "10_samplers_{profile}_winners",
             "Which teacher sampler comes closest to Table 1 at equal work, per quantity ({profile} profile)",
             "the sampler study (store kind chain)"),
    Artifact("table", Kind.TABLE, "10_samplers_{profile}_table",
             "Each candidate sampler's last log point, seconds and ratio to the paper's Table 1 ({profile} profile)",
             "the sampler study (store kind chain)"),
    Artifact("curves", Kind.FIGURE, "10_samplers_{profile}_curves",
             "Table 1's quantities over the steps for every candidate sampler ({profile} profile)",
             "the sampler study (store kind chain)"),
    Artifact("profiles_table", Kind.TABLE, "10_samplers_profiles_table",
             "The sampler study's candidates under every stored profile", "the store's chains of every profile"),
    Artifact("profiles_winners", Kind.TABLE, "10_samplers_profiles_winners",
             "The sampler study's winners under every stored profile", "the store's chains of every profile"),
)

CHECKS = declare_checks(
    Check("lowest", "{quantity}: best (lowest; a skill: highest) at equal teacher work over the seeds", Role.FINDING),
    Check("best_vs_reference", "best teacher NLL at least 5% below {reference} at equal work", Role.FINDING),
    Check("no_drift", "every candidate's recent-window NLL <= its all-sample NLL + 0.005 (no chain drifting "
                      "away)", Role.FINDING),
)
