"""The README: its claims table is the one the committed figures' tables give, its rules judge
hand-built tables correctly, its local links resolve, and it stays a landing page."""

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from gped_kit.cli import readme as R
from gped_kit.experiments import device_runs as D
from gped_kit.experiments import verdicts as V
from gped_kit.experiments.claims import AGREEMENT_COUNTS, agreement_words
from gped_kit.experiments.comparison import notebook as CN
from gped_kit.experiments.experiment1 import notebook as E1N
from gped_kit.experiments.experiment1 import settings as E1
from gped_kit.experiments.experiment2 import notebook as E2N
from gped_kit.experiments.experiment4 import notebook as E4N
from gped_kit.experiments.numerics import LEGACY_CODES
from gped_kit.experiments.paper import PAPER_MODELS, SGLD_BATCH_SIZE
from gped_kit.experiments.samplers import notebook as SN
from gped_kit.experiments.thesis import notebook as TN
from gped_kit.experiments.thesis.toys import LOGREG_MEMORY_CLAIM, MOG_MEMORY_CLAIM


def _agree(*counts: int) -> dict:
    """A table's agreement columns from (agree, compared, not separable, no evidence) counts: the words and the
    counts the README's rows judge by."""
    found = dict(zip(AGREEMENT_COUNTS, counts + (0,) * (4 - len(counts))))
    return {"agree": agreement_words(**found), **found}

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_the_readme_claims_table_is_what_the_committed_tables_give():
    text = README.read_text()
    assert R.replace_block(text, R.render(R.claims_table(ROOT / "figures"))) == text, \
        "README.md's claims table is stale: run `python -m gped_kit.cli.readme` and commit README.md"
    assert R.main(["--readme", str(README), "--figures", str(ROOT / "figures"), "--check"]) == 0


