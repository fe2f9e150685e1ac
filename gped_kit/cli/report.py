"""The results page (``figures/report.html``) and the index of ``figures/`` (``figures/README.md``), generated
from the committed figures and tables and from the notebooks that write them.

``python -m gped_kit.cli.report`` (``make report``) writes both:

* ``report.html``, one self-contained HTML page (its own styles, no script, nothing fetched from the
  network): the README's verdict and claims table (:func:`gped_kit.cli.readme.claims_table`,
  :func:`~gped_kit.cli.readme.render_verdict` and :func:`~gped_kit.cli.readme.render`, reused: no claim is
  derived here), then one section per notebook in the notebooks' order (00, 01, ...), each linking to its
  notebook and showing every figure it wrote with its caption and listing its tables, and a last section
  for the files no notebook claims. Images are referenced by paths relative to the page (not embedded):
  the page stays small, and it shows the figures of the folder beside it. It is git-ignored (generated
  output).
* ``README.md`` of the figures folder: per notebook, its figures and tables with one line each; it is
  committed, and ``--check`` exits with status 1 when it is not what the folder and the notebooks give
  (``tests/test_report.py`` runs the check, as ``tests/test_readme.py`` does for the README).

Which notebook wrote a file is read from the notebooks' code, never listed by hand: every
``save_figure(fig, NAME, ...)`` and ``save_table(table, NAME, ...)`` call (:mod:`gped_kit.plotting.save`) and
every call given ``figures_dir=`` whose class writes a snapshot image (the explorers: the file name their
``snapshot_name`` method documents) gives a file-name pattern (:func:`notebook_outputs`). ``NAME`` may be a
string, an f-string, or a constant of the kit imported by the notebook (``E1.TABLE1.format(profile=...)``);
a placeholder over a literal loop (``for model in ("fcnn", "cnn_mnist")``) matches those values only, one
named ``profile`` or ``tag`` one word, any other anything. A file that several patterns match goes to the
most specific (most literal characters). A figure's caption is the notebook's Markdown cell above the code
cell that saves it (its heading, then its first paragraph), and its title the ``title=`` given to the call
that drew it, or its ``suptitle``, where every placeholder of it is known from the file name.
"""

from __future__ import annotations

import argparse
import ast
import html
import importlib
import os
import re
import string
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from ..plotting.save import PAPER_ONLY_SUFFIX
from . import readme

#: The page's default file name (inside the figures folder).
PAGE = "report.html"
#: The index's file name (inside the figures folder).
INDEX = "README.md"
#: The page's title (the ``<title>`` and the first heading).
TITLE = "gped-kit: results"
#: Files of the figures folder that are pages generated from its tables, with what they are.
GENERATED = {readme.DETAILS: "every claim, cell by cell: all the numbers the README's claims table shortens "
                             "(`python -m gped_kit.cli.readme`)"}
#: What a call writes, by the function's name: the kind of file and its extensions.
WRITERS = {"save_figure": ("figure", ("png", "pdf")), "save_table": ("table", ("md", "csv"))}
#: Extensions of figures and of tables.
FIGURE_EXTENSIONS = ("png", "pdf", "svg", "jpg", "jpeg")
TABLE_EXTENSIONS = ("md", "csv")
#: Placeholder names that stand for a profile (or an explorer's tag, its profile): one word, no underscore.
PROFILE_LABELS = ("profile", "tag")
#: The modules whose constants a notebook's file names may use (imported to read them).
KIT = "gped_kit"

_ANY = "(.+)"
_WORD = "([^_]+)"


# ----------------------------------------------------------------------------- what a notebook writes
@dataclass(frozen=True)
class Placeholder:
    """A part of a file name the notebook fills in at run time: ``expr`` its source (``row.model``),
    ``label`` the name shown for it (``model``), ``values`` the literal values it can take (empty: any)."""

    expr: str
    label: str
    values: tuple[str, ...] = ()

    @property
    def regex(self) -> str:
        if self.values:
            return "(" + "|".join(re.escape(v) for v in sorted(self.values, key=len, reverse=True)) + ")"
        return _WORD if self.label in PROFILE_LABELS else _ANY


#: A file name as text and placeholders, in order.
Parts = tuple["str | Placeholder", ...]


