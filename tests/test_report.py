"""The results page (``make report``: ``python -m gped_kit.cli.report``) and the index of ``figures/``.

The page is built from the committed ``figures/`` into a scratch folder: every PNG of ``figures/`` is on it
exactly once, and every image resolves; every notebook has a section that links to it; the verdict and the
claims table are the README's. ``figures/README.md`` is what the folder and the notebooks give (the check
fails on a stale one). How files are matched to notebooks is checked on a hand-built notebook. The page is
also opened in headless Chromium (marked slow, like ``tests/test_browser.py``, and skipped the same way
without playwright or Chromium): its title, the claims table's rows, no broken image.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from importlib.util import find_spec
from pathlib import Path

import nbformat
import pytest

from gped_kit.cli import readme as RM
from gped_kit.cli import report as R

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "figures"
NOTEBOOKS = ROOT / "notebooks"


class _Page(HTMLParser):
    """The parts of the page the tests read: image sources, links, notebook links, claims-table rows."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.notebook_links: list[str] = []
        self.sections: list[str] = []
        self.claims_rows = 0
        self.title = ""
        self._in = {"title": False, "claims": False, "tbody": False}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.images.append(a["src"] or "")
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
            if "notebook-link" in (a.get("class") or ""):
                self.notebook_links.append(a["href"] or "")
        elif tag == "section" and "notebook" in (a.get("class") or ""):
            self.sections.append(a.get("id") or "")
        elif tag == "title":
            self._in["title"] = True
        elif tag == "table" and a.get("id") == "claims-table":
            self._in["claims"] = True
        elif tag == "tbody" and self._in["claims"]:
            self._in["tbody"] = True
        elif tag == "tr" and self._in["tbody"]:
            self.claims_rows += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in["title"] = False
        elif tag == "table":
            self._in["claims"] = self._in["tbody"] = False

    def handle_data(self, data: str) -> None:
        if self._in["title"]:
            self.title += data


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """The page and the index built from the committed figures/ into a scratch folder."""
    out = tmp_path_factory.mktemp("report")
    page, index = out / "report.html", out / "README.md"
    assert R.main(["--figures", str(FIGURES), "--notebooks", str(NOTEBOOKS), "--out", str(page),
                   "--index", str(index)]) == 0
    parsed = _Page()
    text = page.read_text()
    parsed.feed(text)
    return {"page": page, "index": index, "html": text, "parsed": parsed}


def test_every_png_of_the_folder_is_on_the_page_exactly_once(built):
    parsed, here = built["parsed"], built["page"].parent
    shown = [(here / src).resolve() for src in parsed.images]
    assert all(p.is_file() for p in shown), [str(p) for p in shown if not p.is_file()]  # no broken image
    pngs = sorted(p.resolve() for p in FIGURES.glob("*.png"))
    assert pngs, "no figures committed"
    assert sorted(shown) == pngs, "each PNG of figures/ once, and nothing else"
    for link in parsed.links:  # every local link of the page resolves (files, notebooks, docs)
        if not re.match(r"^([a-z]+:|#)", link):
            assert (here / link.split("#")[0]).exists(), link


def test_every_notebook_has_a_section_linking_to_it(built):
    parsed, here = built["parsed"], built["page"].parent
    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert parsed.sections == [f"nb-{p.stem}" for p in notebooks]  # in the notebooks' order, 00 first
    assert [(here / link).resolve() for link in parsed.notebook_links] == [p.resolve() for p in notebooks]


def test_the_verdict_and_the_claims_table_are_the_readmes(built):
    parsed, text = built["parsed"], built["html"]
    rows = RM.claims_table(FIGURES)
    assert parsed.title == R.TITLE
    assert parsed.claims_rows == len(rows) > 0
    assert "<strong>Verdict.</strong>" in text
    judged = re.search(r"\*\*(\d+ hold, \d+ hold partly and \d+ do not)\*\*", (ROOT / "README.md").read_text())
    assert judged and f"<strong>{judged.group(1)}</strong>" in text  # the README's own counts
    plain = " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())
    for row in rows:  # each claim, in the README's order
        assert " ".join(row.claim.replace("`", "").replace("**", "").split())[:40] in plain, row.claim


def test_every_committed_figure_is_written_by_a_notebook():
    folder = R.read_folder(FIGURES, NOTEBOOKS)
    assert not [i.files for i in folder.others], \
        "files of figures/ that no notebook's code writes: a notebook names them in a way the report cannot read"
    assert folder.generated == [RM.DETAILS]
    assert [i.stem for i in folder.items["09_your_own_model"]] == ["09_regression_uncertainty"]
    assert [i.stem for i in folder.items["04_figure3_masking"]] == ["fig3_masked_mnist", "explorer_masking_default"]


def test_figures_readme_is_current():
    assert R.main(["--figures", str(FIGURES), "--notebooks", str(NOTEBOOKS), "--check"]) == 0, \
        "figures/README.md is stale: run `make report` (python -m gped_kit.cli.report) and commit figures/README.md"


def test_the_check_fails_on_a_stale_index(tmp_path, built):
    stale = tmp_path / "README.md"
    stale.write_text(built["index"].read_text().replace("## [00", "## [zero", 1))
    args = ["--figures", str(FIGURES), "--notebooks", str(NOTEBOOKS), "--index", str(stale)]
    assert R.main([*args, "--check"]) == 1
    assert R.main([*args, "--check", "--index", str(tmp_path / "absent.md")]) == 1


