"""What README.md, docs/setup.md and the Makefile say about setting up and testing is what the Makefile does.

* docs/setup.md names every dependency `make venv` installs (pyproject.toml's ``dependencies``);
* `make venv` installs the ``dev`` extra and nothing of the slow proofs (no Ray, no playwright, no Chromium),
  `make venv-slow` installs those, and no sentence of the README or docs/setup.md says that `make venv`,
  `make test` or `make figures` installs them;
* `make test` leaves out the slow proofs and `make test-slow` runs them, the browser test among them;
* the local links and "README ... section" pointers of these files resolve;
* the set-up's disk size ("about 6 GB") holds for this environment where torch is a CUDA build (slow).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "docs" / "setup.md"
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
#: What only the slow proofs need: installed by `make venv-slow`, never by `make venv`.
SLOW_ONLY = ("ray", "playwright", "chromium")
#: How docs/setup.md spells a distribution, where it differs from its name.
SPELLED = {"pyyaml": "PyYAML", "jupyterlab": "JupyterLab"}


def recipe(target: str) -> str:
    """The Makefile's recipe lines of ``target`` (a rule ``target: ...``), joined."""
    lines = MAKEFILE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{re.escape(target)}\s*:", line))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("\t") and line.strip() and not line.startswith("#"):
            break
        body.append(line)
    return "\n".join(body)


def sentences(path: Path) -> list[str]:
    """The prose of a Markdown file, one sentence at a time (code blocks and comments left out)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return [s for s in re.split(r"(?<=[.;:])\s+", " ".join(text.split())) if s]


def test_setup_names_every_dependency_make_venv_installs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    text = SETUP.read_text().lower()
    names = [re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0] for line in project["dependencies"]]
    missing = [n for n in names if SPELLED.get(n.lower(), n).lower() not in text]
    assert not missing, f"docs/setup.md does not name these dependencies of `make venv`: {missing}"


def test_make_venv_installs_no_slow_extra_and_make_venv_slow_does():
    venv, slow = recipe("$(STAMP)").lower(), recipe("$(SLOW_STAMP)").lower()
    assert '-e ".[notebooks,test,dev]"' in venv and not any(word in venv for word in (*SLOW_ONLY, "cluster", "browser"))
    assert "cluster" in slow and "browser" in slow and "apt-get install -y -q chromium" in slow
    assert "$(SLOW_STAMP)" in next(line for line in MAKEFILE.read_text().splitlines() if line.startswith("venv-slow:"))
    assert "venv-slow" in next(line for line in MAKEFILE.read_text().splitlines() if line.startswith("test-slow:"))


@pytest.mark.parametrize("path", [README, SETUP], ids=lambda p: p.name)
def test_no_sentence_says_the_fast_commands_install_the_slow_extras(path):
    fast = re.compile(r"`make (?:venv|test|figures)`|^Both\b")
    wrong = [s for s in sentences(path) if fast.search(s) and re.search("|".join(SLOW_ONLY), s, re.I)
             and not re.search(r"\bnone of these\b|\bnot\b", s)]
    assert not wrong, f"{path.name}: these say a command other than `make venv-slow` installs Ray, playwright " \
                      "or Chromium:\n" + "\n".join(wrong)


def test_make_test_leaves_the_slow_proofs_to_make_test_slow_the_browser_test_among_them():
    assert '-m "not paper_profile and not slow"' in recipe("test")
    assert '-m "paper_profile or slow"' in recipe("test-slow")
    assert "pytestmark = pytest.mark.slow" in (ROOT / "tests" / "test_browser.py").read_text()
    browser = SETUP.read_text().split("## Browser test", 1)[1]
    assert "`make test-slow`" in browser and "runs it" in browser


@pytest.mark.parametrize("path", [README, SETUP, MAKEFILE], ids=lambda p: p.name)
def test_links_and_section_pointers_resolve(path):
    text = path.read_text()
    headings = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-"): h
                for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    readme_headings = [h.strip().lower() for h in re.findall(r"^#+ (.+)$", README.read_text(), flags=re.M)]
    problems = []
    for target in re.findall(r"\]\(((?!https?://)[^)]+)\)", text):
        file, _, anchor = target.partition("#")
        if file and not (path.parent / file).exists():
            problems.append(f"no file {file}")
        if not file and anchor and anchor not in headings:
            problems.append(f"no heading for #{anchor}")
    for section in re.findall(r"README(?:\.md)?(?:'s)? \"([^\"]+)\" section|README(?:\.md)?, section \"([^\"]+)\"",
                              text):
        name = next(s for s in section if s)
        if name.lower() not in readme_headings:
            problems.append(f"the README has no section {name!r}")
    assert not problems, f"{path.name}: " + "; ".join(problems)


@pytest.mark.slow
def test_the_environment_takes_about_six_gigabytes():
    torch = pytest.importorskip("torch")
    if sys.prefix == sys.base_prefix or torch.version.cuda is None:
        pytest.skip("not a virtual environment with torch's CUDA build, which the 6 GB of the set-up describe")
    size = sum(f.stat().st_size for f in Path(sys.prefix).rglob("*") if f.is_file() and not f.is_symlink())
    assert "about 6 GB" in SETUP.read_text() and "about 6 GB" in README.read_text()
    assert 4.5e9 <= size <= 8e9, f"{sys.prefix} takes {size / 1e9:.1f} GB"
