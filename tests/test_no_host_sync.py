"""No host synchronisation on the step path, checked statically (issue 30, item 4).

Between log points the engine must not make the host wait for the device: every ``.item()``,
``.cpu()``, ``.numpy()``, ``.tolist()``, ``print``, ``float``/``int``/``bool`` of a tensor,
``.nonzero()`` (its size is data-dependent) or upload from host memory (``torch.tensor(...,
device=...)``: a blocking copy) in a step would stall a GPU that the host could otherwise keep
queued ahead. The CUDA tests check this at run time (``torch.cuda.set_sync_debug_mode``) on a GPU;
this test checks it on any machine, by reading the code.

It parses (``ast``) every function of ``gped_kit/engine`` and ``gped_kit/core`` and follows the
calls from :meth:`GPEDEngine.step` (:data:`START`): plain and imported names, module attributes
(``losses.f``), ``self.method`` and ``self.<attr>.method`` (the attribute's class read from
``__init__``'s ``self.<attr> = Class(...)``), functions passed as arguments (``functools.partial``,
``value_and_grad``), and any other ``obj.method(...)`` by method name across those packages
(conservative: every function of that name), except names of torch.Tensor methods. Functions the
step calls through configuration values are added as roots (:func:`extra_roots`: the networks'
``forward`` methods in ``gped_kit/models``, the functions ``core/targets.py`` hands out as values
(targets' ``g`` and ``link``), and every function of ``core/losses.py`` (targets' losses and the
regularisers). A finding names file, function and line.

After a refactor of the engine (renamed or split step methods), the call graph is followed anew
from ``GPEDEngine.step``; only :data:`START`, :data:`PACKAGES`, :data:`VALUE_MODULES`,
:data:`LOSS_MODULES` and :data:`KNOWN` may need adapting.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import torch

ROOT = Path(__file__).resolve().parents[1]
#: Where the step path may lead (every .py file, recursively).
PACKAGES = ("gped_kit/engine", "gped_kit/core")
#: Network modules: their ``forward`` runs inside the step (``functional_call``).
NETWORKS = ("gped_kit/models",)
START = ("gped_kit/engine/engine.py", "GPEDEngine.step")
#: Modules whose functions the step calls through values (Target.g / link / loss): their
#: module-level functions used as values are roots.
VALUE_MODULES = ("gped_kit/core/targets.py",)
#: Modules whose every module-level function is a root: the losses (targets' losses and the
#: regularisers reach the step as values, often through lambdas).
LOSS_MODULES = ("gped_kit/core/losses.py",)
#: Findings that are known and accepted for now, with the reason: (file, function, kind) -> why.
#: An entry that no longer matches a finding fails the test, so that it is removed when fixed.
KNOWN: dict[tuple[str, str, str], str] = {}
#: Calls whose receiver is a tensor are not followed into our functions of the same name.
TENSOR_METHODS = frozenset(dir(torch.Tensor))
SYNC_METHODS = {"item": "item", "cpu": "cpu", "numpy": "numpy", "tolist": "tolist", "nonzero": "nonzero"}
CASTS = ("float", "int", "bool")
#: Arguments of float/int/bool that are host values: sizes and lengths.
HOST_ATTRIBUTES = frozenset({"shape", "ndim", "numel", "dim", "size", "element_size", "num_chains", "K"})


@dataclass(frozen=True)
class Finding:
    file: str
    function: str
    line: int
    kind: str
    code: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}: {self.kind}: {self.code}"


@dataclass
class Module:
    path: str
    tree: ast.Module
    source: str
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # qualname -> node
    relative_imports: list[tuple[int, str | None, str, str]] = field(default_factory=list)  # level, module, name, local
    absolute_names: set[str] = field(default_factory=set)  # torch, F, math, ...: not our code
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # local -> (module path, name or None)
    attribute_types: dict[tuple[str, str], str] = field(default_factory=dict)  # (class, attr) -> class


def _module_path(current: str, level: int, module: str | None, known: Iterable[str]) -> str | None:
    """The path (``a/b/c.py`` or a package's ``__init__.py``) among ``known`` of a relative import."""
    base = PurePosixPath(current).parent
    for _ in range(level - 1):
        base = base.parent
    target = base.joinpath(*module.split(".")) if module else base
    for candidate in (f"{target}.py", f"{target}/__init__.py"):
        if candidate in known:
            return candidate
    return None


def parse_module(path: str, source: str) -> Module:
    tree = ast.parse(source)
    module = Module(path, tree, source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            module.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    module.functions[f"{node.name}.{item.name}"] = item
                    if item.name == "__init__":
                        for stmt in ast.walk(item):
                            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                                    and isinstance(stmt.targets[0], ast.Attribute)
                                    and isinstance(stmt.targets[0].value, ast.Name)
                                    and stmt.targets[0].value.id == "self" and isinstance(stmt.value, ast.Call)
                                    and isinstance(stmt.value.func, ast.Name)):
                                module.attribute_types[(node.name, stmt.targets[0].attr)] = stmt.value.func.id
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            module.relative_imports += [(node.level, node.module, a.name, a.asname or a.name) for a in node.names]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module.absolute_names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return module


class Index:
    """Every function of the given modules, and the calls between them."""

    def __init__(self, modules: Iterable[Module]) -> None:
        self.modules = {m.path: m for m in modules}
        self.by_name: dict[str, list[tuple[str, str]]] = {}
        self.classes: dict[str, list[str]] = {}  # class name -> module paths
        for m in self.modules.values():
            for qualname in m.functions:
                self.by_name.setdefault(qualname.rsplit(".", 1)[-1], []).append((m.path, qualname))
                if "." in qualname:
                    self.classes.setdefault(qualname.split(".")[0], []).append(m.path)
            for level, name, symbol, local in m.relative_imports:
                as_module = _module_path(m.path, level, f"{name}.{symbol}" if name else symbol, self.modules)
                if as_module is not None:
                    m.imports[local] = (as_module, None)  # a module: `from ..core import losses`
                elif (origin := _module_path(m.path, level, name, self.modules)) is not None:
                    m.imports[local] = (origin, symbol)

    def resolve_name(self, module: Module, name: str) -> list[tuple[str, str]]:
        """A plain name used in ``module``: a function of the module, or one it imports."""
        if name in module.functions:
            return [(module.path, name)]
        if name in module.imports:
            target, symbol = module.imports[name]
            if symbol is not None:
                return self._exported(target, symbol)
        return []

    def _exported(self, path: str, symbol: str, depth: int = 0) -> list[tuple[str, str]]:
        """``symbol`` as defined in (or re-exported by) the module at ``path``."""
        m = self.modules.get(path)
        if m is None or depth > 3:
            return []
        if symbol in m.functions:
            return [(path, symbol)]
        if symbol in m.imports and m.imports[symbol][1] is not None:
            return self._exported(m.imports[symbol][0], m.imports[symbol][1], depth + 1)
        return []

    def methods(self, class_name: str, method: str) -> list[tuple[str, str]]:
        return [(path, f"{class_name}.{method}") for path in self.classes.get(class_name, [])
                if f"{class_name}.{method}" in self.modules[path].functions]

    def callees(self, path: str, qualname: str) -> Iterator[tuple[str, str]]:
        """The functions of the index that ``qualname``'s body may call or pass on."""
        module = self.modules[path]
        node = module.functions[qualname]
        cls = qualname.split(".")[0] if "." in qualname else None
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                yield from self.resolve_name(module, sub.id)  # calls and functions passed as values
            elif (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load) and isinstance(sub.value, ast.Name)
                  and sub.value.id in module.imports and module.imports[sub.value.id][1] is None):
                yield from self._exported(module.imports[sub.value.id][0], sub.attr)  # steps.f, called or passed
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                attr, value = sub.func.attr, sub.func.value
                if isinstance(value, ast.Name) and value.id in module.absolute_names:
                    continue  # torch.f(...), F.f(...): not our code
                if isinstance(value, ast.Name) and value.id in module.imports and module.imports[value.id][1] is None:
                    yield from self._exported(module.imports[value.id][0], attr)  # losses.f(...)
                elif isinstance(value, ast.Name) and value.id == "self" and cls is not None:
                    yield from self.methods(cls, attr) or [f for f in self.by_name.get(attr, []) if "." in f[1]]
                elif (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                      and value.value.id == "self" and (cls, value.attr) in module.attribute_types):
                    yield from self.methods(module.attribute_types[(cls, value.attr)], attr)
                elif attr not in TENSOR_METHODS:
                    yield from self.by_name.get(attr, [])