@dataclass(frozen=True)
class Output:
    """One call of a notebook that writes files to the figures folder: ``parts`` its file stem,
    ``kind`` ``"figure"`` or ``"table"``, ``extensions`` those it writes, ``cell`` the code cell's index,
    ``heading`` and ``caption`` the Markdown above it (heading and first paragraph; Markdown text),
    ``title`` the figure's title (text and placeholders; empty when none is given)."""

    parts: Parts
    kind: str
    extensions: tuple[str, ...]
    cell: int
    heading: str
    caption: str
    title: Parts = ()

    @property
    def literal(self) -> int:
        """How specific the pattern is: its literal characters, each placeholder of literal values counting
        its shortest value."""
        return sum(len(p) if isinstance(p, str) else min((len(v) for v in p.values), default=0)
                   for p in self.parts)

    def regex(self, lazy: bool = False) -> re.Pattern[str]:
        """The file stem's pattern (``lazy``: placeholders of any text match as little as they can)."""
        body = "".join(re.escape(p) if isinstance(p, str) else
                       (p.regex.replace("+)", "+?)") if lazy and not p.values else p.regex) for p in self.parts)
        return re.compile(f"^{body}$")

    @property
    def placeholders(self) -> list[Placeholder]:
        return [p for p in self.parts if isinstance(p, Placeholder)]

    def values(self, stem: str) -> dict[str, str] | None:
        """The placeholders' values in ``stem`` (by their source), only those the file name determines (the
        same however the text between literals is split); None when ``stem`` does not match."""
        greedy, lazy = self.regex().match(stem), self.regex(lazy=True).match(stem)
        if greedy is None or lazy is None:
            return None
        return {p.expr: greedy.group(i + 1) for i, p in enumerate(self.placeholders)
                if greedy.group(i + 1) == lazy.group(i + 1)}

    def title_for(self, stem: str) -> str:
        """The figure's title for the file ``stem``, or "" when it has none or a placeholder of it is not
        determined by the file name."""
        known = self.values(stem) or {}
        text = []
        for part in self.title:
            if isinstance(part, str):
                text.append(part)
            elif part.expr in known:
                text.append(known[part.expr])
            elif part.expr.endswith("!r") and part.expr[:-2] in known:
                text.append(repr(known[part.expr[:-2]]))
            else:
                return ""
        return "".join(text).strip()


@dataclass(frozen=True)
class Notebook:
    """A notebook of ``notebooks/``: its ``path``, ``title`` (its first heading) and the calls that write
    to the figures folder (``outputs``, in the notebook's order)."""

    path: Path
    title: str
    outputs: tuple[Output, ...]

    @property
    def name(self) -> str:
        return self.path.stem


def _markdown_parts(source: str) -> tuple[str, str]:
    """A Markdown cell's heading (without its ``#``) and its first paragraph after the heading; with no
    heading, the first sentence of the first paragraph and that paragraph."""
    heading, paragraphs, current = "", [], []
    for line in source.splitlines():
        stripped = line.strip()
        if not heading and not paragraphs and not current and stripped.startswith("#"):
            heading = stripped.lstrip("#").strip()
            continue
        if stripped:
            current.append(stripped)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    first = paragraphs[0] if paragraphs else ""
    if not heading:
        heading = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    return heading, first


def _imports(trees: Sequence[ast.AST]) -> dict[str, str]:
    """The notebook's import aliases of the kit: the name bound -> the dotted path of what it names."""
    names: dict[str, str] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == KIT:
                        names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else KIT
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == KIT:
                for alias in node.names:
                    names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes of a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (head := _dotted(node.value)) is not None:
        return f"{head}.{node.attr}"
    return None


