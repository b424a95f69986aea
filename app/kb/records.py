"""Article records: what every import format is turned into, validated and normalised.

``ArticleRecord`` is the input (from a file row or from the reviewer console); ``prepare_record``
checks it and returns a ``PreparedArticle``: the exact values that are stored, plus the content
hash that tells an unchanged re-import from a real change.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.kb.sanitize import clean_source, has_text, web_address
from app.kb.slugs import is_valid_slug, slugify
from app.models import Article

# Column sizes come from the schema; the rest are limits on what an article sensibly holds.
MAX_TITLE = Article.__table__.c.title.type.length
MAX_SLUG = Article.__table__.c.slug.type.length
MAX_CATEGORY = Article.__table__.c.category.type.length
MAX_SOURCE = Article.__table__.c.source.type.length
MAX_BODY = 100_000
MAX_TAG = 100
MAX_TAGS = 50
MAX_QUESTION = 500
MAX_QUESTIONS = 1_000  # a shipped chit-chat export lists up to 400 questions under one answer

# Bump when rendering or normalisation changes, so the next import refreshes every article.
RENDER_VERSION = 3

LIST_SEPARATOR = "|"
_TRUE = {"1", "true", "yes", "y", "on", "published", "live", "online", "public", "active"}
# help desks' article states (a ``status`` column) included
_FALSE = {"0", "false", "no", "n", "off", "draft", "unpublished", "notpublished", "not published",
          "archived", "hidden", "private", "inactive"}  # fmt: skip


class InvalidArticle(ValueError):
    """A record that cannot be stored; ``reasons`` says every way in which it is wrong."""

    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


@dataclass(slots=True)
class SourceRow:
    """One record as a reader found it: loosely typed fields and where they came from."""

    file: str
    line: int  # the physical line the record starts on
    fields: dict[str, object]
    qna: bool = False  # its title came from a ``question`` column or key: see app.kb.qna
    label: str | None = None  # said before each problem, e.g. ``articles[3] (id 42)``
    question_lines: dict[str, int] | None = None  # question_key -> line it was listed on
    origin: str | None = None  # the record's own id in the export (Zendesk's), when it has one
    # a whole saved HTML page, wrapped in its site's theme (app.kb.page_template)
    page: bool = False

    def reason(self, text: str) -> str:
        return f"{self.label}: {text}" if self.label else text


@dataclass(frozen=True, slots=True)
class ArticleRecord:
    title: str
    body: str
    slug: str | None = None
    category: str | None = None
    tags: tuple[str, ...] | list[str] = ()
    questions: tuple[str, ...] | list[str] = ()
    source: str | None = None
    published: bool = True
    taught: tuple[str, ...] | list[str] = ()  # the questions reviewers taught (an export's)


@dataclass(slots=True)
class PreparedArticle:
    slug: str
    title: str
    body: str
    category: str | None
    tags: list[str]
    questions: list[str]
    source: str | None
    published: bool
    content_hash: str
    slug_derived: bool = field(default=False)
    taught: list[str] = field(default_factory=list)  # those of ``questions`` reviewers taught


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _text_block(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _as_text(value: object, name: str, reasons: list[str]) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        reasons.append(f"{name} must be text, not {type(value).__name__}")
        return None
    if isinstance(value, float) and not math.isfinite(value):  # JSON's NaN, 1e400
        reasons.append(f"{name} must be text, not the number {value}")
        return None
    return str(value)


def _as_body(value: object, reasons: list[str]) -> str:
    """The body; a JSON list of texts (an FAQ item's ``answers``, an intents file's
    ``responses``) is its items as paragraphs, nothing left out."""
    if isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
        return "\n\n".join(v.strip() for v in value if v.strip())
    return _as_text(value, "body", reasons) or ""


def split_list(text: str) -> list[str]:
    """``a|b|c``; a cell with one item per line (a spreadsheet cell with line breaks) reads the
    same way. A cell holding a list as JSON or as Python writes it (``["a", "b"]``,
    ``['a', 'b']``: a data frame's list column saved to CSV) gives its items, and a cell with
    neither ``|`` nor a line break is split at ``;`` (``a; b; c``)."""
    items = _literal_list(text)
    if items is not None:
        return items
    if "\n" in text or "\r" in text:
        return [item for line in text.splitlines() for item in line.split(LIST_SEPARATOR)]
    if LIST_SEPARATOR not in text and ";" in text:
        return text.split(";")
    return text.split(LIST_SEPARATOR)


def _literal_list(text: str) -> list[str] | None:
    """The items of ``text`` when it is a list of texts written as JSON or a Python literal."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(stripped)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return value
    return None


def _as_list(value: object, name: str, reasons: list[str]) -> list[str]:
    """A list of strings from a list, or from one ``|``-separated (or line-separated) string;
    tags may also be comma-separated."""
    if value is None:
        return []
    if isinstance(value, str):
        if name == "tags" and "," in value and not any(sep in value for sep in "|;\n\r["):
            return value.split(",")  # "billing, cards": tags are words, never hold a comma
        return split_list(value)
    if isinstance(value, list | tuple):
        items = []
        for item in value:
            text = _as_text(item, f"each item of {name}", reasons)
            if text is not None:
                items.append(text)
        return items
    reasons.append(f"{name} must be a list or a '{LIST_SEPARATOR}'-separated text")
    return []


def _as_bool(value: object, reasons: list[str], name: str = "published") -> bool:
    if value is None or value == "":
        return True
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    reasons.append(f"{name} must be true or false, not {value!r}")
    return True


def _published(fields: Mapping[str, object], reasons: list[str]) -> bool:
    """``published``, else an article state (``status``: published, draft, archived...), else
    the opposite of ``draft`` (a Zendesk or Hugo flag), else true."""
    published, status, draft = (fields.get(k) for k in ("published", "status", "draft"))
    if published in (None, "") and status not in (None, ""):
        text = str(status).strip().lower()
        if isinstance(status, bool) or text not in _TRUE | _FALSE or text.isdigit():
            reasons.append(
                f"status {status!r} is not an article state (published, live, draft, archived, "
                "hidden...); give a published column of true or false"
            )
            return True
        return text in _TRUE
    if published in (None, "") and draft not in (None, ""):
        return not _as_bool(draft, reasons, "draft")
    return _as_bool(published, reasons)


def record_from_fields(fields: Mapping[str, object]) -> ArticleRecord:
    """An ``ArticleRecord`` from loosely typed fields (a CSV row, a JSON object, front matter)."""
    reasons: list[str] = []
    record = ArticleRecord(
        title=_as_text(fields.get("title"), "title", reasons) or "",
        body=_as_body(fields.get("body"), reasons),
        slug=_as_text(fields.get("slug"), "slug", reasons),
        category=_as_text(fields.get("category"), "category", reasons),
        tags=tuple(_as_list(fields.get("tags"), "tags", reasons)),
        questions=tuple(_as_list(fields.get("questions"), "questions", reasons)),
        source=_as_text(fields.get("source"), "source", reasons),
        published=_published(fields, reasons),
        taught=tuple(_as_list(fields.get("taught_questions"), "taught_questions", reasons)),
    )
    if reasons:
        raise InvalidArticle(reasons)
    return record


def _unique_items(
    items: Iterable[str], name: str, limit: int, most: int, reasons: list[str]
) -> list[str]:
    """Items with whitespace collapsed, empty ones dropped, duplicates removed (order kept)."""
    unique = list(dict.fromkeys(text for text in map(_one_line, items) if text))
    for text in unique:
        if len(text) > limit:
            reasons.append(
                f"{name} {text[:40]!r}... is {len(text)} characters; the limit is {limit}"
            )
    if len(unique) > most:
        reasons.append(f"{len(unique)} {name}s; the limit is {most}")
    return unique


def _check_length(value: str | None, name: str, limit: int, reasons: list[str]) -> None:
    if value is not None and len(value) > limit:
        reasons.append(f"{name} is {len(value)} characters; the limit is {limit}")


def content_hash(
    title: str,
    body: str,
    category: str | None,
    tags: list,
    questions: list,
    source: str | None = None,
) -> str:
    """What decides "unchanged": the stored content, not its published flag, nor its source
    unless that is a web address, which the body's relative links resolve against
    (``render_body``); a file's path changes with the folder an import runs in.

    NUL never occurs in a stored field (validation rejects it), so it separates them safely.
    """
    parts = [str(RENDER_VERSION), title, body, category or "", "\x01".join(tags)]
    parts.append("\x01".join(questions))
    if source and web_address(source):
        parts.append(source)
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def prepare_record(record: ArticleRecord) -> PreparedArticle:
    """Validate and normalise ``record``; raises ``InvalidArticle`` listing every problem."""
    reasons: list[str] = []
    title = _one_line(record.title or "")
    body = clean_source(_text_block(record.body or ""))
    if not title:
        reasons.append("title is empty")
    if not body:
        reasons.append("body is empty")
    elif not has_text(body):
        reasons.append("body has no text, only markup")
    _check_length(title, "title", MAX_TITLE, reasons)
    _check_length(body, "body", MAX_BODY, reasons)

    slug = (record.slug or "").strip()
    derived = not slug
    if derived:
        slug = slugify(title) if title else ""
    elif len(slug) > MAX_SLUG:
        reasons.append(f"slug is {len(slug)} characters; the limit is {MAX_SLUG}")
    elif not is_valid_slug(slug):
        reasons.append(f"slug {slug!r} is not lowercase ASCII kebab-case (try {slugify(slug)!r})")

    category = _one_line(record.category or "") or None
    source = _one_line(record.source or "") or None
    _check_length(category, "category", MAX_CATEGORY, reasons)
    if source is not None and len(source) > MAX_SOURCE:
        source = "..." + source[-(MAX_SOURCE - 3) :]  # a long path: keep its informative end
    tags = _unique_items(record.tags, "tag", MAX_TAG, MAX_TAGS, reasons)
    # the questions reviewers taught are among the questions, checked with them
    asked = [*record.questions, *record.taught]
    questions = _unique_items(asked, "question", MAX_QUESTION, MAX_QUESTIONS, reasons)
    taught = list(dict.fromkeys(text for text in map(_one_line, record.taught) if text))

    for name, value in (("title", title), ("body", body), ("category", category or "")):
        if "\x00" in value:
            reasons.append(f"{name} contains a NUL (\\x00) character")
    if any("\x00" in item for item in (*tags, *questions, source or "")):
        reasons.append("tags, questions or source contain a NUL (\\x00) character")
    if reasons:
        raise InvalidArticle(reasons)
    return PreparedArticle(
        slug=slug,
        title=title,
        body=body,
        category=category,
        tags=tags,
        questions=questions,
        source=source,
        published=bool(record.published),
        content_hash=content_hash(title, body, category, tags, questions, source),
        slug_derived=derived,
        taught=taught,
    )
