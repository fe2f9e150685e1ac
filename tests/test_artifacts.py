"""Declared artifacts and the figures manifest: file names filled from declared templates with clear errors,
captions distinct per file, provenance recorded by the writer (with the store entries read), several writers
losing no record, and a rewrite of the same files leaving the manifest byte-identical."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gped_kit.experiments.artifacts import (  # noqa: E402
    MANIFEST,
    Artifact,
    Kind,
    Provenance,
    declare,
    read_manifest,
    record,
    template_fields,
)
from gped_kit.experiments.experiment1 import PROFILES as E1_PROFILES  # noqa: E402
from gped_kit.experiments.registry import EXPERIMENTS  # noqa: E402
from gped_kit.experiments.store import ResultsStore  # noqa: E402
from gped_kit.viz.writer import ArtifactWriter  # noqa: E402

TABLE = Artifact("t", Kind.TABLE, "demo_{model}_{profile}", "Demo of {model} ({profile} profile)", "a test")
FIGURE = Artifact("f", Kind.FIGURE, "demo_fig_{profile}", "Demo figure ({profile} profile)", "a test")


def test_templates_fill_every_field_and_nothing_else():
    assert template_fields("a_{model}_{profile}_{model}") == ("model", "profile")
    assert TABLE.stem(model="fcnn", profile="default") == "demo_fcnn_default"
    assert TABLE.files(model="fcnn", profile="long") == ("demo_fcnn_long.md", "demo_fcnn_long.csv")
    assert TABLE.caption_for(model="cnn_mnist", profile="long") == "Demo of CNN-MNIST (long profile)"
    with pytest.raises(ValueError, match="missing \\['model'\\]"):
        TABLE.stem(profile="default")
    with pytest.raises(ValueError, match="not a field: \\['seed'\\]"):
        TABLE.stem(model="fcnn", profile="default", seed=0)
    with pytest.raises(ValueError, match="cannot be part of a file name"):
        TABLE.stem(model="../x", profile="default")
    with pytest.raises(ValueError, match="its caption uses \\['seed'\\]"):
        Artifact("bad", Kind.TABLE, "x_{profile}", "seed {seed}")
    with pytest.raises(ValueError, match="must be a plain name"):
        template_fields("x_{0}")


def test_declare_refuses_two_artifacts_writing_the_same_files():
    with pytest.raises(ValueError, match="declared twice"):
        declare(TABLE, TABLE)
    with pytest.raises(ValueError, match="would write the same files"):
        declare(TABLE, Artifact("u", Kind.TABLE, TABLE.file, "other"))
    both = declare(TABLE, Artifact("g", Kind.FIGURE, TABLE.file, "Drawn {model} ({profile})"))  # .md/.csv and .png/.pdf
    assert sorted(both) == ["g", "t"]


def test_every_declared_caption_is_distinct():
    """No two artifacts of the kit share a caption template, and every caption names the fields that tell its
    files apart (a caption template without a field of its file name would repeat over those files)."""
    captions = [a.caption for e in EXPERIMENTS for a in e.artifacts.values()]
    assert len(captions) == len(set(captions))
    for e in EXPERIMENTS:
        for a in e.artifacts.values():
            assert set(template_fields(a.caption)) == set(a.fields), (e.name, a.key)


def _write(args):
    folder, i = args
    record(folder, [Provenance(f"file{i}", Kind.TABLE, "nb", "t", "default", f"caption {i}")], run=f"nb/p{i}",
           settings={"i": i})


def test_several_writers_lose_no_record(tmp_path):
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(_write, [(tmp_path, i) for i in range(12)])
    manifest = read_manifest(tmp_path)
    assert sorted(manifest.files) == sorted(f"file{i}.md" for i in range(12))
    assert manifest.runs["nb/p3"] == {"i": 3}
    assert manifest.owner("file3.csv").caption == "caption 3" and manifest.owner("file3.png") is None


def test_writer_records_provenance_and_a_rewrite_changes_nothing(tmp_path):
    store = ResultsStore(tmp_path / "results")
    entry = store.entry("chain", {"a": 1})
    entry.path.mkdir(parents=True)
    entry.write_table("summary", pd.DataFrame({"x": [1.0]}))
    figures = tmp_path / "figures"
    out = ArtifactWriter("00_demo", "default", figures, store=store, settings={"steps": 10})
    out.figure(plt.figure(), FIGURE)  # before the store is read: no entry behind it
    entry.table("summary")
    out.table(pd.DataFrame({"nll": [0.5]}), TABLE, model="fcnn")
    with pytest.raises(ValueError, match="the profile is the writer's"):
        out.table(pd.DataFrame(), TABLE, model="fcnn", profile="long")
    with pytest.raises(ValueError, match="is a table, not a figure"):
        out.figure(plt.figure(), TABLE, model="fcnn")
    manifest = read_manifest(figures)
    table = manifest.owner("demo_fcnn_default.csv")
    assert table.notebook == "00_demo" and table.artifact == "t" and table.values == {"model": "fcnn",
                                                                                        "profile": "default"}
    assert table.store_keys == (entry.name,) and manifest.owner("demo_fig_default.pdf").store_keys == ()
    assert manifest.runs == {"00_demo/default": {"steps": 10}}
    assert {p.name for p in figures.iterdir()} == {MANIFEST, ".manifest.lock", "demo_fcnn_default.md",
                                                    "demo_fcnn_default.csv", "demo_fig_default.png",
                                                    "demo_fig_default.pdf"}
    before = (figures / MANIFEST).read_bytes()
    again = ArtifactWriter("00_demo", "default", figures, store=store, settings={"steps": 10})
    again.table(pd.DataFrame({"nll": [0.5]}), TABLE, model="fcnn")
    assert (figures / MANIFEST).read_bytes() == before


def test_a_run_with_overridden_settings_stops_before_it_replaces_another_runs_files(tmp_path):
    """A notebook run whose settings differ from its profile's own (a ``-p`` override) refuses, when the writer is
    made, a figures folder holding that profile's files from a run of other settings, naming what differs; the
    profile as it is, and the same overridden run again, may write there."""
    own = E1_PROFILES["default"]
    custom = dataclasses.replace(own, num_iterations=own.num_iterations // 2)
    figures = tmp_path / "figures"
    ArtifactWriter("01_experiment1", "default", figures, settings=own).table(pd.DataFrame({"x": [1.0]}), "table1")
    before = {p.name: p.read_bytes() for p in figures.iterdir()}
    with pytest.raises(ValueError, match=rf"num_iterations={own.num_iterations // 2} \(the folder's run: "
                                         rf"{own.num_iterations}\) would replace them. Give figures_dir a folder"):
        ArtifactWriter("01_experiment1", "default", figures, settings=custom)
    assert {p.name: p.read_bytes() for p in figures.iterdir()} == before  # nothing written
    mine = figures / "my-run"
    ArtifactWriter("01_experiment1", "default", mine, settings=custom).table(pd.DataFrame({"x": [2.0]}), "table1")
    ArtifactWriter("01_experiment1", "default", mine, settings=custom)  # the same overridden run again
    ArtifactWriter("01_experiment1", "default", figures, settings=own)  # the profile regenerated
    ArtifactWriter("01_experiment1", "cpu30", figures, settings=custom)  # another profile's files: none there
