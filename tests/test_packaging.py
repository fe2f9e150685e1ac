"""The library installs alone (issue 56, item 7).

* pyproject.toml's [project].dependencies hold what the library imports and nothing of the notebooks' or the
  tests': every third-party module that a module of gped_kit/ imports at module level is provided by them,
  except in gped_kit.plotting, gped_kit.viz, gped_kit.cli and the experiments' ``figures`` modules (the figures,
  widgets and the notebook runner), whose imports the `notebooks` extra provides; an import inside a function (an
  optional dependency) is declared in some extra. No library module imports one of those.
* CHANGELOG.md's latest version is gped_kit.__version__; `make api` writes the API reference with pdoc.
* Slow: a wheel built from the sources, pip-installed into an empty virtual environment (the running
  environment's packages visible behind it, the notebooks' and tests' packages hidden), imports every library
  module and runs the quickstart of docs/library.md from outside the repository.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import gped_kit

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gped_kit"

#: Layers whose module-level imports the `notebooks` extra may provide (the rest is the library), and the name of
#: the modules that draw an experiment's figures beside it in its package, which the extra provides too.
NOTEBOOK_LAYERS = ("plotting", "viz", "cli")
FIGURE_MODULE = "figures"


def in_notebook_layer(path: Path) -> bool:
    """Whether a file of gped_kit/ is one the `notebooks` extra serves (a figure, widget or the runner)."""
    return path.relative_to(PACKAGE).parts[0] in NOTEBOOK_LAYERS or path.stem == FIGURE_MODULE

#: Import name -> the distribution that provides it (PEP 503 name), for every third-party module gped_kit/
#: imports. A new import fails test_every_import_is_declared until it is added here and to pyproject.toml.
DISTRIBUTIONS = {
    "torch": "torch", "torchvision": "torchvision", "numpy": "numpy", "pandas": "pandas", "tqdm": "tqdm",
    "sklearn": "scikit-learn", "PIL": "pillow", "filelock": "filelock", "psutil": "psutil",
    "torchmetrics": "torchmetrics",
    "IPython": "ipython", "ipywidgets": "ipywidgets", "matplotlib": "matplotlib", "papermill": "papermill",
    "nbformat": "nbformat", "yaml": "pyyaml", "mistune": "mistune", "packaging": "packaging", "zarr": "zarr",
    "ray": "ray",
    # required by a declared distribution (checked below where it is installed), not declared themselves
    "cycler": "cycler", "jupyter_client": "jupyter-client",
}
#: Distributions provided through a declared one's own requirements: name -> the declared distribution.
TRANSITIVE = {"cycler": "matplotlib", "jupyter-client": "ipykernel"}

#: Packages of the notebooks, the tests and the developers: never in [project].dependencies.
NOT_LIBRARY = {"jupyterlab", "notebook", "ipykernel", "ipython", "ipywidgets", "papermill", "nbformat", "nbval",
               "nbclient", "matplotlib", "seaborn", "pytest", "pytest-regressions", "pytest-xdist", "ruff", "pdoc",
               "ray", "playwright", "laplace-torch", "posteriors", "pyyaml", "mistune", "zarr"}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project() -> dict:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)["project"]


def names(lines: list[str]) -> set[str]:
    return {normalise(Requirement(line).name) for line in lines}


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level module, line, at module level) for each absolute import of a third-party module in a file;
    an import inside a function or a try block (an optional dependency) is not at module level."""
    stdlib = set(sys.stdlib_module_names)
    found: list[tuple[str, int, bool]] = []

    def visit(nodes: list[ast.stmt], module_level: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [node.module.split(".")[0]]
            else:
                tops = []
            found.extend((top, node.lineno, module_level) for top in tops
                         if top not in stdlib and top not in {"gped_kit", "__future__"})
            inner = module_level and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Try))
            for field in ("body", "orelse", "finalbody", "handlers"):
                children = getattr(node, field, None)
                if isinstance(children, list):
                    visit([c for c in children if isinstance(c, (ast.stmt, ast.ExceptHandler))], inner)

    visit(ast.parse(path.read_text()).body, True)
    return found


def test_dependencies_hold_no_notebook_or_test_package():
    dependencies = names(project()["dependencies"])
    assert not dependencies & NOT_LIBRARY, f"in [project].dependencies: {sorted(dependencies & NOT_LIBRARY)}"
    extras = project()["optional-dependencies"]
    assert {"jupyterlab", "papermill", "ipykernel"} <= names(extras["notebooks"])
    assert {"pytest", "nbval"} <= names(extras["test"])


