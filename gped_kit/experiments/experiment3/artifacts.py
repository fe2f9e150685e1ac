"""What notebook 05 writes to ``figures/`` (:mod:`gped_kit.experiments.artifacts`)."""

from __future__ import annotations

from ..artifacts import Artifact, Kind, declare

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