def _is_host_value(node: ast.expr) -> bool:
    """Arguments of float/int/bool that cannot be tensors: constants, lengths, sizes."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("round", "min", "max"):
        return all(_is_host_value(a) for a in node.args)
    return any(isinstance(n, ast.Attribute) and n.attr in HOST_ATTRIBUTES for n in ast.walk(node))


def sync_findings(module: Module, qualname: str) -> list[Finding]:
    """Host synchronisations in one function's body (nested functions included)."""
    node = module.functions[qualname]
    out = []

    def add(sub: ast.AST, kind: str) -> None:
        out.append(Finding(module.path, qualname, sub.lineno, kind, ast.get_source_segment(module.source, sub) or ""))

    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Attribute) and func.attr in SYNC_METHODS:
            add(sub, f".{func.attr}()")
        elif isinstance(func, ast.Attribute) and func.attr == "to" and any(
                isinstance(a, ast.Constant) and a.value == "cpu" for a in [*sub.args, *(k.value for k in sub.keywords)]
        ):
            add(sub, ".to('cpu')")
        elif isinstance(func, ast.Name) and func.id == "print":
            add(sub, "print")
        elif isinstance(func, ast.Name) and func.id in CASTS and sub.args and not _is_host_value(sub.args[0]):
            add(sub, f"{func.id}(<tensor>)")
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch"
              and func.attr in ("tensor", "as_tensor") and any(k.arg == "device" for k in sub.keywords)):
            add(sub, "upload")
    return out


