"""What a notebook writes to ``figures/``, declared once, and the manifest that records where each file came from.

Each experiment package declares its **artifacts** (:class:`Artifact`): a figure, a table or an explorer's
snapshot, a file-name template over the profile and the cell it shows (``"table1_experiment1_{profile}"``,
``"fig_reliability_experiment1_{model}_{profile}"``), a caption over the same fields, distinct for every file,
and the summary it draws from. The notebook saves through a writer bound to (notebook, profile)
(:class:`gped_kit.viz.writer.ArtifactWriter`), which fills the template, writes the files and appends a
:class:`Provenance` record to the folder's **manifest** (``figures/manifest.json``): the file, the notebook,
the artifact, the profile, the caption, the values of the template's fields, and the store entries the notebook
had read when it wrote the file. The run's settings are recorded once per (notebook, profile).

``make report``, the figures index and the README read the manifest (:func:`read_manifest`); nothing reads a
notebook's code to learn what it writes. Several notebooks may write into one folder at once (the batch
runner's workers): every update of the manifest holds a file lock and replaces the file whole, so no record
is lost. A record is only replaced by a later write of the same file, so a profile run once keeps its
records beside the others'. The manifest holds no time, so writing the same files again leaves it
byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, is_dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from filelock import FileLock

from ..files import atomic_write_bytes
from .checks import CheckOutcome
from .prose import model_name
from .templates import template_fields

#: The manifest's file name (inside the figures folder) and the version of its layout.
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
#: The lock file beside it (git-ignored).
MANIFEST_LOCK = ".manifest.lock"


class Kind(StrEnum):
    """What an artifact is: a figure (PNG with a PDF beside it), a table (Markdown with a CSV beside it) or
    an explorer's snapshot (a PNG of a widget's view)."""

    FIGURE = "figure"
    TABLE = "table"
    SNAPSHOT = "snapshot"

    @property
    def extensions(self) -> tuple[str, ...]:
        return {Kind.FIGURE: ("png", "pdf"), Kind.TABLE: ("md", "csv"), Kind.SNAPSHOT: ("png",)}[self]


@dataclass(frozen=True)
class Artifact:
    """One kind of file a notebook writes (see the module docstring).

    ``key`` names it within its notebook; ``file`` is the file name without extension, a template over
    ``profile`` and the cell's fields; ``caption`` a template over the same fields (a subset), so that no two
    files share a caption; ``source`` says which summary or store table it is drawn from."""

    key: str
    kind: Kind
    file: str
    caption: str
    source: str = ""

    def __post_init__(self) -> None:
        if not self.key.isidentifier():
            raise ValueError(f"artifact key={self.key!r}: must be an identifier")
        unknown = set(template_fields(self.caption)) - set(self.fields)
        if unknown:
            raise ValueError(f"artifact {self.key!r}: its caption uses {sorted(unknown)}, which its file name "
                             f"{self.file!r} does not; allowed: {list(self.fields)}")

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields a file of this artifact is named by (``profile`` among them when it has one)."""
        return template_fields(self.file)

    def _values(self, values: Mapping[str, Any]) -> dict[str, str]:
        missing = [f for f in self.fields if f not in values]
        extra = sorted(set(values) - set(self.fields))
        if missing or extra:
            raise ValueError(f"artifact {self.key!r} ({self.file!r}) is named by {list(self.fields)}; "
                             f"given {sorted(values)}" + (f", missing {missing}" if missing else "")
                             + (f", not a field: {extra}" if extra else ""))
        out = {k: str(v) for k, v in values.items()}
        bad = [k for k, v in out.items() if not v or "/" in v or v.startswith(".")]
        if bad:
            raise ValueError(f"artifact {self.key!r}: {bad[0]}={out[bad[0]]!r} cannot be part of a file name")
        return out

    def stem(self, **values: Any) -> str:
        """The file name without extension for the cell ``values`` (every field, nothing else)."""
        return self.file.format(**self._values(values))

    def caption_for(self, **values: Any) -> str:
        """The caption of the file for ``values``, a model by its printed name (``cnn_mnist`` -> CNN-MNIST)."""
        shown = self._values(values)
        if "model" in shown:
            shown["model"] = model_name(shown["model"])
        return self.caption.format(**shown)

    def files(self, **values: Any) -> tuple[str, ...]:
        """The file names written for ``values`` (one per extension of its kind)."""
        stem = self.stem(**values)
        return tuple(f"{stem}.{ext}" for ext in self.kind.extensions)


def declare(*artifacts: Artifact) -> dict[str, Artifact]:
    """A notebook's artifacts by key; two with one key, or two that would write the same files (one file-name
    template and a shared extension), are an error."""
    out: dict[str, Artifact] = {}
    for a in artifacts:
        if a.key in out:
            raise ValueError(f"artifact key {a.key!r} declared twice")
        same = [b.key for b in out.values()
                if b.file == a.file and set(b.kind.extensions) & set(a.kind.extensions)]
        if same:
            raise ValueError(f"artifacts {same[0]!r} and {a.key!r} would write the same files: {a.file!r}")
        out[a.key] = a
    return out