def test_the_check_fails_on_a_stale_table(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(README.read_text().replace("| Table 1: a student", "| Table 1 (edited by hand): a student", 1))
    # the committed tables and GPU runs, read through links; what the command writes stays in tmp_path
    figures = tmp_path / "figures"
    figures.mkdir()
    for f in (ROOT / "figures").iterdir():
        if f.name != R.DETAILS:
            (figures / f.name).symlink_to(f)
    (tmp_path / R.DEVICE_RUNS).parent.mkdir(parents=True)
    (tmp_path / R.DEVICE_RUNS).symlink_to(ROOT / R.DEVICE_RUNS)
    (tmp_path / "results").symlink_to(ROOT / "results")  # the machines the results were computed on
    assert R.main(["--readme", str(stale), "--figures", str(figures), "--check"]) == 1
    assert R.main(["--readme", str(stale), "--figures", str(figures)]) == 0
    assert stale.read_text() == README.read_text()
    assert (figures / R.DETAILS).read_text() == (ROOT / "figures" / R.DETAILS).read_text()


def test_a_readme_without_the_markers_is_refused_with_the_lines_to_add():
    with pytest.raises(ValueError, match="has no claims block"):
        R.replace_block("# a README\n", "block")


def _table1(tmp_path, profile, rows, skill: float | None = 0.9):
    """Notebook 01's Table 1 of ``profile`` with ``rows``; every student's skill ``skill`` (None: stored without)."""
    cols = ["model", "teacher_nll", "teacher_nll_std", "teacher_nll_paper", "student_nll", "student_nll_std",
            "student_nll_paper", "entropy_mae", "entropy_mae_std", "entropy_mae_paper", "seeds"]
    table = pd.DataFrame(rows, columns=cols)
    if skill is not None:
        table = table.assign(student_nll_skill=skill, entropy_mae_skill=skill)
    table.to_csv(tmp_path / f"table1_experiment1_{profile}.csv", index=False)


def test_table1_rules_on_hand_built_tables(tmp_path, tables_recorded):
    _table1(tmp_path, "default", [["fcnn", 0.10, 0.0, 0.052, 0.13, 0.0, 0.082, 0.05, 0.0, 0.016, 3],
                                  ["cnn_mnist", 0.04, 0.0, 0.022, 0.10, 0.0, 0.053, 0.03, 0.0, 0.016, 3]])
    gap = E1N.table1_gap(tmp_path)
    # FCNN gap 0.03 <= 2 x 0.030; CNN gap 0.06 < 2 x 0.031 = 0.062: both hold
    assert gap.verdict == "yes" and "FCNN +0.030" in gap.ours and "CNN +0.060" in gap.ours and "3 seeds" in gap.ours
    _table1(tmp_path, "cpu30", [["fcnn", 0.057, None, 0.052, 0.08, None, 0.082, 0.02, None, 0.016, 1],
                                ["cnn_mnist", 0.03, None, 0.022, 0.05, None, 0.053, 0.017, None, 0.016, 1]])
    values = E1N.table1_values(tmp_path, "cpu30", "cpu30")
    # within 10%: FCNN teacher (0.057 <= 0.0572), both students, CNN entropy (0.017 <= 0.0176); not the rest
    assert values.verdict == "partly (4 of 6 within 10%)" and "one seed)" in values.ours and "±" not in values.ours
    assert str(values.evidence) == "`cpu30`, T = 20,000 × 2 chains, one seed"  # a one-seed result says so
    assert values.kind == V.ANOTHER_PROFILE  # Table 1 again in another profile: not counted twice
    assert E1N.table1_values(tmp_path, "long", "long") is None  # no table, no row
    # two-sided: a student 15% below the paper's is not within 10%; it is better than the paper's, said apart
    _table1(tmp_path, "cpu30", [["fcnn", 0.057, None, 0.052, 0.07, None, 0.082, 0.02, None, 0.016, 1],
                                ["cnn_mnist", 0.03, None, 0.022, 0.05, None, 0.053, 0.017, None, 0.016, 1]])
    values = E1N.table1_values(tmp_path, "cpu30", "cpu30")
    # no cause is stated that the results do not show (the paper's H = 100 on a GPU beats the paper's too)
    assert values.verdict == "partly (3 of 6 within 10%; 1 better than the paper's: FCNN student; unexplained)"
    _table1(tmp_path, "cpu30", [["fcnn", 0.057, None, 0.052, 0.08, None, 0.082, 0.02, None, 0.016, 3],
                                ["cnn_mnist", 0.03, None, 0.022, 0.05, None, 0.053, 0.017, None, 0.016, 2]])
    assert E1N.table1_values(tmp_path, "cpu30", "cpu30").ours.endswith("(seeds: FCNN 3, CNN 2)")  # a failed seed
    # the measured time of one seed, both models, from notebook 01's per-profile table (all seeds' seconds)
    pd.DataFrame({"profile": ["cpu30", "cpu30", "default"], "model": ["fcnn", "cnn_mnist", "fcnn"],
                  "seeds": [3, 2, 3], "seconds": [1800.0, 2400.0, 60.0]}).to_csv(
        tmp_path / "table1_experiment1_profiles.csv", index=False)
    assert E1N.table1_minutes_per_seed(tmp_path, "cpu30", ["fcnn", "cnn_mnist"]) == pytest.approx(30.0)  # 10 + 20
    assert E1N.table1_values(tmp_path, "cpu30", "cpu30").ours.endswith(
        "(seeds: FCNN 3, CNN 2; 30.0 min a seed for FCNN and CNN)")
    assert E1N.table1_minutes_per_seed(tmp_path, "default", ["fcnn", "cnn_mnist"]) is None  # CNN's time missing


def test_the_paper_profile_row_reads_the_newest_gpu_run_per_model(tmp_path):
    figures = tmp_path / "figures"
    figures.mkdir()
    assert R.paper_profile_on_gpu(figures).verdict == "not run"
    rows = [(step, student, teacher, nll, mae)
            for step, teacher in ((10_000, 0.09), (20_000, 0.08))
            for student, nll, mae in (("predictive-U_s-K1x1", teacher + 0.02, None),
                                      ("predictive-U_o-K1x1", teacher + 0.01, None),
                                      ("entropy-U_s-K1x1", None, 0.03), ("entropy-U_o-K1x1", None, 0.02))]
    history = pd.DataFrame(rows, columns=["step", "student", "teacher_nll", "student_nll", "entropy_mae"])
    for run in ("2026-01-01-old", "2026-02-01-new"):
        folder = tmp_path / R.DEVICE_RUNS / run
        folder.mkdir(parents=True)
        history.assign(teacher_nll=lambda d: d["teacher_nll"] - (run == "2026-02-01-new") * 0.01).to_csv(
            folder / R.DEVICE_HISTORY.format(model="fcnn"), index=False)
    row = R.paper_profile_on_gpu(figures)
    assert row.verdict == "partly run (FCNN to T = 20,000, not judged)" and row.kind == V.RUN
    assert "FCNN to T = 20,000 of 10^6, not judged (2026-02-01-new)" in row.ours and "teacher 0.0700" in row.ours
    assert "U_o / U_s 0.0900 / 0.1000" in row.ours and "entropy MAE U_o / U_s 0.0200 / 0.0300" in row.ours
    assert "CNN-MNIST and the other notebooks not run" in row.ours
    assert "teacher 0.052" in row.paper and "0.054 / 0.082" in row.paper  # Table 6, N = 60,000, r = 0
    assert "docs/device-runs/2026-02-01-new/README.md" in row.where
    # a CNN chain from the older run only: both rows, each from its own newest run
    history[history["step"] == 10_000].to_csv(
        tmp_path / R.DEVICE_RUNS / "2026-01-01-old" / R.DEVICE_HISTORY.format(model="cnn_mnist"), index=False)
    row = R.paper_profile_on_gpu(figures)
    assert "CNN-MNIST to T = 10,000 of 10^6, not judged (2026-01-01-old): teacher 0.0900" in row.ours
    assert "not run" not in row.ours.replace("the other notebooks not run", "")
    assert "CNN-MNIST, T = 10^6 (Table 5, N = 60,000, r = 0): teacher 0.022" in row.paper
    assert "2026-01-01-old/README.md" in row.where and "2026-02-01-new/README.md" in row.where


def test_trend_rows_count_agreeing_cells(tmp_path, tables_recorded):
    pd.DataFrame({"model": ["fcnn", "cnn_mnist"], "trend": ["U_o at least as good as U_s"] * 2,
                  "ours": ["12 of 12", "9 of 12"], "paper": ["11 of 12", "12 of 12"],
                  **{k: [a[k], b[k]] for a, b in [(_agree(11, 12), _agree(9, 12))] for k in a},
                  "paper_statement": ["almost always"] * 2}).to_csv(tmp_path / "experiment2_mnist_trends_default.csv",
                                                                     index=False)
    (row,) = E2N.readme_rows(tmp_path)
    assert row.verdict == "partly (agree in 20 of 24 cells)" and row.ours == "FCNN 12 of 12, CNN 9 of 12"


def comparison_rows(nlls: dict[str, float], skills: dict[str, float] | None = None) -> pd.DataFrame:
    """A comparison table's test rows: each method's NLL, and a predictive skill (on which NLL claims rest) and a
    skill (the lower of predictive and entropy) of 0.9 for every student unless ``skills`` says otherwise for both
    (the references, ``Snapshot ensemble`` and the teacher, have none)."""
    skills = {m: (float("nan") if m in ("Snapshot ensemble", "Long-chain teacher") else 0.9) for m in nlls} | (
        skills or {})
    return pd.DataFrame({"eval_set": "test", "method": list(nlls), "nll": list(nlls.values()),
                         "predictive_skill": [skills[m] for m in nlls], "skill": [skills[m] for m in nlls]})


def test_the_comparison_order_rule(tmp_path, tables_recorded):
    def row(nlls, skills=None, drop_skill=False):
        table = comparison_rows(nlls, skills)
        (table.drop(columns=["skill", "predictive_skill"]) if drop_skill else table).to_csv(
            tmp_path / "comparison_mnist_default.csv", index=False)
        return CN.order_row(tmp_path)[0]

    def verdict(nlls, skills=None, drop_skill=False):
        return row(nlls, skills, drop_skill).verdict
    assert verdict({"Snapshot ensemble": 0.10, "Hydra": 0.11, "KD": 0.12, "EnD2": 0.13}) == "yes"
    assert verdict({"Snapshot ensemble": 0.12, "Hydra": 0.11, "KD": 0.12, "EnD2": 0.13}) == "partly"
    assert verdict({"Snapshot ensemble": 0.14, "Hydra": 0.13, "KD": 0.12, "EnD2": 0.11}) == "no"
    # a student not known to beat the best constant: the pairs with it are no evidence, the others judged
    nlls = {"Snapshot ensemble": 0.10, "Hydra": 0.11, "KD": 0.12, "EnD2": 0.13}
    weak = row(nlls, {"EnD2": 0.02})
    assert weak.verdict == ("yes (1 of 3 pairs no evidence: EnD2 not known to beat the best constant)")
    assert "EnD2 0.130 (skill 0.020)" in weak.ours and "Hydra 0.110," in weak.ours
    # more pairs no evidence than judged: no evidence (judged_verdict), not a word resting on the one pair left
    assert verdict(nlls, {"KD": float("nan")}) == (
        "no evidence (2 of 3 pairs no evidence: KD not known to beat the best constant)")
    assert verdict(nlls, {"Hydra": 0.01}) == (
        "no evidence (2 of 3 pairs no evidence: Hydra not known to beat the best constant)")
    assert verdict(nlls, {"Hydra": -0.1, "KD": 0.01}) == (
        "no evidence (3 of 3 pairs no evidence: Hydra, KD not known to beat the best constant)")
    # a table stored before the comparison reported skill: no student counts
    assert verdict(nlls, drop_skill=True).startswith("no evidence (3 of 3 pairs no evidence: Hydra, KD, EnD2 ")
    # the NLL rests on the predictive: an entropy head below the floor (skill, not predictive_skill) leaves it judged
    comparison_rows(nlls).assign(skill=lambda t: t["skill"].where(t["method"] != "EnD2", -0.35)).to_csv(
        tmp_path / "comparison_mnist_default.csv", index=False)
    assert CN.order_row(tmp_path)[0].verdict == "yes"


def test_the_long_profile_column_judges_its_own_tables_by_the_same_rule(tmp_path, tables_recorded):
    def write(profile, nlls):
        comparison_rows(nlls).to_csv(tmp_path / f"comparison_mnist_{profile}.csv", index=False)

    write("default", {"Snapshot ensemble": 0.14, "Hydra": 0.13, "KD": 0.12, "EnD2": 0.11})
    row = next(r for r in R.claims_table(tmp_path) if r.claim.startswith("Hydra paper"))
    assert row.verdict == "no" and row.long == "—"  # no long table: no long verdict
    write("long", {"Snapshot ensemble": 0.05, "Hydra": 0.06, "KD": 0.07, "EnD2": 0.08})
    row = next(r for r in R.claims_table(tmp_path) if r.claim.startswith("Hydra paper"))
    assert row.verdict == "no" and row.long.startswith("yes: ") and "Hydra 0.060" in row.long
    # the README's short table: both verdicts, each labelled with its evidence, the strongest (long) first
    assert "| `long`, T = 16,000 × 4 chains, one seed: yes · default, T = 4,000, one seed: no |" in R.render([row])
    assert "ours, `long` profile" in R.render_details([row]) and "| yes: " in R.render_details([row])
    assert row.kind == V.HYDRA


def test_the_readme_lands():
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "the README is a landing page; details go to docs/"
    assert "arxiv.org/abs/2005.08110" in text and "Vadera" in text  # which paper it reproduces
    for command in ("make figures", "make test", "make test-slow"):
        assert f"\n{command}" in text or f"`{command}`" in text
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    for target in re.findall(r"\]\(((?!https?://)[^)#]+)", text):  # every local link resolves
        assert (ROOT / target).exists(), target


def test_every_local_link_of_the_claims_page_resolves_from_the_figures_folder():
    """figures/claims.md lives in figures/: a link the README writes from the root (``docs/gpu.md``,
    ``figures/x.md``) is written from there (``../docs/gpu.md``, ``x.md``); issue 56 found three broken."""
    assert R.from_figures("[a](figures/x.md), [b](docs/gpu.md), [c](https://x.org/a), [d](#top)") == \
        "[a](x.md), [b](../docs/gpu.md), [c](https://x.org/a), [d](#top)"
    page = R.render_details(R.claims_table(ROOT / "figures"))
    assert page == (ROOT / "figures" / R.DETAILS).read_text()
    targets = re.findall(r"\]\(((?![a-z][a-z0-9+.-]*:)[^)#\s]+)", page)
    assert targets and all((ROOT / "figures" / t).exists() for t in targets), \
        [t for t in targets if not (ROOT / "figures" / t).exists()]


def test_the_teachers_row_counts_models_within_ten_percent_per_profile(tmp_path, tables_recorded):
    pd.DataFrame({"model": ["fcnn", "fcnn", "cnn_mnist", "cnn_mnist"], "metric": ["nll", "accuracy"] * 2,
                  "teacher (default)": [0.49, 0.83, 0.39, 0.87], "teacher (long)": [0.38, 0.87, 0.31, 0.90],
                  "paper": [0.362, None, 0.269, None],
                  "teacher / paper (default)": [0.49 / 0.362, None, 0.39 / 0.269, None],
                  "teacher / paper (long)": [0.38 / 0.362, None, 0.31 / 0.269, None]}).to_csv(
        tmp_path / "experiment4_teacher_quality_profiles.csv", index=False)
    (default,) = E4N.teacher_row(tmp_path)
    assert default.verdict == "no" and default.ours.startswith("FCNN 0.4900 (1.35× the paper's)")
    (long,) = E4N.teacher_row(tmp_path, "long")
    assert long.verdict.startswith("partly") and "CNN 0.3100 (1.15× the paper's)" in long.ours  # 1.15 > 1.1
    assert long.paper == "FCNN 0.362, CNN 0.269 (T = 10^6)"
    assert E4N.teacher_row(tmp_path, "cpu30") == []  # no column for that profile
    assert R._long_cell(long) == f"{long.verdict}: {long.ours}"


def test_the_samplers_rows_read_notebook_10s_default_and_pooling_tables(tmp_path, tables_recorded):
    assert SN.study_row(tmp_path) is None and SN.study_row(tmp_path, "pooling") is None
    table = pd.DataFrame({"candidate": ["BAOA, one chain", "BAOA, 4 chains pooled"], "seeds": [2, 2],
                          "T": [48_000, 48_000], "teacher NLL": [0.0645, 0.0624], "student NLL": [0.0713, 0.0942],
                          "entropy MAE": [0.0202, 0.0479], "student NLL skill": [0.95, 0.94],
                          "entropy MAE skill": [0.42, 0.3]})
    table.to_csv(tmp_path / "10_samplers_pooling_table.csv", index=False)
    row = SN.study_row(tmp_path, "pooling")
    assert "48,000 teacher steps in all, 2 seeds" in row.claim
    assert row.ours == "BAOA, 4 chains pooled 0.0624 / 0.0942 / 0.0479; BAOA, one chain 0.0645 / 0.0713 / 0.0202"
    # a student below the floor, or stored without its skill, shows the verdict word, not its value
    table.assign(**{"entropy MAE skill": [0.42, -0.003]}).to_csv(tmp_path / "10_samplers_pooling_table.csv",
                                                                index=False)
    assert SN.study_row(tmp_path, "pooling").ours == ("BAOA, 4 chains pooled 0.0624 / 0.0942 / no evidence; "
                                                      "BAOA, one chain 0.0645 / 0.0713 / 0.0202")
    table.drop(columns=["student NLL skill"]).to_csv(tmp_path / "10_samplers_pooling_table.csv", index=False)
    assert SN.study_row(tmp_path, "pooling").ours.startswith("BAOA, 4 chains pooled 0.0624 / no evidence / 0.0479")
    table.to_csv(tmp_path / "10_samplers_pooling_table.csv", index=False)
    assert row.paper == "Table 1, FCNN, SGLD at T = 10^6: 0.052 / 0.082 / 0.016"
    table.assign(seeds=1).to_csv(tmp_path / "10_samplers_default_table.csv", index=False)
    assert SN.study_row(tmp_path).claim == "(ours) the teacher's sampler at equal work (FCNN, T = 48,000, one seed)"
    assert SN.study_row(tmp_path).verdict == "—"  # no winners table stored: nothing to say which is lowest
    # the word says which candidate the seeds establish as lowest, or why none is
    winners = pd.DataFrame({"quantity": ["teacher NLL", "student NLL", "entropy MAE"],
                            "winner": ["BAOA, 4 chains pooled", "BAOA, one chain", "BAOA, one chain"],
                            "runner_up": ["BAOA, one chain", "BAOA, 4 chains pooled", "BAOA, 4 chains pooled"],
                            "separated": ["no", "yes", V.NO_EVIDENCE]})
    winners.to_csv(tmp_path / "10_samplers_pooling_winners.csv", index=False)
    assert SN.study_row(tmp_path, "pooling").verdict == (
        "— (lowest teacher NLL not established, BAOA, 4 chains pooled vs BAOA, one chain within the seeds' spread; "
        "lowest student NLL BAOA, one chain; lowest entropy MAE no evidence, a student below the skill floor)")
    winners.to_csv(tmp_path / "10_samplers_default_winners.csv", index=False)
    assert SN.study_row(tmp_path).verdict == ("— (lowest teacher NLL not established, BAOA, 4 chains pooled vs BAOA, "
                                              "one chain within the seeds' spread)")


def test_within_10_percent_is_two_sided_and_better_is_its_own_verdict():
    assert V.within(1.10, 1.0) and V.within(0.90, 1.0) and V.within(0.052, 0.052)
    assert not V.within(1.11, 1.0) and not V.within(0.89, 1.0)  # 11% either way fails
    assert not V.within(float("nan"), 1.0) and not V.within(1.0, 0.0)
    assert [V.compare(x, 1.0) for x in (0.95, 1.05, 0.8, 1.2)] == ["within", "within", "better", "worse"]
    assert V.compare(float("nan"), 1.0) == "missing"


def test_thesis_claims_that_hold_by_construction_are_reported_not_counted(tmp_path, tables_recorded):
    rows = [("MoG: online EM as close to p_MC as batch EM", True, "mean_kl_test", "x"),
            (MOG_MEMORY_CLAIM, True, "mean_kl_test", "online / batch bytes: 0.02 at most"),
            (LOGREG_MEMORY_CLAIM, True, "mean_kl_test", "online / batch bytes: 0.006 at most"),
            (LOGREG_MEMORY_CLAIM, True, "mean_kl_grid", "online / batch bytes: 0.006 at most"),
            ("Derivative square error closer to p_MC than cross-entropy", False, "mean_kl_test", "y")]
    pd.DataFrame([dict(claim=c, holds=h, metric=m, ours=o, thesis="t", count=int(h), of=1) for c, h, m, o in rows]
                 ).to_csv(tmp_path / f"{TN.CLAIMS_TABLE.format(profile='default')}.csv", index=False)
    (row,) = TN.readme_rows(tmp_path)
    assert row.verdict == "partly" and row.ours.startswith("1 of 2 claims hold; not: Derivative square error")
    assert row.ours.count(LOGREG_MEMORY_CLAIM) == 1 and "not counted, as they hold by construction" in row.ours


def test_short_verdicts_keep_the_counts_and_drop_the_reasons():
    assert V.short_verdict("yes") == "yes"
    assert V.short_verdict("partly (agree in 5 of 6 cells)") == "partly (agree in 5 of 6 cells)"
    assert V.short_verdict("no (0 of 6 within 10%; 2 better than the paper's: FCNN student, CNN student; its "
                           "students are updated every 2 / 2 steps, the paper's every 100 / 10)") == \
        "no (0 of 6 within 10%; 2 better than the paper's)"
    assert V.short_verdict("no (0 of 6 within 10%; 2 better than the paper's: FCNN student; unexplained: at H = 100 "
                           "(0.0636 vs 0.082))") == "no (0 of 6 within 10%; 2 better than the paper's)"
    assert V.short_verdict("partly (1 of 3 within 10%; 2 not separable: FCNN student)") == \
        "partly (1 of 3 within 10%; 2 not separable)"


def _evidence(profile="default", steps=5_000, seeds=1, chains=1):
    return V.Evidence(profile, steps, seeds, chains)


def test_the_verdict_counts_gpeds_own_claims_once_in_the_named_default_profile(tmp_path):
    long = _evidence("long", 16_000, 1, 4)
    rows = [V.Claim("a", "yes", "1", "1", "w", long="—", long_verdict="no evidence (below the floor)",
                    evidence=_evidence(steps=2_000, seeds=3), long_evidence=long),
            V.Claim("b", "partly (agree in 1 of 2 cells)", "1", "1", "w", long="yes: 1", long_verdict="yes",
                    evidence=_evidence(), long_evidence=long),
            V.Claim("c", "no", "1", "1", "w", long="no: 1", long_verdict="no", evidence=_evidence(),
                    long_evidence=long),
            V.Claim("c again", "no", "1", "1", "w", evidence=_evidence("cpu30", 20_000, 3, 2),
                    kind=V.ANOTHER_PROFILE),
            V.Claim("teachers", "no", "1", "1", "w", evidence=_evidence(), kind=V.PRECONDITION),
            V.Claim("Hydra paper: order", "partly", "1", "1", "w", long="yes: 1", long_verdict="yes",
                    evidence=_evidence(), kind=V.HYDRA),
            V.Claim("thesis", "partly", "6 of 9 claims hold; not: x", "1", "w", evidence=_evidence(), kind=V.THESIS),
            V.Claim("(ours) d", "—", "1", "1", "w", evidence=_evidence(), kind=V.OURS),
            V.Claim("e", "not comparable (no OOD set in common; on ours GPED leads in 9 of 16 cells)", "9 of 16",
                    "x", "w", long="yes: 1", long_verdict="yes", evidence=_evidence(), long_evidence=long),
            V.Claim("f", "not run", "—", "x", "w")]
    figures = tmp_path / "figures"
    figures.mkdir()
    text = R.render_verdict(rows, figures)
    # the Hydra paper's, the thesis', the precondition's, ours and cpu30's rows are not counted
    assert "(3, each counted once), **1 hold, 1 hold partly and 1 do not** in the default profile." in text
    assert ("That profile: a CPU, chains of T = 2,000 to 5,000 steps, 1 to 3 seeds; 1 more claim cannot be "
            "compared and 1 is not run.") in text
    # a row without a verdict in `long` is not one it judges; a change counts only between two verdicts
    assert ("The `long` profile (also a CPU: 4 pooled chains of T = 16,000) judges 3 of GPED's claims (1 more not "
            "judged); 1 of the 2 judged in both differs from the default's (one seed: no spread).") in text
    assert ("Reported apart, each with its own verdict: the Hydra paper's order of test NLLs, partly in the default "
            "profile (`long`: yes); Papamakarios' thesis, partly (6 of 9 claims hold).") in text
    assert "At the paper's length" not in text and "reason" not in text  # no GPU history, no cpu30 table
    assert all(len(line) <= 200 for line in text.splitlines())
    # a claim that is no evidence is counted apart, neither among the judged nor lost from the tally
    rows.append(V.Claim("g", "no evidence (agree in 1 of 1 cells; 7 no evidence)", "1", "1", "w",
                        evidence=_evidence()))
    text = R.render_verdict(rows, figures)
    assert "(3, each counted once)" in text and ("1 more claim cannot be compared, 1 is no evidence and 1 is not "
                                                 "run.") in text
    # no reason is stated for them all: a row is no evidence for its own reason (e.g. no fair comparison stored)
    rows.append(V.Claim("h", "no evidence (no fair comparison stored)", "—", "1", "w", evidence=_evidence()))
    text = R.render_verdict(rows, figures)
    assert "2 are no evidence and 1 is not run." in text and "skill floor" not in text


def test_the_cpu_of_the_header_is_read_from_the_store(tmp_path):
    assert R.cpu_of(tmp_path) == "a CPU"
    for key, device, cpus in (("a", "cpu", "2"), ("b", "cuda", "16"), ("c", "cpu", "2")):
        (tmp_path / "results" / "chain" / key).mkdir(parents=True)
        (tmp_path / "results" / "chain" / key / "entry.json").write_text(json.dumps(
            {"complete": True, "device": device, "machine": {"cpus": cpus}}))
    assert R.cpu_of(tmp_path) == "a 2-core CPU"  # the GPU run's machine is not the CPU profiles'


def _gpu_run(root, name, model="fcnn", code="chain=1", seed=0, rows=(), skill: float | None = 0.9):
    """A committed GPU run of notebook 01's paper-profile chain: its history (every student's ``skill``; None: a
    history without skill, as runs made before every target reported it) and one slice manifest."""
    folder = root / R.DEVICE_RUNS / name
    folder.mkdir(parents=True)
    history = pd.DataFrame(list(rows), columns=["step", "student", "teacher_nll", "student_nll", "entropy_mae"])
    if skill is not None:
        history = history.assign(skill=skill)
    history.to_csv(folder / R.DEVICE_HISTORY.format(model=model), index=False)
    (folder / "slice-001.json").write_text(json.dumps(
        {"kind": "gped-kit slice", "code": code,
         "cells": [{"cell": f"{model} N=60000 m=0 seed={seed}", "model": model}]}))


def _history(step, teacher=0.0539, us=0.0636, uo=0.0630, mae_us=0.0222, mae_uo=0.0157):
    return [(step, "predictive-U_s-K1x1", teacher, us, None), (step, "predictive-U_o-K1x1", teacher, uo, None),
            (step, "entropy-U_s-K1x1", teacher, None, mae_us), (step, "entropy-U_o-K1x1", teacher, None, mae_uo)]


def test_a_cell_nearer_its_bound_than_the_run_to_run_spread_is_not_separable(tmp_path, tables_recorded):
    figures = tmp_path / "figures"
    figures.mkdir()
    # the eager run (a legacy code of the same numerics, chain=1) to step 500,000; the graph run to 10^6; a run
    # of other numerics whose students differ a lot is not a run of the same chain and does not widen the spread
    _gpu_run(tmp_path, "2026-01-01-eager", code=LEGACY_CODES["chain"], rows=_history(500_000, us=0.0700))
    _gpu_run(tmp_path, "2026-01-01-old-code", code="0354bbc02fa0db66", rows=_history(500_000, us=0.2))
    _gpu_run(tmp_path, "2026-01-02-graph", rows=_history(500_000, us=0.0738) + _history(1_000_000))
    (run,) = D.paper_length_runs(tmp_path).values()
    assert run.complete and run.run.name == "2026-01-02-graph" and run.run.seed == 0
    assert run.spread["student_nll"] == pytest.approx(0.0038) and run.spread["teacher_nll"] == 0
    cells = {c.name: c for c in run.cells}
    # Table 1 has the teacher, the U_s student and the U_o entropy MAE; the other two cells are Table 6's only
    assert {n: c.tables for n, c in cells.items()} == {
        "teacher NLL": "Tables 1, 6", "student NLL U_s": "Tables 1, 6", "student NLL U_o": "Table 6",
        "entropy MAE U_o": "Tables 1, 6", "entropy MAE U_s": "Table 6"}
    # U_o 0.0630 against the paper's 0.054: 0.0036 above the bound 0.0594, within the spread 0.0038
    assert cells["student NLL U_o"].outcome == V.NOT_SEPARABLE
    assert cells["teacher NLL"].outcome == "within" and cells["student NLL U_s"].outcome == "better"
    text = R.render_verdict([], figures)
    assert ("At the paper's length on a GPU (FCNN, T = 10^6, one seed), Table 1's cells, ours (the paper's): "
            "teacher NLL 0.0539 (0.052), student NLL U_s 0.0636 (0.082), entropy MAE U_o 0.0157 (0.016).") in text
    # the entropy MAEs of both runs agree: no spread known for them, and the U_s one, 0.0002 above the bound, is out
    assert "Table 6 only: student NLL U_o 0.0630 (0.054), entropy MAE U_s 0.0222 (0.02). Of these 5 cells, 2 are " \
           "within 10%, 1 is better than the paper's, 1 is worse than the paper's and 1 is not separable " \
           "(2026-01-02-graph)." in text
    assert "Not separable: nearer the 10% bound than two runs of this chain differ (student NLL 0.0038)." in text
    # a smaller spread (the eager run 0.0030 away) separates the same cell: it is out, worse than the paper's
    history = tmp_path / R.DEVICE_RUNS / "2026-01-01-eager" / R.DEVICE_HISTORY.format(model="fcnn")
    pd.DataFrame(_history(500_000, us=0.0706), columns=["step", "student", "teacher_nll", "student_nll",
                                                         "entropy_mae"]).assign(skill=0.9).to_csv(history, index=False)
    (run,) = D.paper_length_runs(tmp_path).values()
    assert run.spread["student_nll"] == pytest.approx(0.0032)
    assert run.cell("student_nll", "U_o").outcome == "worse"
    # the rows read the same runs: Table 1's cells only, and the paper profile's row names every cell's table
    _table1(figures, "default", [["fcnn", 0.10, 0.001, 0.052, 0.13, 0.001, 0.082, 0.05, 0.001, 0.016, 3]])
    values = E1N.table1_values(figures, "default", "default")
    assert str(values.gpu.evidence) == "`paper` on a GPU (FCNN only), T = 10^6, one seed"
    assert values.gpu.verdict.startswith("partly (2 of 3 within 10%; 1 better than the paper's: FCNN student")
    row = R.paper_profile_on_gpu(figures)
    assert "student NLL U_o 0.0630 (Table 6: 0.054, worse)" in row.ours and row.verdict.startswith(
        "partly run (FCNN complete, 2 of 5 cells within 10%, 1 better than the paper's, 2 worse")


def test_a_gpu_run_without_its_students_skill_judges_only_its_teacher(tmp_path, tables_recorded):
    """A history written before every target reported skill: no student is known to beat the best constant
    prediction, so its four student cells and U_o against U_s are no evidence; the teacher's cell is judged."""
    figures = tmp_path / "figures"
    figures.mkdir()
    _gpu_run(tmp_path, "2026-01-02-graph", rows=_history(1_000_000), skill=None)
    (run,) = D.paper_length_runs(tmp_path).values()
    assert {c.name: c.outcome for c in run.cells} == {
        "teacher NLL": "within", "student NLL U_s": D.NO_EVIDENCE, "student NLL U_o": D.NO_EVIDENCE,
        "entropy MAE U_o": D.NO_EVIDENCE, "entropy MAE U_s": D.NO_EVIDENCE}
    assert all(outcome == D.NO_EVIDENCE for *_, outcome in D.uo_vs_us(run))
    assert E2N.uo_gpu_finding(figures).verdict.startswith("no evidence (2 no evidence")
    assert "Of these 5 cells, 1 is within 10% and 4 are no evidence" in R.render_verdict([], figures)
    _table1(figures, "default", [["fcnn", 0.10, 0.001, 0.052, 0.13, 0.001, 0.082, 0.05, 0.001, 0.016, 3]])
    assert E1N.table1_values(figures, "default", "default").gpu.verdict.startswith(
        "no evidence (1 of 1 within 10%; 2 no evidence")  # the teacher alone judged: too few cells for a word
    # below the floor reads the same
    _gpu_run(tmp_path, "2026-01-03-graph", rows=_history(1_000_000), skill=V.SKILL_FLOOR / 2)
    (run,) = D.paper_length_runs(tmp_path).values()
    assert run.cell("entropy_mae", "U_o").outcome == D.NO_EVIDENCE and run.cell("teacher_nll", None).outcome == \
        "within"


def test_compare_and_separable_read_not_separable_within_the_spread():
    assert V.compare(0.0630, 0.054, spread=0.0038) == V.NOT_SEPARABLE  # 0.0036 from the bound 0.0594
    assert V.compare(0.0630, 0.054, spread=0.0030) == "worse" and V.compare(0.0630, 0.054) == "worse"
    assert V.compare(0.0575, 0.052, spread=0.001) == V.NOT_SEPARABLE  # 0.0003 above the bound 0.0572
    assert V.compare(0.0470, 0.052, spread=0.001) == V.NOT_SEPARABLE  # 0.0002 above the lower bound 0.0468
    assert V.compare(0.052, 0.052, spread=0.001) == "within" and V.compare(0.052, 0.052, spread=float("nan")) == \
        "within"
    assert not V.separable(0.0006, 0.0038) and V.separable(0.0065, 0.0010) and V.separable(0.0001, None)


def test_the_uo_trend_reads_a_gpu_difference_within_the_spread_as_not_separable(tmp_path):
    figures = tmp_path / "figures"
    figures.mkdir()
    _gpu_run(tmp_path, "2026-01-01-eager", rows=_history(500_000, us=0.0700, mae_uo=0.0167))
    _gpu_run(tmp_path, "2026-01-02-graph", rows=_history(500_000, us=0.0738) + _history(1_000_000))
    finding = E2N.uo_gpu_finding(figures)
    # NLL: U_o 0.0630 vs U_s 0.0636 differ by 0.0006 < 0.0038; entropy: 0.0157 vs 0.0222 differ by 0.0065 > 0.0010
    assert finding.verdict == "yes (agree in 1 of 1 cells; 1 not separable)"
    assert "FCNN student NLL U_o 0.0630 vs U_s 0.0636: not separable (spread 0.0038)" in finding.ours
    assert str(finding.evidence) == "`paper` on a GPU (FCNN, N = 60,000, r = 0 only), T = 10^6, one seed"


def test_the_reason_line_judges_against_the_paper_with_the_seeds_spread(tmp_path, tables_recorded):
    figures = tmp_path / "figures"
    figures.mkdir()
    # the student 0.0726 is 0.0012 below the bound 0.0738, within its spread over seeds 0.002: not separable
    _table1(figures, "cpu30", [["fcnn", 0.066, 0.0002, 0.052, 0.0726, 0.002, 0.082, 0.029, 0.0004, 0.016, 3]])
    assert R.reason_line(figures) is None
    # the teacher 0.066 is 0.0088 above the bound 0.0572, within a spread of 0.01: not separable either
    _table1(figures, "cpu30", [["fcnn", 0.066, 0.01, 0.052, 0.0726, 0.0002, 0.082, 0.029, 0.0004, 0.016, 3]])
    assert R.reason_line(figures) is None
    # the table's own words (its ``_vs_paper`` columns) where it has them
    _table1(figures, "cpu30", [["fcnn", 0.066, 0.0002, 0.052, 0.0726, 0.0002, 0.082, 0.029, 0.0004, 0.016, 3]])
    table = pd.read_csv(figures / "table1_experiment1_cpu30.csv")
    assert R.reason_line(figures) is not None
    table.assign(student_nll_vs_paper="not separable", teacher_nll_vs_paper="worse").to_csv(
        figures / "table1_experiment1_cpu30.csv", index=False)
    assert R.reason_line(figures) is None
    table.assign(student_nll_vs_paper="better", teacher_nll_vs_paper="worse").to_csv(
        figures / "table1_experiment1_cpu30.csv", index=False)
    assert R.reason_line(figures).startswith("No single reason for the misses is established")


def test_a_better_student_is_unexplained_with_what_the_gpu_run_at_the_papers_h_shows(tmp_path, tables_recorded):
    figures = tmp_path / "figures"
    figures.mkdir()
    _table1(figures, "cpu30", [["fcnn", 0.066, 0.0002, 0.052, 0.0726, 0.0002, 0.082, 0.029, 0.0004, 0.016, 3]])
    assert E1N.table1_values(figures, "cpu30", "cpu30").verdict.endswith("FCNN student; unexplained)")
    assert R.reason_line(figures) == ("No single reason for the misses is established: with a teacher worse than the "
                                      "paper's (0.0660 vs 0.052), `cpu30`'s FCNN student beats the paper's (0.0726 "
                                      "vs 0.082).")
    _gpu_run(tmp_path, "2026-01-02-graph", rows=_history(1_000_000))
    values = E1N.table1_values(figures, "cpu30", "cpu30")
    assert values.verdict.endswith("unexplained: at the paper's H = 100 and T = 10^6 on a GPU our FCNN U_s student "
                                   "is better than the paper's too (0.0636 vs 0.082))")
    assert "updated every" not in values.verdict


def test_a_student_below_the_skill_floor_is_no_evidence(tmp_path, tables_recorded):
    _table1(tmp_path, "default", [["fcnn", 0.057, None, 0.052, 0.08, None, 0.082, 0.016, None, 0.016, 1]])
    assert E1N.table1_values(tmp_path, "default", "default").verdict == "yes"
    t = pd.read_csv(tmp_path / "table1_experiment1_default.csv").assign(entropy_mae_skill=V.SKILL_FLOOR / 2)
    t.to_csv(tmp_path / "table1_experiment1_default.csv", index=False)
    # counted as every verdict counts: over the cells judged, the cells that are no evidence named beside it
    assert E1N.table1_values(tmp_path, "default", "default").verdict == \
        "yes (2 of 2 within 10%; 1 no evidence: FCNN entropy MAE (a student below the skill floor))"
    _table1(tmp_path, "default", [["fcnn", 0.057, None, 0.052, 0.08, None, 0.082, 0.016, None, 0.016, 1]], skill=None)
    values = E1N.table1_values(tmp_path, "default", "default")
    # skill not stored: the teacher alone is judged, and a word from 1 of 3 cells would speak for the students too
    assert values.verdict == "no evidence (1 of 1 within 10%; 2 no evidence: FCNN student, FCNN entropy MAE (a " \
        "student stored without its skill))"
    assert V.short_verdict(values.verdict) == "no evidence (1 of 1 within 10%; 2 no evidence)"
    _table1(tmp_path, "default", [["fcnn", 0.07, None, 0.052, 0.08, None, 0.082, 0.016, None, 0.016, 1]], skill=None)
    assert E1N.table1_values(tmp_path, "default", "default").verdict.startswith(
        "no evidence (0 of 1 within 10%; 2 no evidence")


def test_the_gap_rule_judges_only_students_that_count_and_says_when_the_spread_decides():
    """Table 1's gap (0 < gap <= twice the paper's): a student that is no evidence is not judged, on a GPU run
    too, and a gap within its spread of a bound is not separable; with nothing judged the word says which."""
    assert E1N.gap_outcome(0.03, 0.03, 0.0, 0.9) == "hold" and E1N.gap_outcome(0.07, 0.03, 0.0, 0.9) == "fail"
    assert E1N.gap_outcome(-0.01, 0.03, 0.0, 0.9) == "fail"
    assert E1N.gap_outcome(0.0597, 0.03, 0.001, 0.9) == V.NOT_SEPARABLE  # 0.0003 from twice the paper's
    assert E1N.gap_outcome(0.03, 0.03, 0.0, float("nan")) == V.NO_EVIDENCE
    assert E1N.gap_outcome(0.03, 0.03, 0.0, V.SKILL_FLOOR / 2) == V.NO_EVIDENCE
    assert E1N.gap_verdict(["hold", "fail"]) == "partly"
    assert E1N.gap_verdict(["hold", V.NO_EVIDENCE]) == \
        "yes (1 no evidence: a student below the skill floor, or stored without its skill)"
    assert E1N.gap_verdict([V.NO_EVIDENCE]) == \
        "no evidence (a student below the skill floor, or stored without its skill)"
    assert E1N.gap_verdict([V.NOT_SEPARABLE, V.NOT_SEPARABLE]) == \
        "not separable (each gap within its spread of 0 or of twice the paper's)"  # never "no"
    # the reason names what is stored: skills below the floor, skills never stored, or both
    assert E1N.gap_verdict([V.NO_EVIDENCE], V.unskilled_reason([float("nan")])) == \
        "no evidence (a student stored without its skill)"
    assert V.unskilled_reason([0.01, -0.3]) == "a student below the skill floor"
    assert V.unskilled_reason([0.01, float("nan")]) == V.unskilled_reason([]) == V.UNSKILLED_EITHER
    assert V.judged_verdict(0, 0, not_separable=1, no_evidence=1) == V.NO_EVIDENCE
    # a word needs at least as many judged cells as cells that are no evidence; not separable ones do not count
    assert V.judged_verdict(1, 1, no_evidence=1) == "yes" and V.judged_verdict(1, 1, no_evidence=2) == V.NO_EVIDENCE
    assert V.judged_verdict(1, 1, not_separable=5) == "yes" and V.judged_verdict(0, 2, no_evidence=2) == "no"


def test_table1_gap_uses_the_spread_of_the_gap_over_seeds_and_shows_its_sign(tmp_path, tables_recorded):
    # FCNN gap 0.03 (the paper's 0.030): 0.03 from 0 and from twice the paper's; the two NLLs' stds sum to 0.04
    rows = [["fcnn", 0.10, 0.02, 0.052, 0.13, 0.02, 0.082, 0.05, 0.0, 0.016, 3],
            ["cnn_mnist", 0.04, 0.001, 0.022, 0.03, 0.001, 0.053, 0.03, 0.0, 0.016, 3]]
    _table1(tmp_path, "default", rows)
    before = E1N.table1_gap(tmp_path)  # a table written without nll_gap: the sum of the stds, FCNN not separable
    assert before.verdict == "no (1 not separable)" and "CNN -0.010" in before.ours and "+-" not in before.ours
    # the gap's own spread over seeds (the seeds' NLLs move together): FCNN's gap separates and holds
    table = pd.read_csv(tmp_path / "table1_experiment1_default.csv")
    table.assign(nll_gap=[0.03, -0.01], nll_gap_std=[0.002, 0.001]).to_csv(
        tmp_path / "table1_experiment1_default.csv", index=False)
    gap = E1N.table1_gap(tmp_path)
    assert gap.verdict == "partly" and "FCNN +0.030, CNN -0.010 (3 seeds)" in gap.ours
    assert gap.paper == "FCNN +0.030, CNN +0.031"
    # a gap within its own spread of 0 is not separable
    table.assign(nll_gap=[0.03, -0.01], nll_gap_std=[0.002, 0.02]).to_csv(
        tmp_path / "table1_experiment1_default.csv", index=False)
    assert E1N.table1_gap(tmp_path).verdict == "yes (1 not separable)"


def test_the_paper_profiles_deviations_are_read_from_the_code():
    deviations = R.paper_profile_deviations()
    assert deviations[0].startswith(f"M = M' = {SGLD_BATCH_SIZE}, ") and "authors' code" in deviations[0]
    assert f"every {PAPER_MODELS['fcnn'].lr_halving_epochs:g} (MNIST)" in deviations[1]
    assert "teacher epochs of the labelled set" in deviations[1] and "from the end of burn-in B" in deviations[1]
    assert f"every {E1.PROFILES['paper'].eval_thinning}th sample" in deviations[2]
    assert all(d in R.paper_profile_on_gpu(ROOT / "figures").claim for d in deviations)
    page = (ROOT / R.PAPER_PROFILE_PAGE).read_text()
    assert R.replace_block(page, R.render_deviations(), R.DEVIATIONS_BEGIN, R.DEVIATIONS_END) == page


def test_the_thesis_row_states_its_online_rule():
    assert TN.online_rule() == "online ≤ 2 × batch + 0.002"
    (row,) = TN.readme_rows(ROOT / "figures")
    assert TN.online_rule() in row.claim and row.kind == V.THESIS and "one seed" in str(row.evidence)


def test_the_committed_readme_states_no_reason_the_store_contradicts():
    text = README.read_text() + (ROOT / "figures" / R.DETAILS).read_text()
    for contradicted in ("The one reason most fail", "Short teachers are the main reason", "give weaker teachers",
                         "students are updated every 2"):
        assert contradicted not in text
    verdict = text.split(R.VERDICT_BEGIN, 1)[1].split(R.VERDICT_END, 1)[0]
    assert "in the default profile" in verdict and "one seed" in verdict and "Table 6 only" in verdict
    assert all(len(line) <= 200 for line in verdict.splitlines())


def test_ood_rows_count_students_above_their_own_teachers_auroc(tmp_path, tables_recorded):
    pd.DataFrame({"metric": ["auroc", "auroc", "auroc", "nll"], "ood_inputs": ["whole", "whole", "masked", None],
                  "minus_teacher": [0.1, -0.2, 0.05, 0.3]}).to_csv(
        tmp_path / f"{E4N.TEACHER_LINES.format(profile='default')}.csv", index=False)
    assert E4N.students_above_teacher(tmp_path, "default", "whole") == (1, 2)
    assert E4N.students_above_teacher(tmp_path, "default", "masked") == (1, 1)
    assert E4N.students_above_teacher(tmp_path, "long", "whole") is None


def test_the_model_uncertainty_row_names_students_no_better_than_predicting_zero(tmp_path, tables_recorded):
    table = pd.DataFrame({"eval_set": ["test"] * 4 + ["mnist_rotated60"],
                          "method": ["GPED", "EnD2", "Hydra", "Zero MU (baseline)", "GPED"],
                          "mu_mae_teacher": [0.08, 0.03, 0.039, 0.039, 0.5], "skill": [0.9, 0.8, 0.95, None, 0.9],
                          "mu_skill": [-0.5, 0.2, 0.3, None, -3.0]})
    path = tmp_path / f"{CN.MU_SPLIT_TABLE.format(profile='default')}.csv"
    table.to_csv(path, index=False)
    (row,) = CN.mu_row(tmp_path)
    assert row.verdict == ("— (GPED, Hydra no better than predicting zero; MU of GPED no better than the best "
                           "constant MU)")  # a tie is no better
    assert row.ours == "GPED 0.080, EnD2 0.030, Hydra 0.039, predicting zero 0.039"
    assert CN.mu_row(tmp_path, "long") == []
    # a student not known to beat the best constant prediction is named apart, not judged
    table.assign(skill=[0.01, 0.8, 0.95, None, 0.9], mu_mae_teacher=[0.08, 0.03, 0.02, 0.039, 0.5]).to_csv(
        path, index=False)
    (row,) = CN.mu_row(tmp_path)
    assert row.verdict == ("— (EnD2, Hydra better than predicting zero; GPED no evidence (skill not stored or below "
                           "the floor))")
    table.drop(columns=["skill", "mu_skill"]).to_csv(path, index=False)  # stored before skill was
    (row,) = CN.mu_row(tmp_path)
    assert row.verdict == "— (GPED, EnD2, Hydra no evidence (skill not stored or below the floor))"


def test_the_verdict_names_the_cells_whose_students_learnt_nothing(tmp_path, tables_recorded):
    """The default profile's Experiment 1-2 cells whose students are below the skill floor are named in the
    verdict, with a link to their skills (issue 52: each one is named, never counted as a result)."""
    below_floor_line = E2N.below_floor_line
    assert below_floor_line(tmp_path) is None
    pd.DataFrame({"model": ["fcnn", "fcnn", "cnn_mnist"], "labelled_size": [10_000, 60_000, 10_000],
                  "mask_size": [0, 0, 0], "masking_rate": [0.0] * 3, "metric": ["entropy MAE"] * 3,
                  "skill_U_o": [-0.002, float("nan"), -0.007], "skill_U_s": [-0.002, 0.029, -0.01]}
                 ).to_csv(tmp_path / "experiment2_mnist_below_floor_default.csv", index=False)
    line = below_floor_line(tmp_path)
    # one estimator below the floor is named, so the other's comparisons are not taken for left out (the U_o
    # student of FCNN's N = 60,000 is Table 1's, and judged); a table written before the estimators column holds
    # only the skills of those below the floor
    named = ("\nFCNN: entropy MAE at m = 0 (N = 10,000); entropy MAE (U_s only) at m = 0 (N = 60,000). "
             "CNN: entropy MAE at m = 0 (N = 10,000).")
    assert named in line
    assert line.startswith("No evidence in the default profile:")
    assert "their comparisons not counted:" in line
    pd.read_csv(tmp_path / "experiment2_mnist_below_floor_default.csv").assign(
        estimators=["U_o, U_s", "U_s", "U_o, U_s"], skill_U_o=[-0.002, 0.069, -0.007]).to_csv(
        tmp_path / "experiment2_mnist_below_floor_default.csv", index=False)
    assert named in below_floor_line(tmp_path)
    assert all(len(part) <= 200 for part in line.splitlines())
    assert "(figures/experiment2_mnist_below_floor_default.md)" in line
    # where notebook 02 wrote the seeds profile's trends, Exp. 2's verdicts rest on it, and so does the line
    for profile in ("seeds", "default"):
        pd.DataFrame({"model": ["fcnn"], "trend": ["x"]}).to_csv(
            tmp_path / f"experiment2_mnist_trends_{profile}.csv", index=False)
    pd.DataFrame({"model": ["fcnn"], "labelled_size": [10_000], "mask_size": [15], "masking_rate": [0.29],
                  "metric": ["entropy MAE"], "skill_U_o": [0.01], "skill_U_s": [0.02]}
                 ).to_csv(tmp_path / "experiment2_mnist_below_floor_seeds.csv", index=False)
    assert E2N.trends_profile(tmp_path) == "seeds"
    line = below_floor_line(tmp_path)
    assert line.startswith("No evidence in the `seeds` profile:")
    assert line.endswith("\nFCNN: entropy MAE at m = 15 (N = 10,000).")


def test_the_readme_defines_its_terms_before_it_uses_them():
    text = README.read_text()
    terms = text.index("**Terms.**")
    for word in ("U_s", "U_o", "`default`", "`seeds`", "`cpu30`", "`long`", "`pooling`", "`paper`", "BAOA", "cyclical",
                 "masking rate"):
        assert terms <= text.index(word) < text.index(R.VERDICT_BEGIN), f"{word!r} is used before it is defined"
    assert "```bibtex\n@inproceedings{vadera2020gped" in text


def test_the_readme_claims_table_keeps_its_cells_short():
    text = README.read_text()
    table = text.split(R.BEGIN, 1)[1].split(R.END, 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    assert rows
    for row in rows:
        for cell in row.strip().strip("|").split(" | "):
            assert len(cell.strip()) <= R.CELL_LIMIT, f"a cell of {len(cell.strip())} characters: {cell[:80]}"
            assert cell.count("(") == cell.count(")"), f"a cell cut mid-parenthesis: {cell}"


def test_shorten_cuts_between_clauses_and_closes_what_it_leaves_open():
    text = "no (agree in 6 of 8; 2 no evidence; unexplained: a long reason that goes on and on) · default: yes"
    assert R.shorten(text, 200) == text
    cut = R.shorten(text, 40)
    assert len(cut) <= 40 and cut.endswith("…)") and cut.count("(") == cut.count(")")
    assert R.shorten("one two three four five six", 12) == "one two …"
    # a text whose first part was cut already (ours, then " · the paper's: ...") is not marked twice
    assert R.shorten("ours 0.1, 0.2 … · the paper's: " + "0.3, " * 60, 40) == "ours 0.1, 0.2 …"


def test_an_exp4_claim_whose_every_cell_is_no_evidence_says_so(tmp_path, tables_recorded):
    """A profile whose Exp. 4 evaluations predate skill has no cell left to compare: its rows say "no evidence",
    not "no (agree in 0 of 0 cells)"; a profile with cells compared keeps its verdict."""
    stem = E4N.ARTIFACTS["claims"].stem
    for profile, agree in (("default", _agree(7, 8, 0, 1)), ("long", _agree(0, 0, 0, 8))):
        pd.DataFrame({"claim": ["GPED lower nll than EnD2"], "ours": ["7 of 8"], **{k: [v] for k, v in agree.items()},
                      "beside": ["EnD2 (tau = 2.5)"], "ours_beside": ["8 of 8"], "paper": ["8 of 8 (MNIST)"],
                      "paper_statement": ["GPED better in every setting"]}).to_csv(
            tmp_path / f"{stem(profile=profile)}.csv", index=False)
    (default,) = E4N.claim_rows(tmp_path, "default")
    (long,) = E4N.claim_rows(tmp_path, "long")
    # the cell left out stays named beside the count (it was dropped: "partly (agree in 7 of 8 cells)")
    assert default.verdict == ("partly (agree in 7 of 8 cells; 1 no evidence: a student below the skill floor or "
                               "stored without its skill)")
    assert long.verdict == "no evidence (8 no evidence: a student below the skill floor or stored without its skill)"


def _exp4_claims_table(folder, profile, agree, ours="5 of 5 (3 not separable)", seeds="6-7 of 8 over 3 seeds "
                       "(seed 0: 7, seed 1: 6, seed 2: 6)", claim="GPED lower nll than EnD2", judged=(5, 5),
                       left_out=(3, 0)):
    pd.DataFrame({"claim": [claim], "ours": [ours], "gped_cells": [judged[0]], "judged_cells": [judged[1]],
                  "ours_not_separable": [left_out[0]], "ours_no_evidence": [left_out[1]],
                  **{k: [v] for k, v in _agree(*agree).items()}, "seeds": [seeds],
                  "beside": ["EnD2 (tau = 2.5)"], "ours_beside": ["8 of 8"], "paper": ["8 of 8 (MNIST)"],
                  "paper_statement": ["GPED better in every setting"]}).to_csv(
        folder / f"{E4N.ARTIFACTS['claims'].stem(profile=profile)}.csv", index=False)


def test_exp4_claims_are_judged_on_the_seeds_profile_where_notebook_06_stored_it(tmp_path, tables_recorded):
    """The default profile's Exp. 4 claims rest on its chains over three seeds (the ``seeds`` profile's table,
    each cell's winner separable or not by the seeds' spread) where stored, as Exp. 2's trends do; before, the
    verdict was the one-seed default's and the seeds only gave per-seed counts."""
    _exp4_claims_table(tmp_path, "default", (7, 8), ours="7 of 8", seeds="7 of 8 (one seed)", judged=(7, 8),
                       left_out=(0, 0))
    (one,) = E4N.claim_rows(tmp_path)  # no seeds table: the default's one seed, where every cell counts
    assert (one.verdict, str(one.evidence)) == ("partly (agree in 7 of 8 cells)", "default, T = 3,000, one seed")
    assert "experiment4_claims_default.md" in one.where and "per seed" not in one.ours
    _exp4_claims_table(tmp_path, "seeds", (5, 5, 3))
    (row,) = E4N.claim_rows(tmp_path)
    assert row.verdict == "yes (agree in 5 of 5 cells; 3 not separable: within the seeds' spread)"
    assert R.short_verdict(row.verdict) == "yes (agree in 5 of 5 cells; 3 not separable)"
    assert str(row.evidence) == "default, T = 3,000, 3 seeds"
    assert "experiment4_claims_seeds.md" in row.where
    assert row.ours == ("5 of 5 (3 not separable); vs EnD² (τ = 2.5): 8 of 8; per seed: 6-7 of 8 over 3 seeds "
                        "(seed 0: 7, seed 1: 6, seed 2: 6)")
    assert E4N.claim_rows(tmp_path, "long") == []  # another profile reads its own table only
    # an OOD claim whose cells of ours are all within the seeds' spread: its count says so, nothing is judged
    _exp4_claims_table(tmp_path, "seeds", (), ours="0 of 8 (8 not separable)", judged=(0, 8), left_out=(8, 0),
                       claim="GPED higher auroc than EnD2 (OOD inputs masked)")
    (ood,) = E4N.claim_rows(tmp_path)
    assert ood.verdict == ("not comparable (no OOD set in common; on ours EnD² leads in 8 of 8 cells judged; "
                           "8 not separable)")
    # the cells left out come from the table's counts, not from the words of its "ours" column
    _exp4_claims_table(tmp_path, "seeds", (), ours="0 of 8", judged=(0, 8), left_out=(2, 1),
                       claim="GPED higher auroc than EnD2 (OOD inputs masked)")
    (ood,) = E4N.claim_rows(tmp_path)
    assert ood.verdict.endswith("leads in 8 of 8 cells judged; 2 not separable; 1 no evidence)")
    _exp4_claims_table(tmp_path, "seeds", (), ours="not separable", judged=(0, 0), left_out=(8, 0),
                       claim="GPED higher auroc than EnD2 (OOD inputs masked)")
    (ood,) = E4N.claim_rows(tmp_path)
    assert ood.verdict == "not comparable (no OOD set in common; on ours not separable)"


def test_an_exp4_claim_judged_on_fewer_cells_than_are_no_evidence_is_no_evidence(tmp_path, tables_recorded):
    """The verdict word comes from judged_verdict: one cell compared against seven no evidence is no evidence, not
    "yes (agree in 1 of 1 cells)" as verdict(1, 1) gave; the cells left out stay in the text."""
    _exp4_claims_table(tmp_path, "default", (1, 1, 0, 7), judged=(1, 1), left_out=(0, 7),
                       ours="1 of 1 (7 no evidence)", seeds="1 of 1 (one seed)")
    (row,) = E4N.claim_rows(tmp_path)
    assert row.verdict == ("no evidence (agree in 1 of 1 cells; 7 no evidence: a student below the skill floor or "
                           "stored without its skill)")
    assert R.short_verdict(row.verdict) == "no evidence (agree in 1 of 1 cells; 7 no evidence)"
    assert E4N.agreement_verdict(pd.Series(_agree(3, 4, 2, 4))) == (
        "partly (agree in 3 of 4 cells; 2 not separable: within the seeds' spread; 4 no evidence: a student below the "
        "skill floor or stored without its skill)")
    assert E4N.agreement_verdict(pd.Series(_agree(0, 0, 3))).startswith("not separable (3 ")
