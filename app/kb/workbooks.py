"""The first sheet of an Excel workbook (``.xlsx``) as table records, for ``table_rows``.

QnA Maker's portal and Language Studio export a knowledge base as a sheet with the columns of
the QnA TSV. openpyxl reads it in read-only mode (rows streamed; a formula gives its value as
last calculated). Each record is (sheet row number, cells as text); leading empty rows are
skipped, so the header is the first row with a value, and trailing empty cells are dropped.
A file that is not a readable workbook raises ``UnreadableRecord`` for line 1.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Iterator
from pathlib import Path

from app.kb.textfiles import ByteCounter, UnreadableRecord


def _reason(exc: Exception) -> str:
    text = str(exc.args[0]) if exc.args else ""
    return text.splitlines()[0] if text.strip() else type(exc).__name__


def cell_text(value: object) -> str:
    """A cell's value as the text a CSV would hold: 7 for 7.0, ISO dates, true/false."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def _trimmed(values: tuple) -> list[str]:
    cells = [cell_text(v) for v in values]
    while cells and not cells[-1].strip():
        cells.pop()
    return cells


def sheet_records(path: Path, on_bytes: ByteCounter) -> Iterator[tuple[int, list[str]]]:
    """(row number, cells) of the workbook's first sheet, from its first row with a value."""
    import openpyxl  # here, not at the top: it takes half a second and only .xlsx needs it

    size = path.stat().st_size
    on_bytes(size)
    if size == 0:
        raise UnreadableRecord(1, "file is empty")
    try:
        with warnings.catch_warnings():  # e.g. "contains no default style": not the user's concern
            warnings.simplefilter("ignore")
            workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except OSError as exc:
        if exc.errno is not None:  # cannot open the file at all: reported by the caller
            raise
        raise UnreadableRecord(1, f"not a valid Excel workbook (.xlsx): {_reason(exc)}") from None
    except Exception as exc:  # openpyxl raises many kinds for a damaged or foreign file
        raise UnreadableRecord(1, f"not a valid Excel workbook (.xlsx): {_reason(exc)}") from None
    try:
        if not workbook.worksheets:
            raise UnreadableRecord(1, "the workbook has no worksheet")
        sheet = workbook.worksheets[0]
        # The stored dimension ("A1:H20") may be wrong (some writers always say A1) and would
        # cut rows off; without it every row in the sheet is read.
        sheet.reset_dimensions()
        rows = sheet.iter_rows(values_only=True)
        number, started = 0, False
        while True:
            number += 1
            try:
                values = next(rows)
            except StopIteration:
                break
            except Exception as exc:  # damaged sheet XML, an unknown cell type...
                raise UnreadableRecord(
                    number, f"cannot read row {number} of sheet {sheet.title!r}: {_reason(exc)}"
                ) from None
            cells = _trimmed(values)
            if cells or started:
                started = True
                yield number, cells
        if not started:
            raise UnreadableRecord(1, f"the first sheet ({sheet.title!r}) is empty")
    finally:
        workbook.close()
