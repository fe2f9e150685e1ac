"""The one way a notebook writes to ``figures/``: an :class:`ArtifactWriter` bound to (notebook, profile).

A notebook makes one at its start::

    writer = ArtifactWriter("01_experiment1", profile, "../figures", store=store, settings=settings)
    writer.table(table, "table1")                      # table1_experiment1_<profile>.md and .csv
    writer.figure(fig, "reliability", model="fcnn")    # fig_reliability_experiment1_fcnn_<profile>.png and .pdf
    writer.check("mnist_finished", bool(done))         # prints "every MNIST cell completed: True" and records it

The notebook is named by its stem (its registry entry is looked up) or given as its
:class:`~gped_kit.experiments.frame.Experiment` (a notebook of your own, not in the registry). An artifact is
named by its key among the notebook's declared ones (the entry's ``artifacts``) or given
as an :class:`~gped_kit.experiments.artifacts.Artifact` (a notebook of your own). Each call fills the artifact's
file-name template (:class:`~gped_kit.experiments.artifacts.Artifact`; the
profile is the writer's, the other fields the call's), writes the files as :func:`~gped_kit.plotting.save.save_figure`
and :func:`~gped_kit.plotting.save.save_table` do (files that show the same figure or table are kept as they are)
and records their :class:`~gped_kit.experiments.artifacts.Provenance` in the folder's manifest, with the store
entries the notebook's ``store`` has read so far. The run's settings are recorded once, at the first write.
A check (:mod:`~gped_kit.experiments.checks`) is named by its key among the notebook's declared checks (the
entry's ``checks``) or given as a :class:`~gped_kit.experiments.checks.Check`; the writer prints its line and
records its outcome.

A run whose settings differ from its profile's own (a ``-p`` override) stops when its writer is made, before it
computes anything, if the folder holds that profile's files from a run of other settings: it would replace them.
Such a run writes to a ``figures_dir`` of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from ..experiments.artifacts import Artifact, Kind, Provenance, read_manifest, record, settings_record
from ..experiments.checks import Check, CheckOutcome
from ..experiments.frame import Experiment
from ..experiments.registry import NOTEBOOKS
from ..experiments.store import ResultsStore
from ..plotting.save import save_figure, save_table, write_png


class ArtifactWriter:
    """Writes a notebook's declared artifacts into ``figures_dir`` and records where each came from (see the
    module docstring). ``store``: the notebook's results store (its entries read so far are each file's
    ``store_keys``; None: none); ``settings``: the run's settings, recorded once per (notebook, profile)."""

    def __init__(self, notebook: str | Experiment, profile: str, figures_dir: str | Path,
                 store: ResultsStore | None = None, settings: Any = None) -> None:
        entry = notebook if isinstance(notebook, Experiment) else NOTEBOOKS.get(notebook)
        name = notebook.name if isinstance(notebook, Experiment) else notebook
        if not name or "/" in name:
            raise ValueError(f"notebook={name!r}: give the notebook's stem, e.g. '01_experiment1', or its "
                             "registry entry")
        self.notebook, self.profile, self.figures_dir = name, str(profile), Path(figures_dir)
        self.store, self.settings = store, settings
        own = entry.profiles.get(self.profile) if entry is not None else None
        if own is not None and settings is not None:
            _refuse_replacing_another_run(self.figures_dir, name, self.profile, settings, own)
        #: The notebook's declared artifacts by key (none for a notebook the registry does not know).
        self.declared = dict(entry.artifacts) if entry is not None else {}
        #: The notebook's declared checks by key (none for a notebook the registry does not know).
        self.declared_checks = dict(entry.checks) if entry is not None else {}
        self._settings_recorded = False
        self.written: list[Provenance] = []
        #: This execution's check outcomes, by statement (the run's recorded ones in the manifest).
        self.outcomes: dict[str, CheckOutcome] = {}

    def __repr__(self) -> str:
        return f"ArtifactWriter({self.notebook!r}, profile={self.profile!r}, {str(self.figures_dir)!r})"

    def artifact(self, artifact: Artifact | str) -> Artifact:
        """``artifact`` itself, or the notebook's declared artifact of that key (an unknown key is an error that
        lists the declared ones)."""
        if isinstance(artifact, Artifact):
            return artifact
        if artifact not in self.declared:
            raise ValueError(f"{self.notebook} declares no artifact {artifact!r}; declared: {sorted(self.declared)}")
        return self.declared[artifact]

    def declared_check(self, check: Check | str) -> Check:
        """``check`` itself, or the notebook's declared check of that key (an unknown key is an error that lists
        the declared ones)."""
        if isinstance(check, Check):
            return check
        if check not in self.declared_checks:
            raise ValueError(f"{self.notebook} declares no check {check!r}; declared: {sorted(self.declared_checks)}")
        return self.declared_checks[check]

    def _values(self, artifact: Artifact, kind: Kind, values: dict[str, Any]) -> dict[str, Any]:
        if artifact.kind is not kind:
            raise ValueError(f"artifact {artifact.key!r} is a {artifact.kind}, not a {kind}")
        if "profile" in values:
            raise ValueError(f"artifact {artifact.key!r}: the profile is the writer's ({self.profile!r}), not a "
                             "value to give")
        return {**values, "profile": self.profile} if "profile" in artifact.fields else dict(values)

    def _record(self, artifact: Artifact, stem: str, values: dict[str, Any]) -> Provenance:
        entry = Provenance(stem=stem, kind=artifact.kind, notebook=self.notebook, artifact=artifact.key,
                           profile=self.profile, caption=artifact.caption_for(**values),
                           values={k: str(v) for k, v in values.items()},
                           store_keys=tuple(sorted(self.store.read_keys)) if self.store is not None else ())
        run = None if self._settings_recorded else f"{self.notebook}/{self.profile}"
        record(self.figures_dir, [entry], run=run, settings=self.settings)
        self._settings_recorded = True
        self.written.append(entry)
        return entry

    def figure(self, fig: plt.Figure, artifact: Artifact | str, **values: Any) -> list[Path]:
        """Save ``fig`` as ``artifact``'s PNG and PDF for the cell ``values`` and record it."""
        artifact = self.artifact(artifact)
        values = self._values(artifact, Kind.FIGURE, values)
        stem = artifact.stem(**values)
        paths = save_figure(fig, stem, self.figures_dir)
        self._record(artifact, paths[0].stem, values)
        return paths

    def table(self, table: pd.DataFrame, artifact: Artifact | str, floatfmt: str = ".3f",
              **values: Any) -> list[Path]:
        """Save ``table`` as ``artifact``'s Markdown and CSV for the cell ``values`` and record it."""
        artifact = self.artifact(artifact)
        values = self._values(artifact, Kind.TABLE, values)
        paths = save_table(table, artifact.stem(**values), self.figures_dir, floatfmt=floatfmt)
        self._record(artifact, paths[0].stem, values)
        return paths

    def check(self, check: Check | str, value: Any, **values: Any) -> None:
        """Test ``check`` (a declared key, or a :class:`~gped_kit.experiments.checks.Check`) for the cell
        ``values``: print ``<statement>: <value>`` and record the outcome in the manifest under this run, with
        this execution's earlier outcomes (they replace the run's previous ones; :attr:`outcomes`). An
        invariant's ``value`` must be a bool. Returns nothing, so that a check ending a cell shows only its line."""
        outcome = self.declared_check(check).outcome(value, **values)
        print(outcome.line)
        self.outcomes[outcome.statement] = outcome
        run = f"{self.notebook}/{self.profile}"
        record(self.figures_dir, [], run=None if self._settings_recorded else run, settings=self.settings,
               checks=(run, list(self.outcomes.values())))
        self._settings_recorded = True

    def snapshot(self, png: bytes, artifact: Artifact | str, **values: Any) -> Path:
        """Write an explorer's view ``png`` as ``artifact``'s file for ``values`` and record it."""
        artifact = self.artifact(artifact)
        values = self._values(artifact, Kind.SNAPSHOT, values)
        stem = artifact.stem(**values)
        path = write_png(png, self.figures_dir / f"{stem}.png")
        self._record(artifact, stem, values)
        return path


