"""Table 1 from the chains' student rows, beside the paper's, per profile; the names of the tables it writes."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ...core.targets import SKILL_FLOOR
from .. import paper_tables
from ..frame import Summary, side_by_side
from ..verdicts import (
    NO_EVIDENCE,
    NOT_SEPARABLE,
    compare,
    lowest_known,
    no_evidence,
    separable,
    skill_unknown,
    student_skill,
    unskilled,
)
from .artifacts import ARTIFACTS

#: Table 1's quantities: the teacher ensemble's NLL, the predictive U_s student's NLL, the entropy
#: U_o student's MAE (the paper's Table 1), and the two accuracies (ours only).
TABLE1_METRICS = ("teacher_nll", "student_nll", "entropy_mae")
#: The tables notebook 01 writes to ``figures/`` (``.csv`` and ``.md``): Table 1 of a profile, and every
#: profile's beside the paper's. The README's rows read them (:mod:`.notebook`).
TABLE1 = ARTIFACTS["table1"].file
TABLE1_PROFILES = ARTIFACTS["profiles"].file
#: The expected calibration error of Table 1's teachers and predictive students, per profile.
CALIBRATION_TABLE = ARTIFACTS["calibration"].file
#: Label of the paper's rows in :func:`table1_by_profile`.
PAPER_TABLE1 = "paper (T = 10^6)"
#: Label of the rows of the paper profile's chains run on a GPU (committed under docs/device-runs) in
#: :func:`table1_by_profile`.
GPU_TABLE1 = "paper profile on a GPU (T = 10^6)"


def experiment1_table(table: pd.DataFrame) -> pd.DataFrame:
    """Table 1 from a grid's student rows, one row per model: the teacher NLL, the predictive
    student's NLL (U_s, as in the paper's Table 1), the entropy student's MAE (U_o) and the two
    accuracies, each the mean over the seeds run, with its standard deviation (``_std``, NaN for one
    seed) and ``seeds``, beside the paper's numbers (``_paper``). ``<metric>_vs_paper`` says how our
    mean compares, in the verdict words of the README (:func:`versus_paper`): ``"within 10%"`` (two-sided),
    ``"better"``, ``"worse"``, ``"not separable"`` when the mean lies closer to a 10% bound than the standard
    deviation over the seeds, ``"no evidence"`` when a seed's student is not known to beat the best constant
    prediction, ``"—"`` without a run. ``nll_gap`` (``_std``): the predictive student's NLL less its teacher's,
    per seed, then its mean (standard deviation) over the seeds. ``<metric>_skill`` is the lowest skill over the
    seeds of the students behind it (:func:`~gped_kit.experiments.verdicts.student_skill`: their error against the
    teacher's expectation beside the best constant prediction's; NaN for chains stored before every built-in target
    reported it)."""
    paper = paper_tables.table1().set_index("model")[list(TABLE1_METRICS)].add_suffix("_paper")
    if table.empty:
        return paper.reset_index()
    pred = table[(table["target"] == "predictive") & (table["estimator"] == "U_s")]
    ent = table[(table["target"] == "entropy") & (table["estimator"] == "U_o")]
    per_seed = pred.set_index(["model", "seed"])[["teacher_nll", "student_nll", "teacher_accuracy",
                                                   "student_accuracy"]]
    per_seed = per_seed.join(ent.set_index(["model", "seed"])[["entropy_mae"]], how="outer")
    per_seed["nll_gap"] = per_seed["student_nll"] - per_seed["teacher_nll"]  # per seed, so its spread is the gap's
    grouped = per_seed.groupby(level="model")
    ours = grouped.mean().join(grouped.std().add_suffix("_std")).join(grouped.size().rename("seeds"))
    for metric, rows in (("student_nll", pred), ("entropy_mae", ent)):  # the skill of the student behind it
        ours[f"{metric}_skill"] = student_skill(rows).groupby(rows["model"]).agg(lowest_known)
    out = ours.join(paper, how="outer")
    for metric in TABLE1_METRICS:
        out[f"{metric}_vs_paper"] = [judge_table1(row, metric) for _, row in out.iterrows()]
    columns = [c for metric in TABLE1_METRICS
               for c in (metric, f"{metric}_std", f"{metric}_paper", f"{metric}_vs_paper")
               + ((f"{metric}_skill",) if f"{metric}_skill" in out else ())]
    columns += ["nll_gap", "nll_gap_std", "teacher_accuracy", "teacher_accuracy_std", "student_accuracy",
                "student_accuracy_std", "seeds"]
    return out[columns].reset_index()


def entropy_skill_finding(table1: pd.DataFrame, models: tuple[str, ...] = ("fcnn", "cnn_mnist")) -> bool | str:
    """Whether every one of ``models``' expected-entropy students in Table 1 (:func:`experiment1_table`, the lowest
    skill over its seeds, ``entropy_mae_skill``) beats the best constant prediction by the skill floor
    (:data:`~gped_kit.core.targets.SKILL_FLOOR`): True or False; a sentence instead where no model has a row or a
    row's skill was not stored (chains stored before every target reported it): unknown, not passed."""
    rows = table1[table1["model"].isin(models)].dropna(subset=["entropy_mae"])
    if rows.empty:
        return "no entropy student stored"
    skill = rows["entropy_mae_skill"] if "entropy_mae_skill" in rows else pd.Series(float("nan"), index=rows.index)
    unknown = rows.loc[skill.isna(), "model"].tolist()
    if unknown:
        return f"skill not stored for {', '.join(unknown)}"
    return bool((skill >= SKILL_FLOOR).all())


