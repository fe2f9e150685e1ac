"""What the code fingerprint hashes of one source file, the same on every Python version.

Only the standard library is imported here, so that this module can be loaded by file path under
any interpreter (``tests/test_store.py`` checks that Pythons 3.11, 3.12 and 3.13 give the same text,
where they are installed).

Why not ``ast.dump``: its output changes between Python versions for the same source. Python 3.12
added the field ``type_params`` to every function and class (``type_params=[]`` in the dump) and
3.13 leaves empty lists and ``None`` out by default, so a chain computed on the GPU machine
(Python 3.12) was stored under another code fingerprint than the same chain here (Python 3.11),
and a slice brought back from the device was never found by this checkout's notebooks.
:func:`canonical_dump` writes the tree as Python 3.11's ``ast.dump`` does (so the fingerprints of
every result already stored, made with 3.11, are unchanged) on every version.
"""

from __future__ import annotations

import ast

#: Module-level names whose assignments :func:`code_text` leaves out: the profiles, named
#: settings whose values reach every result through its configuration record, so a profile added
#: or changed re-keys only the results made with it.
PROFILE_NAMES = frozenset({"PROFILES"})

#: Fields that Pythons newer than 3.11 added to existing nodes; left out while empty (always, in
#: code that runs on 3.11), so that the text is 3.11's.
NEWER_FIELDS = frozenset({"type_params"})


def canonical_dump(node: object) -> str:
    """``ast.dump(node)`` as Python 3.11 writes it (``annotate_fields=True``, no attributes, no
    indent), on every Python version: fields in ``_fields`` order as ``name=value``; an optional
    field that is ``None`` left out; lists in brackets; other values by ``repr``."""
    if isinstance(node, ast.AST):
        cls = type(node)
        args = []
        for name in node._fields:
            try:
                value = getattr(node, name)
            except AttributeError:
                continue
            if name in NEWER_FIELDS and not value:
                continue
            if value is None and getattr(cls, name, ...) is None:
                continue
            args.append(f"{name}={canonical_dump(value)}")
        return f"{cls.__name__}({', '.join(args)})"
    if isinstance(node, list):
        return f"[{', '.join(canonical_dump(x) for x in node)}]"
    return repr(node)


def code_text(source: str) -> str:
    """What the code fingerprint hashes of one file: its syntax tree (:func:`canonical_dump`), so
    comments and layout do not count, without the module-level assignments of :data:`PROFILE_NAMES`."""
    tree = ast.parse(source)
    tree.body = [node for node in tree.body if not (
        isinstance(node, (ast.Assign, ast.AnnAssign))
        and any(isinstance(t, ast.Name) and t.id in PROFILE_NAMES
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])))]
    return canonical_dump(tree)