def test_every_import_is_declared():
    """Each third-party import of gped_kit/ at the level that needs it: the library's module-level imports by
    [project].dependencies, viz's and cli's by those or the notebooks extra, optional imports by any list."""
    project_ = project()
    dependencies = names(project_["dependencies"])
    notebooks = dependencies | names(project_["optional-dependencies"]["notebooks"])
    anywhere = dependencies | {n for extra in project_["optional-dependencies"].values() for n in names(extra)}
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(ROOT)
        layer = path.relative_to(PACKAGE).parts[0]
        notebook_layer = in_notebook_layer(path)
        for top, line, module_level in imports(path):
            if top not in DISTRIBUTIONS:
                problems.append(f"{where}:{line}: import {top}: not in DISTRIBUTIONS (add it and declare it)")
                continue
            dist = DISTRIBUTIONS[top]
            dist = TRANSITIVE.get(dist, dist)
            allowed = (anywhere if not module_level else notebooks if notebook_layer else dependencies)
            if dist not in allowed:
                level = "an optional import" if not module_level else f"a module-level import of {layer}"
                problems.append(f"{where}:{line}: import {top} ({level}) needs {dist}, which is not declared there")
    assert not problems, "\n".join(problems)


def kit_imports(path: Path) -> set[str]:
    """The gped_kit modules (or packages) a file imports, relative imports resolved."""
    package = ["gped_kit", *path.relative_to(PACKAGE).parent.parts]  # what a relative import of level 1 names
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "gped_kit"}
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "").split(".") if not node.level else \
                package[:len(package) - node.level + 1] + ([node.module] if node.module else [])
            module = ".".join(base)
            if module.split(".")[0] == "gped_kit":
                found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