def _lookup(node: ast.AST, imports: dict[str, str]) -> Any:
    """The kit's object a name or attribute chain of the notebook names (through its imports), or None."""
    dotted = _dotted(node)
    if dotted is None or dotted.split(".")[0] not in imports:
        return None
    path = imports[dotted.split(".")[0]] + dotted[len(dotted.split(".")[0]):]
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _label(node: ast.AST) -> str:
    """The name shown for a placeholder: the attribute of ``row.model`` or ``row.figure.split()[-1]``
    read from its name (``model``, ``figure``), or the name itself."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name):
            return sub.attr
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            return sub.id
    return ast.unparse(node)


def _template_parts(template: str, kwargs: dict[str, ast.AST], loops: dict[str, tuple[str, ...]]) -> Parts:
    """A ``str.format`` template's parts: its literal text, and a placeholder per field (the keyword's
    constant where ``.format`` is given one)."""
    parts: list[str | Placeholder] = []
    for literal, name, _, _ in string.Formatter().parse(template):
        if literal:
            parts.append(literal)
        if name is None:
            continue
        value = kwargs.get(name)
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif value is not None:
            parts.append(_placeholder(value, loops, label=name))
        else:
            parts.append(Placeholder(name, name))
    return tuple(parts)


def _placeholder(node: ast.AST, loops: dict[str, tuple[str, ...]], label: str | None = None) -> Placeholder:
    expr = ast.unparse(node)
    values = loops.get(expr, ()) if isinstance(node, ast.Name) else ()
    return Placeholder(expr, label or _label(node), values)


def _string_parts(node: ast.AST | None, imports: dict[str, str], loops: dict[str, tuple[str, ...]]) -> Parts | None:
    """A file name or title expression as parts, or None when it cannot be read from the code."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return (node.value,)
    if isinstance(node, ast.JoinedStr):
        parts: list[str | Placeholder] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                held = _placeholder(value.value, loops)
                if value.conversion == ord("r"):
                    held = Placeholder(held.expr + "!r", held.label, held.values)
                parts.append(held)
        return tuple(parts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and not node.args):
        template = _lookup(node.func.value, imports)
        if isinstance(template, str):
            return _template_parts(template, {k.arg: k.value for k in node.keywords if k.arg}, loops)
        return None
    constant = _lookup(node, imports) if node is not None else None
    return (constant,) if isinstance(constant, str) else None


def _loops(tree: ast.AST) -> dict[ast.AST, dict[str, tuple[str, ...]]]:
    """For every node inside a ``for`` loop over literal values: the loop names -> the strings they take."""
    bound: dict[ast.AST, dict[str, tuple[str, ...]]] = {}

    def visit(node: ast.AST, names: dict[str, tuple[str, ...]]) -> None:
        bound[node] = names
        if isinstance(node, ast.For):
            try:
                items = ast.literal_eval(node.iter)
            except (ValueError, SyntaxError, TypeError):
                items = None
            inner = dict(names)
            targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            if isinstance(items, (list, tuple)) and items:
                rows = [item if isinstance(node.target, ast.Tuple) else (item,) for item in items]
                for i, target in enumerate(targets):
                    if isinstance(target, ast.Name):
                        column = [row[i] for row in rows if isinstance(row, (list, tuple)) and len(row) > i]
                        if len(column) == len(rows) and all(isinstance(v, str) for v in column):
                            inner[target.id] = tuple(column)
            for child in ast.iter_child_nodes(node):
                visit(child, inner)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, names)

    visit(tree, {})
    return bound


def _snapshot_parts(cls: Any) -> tuple[Parts, str] | None:
    """The file stem and extension an explorer class documents for its snapshot: the first ````...````
    literal of its ``snapshot_name``'s docstring, ``<name>`` a placeholder."""
    doc = getattr(getattr(cls, "snapshot_name", None), "__doc__", None) or ""
    found = re.search(r"``([^`]+)``", doc)
    if found is None:
        return None
    stem, _, extension = found.group(1).rpartition(".")
    parts: list[str | Placeholder] = []
    for piece in re.split(r"(<\w+>)", stem):
        if piece.startswith("<") and piece.endswith(">"):
            parts.append(Placeholder(piece[1:-1], piece[1:-1]))
        elif piece:
            parts.append(piece)
    return tuple(parts), extension


def _title(cell: ast.Module, save: ast.Call, imports: dict[str, str],
           loops: dict[ast.AST, dict[str, tuple[str, ...]]]) -> Parts:
    """The title of the figure a ``save_figure`` call saves: the ``title=`` of the call whose result was
    assigned to its first argument last before it, or a later ``.suptitle(...)`` on it."""
    if not save.args or not isinstance(save.args[0], ast.Name):
        return ()
    name, title, since = save.args[0].id, None, -1
    for node in ast.walk(cell):
        if getattr(node, "lineno", save.lineno + 1) > save.lineno:
            continue
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
                and isinstance(node.value, ast.Call) and node.lineno > since):
            since = node.lineno
            given = [k.value for k in node.value.keywords if k.arg == "title"]
            title = (_string_parts(given[0], imports, loops.get(given[0], {})) or ()) if given else None
    for node in ast.walk(cell):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "suptitle"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name and node.args
                and since <= node.lineno <= save.lineno):
            title = _string_parts(node.args[0], imports, loops.get(node.args[0], {})) or ()
    return tuple(title or ())


