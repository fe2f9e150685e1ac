"""The committed notebooks' outputs are written for readers (issue 29, item 3): no absolute path, no
``nan`` in a table, no count written as a float ("9568200.0000", "seeds 3.0000"), no table whose first column
is pandas' row numbers 0, 1, 2, ... (issue 56: ``flat_table`` hides them), no progress or status line of a
run (tqdm bars, "it/s" lines, the kit's "[3/9] fcnn ...: reused (0.3 s)").

The test reads every cell output that a reader sees as text: ``stream`` text, the ``text/plain``,
``text/markdown`` and ``text/html`` forms of displayed and returned values, and error tracebacks
(images are not read). It runs over ``notebooks/*.ipynb``; ``GPED_NOTEBOOK_OUTPUTS=<folder>``
checks the executed notebooks in that folder instead (e.g. a scratch run made with papermill or
the batch runner), so a notebook can be checked before its outputs are committed. The checker
itself is tested on outputs made up for it, each kind of problem once, so it cannot pass by
finding nothing.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
#: Set to a folder of executed notebooks to check those instead of the committed ones.
OUTPUTS_ENV = "GPED_NOTEBOOK_OUTPUTS"

#: An absolute path of a POSIX machine's usual roots (or a Windows drive); a relative path such as
#: ``../figures/fig1.png`` is fine.
ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])/(?:work|root|tmp|home|Users|mnt|var|opt|private|srv|scratch)/"
                           r"|\b[A-Z]:\\\\")
#: A missing value written as pandas writes it.
NAN = re.compile(r"(?<![\w.&-])(?:nan|NaN|NAN|<NA>|&lt;NA&gt;)(?![\w(])")
#: A whole number of four or more digits written with decimals: a count (steps, parameters, FLOPs,
#: sizes) that went through a float column (9568200.0000, T 3000.0).
BIG_FLOAT_COUNT = re.compile(r"(?<![\w.])\d{4,}\.0+(?![\d])")
#: A table cell holding a whole number with decimals; a table column made only of such cells
#: (two or more, not all zero) is a count column written as floats (seeds 3.0000, 1.0000).
WHOLE_WITH_DECIMALS = re.compile(r"^-?\d+\.0+$")
#: Progress and status lines of a run: tqdm bars (text or widget), rates, the kit's progress lines
#: ("GPED: 1000/3000 it (33%), ...") and the grids' one-line statuses.
PROGRESS = re.compile(
    r"\d+%\|"                                    # a tqdm bar: " 45%|████▌     | 450/1000"
    r"|\b(?:it|s)/(?:s|it)\b"                    # a rate: "72 it/s", "1.3 s/it"
    r"|(?:Float|Int)Progress\("                  # a tqdm widget's text form
    r"|: \d+/\d+ \w+ \(\d+%\)"                   # the kit's progress lines
    r"|^[\w .-]+: (?:\d+ it|resuming at \d+/\d+ it)$"  # the kit's start lines: "GPED x2: 3000 it"
    r"|^\[\d+/\d+\] .+: (?:ran|reused|resumed|missing data|failed|stopped|not started)\b"  # grid statuses
    r"|: \w+ reused \(chain not loaded\)",       # derived results read back
    re.MULTILINE)

TEXT_TYPES = ("text/plain", "text/markdown", "text/html")


#: Terminal colour codes (IPython colours its tracebacks): removed before a text is checked.
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _text(value: object) -> str:
    return ANSI.sub("", "".join(value) if isinstance(value, list) else str(value))


def output_texts(notebook: dict) -> list[tuple[int, str, str]]:
    """(cell index, kind, text) of every output a reader sees as text."""
    out = []
    for i, cell in enumerate(notebook.get("cells", [])):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            kind = output.get("output_type")
            if kind == "stream":
                out.append((i, "stream", _text(output.get("text", ""))))
            elif kind in ("execute_result", "display_data"):
                data = output.get("data", {})
                out += [(i, mime, _text(data[mime])) for mime in TEXT_TYPES if mime in data]
            elif kind == "error":
                out.append((i, "error", _text("\n".join([output.get("evalue", ""), *output.get("traceback", [])]))))
    return out


def _table_columns(text: str, kind: str) -> list[list[str]]:
    """The body cells of every table in an HTML or Markdown text, column by column."""
    columns: list[list[str]] = []
    if kind == "text/html":
        for table in re.findall(r"<table.*?</table>", text, flags=re.S):
            body = re.search(r"<tbody>(.*?)</tbody>", table, flags=re.S)
            rows = [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r,
                                                                                          flags=re.S)]
                    for r in re.findall(r"<tr.*?</tr>", body.group(1) if body else "", flags=re.S)]
            width = max((len(r) for r in rows), default=0)
            columns += [[r[k] for r in rows if len(r) == width] for k in range(width)]
    elif kind in ("text/markdown", "stream", "text/plain"):
        block: list[list[str]] = []
        for line in [*text.splitlines(), ""]:
            if line.strip().startswith("|") and line.strip().endswith("|"):
                cells = [c.strip() for c in line.strip()[1:-1].split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells if c):
                    block.append(cells)
                continue
            if len(block) > 1:  # header row, then the body
                width = len(block[0])
                columns += [[r[k] for r in block[1:] if len(r) == width] for k in range(width)]
            block = []
    return columns


def row_numbers(text: str) -> list[int]:
    """For each HTML table of ``text`` whose first column is pandas' row numbers (an unnamed index 0, 1, 2, ...:
    no row of the header names it), the number of rows: a column that tells a reader nothing (issue 56)."""
    found = []
    for table in re.findall(r"<table.*?</table>", text, flags=re.S):
        head = re.search(r"<thead>(.*?)</thead>", table, flags=re.S)
        body = re.search(r"<tbody>(.*?)</tbody>", table, flags=re.S)
        if not head or not body or len(re.findall(r"<tr", head.group(1))) != 1:
            continue  # a named index (its name in a second header row) or no header: not row numbers
        heads = re.findall(r"<tr[^>]*>\s*<th[^>]*>(.*?)</th>", body.group(1), flags=re.S)  # each row's first cell
        first = [re.sub(r"<[^>]+>", "", m).strip() for m in heads]
        if len(first) >= 2 and first == [str(k) for k in range(len(first))]:
            found.append(len(first))
    return found


def problems(notebook: dict) -> list[str]:
    """Every problem of a notebook's outputs, one line each (cell index, kind, what and where)."""
    found = []
    for i, kind, text in output_texts(notebook):
        where = f"cell {i} ({kind})"
        for pattern, what in ((ABSOLUTE_PATH, "an absolute path"), (NAN, "a missing value written as nan"),
                              (BIG_FLOAT_COUNT, "a count written as a float"), (PROGRESS, "a progress line")):
            match = pattern.search(text)
            if match:
                start = max(match.start() - 40, 0)
                found.append(f"{where}: {what}: ...{text[start:match.end() + 40]!r}...")
        if kind == "text/html":
            found += [f"{where}: a table shows row numbers 0 to {n - 1} as its first column (flat_table hides them)"
                      for n in row_numbers(text)]
        for column in _table_columns(text, kind):
            if (len(column) >= 2 and all(WHOLE_WITH_DECIMALS.match(c) for c in column)
                    and any(float(c) != 0 for c in column)):  # a rate of 0.000 in every row is not a count
                found.append(f"{where}: a count column written as floats: {column[:4]}")
    return found


