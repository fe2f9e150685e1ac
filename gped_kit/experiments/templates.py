"""Templates over named fields (``"table1_{model}_{profile}"``), as artifacts' file names and captions and
checks' statements use them."""

from __future__ import annotations

import string


def template_fields(template: str) -> tuple[str, ...]:
    """The named fields of a ``str.format`` template, in order, each once (``"a_{model}_{profile}"`` ->
    ``("model", "profile")``); positional or attribute fields are an error."""
    out: list[str] = []
    for _, name, _, _ in string.Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"template {template!r}: field {{{name}}} must be a plain name")
        if name not in out:
            out.append(name)
    return tuple(out)


__all__ = ["template_fields"]