def reachable(index: Index, roots: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()
    todo = list(roots)
    while todo:
        item = todo.pop()
        if item in seen or item[0] not in index.modules or item[1] not in index.modules[item[0]].functions:
            continue
        seen.add(item)
        todo.extend(index.callees(*item))
    return sorted(seen)


def _used_as_values(module: Module) -> set[str]:
    """Module-level functions of ``module`` that it uses as values (not only calls): e.g.
    ``Target(g=entropy_g, ...)``, ``REGULARIZERS = {"group_lasso": group_lasso}``."""
    called = {id(n.func) for n in ast.walk(module.tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(module.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and id(n) not in called and n.id in module.functions}


def extra_roots(index: Index) -> list[tuple[str, str]]:
    """Functions the step reaches through configuration values rather than calls by name: the
    networks' ``forward`` methods (:data:`NETWORKS`), the functions :data:`VALUE_MODULES` hand
    out as values (a target's ``g`` and ``link``) and every function of :data:`LOSS_MODULES`."""
    return ([(path, q) for path, m in index.modules.items() if path.startswith(NETWORKS)
             for q in m.functions if q.endswith(".forward")]
            + [(path, q) for path in VALUE_MODULES if path in index.modules
               for q in sorted(_used_as_values(index.modules[path]))]
            + [(path, q) for path in LOSS_MODULES if path in index.modules
               for q in index.modules[path].functions if "." not in q])


def kit_index() -> Index:
    files = [f for pkg in (*PACKAGES, *NETWORKS) for f in sorted((ROOT / pkg).rglob("*.py"))]
    return Index(parse_module(f.relative_to(ROOT).as_posix(), f.read_text()) for f in files)


def step_path_findings(index: Index) -> tuple[list[tuple[str, str]], list[Finding]]:
    functions = reachable(index, [START, *extra_roots(index)])
    return functions, [f for path, q in functions for f in sync_findings(index.modules[path], q)]


# ------------------------------------------------------------------------------ the kit
def test_step_path_has_no_host_synchronisation():
    index = kit_index()
    functions, findings = step_path_findings(index)
    names = {q for _, q in functions}
    # the walk reaches what a step runs (a check that it follows the calls at all)
    assert START in functions and {"teacher_gradients", "distill_gradients", "ensemble_step",
                                   "estimator_update_", "adam_update_", "units", "FlatLayout.gather_",
                                   "ChainStreams.sgld_noise", "ChainSets.gather"} <= names, names
    assert any(q.endswith(".update_") for q in names) and any(q.endswith(".forward") for q in names)
    assert "GPEDEngine.log" not in names and "GPEDEngine.results" not in names  # log points are not on it
    known = {k: [f for f in findings if (f.file, f.function, f.kind) == k] for k in KNOWN}
    stale = [k for k, hits in known.items() if not hits]
    assert not stale, f"KNOWN lists findings that no longer occur (remove them): {stale}"
    new = [f for f in findings if (f.file, f.function, f.kind) not in KNOWN]
    assert not new, "host synchronisation on the step path:\n" + "\n".join(map(str, new))


# ------------------------------------------------------------------------------ the checker itself
SYNTHETIC_ENGINE = '''
import torch
from .helpers import helper


class Streams:
    def draw(self, out):
        out.normal_()


class Engine:
    def __init__(self):
        self.streams = Streams()

    def step(self):
        self.streams.draw(self.buffer)
        helper(self.buffer)
        self._inner()

    def _inner(self):
        loss = self.buffer.sum()
        n = int(self.buffer.shape[0])
        {inserted}

    def log(self):
        return self.buffer.mean().item()
'''
SYNTHETIC_HELPERS = '''
def helper(x):
    x.mul_(2)
    {inserted}
'''


def synthetic_findings(engine: str = "pass", helpers: str = "pass") -> list[Finding]:
    modules = [parse_module("gped_kit/engine/engine.py", SYNTHETIC_ENGINE.replace("{inserted}", engine)),
               parse_module("gped_kit/engine/helpers.py", SYNTHETIC_HELPERS.replace("{inserted}", helpers))]
    index = Index(modules)
    return [f for path, q in reachable(index, [("gped_kit/engine/engine.py", "Engine.step")])
            for f in sync_findings(index.modules[path], q)]


def test_checker_is_silent_on_clean_code_and_ignores_log_points():
    assert synthetic_findings() == []  # .item() in log() is not on the step path; int(x.shape[0]) is a size


def test_checker_catches_an_inserted_item_and_names_file_function_and_line():
    (finding,) = synthetic_findings(engine="value = loss.item()")
    assert (finding.file, finding.function, finding.kind, finding.code) == (
        "gped_kit/engine/engine.py", "Engine._inner", ".item()", "loss.item()")
    lines = SYNTHETIC_ENGINE.replace("{inserted}", "value = loss.item()").splitlines()
    assert "loss.item()" in lines[finding.line - 1]
    assert str(finding).startswith(f"gped_kit/engine/engine.py:{finding.line} in Engine._inner: .item()")


def test_checker_follows_imports_and_catches_every_kind():
    cases = {"print(x)": "print", "x.cpu()": ".cpu()", "x.numpy()": ".numpy()", "x.tolist()": ".tolist()",
             "float(x.sum())": "float(<tensor>)", "bool((x > 0).any())": "bool(<tensor>)",
             "x.nonzero()": ".nonzero()", "x.to('cpu')": ".to('cpu')",
             "torch.tensor([1.0], device=x.device)": "upload"}
    for code, kind in cases.items():
        findings = synthetic_findings(helpers=code)
        expected = [("gped_kit/engine/helpers.py", "helper", kind)]
        assert [(f.file, f.function, f.kind) for f in findings] == expected, code
    assert synthetic_findings(helpers="n = float(len(x)) + int(x.shape[1])") == []


def test_checker_reads_typed_attributes_of_self():
    source = textwrap.dedent(SYNTHETIC_ENGINE.replace("{inserted}", "pass")).replace(
        "out.normal_()", "out.normal_()\n        print(out)")
    index = Index([parse_module("gped_kit/engine/engine.py", source),
                   parse_module("gped_kit/engine/helpers.py", SYNTHETIC_HELPERS.replace("{inserted}", "pass"))])
    found = [f for path, q in reachable(index, [("gped_kit/engine/engine.py", "Engine.step")])
             for f in sync_findings(index.modules[path], q)]
    assert [(f.function, f.kind) for f in found] == [("Streams.draw", "print")]


def test_checker_catches_an_item_inserted_deep_in_the_real_step_path():
    """The real kit with one line inserted in the SGLD update (reached from GPEDEngine.step through
    GPEDEngine.teacher_step -> SamplerConfig.update_ -> sgld_update_): the test would fail, naming it."""
    path = "gped_kit/core/sgld.py"
    source = (ROOT / path).read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "sgld_update_")
    first = node.body[1] if ast.get_docstring(node) else node.body[0]
    lines = source.splitlines(keepends=True)
    lines.insert(first.lineno - 1, " " * first.col_offset + "print(float(sum(t.sum() for t in params.values())))\n")
    modules = [parse_module(f.relative_to(ROOT).as_posix(), f.read_text()) for pkg in (*PACKAGES, *NETWORKS)
               for f in sorted((ROOT / pkg).rglob("*.py")) if f.relative_to(ROOT).as_posix() != path]
    index = Index([*modules, parse_module(path, "".join(lines))])
    _, findings = step_path_findings(index)
    inserted = [(f.file, f.function, f.line, f.kind) for f in findings if f.file == path]
    assert inserted == [(path, "sgld_update_", first.lineno, "print"),
                        (path, "sgld_update_", first.lineno, "float(<tensor>)")]