#: Table 1's quantities as the notebook's table and figure name them.
METRIC_NAMES = {"teacher_nll": "teacher NLL", "student_nll": "student NLL (U_s)", "entropy_mae": "entropy MAE (U_o)"}
#: Table 1's models in the paper's order, with their names in tables and figures.
MODEL_NAMES = {"fcnn": "FCNN", "cnn_mnist": "CNN-MNIST", "cnn_cifar10": "CNN-CIFAR-10"}


def table1_result(table1: pd.DataFrame, profile: str) -> str:
    """The notebook's result in one paragraph (Markdown), from Table 1 (:func:`experiment1_table`): per
    MNIST model with a run, the predictive student's NLL less its teacher's (± its standard deviation over the
    seeds, where the table has it and two or more seeds ran) beside the paper's, a model whose predictive student
    is no evidence marked so; then how many of the Table 1 values are within 10% of the paper's (two-sided,
    :func:`~gped_kit.experiments.verdicts.within`), better or worse, and the teacher's NLL beside the paper's (what
    the others are judged against). It states the gaps; it does not call them small."""
    t = table1.set_index("model")
    ran = [m for m in MODEL_NAMES if m in t.index and pd.notna(t.loc[m, "teacher_nll"])]
    if not ran:
        return f"**Result** ({profile!r} profile): no chain of ours has run; the table shows the paper's numbers."
    seeds = min(int(t.loc[m, "seeds"]) for m in ran)

    def gap(m: str) -> str:
        row = t.loc[m]
        value = row["nll_gap"] if "nll_gap" in row.index else row["student_nll"] - row["teacher_nll"]
        spread = row.get("nll_gap_std", math.nan)
        shown = f"{value:+.4f}" + (f" ± {spread:.4f}" if pd.notna(spread) and row["seeds"] >= 2 else "")
        paper = f"the paper's {row['student_nll_paper'] - row['teacher_nll_paper']:+.3f}"
        return (f"{MODEL_NAMES[m]} {shown} ({paper}" + ("; no evidence, its student not known to beat the best "
                                                       "constant prediction)" if no_evidence(row, "student_nll")
                                                       else ")"))

    gaps = ", ".join(gap(m) for m in ran)
    # as the table judges them: with the seeds' spread (not separable) and the students' skill (no evidence)
    outcome = [judge_table1(t.loc[m], k) for m in ran for k in TABLE1_METRICS]
    counted = {o: outcome.count(o) for o in ("within 10%", "better", "worse", NOT_SEPARABLE, "no evidence")}
    learnt_nothing = [f"{MODEL_NAMES[m]} {METRIC_NAMES[k]}" for m in ran for k in TABLE1_METRICS
                      if no_evidence(t.loc[m], k) and not skill_unknown(t.loc[m], k)]
    not_stored = [f"{MODEL_NAMES[m]} {METRIC_NAMES[k]}" for m in ran for k in TABLE1_METRICS
                  if skill_unknown(t.loc[m], k)]
    why = ([f"no better than the best constant prediction ({', '.join(learnt_nothing)})"] if learnt_nothing else []) + (
        [f"stored without their skill over the best constant prediction ({', '.join(not_stored)})"]
        if not_stored else [])
    teachers = ", ".join(f"{MODEL_NAMES[m]} {t.loc[m, 'teacher_nll']:.4f} (the paper's "
                         f"{t.loc[m, 'teacher_nll_paper']:g})" for m in ran)
    return (f"**Result** ({profile!r} profile, {seeds} seed{'s' * (seeds > 1)}): the predictive student's (U_s) "
            f"NLL less its teacher's{' (mean ± std over the seeds)' if seeds > 1 else ''}: {gaps}. "
            f"Of the {len(outcome)} Table 1 values, {counted['within 10%']} "
            f"{'is' if counted['within 10%'] == 1 else 'are'} within "
            f"10% of the paper's, {counted['better']} better and {counted['worse']} worse"
            + (f"; {counted[NOT_SEPARABLE]} {'is' if counted[NOT_SEPARABLE] == 1 else 'are'} not separable from a "
               "bound by the seeds' spread" if counted[NOT_SEPARABLE] else "")
            + (f"; {counted['no evidence']} {'is' if counted['no evidence'] == 1 else 'are'} no evidence, "
               f"{'its student' if counted['no evidence'] == 1 else 'their students'} {' or '.join(why)}"
               if why else "")
            + f"; the teachers' NLL, against which every student is judged: {teachers}.")


