"""Every notebook's ``parameters`` cell is read completely by papermill: a line it cannot parse
(e.g. a comment containing ``=``) silently drops that parameter from ``papermill -p`` and from
the batch runner's overrides."""

import ast
import json
import warnings
from pathlib import Path

import papermill
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_cell_parses_completely(path):
    cells = [c for c in json.loads(path.read_text())["cells"]
             if c["cell_type"] == "code" and "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{path.name}: expected one cell tagged 'parameters', found {len(cells)}"
    assigned = [node.targets[0].id for node in ast.parse("".join(cells[0]["source"])).body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = list(papermill.inspect_notebook(str(path)))
    assert found == assigned, f"{path.name}: papermill reads {found}, the cell assigns {assigned}"