def notebook_outputs(path: Path) -> Notebook:
    """What the notebook at ``path`` writes to the figures folder, read from its code cells (see the
    module docstring); a code cell that does not parse as Python (a cell magic) is skipped."""
    book = nbformat.read(path, as_version=4)
    cells: list[tuple[int, ast.Module]] = []
    name = path.stem
    for index, cell in enumerate(book.cells):
        if cell.cell_type == "markdown" and name == path.stem and cell.source.lstrip().startswith("#"):
            name = _markdown_parts(cell.source)[0]
        if cell.cell_type == "code":
            try:
                cells.append((index, ast.parse(cell.source)))
            except SyntaxError:
                continue
    imports = _imports([tree for _, tree in cells])
    outputs: list[Output] = []
    for index, tree in cells:
        above = next((c.source for c in reversed(book.cells[:index]) if c.cell_type == "markdown"), "")
        heading, caption = _markdown_parts(above)
        loops = _loops(tree)
        calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            function = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            if function in WRITERS:
                given = call.args[1] if len(call.args) > 1 else next(
                    (k.value for k in call.keywords if k.arg == "name"), None)
                parts = _string_parts(given, imports, loops.get(given, {})) if given is not None else None
                if parts is None:
                    continue
                kind, extensions = WRITERS[function]
                title = _title(tree, call, imports, loops) if kind == "figure" else ()
                outputs.append(Output(parts, kind, extensions, index, heading, caption, title))
            elif any(k.arg == "figures_dir" for k in call.keywords):
                owner = call.func.value if isinstance(call.func, ast.Attribute) else call.func
                snapshot = _snapshot_parts(_lookup(owner, imports))
                if snapshot is not None:
                    outputs.append(Output(snapshot[0], "figure", (snapshot[1],), index, heading, caption))
    return Notebook(path, name, tuple(outputs))


# ----------------------------------------------------------------------------- the folder, file by file
@dataclass(frozen=True)
class Item:
    """The files of one stem in the figures folder (``files``: names with their extensions, PNG first),
    ``kind`` ``"figure"``, ``"table"`` or ``"other"``, and, where a notebook wrote it, that notebook and
    the call (``output``)."""

    stem: str
    files: tuple[str, ...]
    kind: str
    notebook: Notebook | None = None
    output: Output | None = None

    @property
    def paper_only(self) -> bool:
        return self.stem.endswith(PAPER_ONLY_SUFFIX)

    @property
    def written_stem(self) -> str:
        """The stem the notebook's name gives (without the paper-only suffix that saving adds)."""
        return self.stem[:-len(PAPER_ONLY_SUFFIX)] if self.paper_only else self.stem

    @property
    def profile(self) -> str | None:
        if self.output is None:
            return None
        known = self.output.values(self.written_stem) or {}
        return next((known[p.expr] for p in self.output.placeholders
                     if p.label in PROFILE_LABELS and p.expr in known), None)

    @property
    def image(self) -> str | None:
        """The file a browser shows (PNG first), or None."""
        return next((f for ext in ("png", "svg", "jpg", "jpeg") for f in self.files if f.endswith(f".{ext}")),
                    None)

    def note(self, title: str = "") -> str:
        """The profile (unless ``title`` names it already) and "the paper's numbers only", as text ("" when
        neither)."""
        notes = []
        if self.profile is not None and f"{self.profile} profile" not in title:
            notes.append(f"profile `{self.profile}`")
        if self.paper_only:
            notes.append("the paper's numbers only")
        return "; ".join(notes)

    def description(self) -> str:
        """One line of Markdown: the figure's title where known, else its section's heading; and the note."""
        title = self.output.title_for(self.written_stem) if self.output else ""
        text = title or (self.output.heading if self.output else "")
        note = self.note(title)
        return f"{text} ({note})" if text and note else text or note


@dataclass(frozen=True)
class Folder:
    """The figures folder read against the notebooks: ``notebooks`` in order, ``items`` per notebook name
    (in its calls' order), ``others`` the files no notebook writes, ``generated`` pages made from them."""

    figures: Path
    notebooks: tuple[Notebook, ...]
    items: dict[str, list[Item]] = field(default_factory=dict)
    others: list[Item] = field(default_factory=list)
    generated: list[str] = field(default_factory=list)


