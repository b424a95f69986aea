"""The import formats, each turned into ``SourceRow``s (file, line, loosely typed fields).

- CSV: header with ``title`` and ``body`` (or ``answer``); optional ``slug``, ``category``,
  ``tags`` and ``questions`` (``|``-separated), ``source``, ``published``.
- JSON (a list of objects) and JSONL (one object per line) with the same keys.
- Markdown: YAML front matter then the body; a folder is searched recursively for ``*.md``.
- QnA TSV: ``Question``, ``Answer``, optional ``Source``, ``Metadata`` (``key:value|key:value``)
  and ``QnaId`` (rows sharing a QnaId are one article; later questions become alternates).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from app.kb.textfiles import (
    ByteCounter,
    Problems,
    csv_rows,
    decoded_lines,
    read_text,
    yaml_error,
)

ARTICLE_KEYS = ("title", "body", "slug", "category", "tags", "questions", "source", "published")
MARKDOWN_SUFFIXES = (".md", ".markdown")
SKIPPED_NAMES = {"readme.md", "readme.markdown"}
# QnA Maker's export columns; the last four carry multi-turn data that has no use here.
QNA_COLUMNS = ("question", "answer", "source", "metadata", "qnaid", "suggestedquestions",
               "iscontextonly", "prompts")  # fmt: skip


@dataclass(slots=True)
class SourceRow:
    file: str
    line: int
    fields: dict[str, object]


Reader = Callable[[Path, str, Problems, ByteCounter], Iterator[SourceRow]]


# ----------------------------------------------------------------------------- CSV


def read_csv(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    rows = csv_rows(
        path,
        display,
        problems,
        aliases={"answer": "body"},
        required=("title", "body"),
        known=ARTICLE_KEYS,
        on_bytes=on_bytes,
    )
    for row in rows:
        fields: dict[str, object] = {k: v for k, v in row.values.items() if k in ARTICLE_KEYS}
        for key in ("slug", "category", "source", "published"):
            if fields.get(key) == "":
                fields[key] = None
        fields.setdefault("source", display)
        yield SourceRow(display, row.line, fields)


# ----------------------------------------------------------------------------- QnA TSV


def _metadata(text: str) -> tuple[dict[str, object], list[str]]:
    """``category:cards|product:gold`` -> fields; unknown keys are kept as ``key:value`` tags."""
    fields: dict[str, object] = {}
    tags: list[str] = []
    errors: list[str] = []
    for item in filter(None, (part.strip() for part in text.split("|"))):
        key, sep, value = item.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not sep or not key:
            errors.append(f"metadata item {item!r} is not key:value")
        elif key in ("category", "intent"):
            fields["category"] = value
        elif key == "slug":
            fields["slug"] = value
        elif key in ("tag", "tags"):
            tags.extend(t.strip() for t in value.split(","))
        else:
            tags.append(f"{key}:{value}")
    fields["tags"] = tags
    return fields, errors


def read_qna_tsv(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    groups: dict[str, SourceRow] = {}
    ungrouped: list[SourceRow] = []
    rows = csv_rows(
        path,
        display,
        problems,
        delimiter="\t",
        required=("question", "answer"),
        known=QNA_COLUMNS,
        on_bytes=on_bytes,
    )
    for row in rows:
        values = row.values
        fields, errors = _metadata(values.get("metadata") or "")
        for error in errors:
            problems.add(display, row.line, error)
        question, answer = values.get("question", ""), values.get("answer", "")
        qna_id = (values.get("qnaid") or "").strip()
        group = groups.get(qna_id) if qna_id else None
        if group is not None:
            if answer.strip() != str(group.fields["body"]).strip():
                problems.add(
                    display,
                    row.line,
                    f"QnaId {qna_id} has a different answer than on line {group.line}",
                )
            group.fields["questions"].append(question)  # type: ignore[union-attr]
            continue
        fields.update(
            title=question,
            body=answer,
            questions=[],
            source=(values.get("source") or "").strip() or display,
        )
        source_row = SourceRow(display, row.line, fields)
        if qna_id:
            groups[qna_id] = source_row
        else:
            ungrouped.append(source_row)
    yield from sorted([*groups.values(), *ungrouped], key=lambda r: r.line)


# ----------------------------------------------------------------------------- JSON, JSONL


def _object_fields(obj: object, display: str, line: int, problems: Problems) -> SourceRow | None:
    if not isinstance(obj, dict):
        problems.add(display, line, f"expected an object, found {type(obj).__name__}")
        return None
    fields = {str(k).lower(): v for k, v in obj.items()}
    if "answer" in fields:
        if "body" in fields:
            problems.add(display, line, "has both 'body' and 'answer'; keep one")
            return None
        fields["body"] = fields.pop("answer")
    fields = {k: v for k, v in fields.items() if k in ARTICLE_KEYS}
    fields.setdefault("source", display)
    return SourceRow(display, line, fields)


def read_jsonl(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    count = 0
    for lineno, line in enumerate(decoded_lines(path, display, problems, on_bytes), 1):
        if not line.strip():
            continue
        count += 1
        try:
            obj = json.loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            problems.add(display, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        row = _object_fields(obj, display, lineno, problems)
        if row is not None:
            yield row
    if count == 0 and not problems.locations & {(display, 1)}:
        problems.add(display, 1, "file is empty")


_WS = re.compile(r"\s*")


def read_json(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    """A JSON list of objects, decoded one element at a time so each knows its line."""
    text = read_text(path, display, problems, on_bytes)
    if text is None:
        return
    if not text.strip():
        problems.add(display, 1, "file is empty")
        return
    decoder = json.JSONDecoder()
    pos = _WS.match(text, 0).end()
    line = 1 + text.count("\n", 0, pos)
    if text[pos] != "[":
        problems.add(display, line, "expected a JSON list of article objects ('[' ...)")
        return
    pos += 1
    counted_to = pos
    first = True
    while True:
        pos = _WS.match(text, pos).end()
        if pos < len(text) and text[pos] == "]" and first:
            problems.add(display, line, "the list is empty")
            return
        if not first:
            if pos < len(text) and text[pos] == "]":
                return
            if pos >= len(text) or text[pos] != ",":
                problems.add(display, _line_at(text, pos), "expected ',' or ']' after an object")
                return
            pos = _WS.match(text, pos + 1).end()
        line += text.count("\n", counted_to, pos)
        counted_to = pos
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            problems.add(display, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            return
        first = False
        row = _object_fields(obj, display, line, problems)
        if row is not None:
            yield row


def _line_at(text: str, pos: int) -> int:
    return 1 + text.count("\n", 0, pos)


# ----------------------------------------------------------------------------- Markdown

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)(?:\n)?^(?:---|\.\.\.)[ \t]*$\n?", re.S | re.M)
_H1 = re.compile(r"\A\s*#[ \t]+(.+?)[ \t#]*(?:\n|\Z)")


def read_markdown(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    text = read_text(path, display, problems, on_bytes)
    if text is None:
        return
    if not text.strip():
        problems.add(display, 1, "file is empty")
        return
    meta: object = {}
    body = text
    if text.startswith("---"):
        match = _FRONT_MATTER.match(text)
        if match is None:
            problems.add(display, 1, "front matter opened with '---' is never closed")
            return
        body = text[match.end() :]
        try:
            meta = yaml.safe_load(match.group(1)) or {}
        except yaml.YAMLError as exc:
            line, reason = yaml_error(exc, first_line=2)  # the YAML starts after '---'
            problems.add(display, line, f"invalid YAML front matter: {reason}")
            return
        if not isinstance(meta, dict):
            problems.add(display, 2, "front matter must be key: value pairs")
            return
    fields = {str(k).lower(): v for k, v in meta.items() if str(k).lower() in ARTICLE_KEYS}
    if "title" not in fields:
        heading = _H1.match(body)
        if heading:
            fields["title"] = heading.group(1)
            body = body[heading.end() :]
    fields["body"] = body
    fields.setdefault("source", display)
    yield SourceRow(display, 1, fields)


# ----------------------------------------------------------------------------- dispatch

READERS: dict[str, Reader] = {
    ".csv": read_csv,
    ".tsv": read_qna_tsv,
    ".json": read_json,
    ".jsonl": read_jsonl,
    ".ndjson": read_jsonl,
    ".md": read_markdown,
    ".markdown": read_markdown,
}


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith((".", "_")) for part in relative.parts)


def expand_paths(paths: list[Path], problems: Problems) -> list[tuple[Path, str]]:
    """(file, display name) for every file to read; folders give their Markdown files."""
    files: list[tuple[Path, str]] = []
    for path in paths:
        display = str(path)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix.lower() in MARKDOWN_SUFFIXES
                and p.name.lower() not in SKIPPED_NAMES
                and not _is_hidden(p.relative_to(path))
            )
            if not found:
                problems.add(display, 1, "folder has no Markdown (.md) files")
            files.extend((p, str(p)) for p in found)
        elif not path.exists():
            problems.add(display, 1, "no such file or folder")
        elif path.suffix.lower() not in READERS:
            supported = ", ".join(sorted(READERS))
            problems.add(display, 1, f"unsupported file type (use {supported} or a folder)")
        else:
            files.append((path, display))
    return _without_repeats(files)


def _without_repeats(files: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """A file named twice (or also inside a named folder) is read once."""
    seen: set[Path] = set()
    unique = []
    for path, display in files:
        resolved = path.resolve()
        if resolved not in seen:
            seen.add(resolved)
            unique.append((path, display))
    return unique


def read_rows(files: list[tuple[Path, str]], problems: Problems, on_bytes: ByteCounter):
    for path, display in files:
        try:
            yield from READERS[path.suffix.lower()](path, display, problems, on_bytes)
        except OSError as exc:
            problems.add(display, 1, f"cannot read: {exc.strerror or exc}")