def test_a_missing_folder_is_an_error_with_the_reason(tmp_path, capsys):
    assert R.main(["--figures", str(tmp_path / "nowhere"), "--notebooks", str(NOTEBOOKS), "--check"]) == 2
    assert "make figures" in capsys.readouterr().err


def _notebook(path: Path, cells: list) -> Path:
    book = nbformat.v4.new_notebook()
    book.cells = cells
    nbformat.write(book, path)
    return path


def test_files_are_matched_to_the_notebook_whose_code_names_them_most_precisely(tmp_path):
    notebooks, figures = tmp_path / "notebooks", tmp_path / "figures"
    notebooks.mkdir()
    figures.mkdir()
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    _notebook(notebooks / "01_any.ipynb", [
        md("# 01 · Any\n\nIntro."),
        code("from gped_kit.plotting.save import save_figure, save_table\n"
             "from gped_kit.experiments import experiment1 as E1"),
        md("## Curves, one per model\n\nThe first paragraph, with [a link](../docs/store.md) and $U_o$.\n\nMore."),
        code('for model in ("fcnn", "cnn_mnist"):\n'
             '    fig = plot(model, title=f"{model}: ours ({profile} profile)")\n'
             '    save_figure(fig, f"{figure}_curves_{model}_{profile}", figures_dir)'),
        code("save_table(t, E1.TABLE1.format(profile=profile), figures_dir)"),
        code("%%time\nnot python"),  # a cell magic: skipped
    ])
    _notebook(notebooks / "02_cifar.ipynb", [
        md("# 02 · CIFAR"),
        code('save_figure(fig, f"fig5_curves_fcnn_{profile}", figures_dir)'),
    ])
    for name in ("fig1_curves_fcnn_default.png", "fig1_curves_fcnn_default.pdf", "fig1_curves_cnn_mnist_long.png",
                 "fig5_curves_fcnn_default_paper_only.png", "table1_experiment1_cpu30.md",
                 "table1_experiment1_cpu30.csv", "fig1_curves_resnet_default.png", "notes.txt", "claims.md"):
        (figures / name).write_bytes(b"")
    folder = R.read_folder(figures, notebooks)
    first = {i.stem: i for i in folder.items["01_any"]}
    assert sorted(first) == ["fig1_curves_cnn_mnist_long", "fig1_curves_fcnn_default", "table1_experiment1_cpu30"]
    fcnn = first["fig1_curves_fcnn_default"]
    assert fcnn.files == ("fig1_curves_fcnn_default.png", "fig1_curves_fcnn_default.pdf")
    assert fcnn.profile == "default" and fcnn.description() == "fcnn: ours (default profile)"
    assert first["table1_experiment1_cpu30"].description() == "Curves, one per model (profile `cpu30`)"
    (cifar,) = folder.items["02_cifar"]  # both notebooks' patterns match; the more literal one wins
    assert cifar.stem == "fig5_curves_fcnn_default_paper_only" and cifar.paper_only
    assert cifar.description() == "02 · CIFAR (profile `default`; the paper's numbers only)"
    assert sorted(i.stem for i in folder.others) == ["fig1_curves_resnet_default", "notes"]  # model not in the loop
    assert folder.generated == ["claims.md"]
    index = R.render_index(folder)
    assert "## [01 · Any](../notebooks/01_any.ipynb)" in index
    assert "- [fig1_curves_fcnn_default.png](fig1_curves_fcnn_default.png) ([pdf](fig1_curves_fcnn_default.pdf))" \
        in index
    output = fcnn.output
    assert output is not None and output.caption.startswith("The first paragraph") and "More" not in output.caption
    assert R.relink("../docs/store.md", notebooks, figures) == "../docs/store.md"
    assert R.relink("#notes", notebooks, figures, notebooks / "01_any.ipynb") == "../notebooks/01_any.ipynb#notes"
    assert R.relink("https://arxiv.org/abs/2005.08110", notebooks, figures) == "https://arxiv.org/abs/2005.08110"
    assert R.relink("figures/claims.md", tmp_path, figures) == "claims.md"


# ----------------------------------------------------------------------------- in a real browser
@pytest.mark.slow
def test_the_page_renders_in_chromium(built):
    """The page in headless Chromium (the system browser, as tests/test_browser.py drives it): its title,
    the claims table's rows, every image loaded (naturalWidth > 0), no request failed."""
    if find_spec("playwright") is None:
        pytest.skip("the playwright package is not installed (pip install playwright; `make venv-slow` installs it)")
    from test_browser import chromium_path

    if chromium_path() is None:
        pytest.skip("no Chromium binary: install the Debian package `chromium` (`make venv-slow` does so as root) "
                    "or set GPED_CHROMIUM")
    from playwright.sync_api import sync_playwright

    failed: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.on("requestfailed", lambda request: failed.append(request.url))
            page.goto(built["page"].resolve().as_uri(), wait_until="load", timeout=120_000)
            assert page.title() == R.TITLE
            assert page.locator("#claims-table tbody tr").count() == len(RM.claims_table(FIGURES))
            assert page.locator("#verdict p").first.inner_text().startswith("Verdict.")
            sizes = page.eval_on_selector_all(
                "img", "imgs => imgs.map(i => [i.getAttribute('src'), i.complete, i.naturalWidth])")
            assert len(sizes) == len(list(FIGURES.glob("*.png")))
            broken = [src for src, complete, width in sizes if not complete or width <= 0]
            assert not broken, f"images that did not load: {broken}"
            assert page.locator("section.notebook").count() == len(list(NOTEBOOKS.glob("*.ipynb")))
        finally:
            browser.close()
    assert not failed, f"requests that failed: {failed}"
