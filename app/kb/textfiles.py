"""Reading user files line by line: UTF-8 (with or without BOM), CRLF, quoted newlines.

Every problem is recorded as ``file:line: reason`` where ``line`` is the physical line a record
starts on, so a content owner can jump straight to it in an editor. ``table_rows`` reads any
table whose first record is its header: a delimited file's records, or a spreadsheet's rows
(app.kb.workbooks), whose ``line`` is the sheet's row number.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ByteCounter = Callable[[int], None]


def _ignore_bytes(_n: int) -> None:
    return None


@dataclass
class Problems:
    """``file:line: reason`` messages, plus the set of records (file, line) they concern.

    ``notes`` and ``warnings`` never reject an import: a note says what was ignored (an unknown
    column), a warning what the import did on its own that the owner may want to fix at the
    source (a slug given a suffix, a question filed under two answers).
    """

    messages: list[str] = field(default_factory=list)
    locations: set[tuple[str, int]] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, file: str, line: int, reason: str) -> None:
        self.messages.append(f"{file}:{line}: {reason}")
        self.locations.add((file, line))

    def note(self, file: str, line: int, text: str) -> None:
        self.notes.append(f"{file}:{line}: {text}")

    def warn(self, file: str, line: int, text: str) -> None:
        self.warnings.append(f"{file}:{line}: {text}")

    def __bool__(self) -> bool:
        return bool(self.messages)


def _utf8_error(raw: bytes, exc: UnicodeDecodeError) -> str:
    column = len(raw[: exc.start].decode("utf-8", "replace")) + 1
    return (
        f"not valid UTF-8 (byte 0x{raw[exc.start]:02X} at column {column}); save the file as UTF-8"
    )


def display_name(path: Path) -> str:
    """``path`` as text that can be printed and stored: a name in another encoding than
    UTF-8 (``caf\\xe9.csv`` unpacked from an old zip) shows its undecodable bytes as U+FFFD, as
    the article's ``source`` where the file gives none."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _utf16_bom(raw: bytes) -> bool:
    return raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))


def decoded_lines(
    path: Path, display: str, problems: Problems, on_bytes: ByteCounter = _ignore_bytes
) -> Iterator[str]:
    """The file's lines as text (line endings kept). Bad bytes are reported and replaced so
    that the rest of the file is still checked. A file whose lines end in a bare CR (classic
    Mac OS, some Excel exports) is split there."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(_cr_lines(fh), 1):
            on_bytes(len(raw))
            if lineno == 1:
                if _utf16_bom(raw):
                    problems.add(display, 1, "file is UTF-16 encoded; save it as UTF-8")
                    return
                if raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.add(display, lineno, _utf8_error(raw, exc))
                yield raw.decode("utf-8", "replace")


def _cr_lines(fh) -> Iterator[bytes]:
    """The lines of a binary file, split at LF, or at bare CRs when its first line is all
    there is and holds CRs that no LF follows."""
    first = fh.readline()
    if first.endswith(b"\n") or b"\r" not in first.rstrip(b"\r"):
        if first:
            yield first
        yield from fh
        return
    parts = first.split(b"\r")
    if parts and parts[-1] == b"":
        parts.pop()
    for part in parts:
        yield part + b"\n"


# An HTML page's own declaration of its encoding, looked for in its first 1,024 bytes as
# browsers do: <meta charset="...">, <meta http-equiv="Content-Type" content="...; charset=...">
# or an XHTML page's <?xml ... encoding="..."?>.
_HTML_CHARSET = re.compile(
    rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)|"""
    rb"""\A\s*<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9_:.+-]+)""",
    re.I,
)
# Labels that browsers read as windows-1252, which they are in practice.
_WINDOWS_1252 = {"iso8859-1", "ascii", "cp1252"}


def _html_charset(raw: bytes) -> str | None:
    """The encoding an HTML page declares, unless it is UTF-8 (a UTF-16 declaration in a file
    without a UTF-16 byte order mark means UTF-8, as browsers read it)."""
    match = _HTML_CHARSET.search(raw[:1024])
    if match is None:
        return None
    label = (match.group(1) or match.group(2)).decode("ascii")
    try:
        name = codecs.lookup(label).name
    except LookupError:
        return label  # decoding it names it as unknown
    return None if name == "utf-8" or name.startswith("utf-16") else label