def table1_display(table1: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1 for reading: ``(ours, paper_only)``. ``ours`` has a row per model with a run, FCNN before
    CNN, an integer ``seeds``, and per quantity ours ("mean ± std" over seeds) beside the paper's and
    the verdict (:func:`versus_paper`: within 10%, better, worse, not separable; and, for a student's quantity,
    its lowest skill over the best constant prediction); ``paper_only`` the models without a run (CIFAR-10 where
    its data are absent), the paper's values alone."""
    t = table1.set_index("model")
    order = [m for m in MODEL_NAMES if m in t.index] + [m for m in t.index if m not in MODEL_NAMES]
    t = t.loc[order]
    has_run = t["teacher_nll"].notna()
    ours = pd.DataFrame({"model": [MODEL_NAMES.get(m, m) for m in t.index[has_run]],
                         "seeds": t.loc[has_run, "seeds"].astype(int).to_numpy()})
    for k, name in METRIC_NAMES.items():
        mean, std = t.loc[has_run, k], t.loc[has_run, f"{k}_std"]
        ours[name] = [f"{m:.4f}" if pd.isna(s) else f"{m:.4f} ± {s:.4f}" for m, s in zip(mean, std)]
        ours[f"{name}, the paper's"] = t.loc[has_run, f"{k}_paper"].to_numpy()
        ours[f"{name}: ours vs the paper's"] = t.loc[has_run, f"{k}_vs_paper"].to_numpy()
        if f"{k}_skill" in t:  # the lowest over the seeds; below the floor the value is no evidence
            ours[f"{name}: skill"] = [f"{v:.2f}" if pd.notna(v) else "—" for v in t.loc[has_run, f"{k}_skill"]]
    paper = pd.DataFrame({"model": [MODEL_NAMES.get(m, m) for m in t.index[~has_run]]})
    for k, name in METRIC_NAMES.items():
        paper[f"{name}, the paper's"] = t.loc[~has_run, f"{k}_paper"].to_numpy()
    return ours, paper


def versus_paper(mean: float, std: float, seeds: float, paper: float) -> str:
    """Our mean over ``seeds`` beside the paper's value, where lower is better, in the README's verdict words
    (:func:`~gped_kit.experiments.verdicts.compare` with the seeds' standard deviation as the spread, known from
    two seeds on): ``"within 10%"``, ``"better"``, ``"worse"``, ``"not separable"``; ``"—"`` without a value."""
    if pd.isna(mean) or pd.isna(paper):
        return "—"
    spread = float(std) if pd.notna(std) and seeds >= 2 else None
    word = compare(float(mean), float(paper), spread=spread)
    return {"within": "within 10%", "missing": "—"}.get(word, word)


def judge_table1(row: pd.Series, metric: str) -> str:
    """The rule by which a Table 1 ``row`` (:func:`experiment1_table`) judges its ``metric`` against the paper's:
    :data:`~gped_kit.experiments.verdicts.NO_EVIDENCE` for a student's value whose skill is below the floor or not
    stored (:func:`~gped_kit.experiments.verdicts.no_evidence`), else :func:`versus_paper` on the mean,
    ``<metric>_std`` and ``seeds``: what the table's ``<metric>_vs_paper`` column and the notebook's result say."""
    if pd.notna(row[metric]) and no_evidence(row, metric):  # a student's value counts only with its skill known
        return NO_EVIDENCE
    return versus_paper(row[metric], row.get(f"{metric}_std", math.nan), row.get("seeds", 1), row[f"{metric}_paper"])


def table1_outcome(row: pd.Series, metric: str) -> str:
    """A stored Table 1 ``row``'s word on ``metric``, as readers of the table take it: its ``<metric>_vs_paper``
    column, or, for a table written without that column, :func:`judge_table1`."""
    stored = row.get(f"{metric}_vs_paper")
    return stored if isinstance(stored, str) and stored else judge_table1(row, metric)


def table1_by_profile(summaries: Mapping[str, Summary],
                      gpu: Mapping[str, Mapping[str, float]] | None = None) -> pd.DataFrame:
    """Table 1 of every profile stacked (column ``profile``), then the paper profile's chains run on a GPU
    (``gpu``: per model Table 1's ``teacher_nll``, ``student_nll`` and ``entropy_mae`` of its complete
    paper-length chain, one seed; ``profile`` = :data:`GPU_TABLE1`), then the paper's (``profile`` =
    :data:`PAPER_TABLE1`): per model with a run, the seeds, each quantity's mean and standard deviation
    over seeds and its ratio to the paper's (``<quantity> / paper``), and the chains' measured
    computing time (``seconds``, all seeds together; not recorded for the GPU's chains)."""
    metrics = list(TABLE1_METRICS)
    parts: dict[str, pd.DataFrame] = {}
    models: list[str] = []
    for profile, s in summaries.items():
        t = s.tables["table1"]
        t = t.dropna(subset=["teacher_nll"]) if "teacher_nll" in t else t.iloc[:0].reindex(columns=["model", "seeds"])
        rows = t[["model", "seeds"]].copy()
        for m in metrics:
            rows[m] = t.get(m)
            rows[f"{m}_std"] = t.get(f"{m}_std")
            rows[f"{m} / paper"] = t[m] / t[f"{m}_paper"] if m in t else None
        run_time = s.tables["run_time"].set_index("model")["seconds"] if len(s.tables["run_time"]) else \
            pd.Series(dtype=float)
        rows["seconds"] = rows["model"].map(run_time)
        parts[profile] = rows.reset_index(drop=True)
        models += [m for m in rows["model"] if m not in models]
    if gpu:
        theirs = paper_tables.table1().set_index("model")
        rows = pd.DataFrame([{"model": model, "seeds": 1} for model in gpu])
        for m in metrics:
            rows[m] = [gpu[model][m] for model in gpu]
            rows[f"{m}_std"] = float("nan")  # one seed
            rows[f"{m} / paper"] = rows[m] / theirs.loc[list(gpu), m].to_numpy()
        rows["seconds"] = float("nan")  # not recorded
        parts[GPU_TABLE1] = rows
        models += [m for m in rows["model"] if m not in models]
    paper = paper_tables.table1().set_index("model").reindex(models)[metrics].reset_index()
    parts[PAPER_TABLE1] = paper
    return side_by_side(parts)


def run_time_line(summaries: Mapping[str, Summary]) -> str:
    """One line: every profile's chains' measured computing time, all models and seeds together
    (:func:`~gped_kit.experiments.frame.chain_seconds`)."""
    parts = []
    for profile, s in summaries.items():
        seconds = float(s.tables["run_time"]["seconds"].sum()) if len(s.tables["run_time"]) else float("nan")
        chains = int(s.tables["run_time"]["chains"].sum()) if len(s.tables["run_time"]) else 0
        parts.append(f"{profile} {seconds / 60:.1f} min ({chains} chain{'s' if chains != 1 else ''})")
    return ("The chains' measured computing time, every model and seed together, as their store entries record it: "
            + "; ".join(parts) + ".")


#: The table of the U_s - U_o student NLL gap per profile (:func:`estimator_gap`), written by notebook 01.
ESTIMATOR_GAP_TABLE = ARTIFACTS["estimator_gap"].file
#: Label of the GPU chain's rows and of the paper's in :func:`estimator_gap`.
GPU_ROW, PAPER_ROW = "paper on a GPU", "the paper's (Tables 5, 6)"


def _student_updates(rows: pd.DataFrame) -> float:
    """The predictive students' updates in a chain: (T - B) / H kept steps (every chain's, for a pooled teacher
    the engine's steps)."""
    r = rows.iloc[0]
    return float((r["num_iterations"] - r["burn_in"]) // r["thinning"])


def estimator_gap(summaries: Mapping[str, Summary], gpu: Mapping[str, Mapping[str, float]] | None = None
                  ) -> pd.DataFrame:
    """The predictive students' test NLL under U_s and U_o and their gap U_s - U_o, per profile and model at
    Table 1's cell (N = 60,000, r = 0), beside what each profile does differently: chain length T, chains pooled,
    thinning H, student updates, the learning-rate halving period (teacher epochs; NaN: constant) and warm-up,
    and the seeds (the gap's mean and standard deviation over them). ``summaries``: Experiment 1's summaries per
    profile (their grids' student rows); ``gpu``: per model the paper profile's GPU chain's U_s and U_o NLL
    (``{"U_s": ..., "U_o": ...}``: one seed, T = 10^6, H = 100; with ``"skill"`` where it was stored); then the
    paper's own cells. ``skill`` is the lowest skill of the predictive students behind a row (both estimators, every
    seed; NaN where one was not stored): a row whose students are not known to beat the best constant prediction is
    no evidence. The paper's gap (FCNN 0.082 - 0.054 = 0.028) is what the table asks about: where ours is far
    smaller at every T and H here, the paper's U_o advantage is not reproduced and its cause is not among these
    settings."""
    rows = []
    for profile, s in summaries.items():
        grid = s.run
        if grid is None or grid.table.empty:
            continue
        t = grid.table
        pred = t[(t["target"] == "predictive") & (t["labelled_size"] == 60_000) & (t["mask_size"] == 0)]
        for model, part in pred.groupby("model", sort=False):
            nll = part.pivot_table(index="seed", columns="estimator", values="student_nll")
            if not {"U_s", "U_o"} <= set(nll.columns):
                continue
            gap = nll["U_s"] - nll["U_o"]
            first = part.iloc[0]
            rows.append({"profile": profile, "model": model, "T": int(first["num_iterations"]),
                         "chains": int(first["num_chains"]) if "num_chains" in part and pd.notna(first["num_chains"])
                         else 1, "H": int(first["thinning"]), "student_updates": _student_updates(part),
                         "lr_halving_epochs": first["lr_halving_epochs"],
                         "lr_warmup": first["lr_warmup"] if "lr_warmup" in part and pd.notna(first["lr_warmup"])
                         else 0, "seeds": len(gap), "student_nll_U_s": nll["U_s"].mean(),
                         "student_nll_U_o": nll["U_o"].mean(), "gap": gap.mean(), "gap_std": gap.std(),
                         "skill": lowest_known(student_skill(part))})
    for model, values in (gpu or {}).items():
        rows.append({"profile": GPU_ROW, "model": model, "T": 1_000_000, "chains": 1, "H": 100,
                     "student_updates": float((1_000_000 - 1_000) // 100), "lr_halving_epochs": 200.0,
                     "lr_warmup": 0, "seeds": 1, "student_nll_U_s": values["U_s"], "student_nll_U_o": values["U_o"],
                     "gap": values["U_s"] - values["U_o"], "gap_std": float("nan"),
                     "skill": values.get("skill", float("nan"))})
    for model in dict.fromkeys(r["model"] for r in rows):
        if model in paper_tables.MODELS:
            t = paper_tables.experiment2_table(model)
            cell = t[(t["labelled_size"] == 60_000) & (t["masking_rate"] == 0)].iloc[0]
            rows.append({"profile": PAPER_ROW, "model": model, "T": 1_000_000, "chains": 1, "H": 100,
                         "student_updates": float("nan"), "lr_halving_epochs": 200.0, "lr_warmup": 0, "seeds": 1,
                         "student_nll_U_s": cell["student_nll_U_s"], "student_nll_U_o": cell["student_nll_U_o"],
                         "gap": cell["student_nll_U_s"] - cell["student_nll_U_o"], "gap_std": float("nan")})
    return pd.DataFrame(rows)


def estimator_gap_text(gaps: pd.DataFrame) -> str:
    """One paragraph on :func:`estimator_gap`: per model, our gaps beside the paper's, and whether any of ours
    comes within half of the paper's (if none does, the paper's U_o advantage is not reproduced by any setting
    measured, and its cause is not among them). Only rows whose students are known to beat the best constant
    prediction judge it (``skill``, :func:`~gped_kit.experiments.verdicts.unskilled`; the others are named as no
    evidence), and a gap nearer half the paper's than its seeds' spread is not separable from it."""
    skill = gaps["skill"] if "skill" in gaps else pd.Series(float("nan"), index=gaps.index)
    weak = gaps[(gaps["profile"] != PAPER_ROW) & skill.map(unskilled)]
    ours_all = gaps[(gaps["profile"] != PAPER_ROW) & ~gaps.index.isin(weak.index)]
    if ours_all.empty:
        return ""
    parts, reproduced, unclear = [], [], []
    for model, part in gaps.groupby("model", sort=False):
        paper = part[part["profile"] == PAPER_ROW]
        ours = part[part.index.isin(ours_all.index)]
        if ours.empty or paper.empty:
            continue
        theirs = float(paper["gap"].iloc[0])
        each = ", ".join(f"{r.profile} (T = {r.T:,}{f' x {r.chains}' if r.chains > 1 else ''}, H = {r.H}) "
                         f"{r.gap:+.4f}" + (f" ± {r.gap_std:.4f}" if pd.notna(r.gap_std) else "")
                         for r in ours.itertuples())
        parts.append(f"{MODEL_NAMES.get(model, model)}: {each}; the paper's {theirs:+.3f}")
        for r in ours.itertuples():
            if theirs > 0 and not separable(r.gap - theirs / 2, r.gap_std):
                unclear.append(r.profile)
            elif theirs > 0 and r.gap >= theirs / 2:
                reproduced.append(r.profile)
    updates = ours_all["student_updates"]
    span = f"{updates.min():,.0f} to {updates.max():,.0f} student updates"
    if reproduced:
        tail = f"At least half the paper's gap in: {', '.join(dict.fromkeys(reproduced))}."
    elif unclear:
        tail = (f"Not separable from half the paper's gap within the seeds' spread in: "
                f"{', '.join(dict.fromkeys(unclear))}; none of the others reaches it.")
    else:
        tail = (f"None of ours reaches half the paper's gap, over {span}, chain lengths, thinnings and schedules "
                "measured here: the paper's U_o advantage is not reproduced, and what produces it is not among "
                "these settings (unexplained).")
    if len(weak):
        tail += (f" No evidence: {', '.join(dict.fromkeys(weak['profile']))} (students not known to beat the best "
                 "constant prediction), left out.")
    return "**U_s - U_o student NLL** (Table 1's cell; positive: U_o better): " + "; ".join(parts) + ". " + tail
