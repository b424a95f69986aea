"""One row per question, QnA Maker style: ``Metadata`` and grouping rows into articles.

A *question row* is one whose title came from a ``question`` column or key (every QnA TSV
row). Question rows of one file that share a ``QnaId`` are one article. Without a QnaId, question
rows identical in everything but the question (answer, metadata, category, tags, source,
published, ...) are one article: that is how Microsoft ships its chit-chat sets, each answer
repeated on the row of every question it answers. The first row's question is the title and the
later rows' questions are its alternate questions, in file order, each once (ignoring case and
spacing). Rows with an empty question or answer are never merged, so each gets its own error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from app.kb.records import SourceRow, split_list
from app.kb.textfiles import Problems

# Fields that are not part of what makes two question rows "the same answer".
_NOT_CONTENT = ("title", "questions", "qnaid")


def question_key(text: str) -> str:
    """What makes two questions the same: case and runs of whitespace do not count."""
    return " ".join(text.split()).casefold()


# ----------------------------------------------------------------------------- Metadata


def parse_metadata(value: object) -> tuple[dict[str, object], list[str]]:
    """``category:cards|product:gold`` (or a JSON object, or QnA Maker's list of
    ``{"name": ..., "value": ...}``) -> fields and errors.

    ``category`` (or ``intent``) and ``slug`` become those fields, ``tag``/``tags`` add
    comma-separated tags, and every other pair is kept as a ``key:value`` tag.
    """
    if value is None or value == "":
        return {}, []
    if isinstance(value, dict):
        pairs = [(str(k), "" if v is None else str(v)) for k, v in value.items()]
    elif isinstance(value, list):
        pairs = []
        for item in value:
            entry = {str(k).lower(): v for k, v in item.items()} if isinstance(item, dict) else {}
            name, text = entry.get("name"), entry.get("value")
            if not isinstance(name, str) or not name.strip():
                return {}, [f"metadata item {item!r} is not a name/value pair"]
            pairs.append((name, "" if text is None else str(text)))
    elif isinstance(value, str):
        pairs = []
        for item in filter(None, (part.strip() for part in value.split("|"))):
            key, sep, text = item.partition(":")
            if not sep or not key.strip():
                return {}, [f"metadata item {item!r} is not key:value"]
            pairs.append((key, text))
    else:
        return {}, [f"metadata must be 'key:value|key:value' text, an object or a list of "
                    f"name/value pairs, not {type(value).__name__}"]  # fmt: skip
    fields: dict[str, object] = {}
    tags: list[str] = []
    for key, text in pairs:
        key, text = key.strip().lower(), text.strip()
        if key in ("category", "intent"):
            fields["category"] = text
        elif key == "slug":
            fields["slug"] = text
        elif key in ("tag", "tags"):
            tags.extend(t.strip() for t in text.split(","))
        else:
            tags.append(f"{key}:{text}")
    if tags:
        fields["tags"] = tags
    return fields, []


def _as_items(value: object) -> list | None:
    """A list from a list or a ``|``-separated text; None for anything else (left to
    validation, which names the wrong type)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return split_list(value)
    if isinstance(value, list | tuple):
        return list(value)
    return None


def apply_metadata(
    fields: dict[str, object],
    row_file: str,
    line: int,
    problems: Problems,
    label: str | None = None,
):
    """Move a ``metadata`` field into ``fields``: its category and slug where the row has none,
    its tags after the row's own. Errors are said after ``label`` when given."""
    meta, errors = parse_metadata(fields.pop("metadata", None))
    for error in errors:
        problems.add(row_file, line, f"{label}: {error}" if label else error)
    for key in ("category", "slug"):
        if key in meta and fields.get(key) in (None, ""):
            fields[key] = meta[key]
    if "tags" in meta:
        own = _as_items(fields.get("tags"))
        if own is not None:
            fields["tags"] = [*own, *meta["tags"]]


# ----------------------------------------------------------------------------- grouping


def _text(value: object) -> str | None:
    return value.replace("\r\n", "\n").strip() if isinstance(value, str) else None


def _group_key(row: SourceRow) -> tuple[str, str] | None:
    """The key rows of one article share, or None when the row must stay on its own."""
    fields = row.fields
    question, answer = _text(fields.get("title")), _text(fields.get("body"))
    if not question or not answer or _as_items(fields.get("questions")) is None:
        return None
    qna_id = fields.get("qnaid")
    if qna_id not in (None, ""):
        return ("id", str(qna_id).strip())
    rest = {k: v for k, v in fields.items() if k not in _NOT_CONTENT}
    rest["body"] = answer
    return ("content", json.dumps(rest, sort_keys=True, ensure_ascii=False, default=repr))


def _start_group(row: SourceRow) -> None:
    alternates = _as_items(row.fields.get("questions")) or []
    row.fields["questions"] = []
    row.question_lines = {question_key(str(row.fields["title"])): row.line}
    _add_questions(row, alternates, row.line)


def _add_questions(group: SourceRow, questions: list, line: int) -> None:
    listed = group.question_lines
    assert listed is not None
    for question in questions:
        if not isinstance(question, str):
            group.fields["questions"].append(question)  # type: ignore[union-attr]
            continue  # validation names the wrong type
        key = question_key(question)
        if key and key not in listed:
            listed[key] = line
            group.fields["questions"].append(question)  # type: ignore[union-attr]


def group_questions(rows: Iterable[SourceRow], problems: Problems) -> Iterator[SourceRow]:
    """The rows of one file with its question rows grouped into articles (see the module
    docstring), in the order of each article's first line.

    Rows stream through until the first question row; from then on the rest of the file is
    held, since a later row may still join an earlier article.
    """
    groups: dict[tuple[str, str], SourceRow] = {}
    held: list[SourceRow] = []
    for row in rows:
        if not row.qna:
            if held:
                held.append(row)
            else:
                yield row
            continue
        key = _group_key(row)
        group = groups.get(key) if key is not None else None
        if group is None:
            if key is not None:
                _start_group(row)
                groups[key] = row
            held.append(row)
            continue
        if key[0] == "id" and _text(row.fields["body"]) != _text(group.fields["body"]):
            problems.add(
                row.file,
                row.line,
                f"QnaId {key[1]} has a different answer than on line {group.line}",
            )
            continue
        if key[0] == "id" and (differ := _differences(row, group)):
            problems.warn(
                row.file,
                row.line,
                f"QnaId {key[1]} has other {', '.join(differ)} than on line {group.line}; "
                f"the article keeps line {group.line}'s",
            )
        alternates = _as_items(row.fields.get("questions")) or []
        _add_questions(group, [row.fields["title"], *alternates], row.line)
    yield from held


def _differences(row: SourceRow, group: SourceRow) -> list[str]:
    """The fields (metadata read as category, tags...) in which a row differs from the first
    row of its QnaId, apart from its questions and answer."""
    skip = (*_NOT_CONTENT, "body")
    names = sorted((set(row.fields) | set(group.fields)) - set(skip))
    return [n for n in names if _same_form(row.fields.get(n)) != _same_form(group.fields.get(n))]


def _same_form(value: object) -> str:
    if isinstance(value, str):
        return value.replace("\r\n", "\n").strip()
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