def test_the_library_imports_no_figure_widget_or_runner():
    """The library (every module outside gped_kit.plotting, viz, cli and the ``figures`` modules) imports none
    of those: it installs and imports without the `notebooks` extra, and the figures stay on top of it."""
    notebook_modules = {".".join(("gped_kit", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
                        for p in PACKAGE.rglob("*.py") if in_notebook_layer(p)}
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if in_notebook_layer(path):
            continue
        taken = {m for m in kit_imports(path) if m in notebook_modules}
        if taken:
            problems.append(f"{path.relative_to(ROOT)} imports {sorted(taken)}")
    assert not problems, "\n".join(problems)


def test_the_import_check_sees_each_kind_of_import(tmp_path):
    """The parser behind test_every_import_is_declared is not vacuous."""
    source = tmp_path / "m.py"
    source.write_text(textwrap.dedent("""\
        import os
        import torch.nn as nn
        from matplotlib import pyplot
        from . import sibling
        from gped_kit.core import flat
        try:
            import ray
        except ImportError:
            ray = None
        if True:
            import pandas
        def f():
            import zarr
        """))
    assert imports(source) == [("torch", 2, True), ("matplotlib", 3, True), ("ray", 7, False), ("pandas", 11, True),
                               ("zarr", 13, False)]


def test_distribution_table_matches_the_installed_packages():
    """DISTRIBUTIONS names the distribution that really provides each module, and each transitive one is a
    requirement of the distribution named for it (where they are installed)."""
    provided = metadata.packages_distributions()
    for module, dist in DISTRIBUTIONS.items():
        if module in provided:
            assert dist in {normalise(d) for d in provided[module]}, (module, provided[module])
    for dist, via in TRANSITIVE.items():
        try:
            requires = metadata.requires(via) or []
        except metadata.PackageNotFoundError:
            continue
        assert dist in {normalise(Requirement(r).name) for r in requires if "extra ==" not in r}, (dist, via)


def test_changelog_names_the_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[?v?(\d+\.\d+\.\d+)\]?", text, flags=re.MULTILINE)
    assert versions, "CHANGELOG.md has no '## X.Y.Z' heading"
    assert versions[0] == gped_kit.__version__, f"CHANGELOG.md's latest version is {versions[0]}"
    assert len(set(versions)) == len(versions), "a version heading twice"


def test_make_api_writes_the_reference_with_pdoc():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^api: venv\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
    assert recipe and re.search(r"-m pdoc .*--output-directory \$\(API_DIR\) \$\(API_MODULES\)", recipe.group(1))
    # every module by name (pdoc leaves out the submodules that a package's __all__ does not list)
    assert re.search(r"^API_MODULES = \$\(shell find gped_kit -name '\*\.py' ", makefile, flags=re.MULTILINE)
    assert re.search(r"^API_DIR\s*\?=\s*docs/api$", makefile, flags=re.MULTILINE)
    assert "/docs/api/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "pdoc" in names(project()["optional-dependencies"]["dev"])
    assert "make api" in (ROOT / "docs" / "library.md").read_text()


# ------------------------------------------------------------------------------------------- slow: a real install

#: Modules of the notebooks', tests' and slow proofs' packages: none may be visible to the installed library.
HIDDEN = ("matplotlib", "IPython", "ipywidgets", "ipykernel", "jupyterlab", "jupyter_client", "papermill",
          "nbformat", "nbval", "yaml", "mistune", "zarr", "tabulate", "pytest", "ray", "playwright", "laplace",
          "posteriors", "pdoc")

PROBE = """
import importlib, importlib.util, pkgutil, re, sys
from pathlib import Path

visible = [name for name in sys.argv[1].split(",") if importlib.util.find_spec(name) is not None]
assert not visible, f"not a clean install: {visible} visible"
import gped_kit
assert Path(gped_kit.__file__).resolve().is_relative_to(Path(sys.argv[2]).resolve()), gped_kit.__file__
library = [m.name for m in pkgutil.walk_packages(gped_kit.__path__, "gped_kit.")
           if m.name.split(".")[1] not in ("plotting", "viz", "cli") and m.name.rsplit(".", 1)[1] != "figures"]
for name in library:
    importlib.import_module(name)
print("imported", len(library), "library modules from", Path(gped_kit.__file__).parent)
doc = Path(sys.argv[3]).read_text()
section = doc[doc.index("## Install and quickstart"):]
code = re.search(r"```python\\n(.*?)```", section, flags=re.DOTALL).group(1)
namespace = {"__name__": "__quickstart__"}
exec(compile(code, "docs/library.md (quickstart)", "exec"), namespace)
print(namespace["result"].summary[["student", "teacher_nll", "student_nll", "entropy_mae"]].to_string())
"""


def requirement_closure(lines: list[str]) -> set[str]:
    """The installed distributions that these requirements need, recursively (markers evaluated here, the
    extras a requirement asks for included): what pip would install for them, as installed in this
    environment. A requirement that is not installed fails the test."""
    seen: set[str] = set()
    todo = [(Requirement(line), ("",)) for line in lines]
    while todo:
        req, extras = todo.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras):
            continue
        name = normalise(req.name)
        if name in seen:
            continue
        seen.add(name)
        dist = metadata.distribution(req.name)
        asked = ("", *sorted(req.extras))
        todo += [(Requirement(line), asked) for line in dist.requires or []]
    return seen


def site_view(distributions: set[str], view: Path) -> None:
    """``view``: links to the top-level files and folders of these distributions (packages, their .dist-info,
    bundled libraries) in this environment's site-packages, and nothing else."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    view.mkdir()
    for name in sorted(distributions):
        for file in metadata.distribution(name).files or []:
            top = Path(file).parts[0]
            if top not in ("..", "__pycache__") and (purelib / top).exists() and not (view / top).exists():
                (view / top).symlink_to(purelib / top)


@pytest.mark.slow  # builds a wheel and runs a 3,000-step chain: about 30 s, in make test-slow
def test_wheel_installs_alone_and_runs_the_quickstart(tmp_path):
    """`pip install` of a wheel built from the sources into an empty virtual environment gives the library: every
    module outside plotting, viz, cli and the figures modules imports, and docs/library.md's quickstart runs, from
    outside the checkout. Offline: the wheel is built with this environment's setuptools, and the new environment
    sees, behind its own site-packages, only the installed distributions that [project].dependencies need (their
    requirements' closure), so the notebooks' and tests' packages are absent as after `pip install .`."""
    setuptools = pytest.importorskip("setuptools", reason="building the wheel offline needs setuptools here")
    if Version(setuptools.__version__) < Version("70.1"):  # older ones build wheels through the wheel package
        pytest.importorskip("wheel", reason=f"setuptools {setuptools.__version__} builds wheels only with `wheel`")
    source = tmp_path / "src"  # a copy of what the wheel is built from: the build writes nothing into the checkout
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(PACKAGE, source / "gped_kit", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path / "wheels"
    # no PYTHONPATH: a checkout on it would be the gped_kit that pip finds installed, and the one imported
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels),
                    str(source)], check=True, capture_output=True, text=True, timeout=300, env=environment)
    (wheel,) = wheels.glob("gped_kit-*.whl")
    assert wheel.name.startswith(f"gped_kit-{gped_kit.__version__}-")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300, env=environment)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, env=environment).stdout.strip())
    requires = metadata.Distribution.at(next(site.glob("gped_kit-*.dist-info"))).requires or []
    assert {normalise(Requirement(r).name) for r in requires if "extra ==" not in r} == \
        names(project()["dependencies"])
    needed = requirement_closure([r for r in requires if "extra ==" not in r])
    assert not needed & NOT_LIBRARY, sorted(needed & NOT_LIBRARY)
    site_view(needed, tmp_path / "dependencies")
    (site / "zz_dependencies.pth").write_text(f"{tmp_path / 'dependencies'}\n")

    run = subprocess.run([str(python), "-c", PROBE, ",".join(HIDDEN), str(site), str(ROOT / "docs" / "library.md")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(tmp_path),
                              "GPED_PROGRESS": "off"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "imported" in run.stdout and "predictive-U_s" in run.stdout, run.stdout