def _notebooks() -> list[Path]:
    folder = Path(os.environ[OUTPUTS_ENV]) if os.environ.get(OUTPUTS_ENV) else NOTEBOOK_DIR
    return sorted(folder.glob("*.ipynb"))


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_outputs_are_written_for_readers(path: Path) -> None:
    found = problems(json.loads(path.read_text()))
    assert not found, f"{path.name}:\n" + "\n".join(found)


def unshown_figures(notebook: dict) -> list[str]:
    """The code cells that save figures (``save_figure(`` in their source) and hold fewer images than they have
    such calls: a figure written to ``figures/`` that the reader of the notebook never sees."""
    found = []
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        calls = "".join(cell["source"]).count("save_figure(")
        images = sum(1 for o in cell.get("outputs", []) if "image/png" in o.get("data", {}))
        if calls and images < calls:
            found.append(f"cell {i}: saves {calls} figure(s) with save_figure, shows {images} image(s)")
    return found


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: p.name)
def test_every_saved_figure_is_shown_where_it_is_made(path: Path) -> None:
    found = unshown_figures(json.loads(path.read_text()))
    assert not found, f"{path.name}: show each figure the cell saves (plt.show(), display(fig)):\n" + "\n".join(found)


def test_the_figure_check_finds_a_saved_figure_without_an_image() -> None:
    cell = {"cell_type": "code", "source": ["fig = plot(t)\n", "save_figure(fig, 'f', figures_dir)\n"]}
    assert unshown_figures({"cells": [{**cell, "outputs": []}]}) == [
        "cell 0: saves 1 figure(s) with save_figure, shows 0 image(s)"]
    shown = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}}
    assert unshown_figures({"cells": [{**cell, "outputs": [shown]}]}) == []