@dataclass(frozen=True)
class Provenance:
    """Where a file of the figures folder came from: ``stem`` (the file name without extension; its
    ``kind`` gives the extensions), the ``notebook`` and its ``artifact`` key, the ``profile`` it ran, the
    ``caption``, the ``values`` of the file name's fields, and ``store_keys``, the store entries
    (``<kind>/<key>``) the notebook had read when it wrote the file."""

    stem: str
    kind: Kind
    notebook: str
    artifact: str
    profile: str
    caption: str
    values: dict[str, str] = field(default_factory=dict)
    store_keys: tuple[str, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(f"{self.stem}.{ext}" for ext in self.kind.extensions)

    @property
    def name(self) -> str:
        """The record's key in the manifest: its first file (``<stem>.png`` or ``<stem>.md``)."""
        return self.files[0]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = str(self.kind)
        d["store_keys"] = list(self.store_keys)
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Provenance:
        return cls(stem=d["stem"], kind=Kind(d["kind"]), notebook=d["notebook"], artifact=d["artifact"],
                   profile=d["profile"], caption=d["caption"], values=dict(d.get("values", {})),
                   store_keys=tuple(d.get("store_keys", ())))


@dataclass(frozen=True)
class Manifest:
    """The figures folder's manifest: every file's :class:`Provenance` by its first file
    (:attr:`Provenance.name`), the settings of every (notebook, profile) run that wrote one
    (``"<notebook>/<profile>"``) and the check outcomes of each run's latest execution."""

    files: dict[str, Provenance] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    #: per run (``"<notebook>/<profile>"``), its latest execution's check outcomes by statement
    #: (:mod:`~gped_kit.experiments.checks`)
    checks: dict[str, dict[str, CheckOutcome]] = field(default_factory=dict)

    def owner(self, filename: str) -> Provenance | None:
        """The record of the file named ``filename`` (with its extension), or None."""
        stem = filename.rpartition(".")[0]
        return next((r for r in self.files.values() if r.stem == stem and filename in r.files), None)

    def outcomes(self, notebook: str, profile: str) -> list[CheckOutcome]:
        """The check outcomes of ``notebook``'s latest execution with ``profile``, by statement."""
        run = self.checks.get(f"{notebook}/{profile}", {})
        return [run[k] for k in sorted(run)]

    def failed_checks(self) -> dict[str, list[CheckOutcome]]:
        """Per run, the invariants its latest execution recorded as not holding (runs without any left out)."""
        out = {run: [o for _, o in sorted(checks.items()) if o.failed] for run, checks in sorted(self.checks.items())}
        return {run: failed for run, failed in out.items() if failed}

    def to_bytes(self) -> bytes:
        data = {"format": MANIFEST_FORMAT,
                "files": {k: self.files[k].to_json() for k in sorted(self.files)},
                "runs": {k: self.runs[k] for k in sorted(self.runs)},
                "checks": {run: {k: checks[k].to_json() for k in sorted(checks)}
                           for run, checks in sorted(self.checks.items())}}
        return (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def read_manifest(figures_dir: str | Path) -> Manifest:
    """The manifest of ``figures_dir`` (empty when there is none). A manifest of another layout version is
    an error naming the file."""
    path = Path(figures_dir) / MANIFEST
    if not path.is_file():
        return Manifest()
    data = json.loads(path.read_text())
    if data.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{path}: manifest format {data.get('format')!r}; this kit reads {MANIFEST_FORMAT}")
    checks = {run: {k: CheckOutcome.from_json(v) for k, v in outcomes.items()}
              for run, outcomes in data.get("checks", {}).items()}
    return Manifest({k: Provenance.from_json(v) for k, v in data.get("files", {}).items()}, dict(data.get("runs", {})),
                    checks)


def settings_record(settings: Any) -> Any:
    """``settings`` as JSON values (a dataclass as its fields, tuples as lists, anything else as its text)."""
    if is_dataclass(settings) and not isinstance(settings, type):
        settings = asdict(settings)
    return json.loads(json.dumps(settings, default=str))


def record(figures_dir: str | Path, records: Iterable[Provenance], run: str | None = None,
           settings: Any = None, timeout: float = 60.0, *, checks: tuple[str, Iterable[CheckOutcome]] | None = None
           ) -> Manifest:
    """Add ``records`` (replacing those of the same files) and the settings of ``run`` to ``figures_dir``'s
    manifest, under its lock; ``checks`` is (a run, its check outcomes so far), which replace that run's
    recorded ones. The file is replaced whole (readers see the old one or the new one). Returns the manifest
    as written; when nothing changes the file is not touched."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(figures_dir / MANIFEST_LOCK, timeout=timeout):
        old = read_manifest(figures_dir)
        files = {**old.files, **{r.name: r for r in records}}
        runs = dict(old.runs)
        if run is not None:
            runs[run] = settings_record(settings)
        outcomes = dict(old.checks)
        if checks is not None:
            outcomes[checks[0]] = {o.statement: o for o in checks[1]}
        new = Manifest(files, runs, outcomes)
        path = figures_dir / MANIFEST
        data = new.to_bytes()
        if not path.is_file() or path.read_bytes() != data:
            atomic_write_bytes(path, data)
        return new


__all__ = ["MANIFEST", "MANIFEST_FORMAT", "Artifact", "Kind", "Manifest", "Provenance", "declare", "read_manifest",
           "record", "settings_record", "template_fields"]
