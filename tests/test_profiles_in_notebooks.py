"""The notebooks' sections "Other profiles in the store" (gped_kit.experiments.frame, each experiment's summary).

Per notebook with such a section (01, 02, 05, 06, 07, 10): a tiny store on MNIST (tiny chains: the
profiles' settings with a few iterations and a small test set) holds the default profile's results;
reading the other profile with ``executor="stored"`` then gives its "not stored" line and computes
nothing (the store gains no entry); once the other profile's tiny results are computed, the same
read gives both profiles in the notebook's side-by-side table. The helpers are tested on known
answers: :func:`side_by_side`, :func:`changed_settings`, the ``seeds`` profiles, the claims of
notebook 07 against the notebook's former inline computation.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from gped_kit.core.baoa import BAOAConfig
from gped_kit.core.status import Status
from gped_kit.data.sources import DatasetNotFoundError, load_split
from gped_kit.experiments import comparison as C
from gped_kit.experiments import experiment1 as E1
from gped_kit.experiments import experiment2 as E2
from gped_kit.experiments import experiment4 as E4
from gped_kit.experiments import frame, registry, samplers
from gped_kit.experiments.settings import changed_settings
from gped_kit.experiments.store import ResultsStore

# Each test executes a notebook under papermill (10-30 s each): in `make test-slow`, which CI runs after `make test`.
pytestmark = pytest.mark.slow


def _mnist_present() -> bool:
    try:
        load_split("mnist", "test")
    except DatasetNotFoundError:
        return False
    return True


needs_mnist = pytest.mark.skipif(not _mnist_present(), reason="MNIST is not available here")

#: Tiny chains for every profile (the fields every notebook's settings share).
TINY = {"num_iterations": 40, "burn_in": 10, "test_size": 100, "eval_thinning": 1}


def entry_paths(store: ResultsStore) -> set[str]:
    """Every entry directory of the store, complete or not (lock files are not entries)."""
    return {f"{e.kind}/{e.key}" for e in store.entries(complete=False)} | {
        p.relative_to(store.root).as_posix() for p in store.root.glob("*/*") if p.is_dir()}


def profiles_read(notebook: str, overrides: dict, other: str, tmp_path, **parameters):
    """The test of one notebook's section: the default profile computed; the other profile read from the
    store (not stored: one line, no entry added); the other profile computed; both read side by side."""
    entry = registry.notebook(notebook)
    store = ResultsStore(tmp_path / "results")
    default = entry.summarise(store, entry.settings("default", overrides), profile="default", progress=False,
                              **parameters)
    assert default.complete and default.missing == []
    before = entry_paths(store)
    beside = entry.stored_profiles(default, store, profiles=("default", other), **parameters)
    assert list(beside.summaries) == ["default"] and not beside.others
    assert len(beside.lines) == 1
    line = beside.lines[0]
    assert line.startswith(f"Profile {other!r}: not in the store (") and Status.NOT_STORED in line
    assert line.endswith(f"make it with `python -m gped_kit.cli.batch --profile {other} {notebook}`.")
    assert entry_paths(store) == before  # nothing was computed
    computed = entry.summarise(store, entry.settings(other, changed_settings(default.settings,
                                                                             entry.settings("default"))),
                               profile=other, progress=False, **parameters)
    assert computed.complete
    after = entry_paths(store)
    beside = entry.stored_profiles(default, store, profiles=("default", other), **parameters)
    assert list(beside.summaries) == ["default", other] and beside.others and beside.lines == []
    assert entry_paths(store) == after
    read = beside.summaries[other]
    assert read.settings == computed.settings and read.profile == other
    for name, table in computed.tables.items():  # read back, the other profile's tables are the computed ones
        pd.testing.assert_frame_equal(read.tables[name].reset_index(drop=True), table.reset_index(drop=True),
                                      check_dtype=False)
    # the same read from the other profile's side puts the default beside it, in the notebook's order
    reverse = entry.stored_profiles(computed, store, profiles=("default", other), **parameters)
    assert list(reverse.summaries) == ["default", other] and reverse.summaries[other] is computed
    return beside


# ----------------------------------------------------------------------------- the helpers
def test_side_by_side_stacks_or_aligns_with_known_answers():
    a = pd.DataFrame({"claim": ["x", "y"], "ours": ["1 of 2", "2 of 2"], "paper": ["1 of 2", "0 of 2"]})
    b = pd.DataFrame({"claim": ["y", "z"], "ours": ["0 of 2", "1 of 1"], "paper": ["0 of 2", "1 of 1"]})
    stacked = frame.side_by_side({"default": a, "long": b})
    assert list(stacked.columns) == ["profile", "claim", "ours", "paper"]
    assert stacked["profile"].tolist() == ["default", "default", "long", "long"]
    wide = frame.side_by_side({"default": a, "long": b}, keys=["claim"], same=("paper",))
    assert list(wide.columns) == ["claim", "ours (default)", "ours (long)", "paper"]
    assert wide["claim"].tolist() == ["x", "y", "z"]
    assert wide["ours (default)"].tolist()[:2] == ["1 of 2", "2 of 2"] and pd.isna(wide["ours (default)"].iloc[2])
    assert wide["paper"].tolist() == ["1 of 2", "0 of 2", "1 of 1"]  # equal where both have it: once
    # a "same" column that differs between profiles is split like the others
    c = b.assign(paper=["5 of 9", "1 of 1"])
    split = frame.side_by_side({"default": a, "long": c}, keys=["claim"], same=("paper",))
    assert list(split.columns) == ["claim", "ours (default)", "ours (long)", "paper (default)", "paper (long)"]
    # several keys; bad input is refused before any work
    two = frame.side_by_side({"p": pd.DataFrame({"m": ["f", "f"], "t": [1, 2], "v": [0.5, 0.25]})}, keys=["m", "t"])
    assert two.to_dict("list") == {"m": ["f", "f"], "t": [1, 2], "v (p)": [0.5, 0.25]}
    with pytest.raises(ValueError, match="lacks the key column"):
        frame.side_by_side({"p": a}, keys=["nope"])
    with pytest.raises(ValueError, match="missing values"):
        frame.side_by_side({"p": pd.DataFrame({"claim": [None], "ours": [1]})}, keys=["claim"])
    with pytest.raises(TypeError, match="must be a DataFrame"):
        frame.side_by_side({"p": [1, 2]})


def test_changed_settings_give_the_run_back_and_the_same_changes_to_another_profile():
    entry = registry.notebook("07_hydra_comparison")
    run = entry.settings("default", {"num_iterations": 40, "hydra.phase1_steps": 7, "spiral.hydra.lr": 0.5})
    changes = changed_settings(run, entry.settings("default"))
    assert changes == {"num_iterations": 40, "hydra.phase1_steps": 7, "spiral.hydra.lr": 0.5}
    assert entry.settings("default", changes) == run
    long = entry.settings("long", changes)
    assert (long.num_iterations, long.hydra.phase1_steps, long.spiral.hydra.lr) == (40, 7, 0.5)
    assert long.hydra.phase2_steps == entry.settings("long").hydra.phase2_steps  # fields not changed keep the profile's
    assert changed_settings(run, run) == {}
    with pytest.raises(TypeError, match="one class"):
        changed_settings(run, E4.PROFILES["default"])


def test_seeds_profiles_are_the_default_with_three_seeds():
    for module in (E2, E4):
        assert module.PROFILES["seeds"] == dataclasses.replace(module.PROFILES["default"], seeds=(0, 1, 2))
        assert module.PROFILES["default"].seeds == (0,)
    # every profile a notebook shows beside its own is one of its experiment's profiles
    for experiment in registry.EXPERIMENTS:
        profiles = experiment.shown_profiles
        assert not experiment.profiles or set(profiles) <= set(experiment.profiles), experiment.name
        assert profiles[0] == "default"


def test_stored_reads_refuse_to_recompute(tmp_path):
    with pytest.raises(ValueError, match="cannot be combined with recompute=True"):
        E1.EXPERIMENT.summarise(ResultsStore(tmp_path), E1.PROFILES["default"], models=["fcnn"], executor="stored",
                                recompute=True)


def test_a_profile_whose_chains_the_overrides_make_invalid_gets_a_line(tmp_path):
    """Notebook 10's default warm-up candidate needs B >= 1,000; a run of the pooling profile with B = 10
    cannot be carried over to it: one line says so, and nothing is read or computed."""
    entry = registry.notebook("10_samplers")
    run = frame.Summary(entry, "pooling", entry.settings("pooling", {"burn_in": 10}), None)
    beside = entry.stored_profiles(run, ResultsStore(tmp_path / "results"))
    assert list(beside.summaries) == ["pooling"]
    assert len(beside.lines) == 1 and beside.lines[0].startswith("Profile 'default': its settings do not take this "
                                                                 "run's overrides (")
    assert "warmup_steps" in beside.lines[0] and not (tmp_path / "results").exists()


def test_comparison_claims_are_the_notebooks_former_checks():
    """Notebook 07's claims on a hand-made table, against the notebook's former inline code."""
    rows = []
    values = {"test": {"Hydra": 0.01, "GPED": 0.03, "EnD2": 0.02, C.ZERO_MU: 0.04},
              "mnist_rotated60": {"Hydra": 0.05, "GPED": 0.01, "EnD2": 0.02, C.ZERO_MU: 0.04}}
    for eval_set, by_method in values.items():
        for method, mu in by_method.items():
            rows.append({"eval_set": eval_set, "method": method, "mu_mae_snapshots": mu, "mu_mae_teacher": mu,
                         "accuracy": 0.9 if method != C.ZERO_MU else float("nan"),
                         "skill": 0.9 if method != C.ZERO_MU else float("nan"),
                         "predictive_skill": 0.9 if method != C.ZERO_MU else float("nan")})
        rows.append({"eval_set": eval_set, "method": "Snapshot ensemble", "mu_mae_snapshots": 0.0,
                     "mu_mae_teacher": 0.0, "accuracy": 0.905})
    table = pd.DataFrame(rows)
    table = pd.concat([table, pd.DataFrame({"eval_set": "test", "method": ["KD", "KD (noise inputs)"],
                                            "skill": [0.9, 0.6], "predictive_skill": [0.9, 0.6]})], ignore_index=True)
    kd = pd.DataFrame({"student": ["KD", "KD (noise inputs)"], "student_nll": [0.3, 0.9]})
    spiral = pd.DataFrame({"eval_set": ["grid"] * 3 + ["test"] * 3, "method": ["Hydra", "GPED", "EnD2"] * 2,
                           "mu_mae_snapshots": [0.2, 0.1, 0.3] * 2, "skill": [0.8] * 6})
    claims = C.comparison_claims(table, kd, spiral).set_index("claim")

    def mae(df, method, eval_set, ref):  # the notebook's former helper, verbatim
        row = df[(df["method"] == method) & (df["eval_set"] == eval_set)]
        return float(row[f"mu_mae_{ref}"].iloc[0]) if len(row) else float("nan")

    sets = ["test", "mnist_rotated60"]
    hydra_best = [s_ for s_ in sets if mae(table, "Hydra", s_, "snapshots") < min(mae(table, "GPED", s_, "snapshots"),
                                                                                 mae(table, "EnD2", s_, "snapshots"))]
    gped_best = [s_ for s_ in sets if mae(table, "GPED", s_, "teacher") < min(mae(table, "Hydra", s_, "teacher"),
                                                                             mae(table, "EnD2", s_, "teacher"))]
    names = [name for name, _ in C.COMPARISON_CLAIMS]
    assert claims.loc[names[0], "ours"] == f"{len(hydra_best)} of 2" == "1 of 2"
    assert claims.loc[names[0], "sets"] == str(hydra_best) == "['test']"
    assert claims.loc[names[1], "ours"] == "1 of 2" and claims.loc[names[1], "sets"] == str(gped_best)
    assert [claims.loc[n, "ours"] for n in names[2:]] == [True, True, True, False, True]
    assert all(type(claims.loc[n, "ours"]) is bool for n in names[2:])  # printed "True" / "False" as before
    # a student not known to beat the best constant: every claim about it is no evidence, the others stand
    weak = table.assign(skill=table["skill"].where(table["method"] != "GPED", 0.01))
    claims = C.comparison_claims(weak, kd, spiral).set_index("claim")
    about_gped = [names[0], names[1], names[6]]
    assert [claims.loc[n, "ours"] for n in about_gped] == ["no evidence"] * 3
    assert claims.loc[names[6], "sets"] == "not known to beat the best constant: GPED (skill 0.010)"
    assert [claims.loc[n, "ours"] for n in names[2:6]] == [True, True, True, False]
    # noise inputs that teach nothing are the thesis' claim: only the student on resampled D' must have skill
    noise = table.assign(skill=table["skill"].where(table["method"] != "KD (noise inputs)", -0.2))
    assert C.comparison_claims(noise, kd, spiral).set_index("claim").loc[names[4], "ours"] is True
    no_kd = table.assign(predictive_skill=table["predictive_skill"].where(table["method"] != "KD", 0.0))
    assert C.comparison_claims(no_kd, kd, spiral).set_index("claim").loc[names[4], "ours"] == "no evidence"
    # a table stored before the comparison reported skill judges no student of it (the spiral's has skill)
    claims = C.comparison_claims(table.drop(columns=["skill", "predictive_skill"]), kd, spiral).set_index("claim")
    assert set(claims["ours"].drop(index=names[5])) == {"no evidence"} and claims.loc[names[5], "ours"] is False
    assert claims.loc[names[3], "sets"] == ("not known to beat the best constant: Hydra (skill not stored), "
                                            "EnD2 (skill not stored)")
    # the closest-MU claims are gated set by set: a student worse than a constant on one (OOD) set leaves that
    # set out, named, and the others judged
    ood = table.assign(skill=table["skill"].where((table["method"] != "EnD2") | (table["eval_set"] == "test"), -0.5))
    claims = C.comparison_claims(ood, kd, spiral).set_index("claim")
    assert claims.loc[names[0], "ours"] == "1 of 1" and claims.loc[names[0], "sets"] == (
        "['test']; 1 sets no evidence (not known to beat the best constant there: mnist_rotated60: EnD2)")
    assert claims.loc[names[1], "ours"] == "0 of 1"
    # the NLL and accuracy claims rest on the predictive: an entropy head below the floor does not void them
    entropy_weak = table.assign(skill=table["skill"].where(table["method"] != "Hydra", 0.01))
    assert C.comparison_claims(entropy_weak, kd, spiral).set_index("claim").loc[names[2], "ours"] is True
    # the spiral's claim compares MU maps on the grid, so the students' skill on the grid gates it, not the test set's
    grid_weak = spiral.assign(skill=spiral["skill"].where((spiral["method"] != "EnD2") | (spiral["eval_set"] != "grid"),
                                                          0.03))
    claims = C.comparison_claims(table, kd, grid_weak).set_index("claim")
    assert claims.loc[names[5], "ours"] == "no evidence" and claims.loc[names[5], "sets"] == (
        "not known to beat the best constant: EnD2 (skill 0.030)")
    test_weak = spiral.assign(skill=spiral["skill"].where(spiral["eval_set"] != "test", 0.03))
    assert C.comparison_claims(table, kd, test_weak).set_index("claim").loc[names[5], "ours"] is False


# ----------------------------------------------------------------------------- one test per notebook
@needs_mnist
def test_notebook_01_cpu30_beside_the_default(tmp_path):
    overrides = {**TINY, "log_every": 20, "checkpoint_every": 40}
    beside = profiles_read("01_experiment1", overrides, "cpu30", tmp_path, models=["fcnn"])
    table = E1.table1_by_profile(beside.summaries)
    assert table["profile"].tolist() == ["default", "cpu30", E1.PAPER_TABLE1] and set(table["model"]) == {"fcnn"}
    assert table.loc[2, "teacher_nll"] == 0.052  # the paper's Table 1
    ours = table.iloc[:2]
    assert (ours["seconds"] > 0).all() and ours["seeds"].tolist() == [3, 3]  # cpu30 runs Table 1 on three seeds too
    assert ours["teacher_nll / paper"].tolist() == pytest.approx((ours["teacher_nll"] / 0.052).tolist())
    run_time = beside.summaries["cpu30"].tables["run_time"]
    metas = [o.entry.meta for o in beside.summaries["cpu30"].run.outcomes]
    shares = [m["seconds"] / max(int(m.get("batched_with") or 1), 1) for m in metas]
    assert len(metas) == 3 and run_time[["model", "chains"]].to_dict("records") == [{"model": "fcnn", "chains": 3}]
    assert run_time["seconds"].item() == pytest.approx(sum(shares))
    line = E1.run_time_line(beside.summaries)
    assert "default " in line and f"cpu30 {sum(shares) / 60:.1f} min (3 chains)" in line


@needs_mnist
def test_notebook_02_seeds_beside_the_default(tmp_path):
    overrides = {**TINY, "log_every": 20, "checkpoint_every": 40, "labelled_sizes": (1_000,),
                 "mask_sizes": (0, 25)}
    beside = profiles_read("02_experiment2_mnist", overrides, "seeds", tmp_path,
                           models=["fcnn"])
    assert len(beside.summaries["seeds"].run.outcomes) == 3 * len(beside.summaries["default"].run.outcomes)
    trends = beside.table("trends", keys=["model", "trend"], columns=["ours", "paper", "agree", "seeds"])
    assert {"ours (default)", "ours (seeds)", "paper", "seeds (default)", "seeds (seeds)"} <= set(trends.columns)
    assert trends["seeds (default)"].str.endswith("(one seed)").all()
    assert trends["seeds (seeds)"].str.contains("seeds").all() and not trends["seeds (seeds)"].str.contains(
        "one seed").any()


@needs_mnist
def test_notebook_05_long_beside_the_default(tmp_path):
    overrides = {**TINY, "models": ("fcnn",), "k1_values": (1.0,), "k2_values": (1.0, 2.0), "reg_weights": (1e-3,),
                 "search.finetune_epochs": 0.01, "search.latency_repeats": 1}
    beside = profiles_read("05_experiment3_search", overrides, "long", tmp_path)
    assert beside.summaries["long"].settings.num_chains == 4  # the pooled teacher, read back
    table = beside.table("comparison", keys=["model", "metric", "quantity"], same=("figure", "paper"))
    assert {"ours (default)", "ours (long)", "paper", "figure"} <= set(table.columns)
    nll = table[table["metric"] == "student_nll"].set_index("quantity")
    assert bool(nll.loc["a searched student beats the base student", "paper"])
    assert nll["ours (default)"].notna().sum() > 5 and nll["ours (long)"].notna().sum() > 5


@needs_mnist
def test_notebook_06_long_and_seeds_beside_the_default(tmp_path):
    overrides = {**TINY, "log_every": 20, "checkpoint_every": 40, "ood_size": 50, "ndcg_trials": 3,
                 "largest_k": (1.0, 1.5)}
    beside = profiles_read("06_experiment4_uncertainty", overrides, "long", tmp_path,
                           models=["fcnn"])
    claims = beside.table("claims", keys=["claim"], columns=["ours", "paper", "agree", "seeds"])
    assert {"ours (default)", "ours (long)", "paper", "agree (default)", "agree (long)"} <= set(claims.columns)
    assert claims["paper"].notna().all()
    quality = beside.table("teacher_quality", keys=["model", "metric"], same=("paper",))
    nll = quality.set_index("metric").loc["nll"]
    assert nll["paper"] == 0.362 and nll["teacher (default)"] > 0 and nll["teacher (long)"] > 0
    # the seeds profile: three chains per model, every count with its spread; its seed 0 is the default's
    store = ResultsStore(tmp_path / "results")
    default = beside.summaries["default"]
    entry = registry.notebook("06_experiment4_uncertainty")
    changes = changed_settings(default.settings, entry.settings("default"))
    seeds = entry.summarise(store, entry.settings("seeds", changes), models=["fcnn"], profile="seeds", progress=False)
    assert seeds.run.cells["evaluation"].tolist() == [Status.REUSED, Status.RAN, Status.RAN]
    every = entry.stored_profiles(default, store, models=["fcnn"])
    assert list(every.summaries) == ["default", "long", "seeds"] and every.lines == []
    counts = every.table("claims", keys=["claim"], columns=["seeds", "agree"])
    # a count over the three seeds, or none where every (cell, seed) rests on a student below the skill floor
    # (these chains are tiny): then the agreement says so
    for seeds_count, agree in zip(counts["seeds (seeds)"], counts["agree (seeds)"]):
        assert "3 seeds" in seeds_count or ("no seed" in seeds_count and "no evidence" in agree)
    assert set(every.summaries["seeds"].run.data_uncertainty["seed"]) == {0, 1, 2}  # Figure 15 takes the first


@needs_mnist
def test_notebook_07_long_beside_the_default(tmp_path):
    overrides = {**TINY, "log_every": 20, "checkpoint_every": 40, "num_snapshots": 4, "hydra.phase1_steps": 3,
                 "hydra.phase2_steps": 3, "spiral.num_iterations": 40, "spiral.burn_in": 10,
                 "spiral.num_snapshots": 3, "spiral.hydra.phase1_steps": 3, "spiral.hydra.phase2_steps": 3}
    beside = profiles_read("07_hydra_comparison", overrides, "long", tmp_path)
    test = beside.table("test", keys=["method"])
    assert {"accuracy (default)", "accuracy (long)", "mu_mae_teacher (default)", "mu_mae_teacher (long)"} <= set(
        test.columns)
    assert {"Long-chain teacher", "Hydra", "GPED", "EnD2", C.ZERO_MU} <= set(test["method"])
    claims = beside.table("claims", keys=["claim"], columns=["ours", "paper"])
    assert claims["claim"].tolist() == [name for name, _ in C.COMPARISON_CLAIMS] and "paper" in claims
    assert beside.summaries["long"].run.spiral.entry.key == beside.summaries["default"].run.spiral.entry.key


@needs_mnist
def test_notebook_10_pooling_beside_the_default(tmp_path):
    baoa = BAOAConfig(step_size=0.2, alpha=0.5, prior_precision=10.0, batch_size=100)
    overrides = {**TINY, "seeds": (0,), "candidates": (("BAOA", baoa, 1), ("BAOA, 2 pooled", baoa, 2))}
    beside = profiles_read("10_samplers", overrides, "pooling", tmp_path)
    table = samplers.sampler_table_by_profile(beside.summaries)
    assert table["profile"].tolist() == ["default", "default", "pooling", "pooling", samplers.PAPER_SAMPLER]
    assert table["candidate"].tolist()[:2] == ["BAOA", "BAOA, 2 pooled"]
    assert table.loc[4, "teacher NLL"] == 0.052
    winners = beside.table("winners")
    assert winners["profile"].tolist() == ["default"] * 4 + ["pooling"] * 4  # WINNER_QUANTITIES: 3 and a skill
    assert set(winners["separated"]) <= {"one seed", "no evidence"}  # one seed: no order is established