def _kind(files: Sequence[str]) -> str:
    extensions = {f.rpartition(".")[2].lower() for f in files}
    if extensions & set(FIGURE_EXTENSIONS):
        return "figure"
    return "table" if extensions & set(TABLE_EXTENSIONS) else "other"


def _order(files: list[str]) -> tuple[str, ...]:
    rank = {ext: i for i, ext in enumerate(("png", "svg", "jpg", "jpeg", "pdf", "md", "csv"))}
    return tuple(sorted(files, key=lambda f: (rank.get(f.rpartition(".")[2].lower(), len(rank)), f)))


def read_folder(figures: Path, notebooks: Path, skip: Sequence[str] = (INDEX, PAGE)) -> Folder:
    """Every file of ``figures`` (but ``skip``: the page and the index themselves, and hidden files) with the
    notebook of ``notebooks`` that writes it (see the module docstring)."""
    figures, notebooks = Path(figures), Path(notebooks)
    if not figures.is_dir():
        raise FileNotFoundError(f"no figures folder at {figures}: run the notebooks (`make figures`) first")
    paths = sorted(notebooks.glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks (*.ipynb) in {notebooks}")
    books = tuple(notebook_outputs(p) for p in paths)
    folder = Folder(figures, books, {b.name: [] for b in books})
    stems: dict[tuple[str, str], list[str]] = {}  # a figure and a table may share a stem
    for path in sorted(figures.iterdir()):
        if path.is_file() and not path.name.startswith(".") and path.name not in skip:
            if path.name in GENERATED:
                folder.generated.append(path.name)
                continue
            stems.setdefault((path.stem, _kind([path.name])), []).append(path.name)
    found: list[tuple[int, Item]] = []  # (the call's place in its notebook, the item)
    for (stem, kind), files in sorted(stems.items()):
        bare = Item(stem, _order(files), kind)
        candidates = [(output.literal, -n, -output.cell, book, output)
                      for n, book in enumerate(books) for output in book.outputs
                      if output.kind == kind and output.regex().match(bare.written_stem)]
        if not candidates:
            folder.others.append(bare)
            continue
        *_, book, output = max(candidates, key=lambda c: c[:3])
        found.append((book.outputs.index(output), Item(stem, bare.files, kind, book, output)))
    for _, item in sorted(found, key=lambda f: (f[0], f[1].stem)):
        assert item.notebook is not None
        folder.items[item.notebook.name].append(item)
    return folder


# ----------------------------------------------------------------------------- Markdown, links
def markdown_to_html() -> Callable[[str], str]:
    """A Markdown renderer (mistune 3, which nbconvert brings with JupyterLab): tables, raw HTML escaped,
    ``$...$`` kept as math text in a ``<span class="math">``."""
    try:
        import mistune
    except ImportError as error:  # pragma: no cover - mistune comes with jupyterlab (nbconvert)
        raise RuntimeError("the report needs the mistune package (installed with jupyterlab: `make venv`)") from error
    version = getattr(mistune, "__version__", "0")
    if int(version.split(".")[0]) < 3:
        raise RuntimeError(f"the report needs mistune >= 3 (found {version}): pip install 'mistune>=3'")
    render = mistune.create_markdown(escape=True, plugins=["table", "math", "strikethrough"])
    render.renderer.register("inline_math", lambda r, text: f'<span class="math">{_tex(text)}</span>')
    render.renderer.register("block_math", lambda r, text: f'<div class="math">{_tex(text)}</div>\n')
    return lambda text: str(render(text))


_TEX = {r"\times": "×", r"\le": "≤", r"\ge": "≥", r"\leq": "≤", r"\geq": "≥", r"\lambda": "λ", r"\eta": "η",
        r"\epsilon": "ε", r"\varepsilon": "ε", r"\mu": "μ", r"\sigma": "σ", r"\approx": "≈", r"\cdot": "·",
        r"\ell": "ℓ", r"\to": "→", r"\infty": "∞", r"\mathbb{E}": "E", r"\,": " ", r"\;": " "}


def _tex(text: str) -> str:
    """Inline TeX as HTML a reader follows without a math renderer: a few symbols spelled, ``x_o`` /
    ``x_{ab}`` as subscripts, ``x^2`` / ``x^{ab}`` as superscripts, the rest as written (escaped)."""
    for tex, plain in sorted(_TEX.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(tex, plain)
    text = html.escape(re.sub(r"\\(?:mathrm|text|mathit|operatorname)\{([^{}]*)\}", r"\1", text))
    tags = {"_": "sub", "^": "sup"}
    return re.sub(r"([_^])(?:\{([^{}]*)\}|(\w))",
                  lambda m: f"<{tags[m.group(1)]}>{m.group(2) or m.group(3)}</{tags[m.group(1)]}>", text)


_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def relink(target: str, source: Path, page: Path, anchor: Path | None = None) -> str:
    """A link ``target`` written relative to the folder ``source``, as seen from the folder ``page``; an
    anchor alone (``#notes``) points into the file ``anchor`` where given. Absolute URLs are kept."""
    if not target or _SCHEME.match(target) or target.startswith("/"):
        return target
    if target.startswith("#"):
        return (Path(os.path.relpath(anchor, page)).as_posix() + target) if anchor is not None else target
    path, hash_, fragment = target.partition("#")
    moved = Path(os.path.relpath(Path(os.path.abspath(source / path)), os.path.abspath(page))).as_posix()
    return moved + hash_ + fragment


def _relink_html(text: str, source: Path, page: Path, anchor: Path | None = None) -> str:
    return re.sub(r'(href|src)="([^"]*)"',
                  lambda m: f'{m.group(1)}="{html.escape(relink(html.unescape(m.group(2)), source, page, anchor))}"',
                  text)


def _relink_markdown(text: str, source: Path, page: Path, anchor: Path | None = None) -> str:
    return re.sub(r"\]\(([^)\s]+)\)", lambda m: f"]({relink(m.group(1), source, page, anchor)})", text)


def _plain(markdown_html: str) -> str:
    """Rendered HTML as one line of text (for ``alt``)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", markdown_html)).split())


def _strip_markers(block: str) -> str:
    return "\n".join(line for line in block.splitlines() if not line.startswith("<!--"))


# ----------------------------------------------------------------------------- the page
STYLE = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 0 1.5em 3em; color: #1d1d1f; }
h1 { margin-top: 1.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
h3 { margin: 1.6em 0 .3em; }
nav ol { columns: 2; } nav a, a { color: #0b57a4; }
table { border-collapse: collapse; font-size: 13px; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .3em .5em; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
.claims { width: 100%; } .claims td:nth-child(1) { width: 28%; } .claims td:nth-child(2) { width: 14%; }
figure { margin: 1em 0 1.5em; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 13px; color: #444; }
.caption { color: #333; } .math { font-style: italic; }
.notebook-link { font-size: 14px; }
code { background: #f5f5f5; padding: 0 .2em; border-radius: 3px; }
.generated { color: #666; font-size: 13px; }
"""


def _files_line(item: Item, page: Path, figures: Path) -> str:
    links = [f'<a href="{html.escape(relink(f, figures, page))}">{html.escape(f.rpartition(".")[2].upper())}</a>'
             for f in item.files]
    return " · ".join(links)


def _figure(item: Item, page: Path, figures: Path, md: Callable[[str], str], alt: str) -> str:
    image = item.image
    title = item.output.title_for(item.written_stem) if item.output else ""
    details = [f"<code>{html.escape(image or item.files[0])}</code>"]
    if title:
        details.append(html.escape(title))
    if item.note(title):
        details.append(_inline(md, item.note(title)))
    details.append(_files_line(item, page, figures))
    if image is None:  # a PDF only: a link, no picture
        return f'<figure id="{html.escape(item.stem)}"><figcaption>{" · ".join(details)}</figcaption></figure>'
    src = html.escape(relink(image, figures, page))
    return (f'<figure id="{html.escape(item.stem)}"><a href="{src}"><img src="{src}" alt="{html.escape(alt)}">'
            f'</a>\n<figcaption>{" · ".join(details)}</figcaption></figure>')


def _inline(md: Callable[[str], str], text: str) -> str:
    """Markdown rendered without its paragraph."""
    rendered = md(text).strip()
    return rendered[3:-4] if rendered.startswith("<p>") and rendered.endswith("</p>") else rendered


def _groups(items: Sequence[Item]) -> Iterator[tuple[Output, list[Item]]]:
    """The items grouped by the notebook's section (the Markdown cell above the calls that wrote them), in
    order."""
    groups: dict[tuple[str, str], tuple[Output, list[Item]]] = {}
    for item in items:
        assert item.output is not None
        groups.setdefault((item.output.heading, item.output.caption), (item.output, []))[1].append(item)
    yield from groups.values()


def _table_list(items: Sequence[Item], page: Path, figures: Path, md: Callable[[str], str],
                notebook: Path | None = None) -> str:
    """A list of ``items`` (tables and other files): a link to each file and, where a notebook (at
    ``notebook``) wrote it, its one-line description."""
    rows = []
    for item in items:
        first = html.escape(relink(item.files[0], figures, page))
        text = _relink_html(_inline(md, item.description()), notebook.parent, page, notebook) \
            if item.output and notebook is not None else ""
        files = _files_line(item, page, figures)
        rows.append(f'<li><a href="{first}"><code>{html.escape(item.stem)}</code></a> ({files})'
                    + (f" — {text}" if text else "") + "</li>")
    return "<ul class=\"tables\">\n" + "\n".join(rows) + "\n</ul>"


def render_page(folder: Folder, page: Path, root: Path, md: Callable[[str], str] | None = None) -> str:
    """The results page as HTML, to be written at ``page`` (links are relative to its folder; ``root`` is
    the folder the README's links start from)."""
    md = md or markdown_to_html()
    figures, here = folder.figures, Path(page).parent
    rows = readme.claims_table(figures)
    # the verdict's lines (one paragraph in the README) as paragraphs of their own
    verdict_lines = _strip_markers(readme.render_verdict(rows, figures)).splitlines()
    verdict = _relink_html(md("\n\n".join(verdict_lines)), root, here)
    claims = _relink_html(md(_strip_markers(readme.render(rows))), root, here).replace(
        "<table>", '<table class="claims" id="claims-table">', 1)
    nav = ['<li><a href="#verdict">Verdict</a></li>', '<li><a href="#claims">Claims</a></li>']
    body: list[str] = []
    for book in folder.notebooks:
        anchor = f"nb-{book.name}"
        nav.append(f'<li><a href="#{anchor}">{_inline(md, book.title)}</a></li>')
        link = html.escape(relink(book.path.name, book.path.parent, here))
        section = [f'<section class="notebook" id="{anchor}">', f"<h2>{_inline(md, book.title)}</h2>",
                   f'<p class="notebook-link">Notebook: <a class="notebook-link" href="{link}">'
                   f"notebooks/{html.escape(book.path.name)}</a></p>"]
        items = folder.items.get(book.name, [])
        if not items:
            section.append("<p>This notebook writes no figures or tables to the figures folder.</p>")
        for output, group in _groups([i for i in items if i.kind == "figure"]):
            heading = _relink_html(_inline(md, output.heading), book.path.parent, here, book.path)
            section.append(f"<h3>{heading}</h3>")
            if output.caption:
                section.append(f'<div class="caption">'
                               f'{_relink_html(md(output.caption), book.path.parent, here, book.path)}</div>')
            for item in group:
                section.append(_figure(item, here, figures, md, _plain(md(item.description()))))
        tables = [i for i in items if i.kind != "figure"]
        if tables:
            section += ["<h3>Tables</h3>", _table_list(tables, here, figures, md, book.path)]
        body.append("\n".join(section + ["</section>"]))
    nav.append('<li><a href="#other">Other files</a></li>')
    other = ['<section id="other">', "<h2>Other files</h2>"]
    for name in folder.generated:
        other.append(f'<p><a href="{html.escape(relink(name, figures, here))}"><code>{html.escape(name)}</code></a>'
                     f" — {_inline(md, GENERATED[name])}</p>")
    if folder.others:
        other.append("<p>Files no notebook's code names:</p>")
        for item in folder.others:
            if item.kind == "figure":
                other.append(_figure(item, here, figures, md, item.stem))
        rest = [i for i in folder.others if i.kind != "figure"]
        if rest:
            other.append(_table_list(rest, here, figures, md))
    else:
        other.append("<p>Every other file of the folder is written by a notebook above.</p>")
    body.append("\n".join(other + ["</section>"]))
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">', f"<title>{html.escape(TITLE)}</title>",
        f"<style>{STYLE}</style>", "</head>", "<body>", f"<h1>{html.escape(TITLE)}</h1>",
        '<p class="generated">Generated by <code>python -m gped_kit.cli.report</code> (<code>make report</code>) from '
        "the figures and tables the notebooks write and from the notebooks themselves; do not edit. The verdict and "
        "the claims table are the README's.</p>",
        "<nav><h2>Contents</h2><ol>", *nav, "</ol></nav>",
        '<section id="verdict"><h2>Verdict</h2>', verdict, "</section>",
        '<section id="claims"><h2>Claims</h2>', claims,
        f'<p>Every number of every row: <a href="{html.escape(relink(readme.DETAILS, figures, here))}">'
        f"{html.escape(readme.DETAILS)}</a>.</p>", "</section>",
        *body, "</body>", "</html>", ""])


