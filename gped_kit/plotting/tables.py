"""Tables as a notebook shows and saves them: complete (every row, every column), missing values
as "—" (never ``nan``), counts as integers (never ``9568200.0000``), a title saying whose numbers
they are.

:func:`full_table` wraps a DataFrame for display: its HTML and its plain-text form both hold every
row (pandas would cut a long table to its first and last five rows with "…"), numbers rounded to
``digits``, missing values as "—", and a float column whose values are all whole numbers (a count
that pandas turned into floats because a value is missing) written as integers
(:func:`integer_columns`). :func:`paper_table` labels a table of the paper's numbers as the
paper's (columns ``<name>_paper``, the kit's suffix for the paper's values beside ours) when there
are no numbers of ours to show beside them. :func:`markdown_table` is the Markdown that
:func:`gped_kit.plotting.save.save_table` writes.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

#: How a missing value is shown in every table of the kit.
MISSING = "—"
#: The key of :attr:`pandas.DataFrame.attrs` that marks a table of the paper's numbers only
#: (set by :func:`paper_table`; :func:`gped_kit.plotting.save.save_table` then names its files
#: ``<name>_paper_only``).
PAPER_ONLY_ATTR = "paper_only"


def _formatter(digits: int | None):
    def fmt(value: float) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return MISSING
        return f"{value:.{digits}f}" if digits is not None else f"{value:.6g}"

    return fmt


def integer_columns(table: pd.DataFrame) -> list:
    """The float columns of ``table`` whose present values are all whole numbers (at least one
    present): counts such as parameters, FLOPs, steps or seeds that pandas stores as floats once a
    value is missing or a column is averaged. :func:`full_table` and :func:`markdown_table` write
    them as integers."""
    out = []
    for name in table.columns:
        column = table[name]
        if not pd.api.types.is_float_dtype(column.dtype):
            continue
        present = column.dropna().to_numpy(dtype=float)
        if len(present) and np.isfinite(present).all() and (present == np.round(present)).all():
            out.append(name)
    return out


def _integer(value: float) -> str:
    return f"{value:.0f}"


class FullTable:
    """A table shown complete: every row and column, numbers to ``digits`` decimals (None: six
    significant digits, for tables of the paper's numbers), missing values as "—", with an
    optional ``title`` above it, and its index column unless ``index`` is False. Displayed by Jupyter
    as HTML (and as text where there is no HTML); ``frame`` is the table itself."""

    def __init__(self, frame: pd.DataFrame, title: str | None = None, digits: int | None = 3,
                 missing: str = MISSING, index: bool = True):
        self.frame = frame
        self.title = title
        self.digits = digits
        self.missing = missing
        self.index = index

    def _kwargs(self) -> dict:
        return dict(na_rep=self.missing, float_format=_formatter(self.digits), max_rows=None, max_cols=None,
                    formatters={name: _integer for name in integer_columns(self.frame)}, index=self.index)

    def _repr_html_(self) -> str:
        body = self.frame.to_html(**self._kwargs(), border=0)
        title = f"<p><strong>{html.escape(self.title)}</strong></p>\n" if self.title else ""
        return title + body

    def __repr__(self) -> str:
        text = self.frame.to_string(**self._kwargs())
        return f"{self.title}\n{text}" if self.title else text

    def __len__(self) -> int:
        return len(self.frame)


def full_table(table: pd.DataFrame, title: str | None = None, digits: int | None = 3,
               missing: str = MISSING, index: bool = True) -> FullTable:
    """``table`` for display in a notebook, complete (see :class:`FullTable`)."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    return FullTable(table, title=title, digits=digits, missing=missing, index=index)


def flat_table(table: pd.DataFrame, title: str | None = None, digits: int | None = 3,
               missing: str = MISSING) -> FullTable:
    """A flat ``table`` (one row per record, its index a mere row number) for display without the index
    column: :func:`full_table` with ``index=False``. Pivot tables keep :func:`full_table`: their index
    names the rows."""
    return full_table(table, title=title, digits=digits, missing=missing, index=False)


def paper_table(table: pd.DataFrame, values: Sequence[str], suffix: str = "_paper") -> pd.DataFrame:
    """A table of the paper's numbers labelled as the paper's: the columns ``values`` (the paper's
    numbers) renamed ``<name><suffix>``, the other columns (what the rows are) kept, and the table
    marked as the paper's only (``attrs[PAPER_ONLY_ATTR]``: saved as ``<name>_paper_only``)."""
    missing = [c for c in values if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the column(s) {missing}; it has {list(table.columns)}")
    labelled = table.rename(columns={c: f"{c}{suffix}" for c in values})
    labelled.attrs = {**labelled.attrs, PAPER_ONLY_ATTR: True}  # a new dict: ``table``'s attrs stay as they are
    return labelled


def markdown_table(table: pd.DataFrame, floatfmt: str = ".3f", missing: str = MISSING) -> str:
    """``table`` as a Markdown table (no index), numbers with ``floatfmt``, whole-number float columns
    as integers (:func:`integer_columns`), missing values as ``missing``."""
    cells = table.astype(object).where(table.notna(), None)
    for name in integer_columns(table):
        cells[name] = pd.Series([None if v is None else int(round(v)) for v in cells[name]], index=cells.index,
                                dtype=object)
    return cells.to_markdown(index=False, floatfmt=floatfmt, missingval=missing)


#: The relative tolerance under which a table computed live again counts as the same table
#: (:func:`same_table`): a chain run on another host (another BLAS, another number of threads) differs
#: in the last digits of its floats, which a reader of the three decimals shown cannot see.
TABLE_RTOL = 1e-4
#: The absolute tolerance beside :data:`TABLE_RTOL`, for values near 0.
TABLE_ATOL = 1e-6


def same_table(table: pd.DataFrame, csv: str | Path, rtol: float = TABLE_RTOL, atol: float = TABLE_ATOL) -> bool:
    """True when ``csv`` holds ``table`` up to round-off: the same columns and rows, the same text in
    every non-numeric cell and the same missing cells, every number within ``rtol`` (relative) or
    ``atol`` (absolute) of the stored one. False when there is no such file or it cannot be read as a
    table. A saver keeps the stored files when this holds, so that a table computed live on another
    host does not show as changed (:func:`gped_kit.plotting.save.save_table`)."""
    csv = Path(csv)
    if not csv.is_file():
        return False
    try:
        old = pd.read_csv(csv)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        return False
    new = pd.read_csv(io.StringIO(table.to_csv(index=False)))  # the dtypes a reader of the file sees
    if list(old.columns) != list(new.columns) or old.shape != new.shape:
        return False
    for name in new.columns:
        a, b = old[name], new[name]
        if (a.isna() != b.isna()).any():
            return False
        a, b = a[a.notna()], b[b.notna()]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            if not np.allclose(a.to_numpy(dtype=float), b.to_numpy(dtype=float), rtol=rtol, atol=atol):
                return False
        elif (a.astype(str) != b.astype(str)).any():
            return False
    return True
