"""The results page (``figures/report.html``) and the index of ``figures/`` (``figures/README.md``), generated
from the figures folder and its manifest.

``python -m gped_kit.cli.report`` (``make report``) writes both:

* ``report.html``, one self-contained HTML page (its own styles, no script, nothing fetched from the
  network): the README's verdict and claims table (:func:`gped_kit.cli.readme.claims_table`,
  :func:`~gped_kit.cli.readme.render_verdict` and :func:`~gped_kit.cli.readme.render`, reused: no claim is
  derived here), then one section per notebook in the notebooks' order (00, 01, ...), each linking to its
  notebook and showing every figure it wrote with its caption and listing its tables, and a last section
  for the files no notebook wrote. Images are referenced by paths relative to the page (not embedded):
  the page stays small, and it shows the figures of the folder beside it. It is git-ignored (generated
  output).
* ``README.md`` of the figures folder: per notebook, its figures and tables with one line each; it is
  committed, and ``--check`` exits with status 1 when it is not what the folder and its manifest give
  (``tests/test_report.py`` runs the check, as ``tests/test_readme.py`` does for the README).

Which notebook wrote a file, and its caption, come from the folder's manifest (``figures/manifest.json``,
:mod:`gped_kit.experiments.artifacts`), where the notebook's writer recorded them when it saved the file
(:class:`gped_kit.viz.writer.ArtifactWriter`); the captions are the ones each experiment package declares. A
notebook's title is the first heading of its first Markdown cell.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from ..experiments.artifacts import MANIFEST, Manifest, Provenance, read_manifest
from ..experiments.checks import CheckOutcome, Role
from ..plotting.save import PAPER_ONLY_SUFFIX
from . import readme

#: The page's default file name (inside the figures folder).
PAGE = "report.html"
#: The index's file name (inside the figures folder).
INDEX = "README.md"
#: The page's title (the ``<title>`` and the first heading).
TITLE = "gped-kit: results"
#: The profile whose check outcomes the index and the page show per notebook.
CHECKS_PROFILE = "default"
#: Files of the figures folder that are pages generated from its tables, with what they are.
GENERATED = {readme.DETAILS: "every claim, cell by cell: all the numbers the README's claims table shortens "
                             "(`python -m gped_kit.cli.readme`)",
             MANIFEST: "where every file here came from: its notebook, artifact, profile, caption and the store "
                       "entries it rests on (written by the notebooks)"}
#: Extensions of figures and of tables.
FIGURE_EXTENSIONS = ("png", "pdf", "svg", "jpg", "jpeg")
TABLE_EXTENSIONS = ("md", "csv")


@dataclass(frozen=True)
class Notebook:
    """A notebook of the notebooks' folder: its ``path``, ``name`` (stem) and ``title`` (its first heading)."""

    path: Path
    name: str
    title: str


def read_notebook(path: Path) -> Notebook:
    """The notebook at ``path`` with the first heading of its first Markdown cell as its title (its name when
    it has none)."""
    nb = nbformat.read(path, as_version=4)
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    heading = next((line.lstrip("#").strip() for line in first.splitlines() if line.startswith("#")), "")
    return Notebook(path, path.stem, heading or path.stem)


# ----------------------------------------------------------------------------- the folder, file by file
@dataclass(frozen=True)
class Item:
    """The files of one stem in the figures folder (``files``: names with their extensions, PNG first),
    ``kind`` ``"figure"``, ``"table"`` or ``"other"``, and, where a notebook wrote it, its manifest record."""

    stem: str
    files: tuple[str, ...]
    kind: str
    record: Provenance | None = None

    @property
    def paper_only(self) -> bool:
        return self.stem.endswith(PAPER_ONLY_SUFFIX)

    @property
    def image(self) -> str | None:
        """The file a browser shows (PNG first), or None."""
        return next((f for ext in ("png", "svg", "jpg", "jpeg") for f in self.files if f.endswith(f".{ext}")),
                    None)

    def description(self) -> str:
        """One line: the declared caption of the file ("" when no notebook wrote it), and whether it shows the
        paper's numbers only."""
        text = self.record.caption if self.record is not None else ""
        if self.paper_only:
            text = f"{text} (the paper's numbers only)" if text else "the paper's numbers only"
        return text