# ----------------------------------------------------------------------------- the index
def _md_files(item: Item) -> str:
    return ", ".join(f"[{f.rpartition('.')[2]}]({f})" for f in item.files[1:])


def _md_item(item: Item, source: Path, figures: Path, anchor: Path | None) -> str:
    first = item.files[0]
    more = f" ({_md_files(item)})" if len(item.files) > 1 else ""
    text = _relink_markdown(item.description(), source, figures, anchor) if item.output else ""
    return f"- [{first}]({first}){more}" + (f" — {text}" if text else "")


def render_index(folder: Folder) -> str:
    """``README.md`` of the figures folder: per notebook, its figures and tables, one line each."""
    figures = folder.figures
    lines = ["# figures/", "",
             "Generated by `python -m gped_kit.cli.report` (`make report`) from this folder and the notebooks' code; "
             "do not edit (`tests/test_report.py` fails when it is stale). What every notebook writes here: its "
             "figures (PNG, with a PDF beside each) and its tables (Markdown, with a CSV beside each), one line "
             "each, from the title the notebook gives the figure or else the heading of the notebook's section "
             "that writes it. All of it on one page, with the README's verdict and claims table: "
             f"`make report` writes `{PAGE}` here (not committed).", ""]
    for book in folder.notebooks:
        notebook = relink(book.path.name, book.path.parent, figures)
        lines += [f"## [{book.title}]({notebook})", ""]
        items = folder.items.get(book.name, [])
        if not items:
            lines += ["Writes nothing here.", ""]
            continue
        for kind, name in (("figure", "Figures"), ("table", "Tables")):
            chosen = [i for i in items if i.kind == kind]
            if chosen:
                lines += [f"{name}:", ""]
                lines += [_md_item(i, book.path.parent, figures, book.path) for i in chosen]
                lines.append("")
    lines += ["## Other files", ""]
    lines += [f"- [{name}]({name}) — {GENERATED[name]}" for name in folder.generated]
    lines += [_md_item(i, figures, figures, None) + " — written by no notebook's code" for i in folder.others]
    if not folder.generated and not folder.others:
        lines.append("None.")
    return "\n".join(lines).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gped_kit.cli.report", description=__doc__.splitlines()[0])
    parser.add_argument("--figures", type=Path, default=Path("figures"), help="the figures folder (default figures)")
    parser.add_argument("--notebooks", type=Path, default=None,
                        help="the notebooks' folder (default: notebooks beside the figures folder)")
    parser.add_argument("--out", type=Path, default=None, help=f"the page (default <figures>/{PAGE})")
    parser.add_argument("--index", type=Path, default=None, help=f"the folder's index (default <figures>/{INDEX})")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when the index is not what the folder and the notebooks give")
    args = parser.parse_args(argv)
    figures = args.figures
    notebooks = args.notebooks or figures.resolve().parent / "notebooks"
    index = args.index or figures / INDEX
    out = args.out or figures / PAGE
    try:
        folder = read_folder(figures, notebooks, skip=(INDEX, PAGE, index.name, out.name))
        md = markdown_to_html()
    except (FileNotFoundError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = render_index(folder)
    if args.check:
        if not index.exists() or index.read_text() != text:
            print(f"{index}: not what {figures}/ and {notebooks}/ give; run `python -m gped_kit.cli.report` "
                  "(`make report`) and commit it", file=sys.stderr)
            return 1
        return 0
    root = figures.resolve().parent
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(folder, out, root, md))
    index.write_text(text)
    print(f"wrote {out} and {index}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