__all__ = ["ArtifactWriter"]


def _refuse_replacing_another_run(figures_dir: Path, notebook: str, profile: str, settings: Any, own: Any) -> None:
    """``ValueError`` before the notebook computes anything when this run would replace files of another run
    in ``figures_dir``: its ``settings`` differ from the profile's own (``own``: some were overridden) and from the
    settings the folder's manifest records for (``notebook``, ``profile``). A run of the profile as it is may
    replace them (the profile's figures regenerated), and so may the same overridden run again."""
    recorded = read_manifest(figures_dir).runs.get(f"{notebook}/{profile}")
    mine = settings_record(settings)
    if recorded is None or mine == recorded or mine == settings_record(own):
        return
    changed = ", ".join(f"{k}={v!r} (the folder's run: {w!r})" for k, v, w in _differences(mine, recorded))
    raise ValueError(
        f"{figures_dir} holds {notebook}'s {profile!r} files from a run with other settings; this run's "
        f"{changed or 'settings'} would replace them. Give figures_dir a folder of its own for this run (e.g. "
        f"figures_dir='{figures_dir / 'my-run'}'), run the {profile!r} profile as it is, or delete those files and "
        f"the manifest's run {notebook}/{profile} first")


def _differences(a: Any, b: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """The (dotted key, value in ``a``, value in ``b``) where two settings records differ, nested records by key."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str)
                for d in _differences(a.get(k), b.get(k), f"{prefix}{k}.")]
    return [] if a == b else [(prefix.rstrip("."), a, b)]