@dataclass(frozen=True)
class Folder:
    """The figures folder read with its manifest: ``notebooks`` in order, ``items`` per notebook name (in file
    order), ``others`` the files no notebook wrote, ``generated`` pages made from them, and ``checks`` per
    notebook name, the check outcomes of its latest default-profile run (:mod:`~gped_kit.experiments.checks`)."""

    figures: Path
    notebooks: tuple[Notebook, ...]
    items: dict[str, list[Item]] = field(default_factory=dict)
    others: list[Item] = field(default_factory=list)
    generated: list[str] = field(default_factory=list)
    checks: dict[str, list[CheckOutcome]] = field(default_factory=dict)


def _kind(files: Sequence[str]) -> str:
    extensions = {f.rpartition(".")[2].lower() for f in files}
    if extensions & set(FIGURE_EXTENSIONS):
        return "figure"
    return "table" if extensions & set(TABLE_EXTENSIONS) else "other"


def _order(files: list[str]) -> tuple[str, ...]:
    rank = {ext: i for i, ext in enumerate(("png", "svg", "jpg", "jpeg", "pdf", "md", "csv"))}
    return tuple(sorted(files, key=lambda f: (rank.get(f.rpartition(".")[2].lower(), len(rank)), f)))


def read_folder(figures: Path, notebooks: Path, skip: Sequence[str] = (INDEX, PAGE),
                manifest: Manifest | None = None) -> Folder:
    """Every file of ``figures`` (but ``skip``: the page and the index themselves, and hidden files) with the
    notebook that wrote it, from the folder's manifest (``manifest``: that one instead). A file whose record
    names a notebook not in ``notebooks`` counts as written by none."""
    figures, notebooks = Path(figures), Path(notebooks)
    if not figures.is_dir():
        raise FileNotFoundError(f"no figures folder at {figures}: run the notebooks (`make figures`) first")
    paths = sorted(notebooks.glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks (*.ipynb) in {notebooks}")
    books = tuple(read_notebook(p) for p in paths)
    manifest = read_manifest(figures) if manifest is None else manifest
    folder = Folder(figures, books, {b.name: [] for b in books},
                    checks={b.name: manifest.outcomes(b.name, CHECKS_PROFILE) for b in books})
    stems: dict[tuple[str, str], list[str]] = {}  # a figure and a table may share a stem
    for path in sorted(figures.iterdir()):
        if path.is_file() and not path.name.startswith(".") and path.name not in skip:
            if path.name in GENERATED:
                folder.generated.append(path.name)
                continue
            stems.setdefault((path.stem, _kind([path.name])), []).append(path.name)
    for (stem, kind), files in sorted(stems.items()):
        ordered = _order(files)
        owner = manifest.owner(ordered[0])
        if owner is None or owner.notebook not in folder.items:
            folder.others.append(Item(stem, ordered, kind))
        else:
            folder.items[owner.notebook].append(Item(stem, ordered, kind, owner))
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
    details = [f"<code>{html.escape(image or item.files[0])}</code>"]
    if item.description():
        details.append(_inline(md, item.description()))
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


def _table_list(items: Sequence[Item], page: Path, figures: Path, md: Callable[[str], str]) -> str:
    """A list of ``items`` (tables and other files): a link to each file and, where a notebook wrote it, its
    caption."""
    rows = []
    for item in items:
        first = html.escape(relink(item.files[0], figures, page))
        text = _inline(md, item.description()) if item.description() else ""
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
        shown = [i for i in items if i.kind == "figure"]
        if shown:
            section.append("<h3>Figures</h3>")
        for item in shown:
            section.append(_figure(item, here, figures, md, _plain(md(item.description() or item.stem))))
        tables = [i for i in items if i.kind != "figure"]
        if tables:
            section += ["<h3>Tables</h3>", _table_list(tables, here, figures, md)]
        if folder.checks.get(book.name):
            section.append(_checks_html(folder.checks[book.name]))
        body.append("\n".join(section + ["</section>"]))
    nav.append('<li><a href="#other">Other files</a></li>')
    other = ['<section id="other">', "<h2>Other files</h2>"]
    for name in folder.generated:
        other.append(f'<p><a href="{html.escape(relink(name, figures, here))}"><code>{html.escape(name)}</code></a>'
                     f" — {_inline(md, GENERATED[name])}</p>")
    if folder.others:
        other.append("<p>Files no notebook wrote (no record in the manifest):</p>")
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
        "the figures and tables the notebooks write and the manifest that records them; do not edit. The verdict and "
        "the claims table are the README's.</p>",
        "<nav><h2>Contents</h2><ol>", *nav, "</ol></nav>",
        '<section id="verdict"><h2>Verdict</h2>', verdict, "</section>",
        '<section id="claims"><h2>Claims</h2>', claims,
        f'<p>Every number of every row: <a href="{html.escape(relink(readme.DETAILS, figures, here))}">'
        f"{html.escape(readme.DETAILS)}</a>.</p>", "</section>",
        *body, "</body>", "</html>", ""])