def _decode_declared(raw: bytes, label: str) -> str:
    """``raw`` in the encoding ``label`` names; LookupError when none is known by it."""
    name = codecs.lookup(label).name
    if name in _WINDOWS_1252:
        try:
            return raw.decode("cp1252")
        except UnicodeDecodeError:  # the five bytes cp1252 leaves undefined: control characters
            return raw.decode("latin-1")
    return raw.decode(name, "replace")


def read_text(
    path: Path,
    display: str,
    problems: Problems,
    on_bytes: ByteCounter = _ignore_bytes,
    html: bool = False,
) -> str | None:
    """The whole file as text with '\\n' line endings, or None when it cannot be read. An HTML
    page (``html``) that is not UTF-8 is read in the encoding its <meta> declares."""
    raw = path.read_bytes()
    on_bytes(len(raw))
    if _utf16_bom(raw):
        problems.add(display, 1, "file is UTF-16 encoded; save it as UTF-8")
        return None
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        charset = _html_charset(raw) if html else None
        if charset is not None:
            try:
                text = _decode_declared(raw, charset)
            except LookupError:
                problems.add(
                    display,
                    1,
                    f"declares charset {charset!r}, which is not known; save it as UTF-8",
                )
                return None
            return text.replace("\r\n", "\n").replace("\r", "\n")
        lines = raw.split(b"\n")
        for lineno, line in enumerate(lines, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.add(display, lineno, _utf8_error(line, exc))
        text = raw.decode("utf-8", "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_document(
    path: Path,
    display: str,
    problems: Problems,
    on_bytes: ByteCounter = _ignore_bytes,
    html: bool = False,
) -> str | None:
    """``read_text`` for one-article files (Markdown, HTML): None, with the problem noted,
    when the file cannot be read or holds only whitespace."""
    text = read_text(path, display, problems, on_bytes, html)
    if text is not None and not text.strip():
        problems.add(display, 1, "file is empty")
        return None
    return text


@dataclass(slots=True)
class CsvRow:
    line: int  # the physical line the record starts on
    values: dict[str, str]
    aliased: frozenset[str] = frozenset()  # header names that were read as another column


def _raise_field_limit() -> None:
    # The csv module refuses fields over 128 KiB; our own limits give clearer messages.
    if csv.field_size_limit() < 16 * 1024 * 1024:
        csv.field_size_limit(16 * 1024 * 1024)


def csv_rows(
    path: Path,
    display: str,
    problems: Problems,
    *,
    delimiter: str = ",",
    aliases: Aliases | None = None,
    required: tuple[str, ...] = (),
    known: tuple[str, ...] | None = None,
    merged: tuple[str, ...] = (),
    headerless: Headerless | None = None,
    on_bytes: ByteCounter = _ignore_bytes,
) -> Iterator[CsvRow]:
    """Rows of a delimited file with a header, as ``table_rows`` reads them (see there).

    A record with more fields than the header is an error (usually an unquoted delimiter inside
    a value); so is malformed quoting, which ends the file there.
    """
    _raise_field_limit()
    quoted = delimiter != "\t" or _tab_quotes_hold(path)
    lines = decoded_lines(path, display, problems, on_bytes)
    records = _csv_records(lines, delimiter, quoted)
    yield from table_rows(
        records,
        display,
        problems,
        delimiter=delimiter,
        aliases=aliases,
        required=required,
        known=known,
        merged=merged,
        headerless=headerless,
    )


def _tab_quotes_hold(path: Path) -> bool:
    """Whether a tab-separated file reads as quoted (a value in double quotes may hold line
    breaks, as spreadsheets write one). Tools that write QnA TSVs join the values with tabs
    and quote nothing, so an answer that starts with a quote (``"Pro" is our paid plan``)
    breaks quoted reading, or silently runs on into the next rows; a file whose quoted reading
    fails, or gives a value holding a tab, is read with quotes as plain characters."""
    with open(path, "rb") as fh:
        text = fh.read().decode("utf-8", "replace")
    if '"' not in text:
        return True
    reader = csv.reader(io.StringIO(text.replace("\r\n", "\n")), delimiter="\t", strict=True)
    try:
        return not any("\t" in cell for row in reader for cell in row)
    except csv.Error:
        return False


def _csv_records(
    lines: Iterator[str], delimiter: str, quoted: bool = True
) -> Iterator[tuple[int, list[str]]]:
    if quoted:
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
    else:
        reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            header = start == 1
            reason = f"cannot read the header row: {exc}" if header else _csv_error(exc)
            raise UnreadableRecord(start, reason) from None
        yield start, row
        start = reader.line_num + 1


class UnreadableRecord(Exception):
    """Raised by a source of ``table_rows`` records: nothing from ``line`` on can be read."""

    def __init__(self, line: int, reason: str):
        super().__init__(reason)
        self.line = line
        self.reason = reason


Required = tuple[str, ...] | Callable[[list[str]], tuple[str, ...]]
# accepted alternative column names: a mapping of lower-case names (``answer`` -> ``body``), or a
# function naming every header cell at once (None keeps a cell's own lower-case name)
Aliases = dict[str, str] | Callable[[list[str]], list[str | None]]
# given the first record, the column names of a table that has no header row, else None
Headerless = Callable[[list[str]], list[str] | None]


def table_rows(
    records: Iterable[tuple[int, list[str]]],
    display: str,
    problems: Problems,
    *,
    delimiter: str | None = None,
    aliases: Aliases | None = None,
    required: Required = (),
    known: tuple[str, ...] | None = None,
    merged: tuple[str, ...] = (),
    headerless: Headerless | None = None,
) -> Iterator[CsvRow]:
    """The rows of a table, as dicts keyed by lower-case column name.

    ``records`` are (line, cells), the header first: a delimited file's records (``delimiter``
    names its separator in messages) or a sheet's rows (``delimiter`` None). ``aliases`` maps
    accepted alternative names to canonical ones (``answer`` -> ``body``) and each row says which
    of them the header used; ``required`` names may be aliases (a missing column is named as
    given), or a function of the header cells returning them. Columns outside ``known``
    (canonical names, when given) are ignored with a note, so a typo is not silent. A name in
    ``merged`` may head several columns (``Alternate question 1``, ``Alternate question 2``):
    a row's non-blank cells under it are joined by line breaks, in column order. When
    ``headerless`` names the columns of the first record, that record is data, and a note says
    so. Blank records are skipped, also above the header; one with a value beyond the header's
    last column is an error (empty cells there are not).
    """
    aliases = aliases or {}
    records = iter(records)
    reported = len(problems.messages)
    try:
        first = next(records, None)
        while first is not None and not any(cell.strip() for cell in first[1]):
            first = next(records, None)  # blank lines above the header
    except UnreadableRecord as exc:
        problems.add(display, exc.line, exc.reason)
        return
    if first is None:
        if len(problems.messages) == reported:  # not already explained (a UTF-16 file)
            problems.add(display, 1, "file is empty")
        return
    header_line, header_row = first
    if headerless is not None and (assumed := headerless(header_row)) is not None:
        problems.note(display, header_line, f"no header row; columns read as {', '.join(assumed)}")
        records = itertools.chain([first], records)
        header_row = assumed
    if callable(required):
        required = required(header_row)
    names = _column_names(header_row, aliases)
    header = _header(header_row, names, display, header_line, problems, delimiter, aliases,
                     required, merged)  # fmt: skip
    if header is None:
        return
    aliased = frozenset(
        c.strip().lower() for c, n in zip(header_row, names, strict=True) if n != c.strip().lower()
    )
    if known is not None:
        ignored = [cell.strip() for cell, name in zip(header_row, header, strict=True)
                   if name and name not in known]  # fmt: skip
        if ignored:
            problems.note(display, header_line, f"ignoring unknown column(s) {', '.join(ignored)}")
    count = 0
    while True:
        try:
            line, row = next(records)
        except StopIteration:
            break
        except UnreadableRecord as exc:
            problems.add(display, exc.line, exc.reason)
            return
        if not any(cell.strip() for cell in row):
            continue
        count += 1
        if any(cell.strip() for cell in row[len(header) :]):
            problems.add(display, line, _too_many_fields(row, header, delimiter))
            continue
        values: dict[str, str] = {}
        for name, cell in zip(header, row, strict=False):
            if not name:
                continue
            if name in values and name in merged:
                if cell.strip():
                    values[name] = f"{values[name]}\n{cell}" if values[name].strip() else cell
            else:
                values[name] = cell
        yield CsvRow(line, values, aliased)
    if count == 0:
        problems.add(display, header_line, "no records after the header row")


def _too_many_fields(row: list[str], header: list[str], delimiter: str | None) -> str:
    if delimiter is None:
        return f"a value in column {column_letter(len(row))}, which has no header"
    return (
        f"{len(row)} fields but the header has {len(header)} "
        f"(an unquoted '{_name(delimiter)}' or quote inside a value?)"
    )


def column_letter(number: int) -> str:
    """A spreadsheet's name for the 1-based column ``number``: 1 -> A, 27 -> AA."""
    letters = ""
    while number > 0:
        number, rest = divmod(number - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def _name(delimiter: str) -> str:
    return "\\t" if delimiter == "\t" else delimiter


def _csv_error(exc: csv.Error) -> str:
    message = str(exc)
    if "unexpected end of data" in message:
        return "a quoted value starting in this record is never closed (missing '\"')"
    return f"malformed record: {message}"


def _column_names(row: list[str], aliases: Aliases) -> list[str]:
    if callable(aliases):
        named = aliases(row)
        return [n if n is not None else c.strip().lower() for c, n in zip(row, named, strict=True)]
    return [aliases.get(cell.strip().lower(), cell.strip().lower()) for cell in row]


# Other names an article file's required columns are read under (app.kb.readers), said when
# one is missing.
_OTHER_NAMES = {
    "title": "a title column may also be named question, Q, query, FAQ or prompt",
    "question": "a question column may also be named title, Q, query, FAQ or prompt",
    "body": "a body column answer, A, response, reply, content or description",
    "answer": "an answer column body, A, response, reply or content",
}


def _header(
    row: list[str],
    names: list[str],
    display: str,
    line: int,
    problems: Problems,
    delimiter: str | None,
    aliases: Aliases,
    required: tuple[str, ...],
    merged: tuple[str, ...],
) -> list[str] | None:
    duplicates = sorted({n for n in names if n and n not in merged and names.count(n) > 1})
    if duplicates:
        spelled = [
            "/".join(dict.fromkeys(c.strip() for c, n in zip(row, names, strict=True) if n == d))
            for d in duplicates
        ]
        problems.add(
            display, line, f"column(s) {', '.join(spelled)} appear more than once; keep one"
        )
        return None
    canonical = _column_names(list(required), aliases)
    missing = [name for name, c in zip(required, canonical, strict=True) if c not in names]
    if missing:
        found = ", ".join(c.strip() for c in row if c.strip()) or "nothing"
        hint = ""
        if (
            delimiter is not None
            and len(row) == 1
            and any(sep in row[0] for sep in ";,\t" if sep != delimiter)
        ):
            hint = f" (is the file separated by something other than '{_name(delimiter)}'?)"
        known = [_OTHER_NAMES[name] for name in missing if name in _OTHER_NAMES]
        if known and not hint:
            hint = f" ({'; '.join(known)})"
        problems.add(
            display,
            line,
            f"missing required column(s) {', '.join(missing)}; found {found}{hint}",
        )
        return None
    return names


def yaml_error(exc: Exception, first_line: int = 1) -> tuple[int, str]:
    """(file line, one-line reason) for a PyYAML error in text that starts at ``first_line``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return first_line, problem
    return first_line + mark.line, f"{problem} (column {mark.column + 1})"
