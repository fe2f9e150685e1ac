"""What notebook 05 writes to ``figures/`` and tests on its results (:mod:`gped_kit.experiments.artifacts`,
:mod:`gped_kit.experiments.checks`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare
from ..checks import Check, Role, declare_checks

ARTIFACTS = declare(
    Artifact("figure", Kind.FIGURE, "fig{figure}_experiment3_{model}_{metric}_{profile}",
             "Figure {figure}: {model} students' {metric} against FLOPs and parameters, both searches "
             "({profile} profile)", "the searches (store kind search)"),
    Artifact("students", Kind.TABLE, "experiment3_students_{model}_{profile}",
             "Every searched {model} student with its cost and metrics ({profile} profile)",
             "the searches (store kind search)"),
    Artifact("frontier", Kind.TABLE, "experiment3_frontier_{model}_{profile}",
             "The {model} students on the speed–storage–accuracy Pareto frontier ({profile} profile)",
             "the searches (store kind search)"),
    Artifact("below_floor", Kind.TABLE, "experiment3_below_floor_{profile}",
             "Searched students that do not beat the best constant prediction ({profile} profile)",
             "the searches (store kind search)"),
    Artifact("vs_paper", Kind.TABLE, "experiment3_vs_paper_{model}_{metric}_{profile}",
             "The paper's Experiment 3 statements on {model}'s {metric}, judged on ours ({profile} profile)",
             "the searches (store kind search)"),
    Artifact("fair", Kind.TABLE, "experiment3_fair_{profile}",
             "Grid and group ℓ1/ℓ2 searches fine-tuned alike, without dropout ({profile} profile)",
             "the fair searches (store kind search)"),
    Artifact("explorer", Kind.SNAPSHOT, "explorer_pareto_{model}_{profile}",
             "The Pareto explorer's opening view of the {model} searches ({profile} profile)",
             "the searches (store kind search)"),
    Artifact("profiles", Kind.TABLE, "experiment3_vs_paper_profiles",
             "The paper's Experiment 3 statements under every stored profile", "the store's searches of every profile"),
)

CHECKS = declare_checks(
    Check("search_finished", "{model}: search finished", Role.INVARIANT),
    Check("search_finished_or_missing", "{model}: search finished or reported missing data", Role.INVARIANT),
    Check("beats_base", "{model}: a searched student other than the base beats the base ({metric})", Role.FINDING),
    Check("below_frontier", "{model}: group l1/l2 students (fine-tuned, no dropout; the grid's not) better than the "
                            "exhaustive frontier at their FLOPs ({metric})", Role.FINDING),
    Check("pruning_exact", "{model}: every pruned network equals its masked original", Role.INVARIANT),
    Check("pruning_removed", "{model}: pruning removed units or channels", Role.FINDING),
    Check("pruning_never_grows", "{model}: no pruned student is larger than its starting network, and those "
                                 "with units removed are smaller", Role.INVARIANT),
    Check("wider_beats_base", "{model}: a searched student (grid or pruned, of any width) beats the base student "
          "(NLL)", Role.FINDING),
    Check("explorer_agrees", "{model}: the explorer's best student is the frontier table's", Role.INVARIANT),
)