# ----------------------------------------------------------------------------- checks
def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def checks_line(outcomes: Sequence[CheckOutcome]) -> str:
    """One line on a notebook's checks: how many invariants hold, the ones that do not, how many findings."""
    invariants = [o for o in outcomes if o.role is Role.INVARIANT]
    failed = [o for o in invariants if o.failed]
    if failed:
        held = (f"{len(failed)} of {_count(len(invariants), 'invariant')} do **not** hold: "
                + "; ".join(f"“{o.line}”" for o in failed))
    else:
        held = {0: "no invariants", 1: "1 invariant, which holds"}.get(len(invariants),
                                                                        f"all {len(invariants)} invariants hold")
    return (f"Checks ({CHECKS_PROFILE} profile, its latest run): {held}; "
            f"{_count(len(outcomes) - len(invariants), 'finding')}.")


def _checks_html(outcomes: Sequence[CheckOutcome]) -> str:
    rows = []
    for o in outcomes:
        mark = ("✗" if o.failed else "✓") if o.role is Role.INVARIANT else "·"
        rows.append(f'<li class="{o.role}{" failed" if o.failed else ""}">{mark} {html.escape(o.line)}</li>')
    return "\n".join([f"<h3>Checks ({CHECKS_PROFILE} profile)</h3>",
                      "<p>✓ / ✗ an invariant that holds / does not hold; · a finding, either way a result.</p>",
                      '<ul class="checks">', *rows, "</ul>"])


# ----------------------------------------------------------------------------- the index
def _md_files(item: Item) -> str:
    return ", ".join(f"[{f.rpartition('.')[2]}]({f})" for f in item.files[1:])


def _md_item(item: Item) -> str:
    first = item.files[0]
    more = f" ({_md_files(item)})" if len(item.files) > 1 else ""
    text = item.description()
    return f"- [{first}]({first}){more}" + (f" — {text}" if text else "")


def render_index(folder: Folder) -> str:
    """``README.md`` of the figures folder: per notebook, its figures and tables, one line each."""
    figures = folder.figures
    lines = ["# figures/", "",
             "Generated by `python -m gped_kit.cli.report` (`make report`) from this folder and its manifest "
             f"(`{MANIFEST}`); do not edit (`tests/test_report.py` fails when it is stale). What every notebook "
             "writes here: its figures (PNG, with a PDF beside each) and its tables (Markdown, with a CSV beside "
             "each), one line each, with the caption its experiment declares. All of it on one page, with the "
             "README's verdict and claims table: "
             f"`make report` writes `{PAGE}` here (not committed).", ""]
    for book in folder.notebooks:
        notebook = relink(book.path.name, book.path.parent, figures)
        lines += [f"## [{book.title}]({notebook})", ""]
        items = folder.items.get(book.name, [])
        if not items:
            lines += ["Writes nothing here.", ""]
        for kind, name in (("figure", "Figures"), ("table", "Tables")):
            chosen = [i for i in items if i.kind == kind]
            if chosen:
                lines += [f"{name}:", ""]
                lines += [_md_item(i) for i in chosen]
                lines.append("")
        if folder.checks.get(book.name):
            lines += [checks_line(folder.checks[book.name]), ""]
    lines += ["## Other files", ""]
    lines += [f"- [{name}]({name}) — {GENERATED[name]}" for name in folder.generated]
    lines += [_md_item(i) + " — written by no notebook (no record in the manifest)" for i in folder.others]
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
                        help="write nothing; exit 1 when the index is not what the folder and its manifest give")
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
            print(f"{index}: not what {figures}/ and its manifest give; run `python -m gped_kit.cli.report` "
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