def _notebook(*outputs: dict) -> dict:
    return {"cells": [{"cell_type": "code", "source": "", "outputs": list(outputs)},
                      {"cell_type": "markdown", "source": "/root/in/markdown/source is not an output"}]}


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _display(mime: str, text: str) -> dict:
    return {"output_type": "display_data", "data": {mime: text}, "metadata": {}}


@pytest.mark.parametrize("output, kind", [
    (_stream("To get it: put the files under /root/.cache/gped_kit/data.\n"), "an absolute path"),
    (_display("text/html", "<td>/work/main/results</td>"), "an absolute path"),
    ({"output_type": "error", "ename": "ValueError", "evalue": "no chain",
      "traceback": ["\x1b[0;32m/work/main/.venv/lib/python3.11/site-packages/x.py\x1b[0m in f()"]}, "an absolute path"),
    (_display("text/markdown", "| model | std |\n|---|---|\n| fcnn | nan |\n"), "nan"),
    (_display("text/plain", "   teacher accuracy  NaN\n"), "nan"),
    (_display("text/html", "<table><tbody><tr><td>9568200.0000</td></tr></tbody></table>"), "a count"),
    (_stream("T = 3000.0 iterations\n"), "a count"),
    (_display("text/html", "<table><tbody><tr><td>SGLD</td><td>3.0000</td><td>0.112</td></tr>"
                           "<tr><td>BAOA</td><td>1.0000</td><td>0.091</td></tr></tbody></table>"),
     "a count column written as floats"),
    (_display("text/html", "<table><thead><tr><th></th><th>candidate</th><th>NLL</th></tr></thead><tbody>"
                           "<tr><th>0</th><td>SGLD</td><td>0.112</td></tr><tr><th>1</th><td>BAOA</td><td>0.091</td></tr>"
                           "<tr><th>2</th><td>SGHMC</td><td>0.095</td></tr></tbody></table>"), "row numbers"),
    (_display("text/markdown", "| candidate | seeds |\n|:--|--:|\n| SGLD | 3.0 |\n| BAOA | 3.0 |\n"),
     "a count column written as floats"),
    (_stream("GPED: 1000/3000 it (33%), 2.11e+03 it/s, 0:01 left, teacher_nll=0.343\n"), "a progress line"),
    (_stream("GPED x2: 3000 it\n"), "a progress line"),
    (_stream(" 45%|████▌     | 450/1000 [00:03<00:04]\n"), "a progress line"),
    (_stream("[3/9] cnn_cifar10 N=50000 m=0 seed=0: missing data (0.0 s)\n"), "a progress line"),
    (_stream("fcnn N=60000 m=15 seed=0: experiment4 reused (chain not loaded)\n"), "a progress line"),
    (_stream("reused: 5000 SGLD iterations at 72 it/s on cpu\n"), "a progress line"),
])
def test_the_checker_finds_each_kind_of_problem(output: dict, kind: str) -> None:
    found = problems(_notebook(output))
    assert len(found) >= 1 and all(kind in line for line in found), found


def test_the_checker_passes_what_a_reader_should_see() -> None:
    fine = _notebook(
        _stream("saved: fig3_masked_mnist.png (in ../figures)\n"
                "GPED lower NLL than EnD2: 6 of 8 cells; agree in 6 of 8\n"),
        _display("text/html", "<table><tbody><tr><td>9568200</td><td>0.1000</td><td>—</td></tr>"
                              "<tr><td>478410</td><td>1.0000</td><td>0.0500</td></tr></tbody></table>"),
        _display("text/html", "<table><thead><tr><th></th><th>U_s</th></tr><tr><th>seed</th><th></th></tr></thead>"
                              "<tbody><tr><th>0</th><td>0.1</td></tr><tr><th>1</th><td>0.2</td></tr></tbody></table>"),
        _display("text/html", "<table><thead><tr><th></th><th>NLL</th></tr></thead><tbody>"
                              "<tr><th>fcnn</th><td>0.1</td></tr><tr><th>cnn_mnist</th><td>0.2</td></tr></tbody>"
                              "</table>"),  # a named index (seed) and an index of names: fine
        _display("text/markdown", "| quantity | ours |\n|:--|--:|\n| base student FLOPs | 771,200 |\n"
                                  "| base student NLL | 0.6176 |\n| nothing stored | — |\n"),
        _display("text/plain", "Reading: the teacher's NLL 0.415 (paper 0.267); nanoseconds and NaNs-free text\n"),
        _display("text/markdown", "| N | masking rate | ratio |\n|--:|--:|--:|\n| 10000 | 0.000 | 2.0 |\n"
                                  "| 50000 | 0.000 | 1.5 |\n"),  # rates all 0.000, ratios mixed: no count column
        {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}},
    )
    assert problems(fine) == []
