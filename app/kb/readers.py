"""The import formats, each turned into ``SourceRow``s (file, line, loosely typed fields).

- CSV: header with ``title`` and ``body``; optional ``slug``, ``category``, ``tags`` and
  ``questions`` (``|``-separated, or spread over several columns: ``column_names``), ``source``,
  ``published``. An FAQ without a header row is read as question, answer[, source].
- JSON (a list of objects) and JSONL (one object per line) with the same keys, Freshdesk
  solution articles among them; or an export object: Zendesk Help Center (``articles``), QnA
  Maker's "Download knowledgebase" (``qnaDocuments``), an Azure AI Language question answering
  project (``assets.qnas``) or an Amazon Kendra FAQ (``FaqDocuments``); a Watson Assistant
  dialog skill (``intents`` and ``dialog_nodes``: app.kb.watson_skill).
- QnA TSV: ``Question``, ``Answer``, optional ``Source``, ``Metadata`` (``key:value|key:value``)
  and ``QnaId``.
- XLSX: the first sheet of a workbook, read like a CSV; with ``Question`` and ``Answer`` columns
  it is the QnA TSV as QnA Maker and Language Studio export it to Excel.
- Bot Framework ``.qna`` files, QnA Maker's text format (app.kb.qna_file).
- Markdown (and MDX, as docs tools write them: app.kb.markdown_dialects): YAML front matter
  then the body; HTML pages (app.kb.html_pages); Word documents and PDFs, read as the pages
  they are written as (app.kb.word_documents, app.kb.pdf_documents), and plain text files
  (app.kb.text_documents) when named. A folder is searched recursively for all four but text
  files, and a zip archive is read as the folder it holds (app.kb.archives); a folder or zip
  holding an exported Dialogflow ES or CX agent, Amazon Lex bot or Rasa project is read as that
  bot (app.kb.dialogflow_agent, app.kb.dialogflow_cx, app.kb.lex_bot, app.kb.rasa_project). An
  FAQ page, in any of them, gives one article per question, and a manual in sections one per
  section (app.kb.faq_pages); a page that only lists links to other pages, a form to fill in
  and a Confluence export's table of contents give none, with a warning; so does a PDF without
  text.

The QnA names work in every tabular and JSON format: ``question`` for ``title``, ``answer`` for
``body``, plus ``metadata`` and ``qnaid``; so do other names FAQ data sets use (``Q,A``,
``query,response``, ``prompt,completion``: ``column_names``). Rows named that way are question
rows, which app.kb.qna groups into articles.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from app.kb import dialogflow_agent, dialogflow_cx, lex_bot, rasa_project, watson_skill
from app.kb.archives import Progress, unpack_zip
from app.kb.bot_exports import first_variant, json_member, unique_texts, zip_names
from app.kb.faq_pages import (
    LONG_DOCUMENT_WORDS,
    LONG_PAGE_WORDS,
    html_faq_rows,
    markdown_faq_rows,
    markdown_section_rows,
    section_rows,
)
from app.kb.html_pages import (
    HTML_SUFFIXES,
    LINK_LIST_MIN_LINKS,
    PROPERTY_FIELDS,
    form_to_fill,
    html_fragment,
    link_list,
    page_address,
    page_fields,
    parse_html,
    resolve_addresses,
    space_contents,
)
from app.kb.markdown_dialects import plain_markdown
from app.kb.pdf_documents import NotAPdf, PdfWithoutText, pdf_page
from app.kb.qna import apply_metadata, group_questions
from app.kb.qna_file import read_qna_file
from app.kb.records import SourceRow, split_list
from app.kb.sanitize import has_text, render_body
from app.kb.slugs import slugify
from app.kb.text_documents import text_page
from app.kb.textfiles import (
    ByteCounter,
    CsvRow,
    Problems,
    csv_rows,
    decoded_lines,
    display_name,
    read_document,
    table_rows,
    yaml_error,
)
from app.kb.word_documents import NotAWordDocument, docx_page
from app.kb.workbooks import sheet_records
from app.vocab import counted

__all__ = ["SourceRow", "READERS", "bytes_to_read", "expand_paths", "read_rows"]

ARTICLE_KEYS = (
    "title",
    "body",
    "slug",
    "category",
    "tags",
    "questions",
    "taught_questions",  # as ``kb export`` writes them
    "source",
    "published",
)
QNA_KEYS = ("metadata", "qnaid")
FRONT_MATTER_KEYS = (*ARTICLE_KEYS, "status", "draft")  # Hugo and Jekyll write ``draft: true``
# where there is no ``published``: an article state (``status``) or a ``draft`` flag (records.py)
TABULAR_KEYS = ARTICLE_KEYS + QNA_KEYS + ("status", "draft")
ALIASES = {
    "question": "title",
    "answer": "body",
    # what FAQ exports call their alternate questions
    **dict.fromkeys(
        (
            "alternate questions",
            "alternative questions",
            "alternates",
            "paraphrases",
            "similar questions",
            "variants",
        ),
        "questions",
    ),
}


def _key(name: str) -> str:
    """A column name as compared: its letters and digits only, in lower case ("Alternate
    questions", "alternate_questions" and "alternateQuestions" are one name), without the
    suffix Salesforce gives a custom field (``Answer__c`` is ``answer``)."""
    return re.sub(r"[^a-z0-9]", "", name.strip().lower().removesuffix("__c"))


_ALIAS_KEYS = {_key(alias): name for alias, name in ALIASES.items()}
# Alternate questions spread over several columns, numbered or not: "Alternate question 1",
# "alt_question_2", "Paraphrase 3", "Similar question", "Paraphrased questions", "Sample
# utterances", "Training phrases" (Dialogflow's name), "Utterances" (Lex's and LUIS's),
# "patterns" (a chatbot's intents file), "Question 2" (a numbered question column other than
# the title's).
_ALTERNATE_COLUMN = re.compile(
    r"(?:(?:alt|alternate|alternative|similar|other|additional|extra|more|paraphrased"
    r"|rephrased|reworded|sample|example|training)"
    r"(?:questions?|phrasings?|phrases?|query|queries|utterances?)"
    r"|(?:question)?(?:paraphrase|variant|variation|rephrasing|pattern)s?|utterances?)\d*"
    r"|question\d+"
)
_NUMBERED_QUESTION = re.compile(r"question(\d+)")
# Other help desks' names, read as ours only where the file has no column of that name already
# (a file with both ``source`` and ``url`` keeps ``source`` and ignores ``url`` with a note):
# HubSpot's "Article title"/"Article body"/"Keywords"/"Article URL", ServiceNow's "Short
# description"/"Article body", Zendesk's "html_url" and "label_names", Intercom's "state",
# Salesforce Knowledge's "PublishStatus", and plain "subject", "headline", "content", "text",
# "details", "url", "link", "section", "topic".
# Plain FAQ data sets name their two columns in many ways ("Questions,Answers", "Q,A",
# "query,response", "FAQ,Response", a fine-tuning file's "prompt,completion"): a column read as
# the title under one of these names is a question column, whose rows app.kb.qna groups.
_QUESTION_FALLBACKS = (
    "q",
    "query",
    "faq",
    "faqquestion",
    "prompt",
    "questiontext",
    "userquestion",
    "customerquestion",
)
_ANSWER_FALLBACKS = (
    "a",
    "answers",
    "answertext",
    "faqanswer",
    "response",
    "responses",
    "responsetext",
    "reply",
    "solution",
    "completion",
)
_FALLBACK_KEYS = {
    **dict.fromkeys(
        ("articletitle", "shortdescription", "subject", "headline", *_QUESTION_FALLBACKS),
        "title",
    ),
    **dict.fromkeys(
        (
            "articlebody",
            "articlecontent",
            "articletext",
            "content",
            "description",
            "text",
            "details",
            *_ANSWER_FALLBACKS,
        ),
        "body",
    ),
    **dict.fromkeys(("keywords", "labels", "labelnames", "tag"), "tags"),
    **dict.fromkeys(("url", "link", "articleurl", "htmlurl", "sourceuri"), "source"),
    **dict.fromkeys(("section", "topic"), "category"),
    **dict.fromkeys(("state", "articlestate", "publishstatus"), "status"),
}
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")
SKIPPED_NAMES = {"readme.md", "readme.markdown", "readme.mdx"}
# QnA Maker's multi-turn columns and Language Studio's SourceDisplayName: no use here, so
# ignored without a note.
QNA_IGNORED = ("suggestedquestions", "iscontextonly", "prompts", "sourcedisplayname")
# our own column names, however spelled ("QnA Id", Amazon Kendra's "_category")
_OWN_KEYS = frozenset(TABULAR_KEYS + QNA_IGNORED)
_OPTIONAL = ("slug", "category", "source", "published", "metadata", "qnaid", "status", "draft")
# several columns (or JSON keys) may hold alternate questions; a row's are read together
MERGED = ("questions",)


def column_names(header: list[str]) -> list[str | None]:
    """The name each header cell (or JSON key) is read as: an alias's canonical name,
    ``questions`` for a column of alternate questions, None for a cell read by its own name.

    Without a ``title`` or ``question`` column, the lowest numbered question column ("Question
    1") is the title and the others its alternate questions."""
    keys = [_key(cell) for cell in header]
    names: list[str | None] = [
        _ALIAS_KEYS.get(key) or ("questions" if _ALTERNATE_COLUMN.fullmatch(key) else None)
        for key in keys
    ]
    if "title" not in names and "title" not in keys:
        numbered = [(int(m.group(1)), i) for i, k in enumerate(keys)
                    if (m := _NUMBERED_QUESTION.fullmatch(k))]  # fmt: skip
        if numbered:
            names[min(numbered)[1]] = "title"
    for i, key in enumerate(keys):
        if names[i] is None and key in _OWN_KEYS and key != header[i].strip().lower():
            names[i] = key
    taken = {name or key for name, key in zip(names, keys, strict=True)}
    for i, key in enumerate(keys):
        fallback = _FALLBACK_KEYS.get(key)
        if names[i] is None and fallback is not None and fallback not in taken:
            names[i] = fallback
            taken.add(fallback)
    return names


Reader = Callable[[Path, str, Problems, ByteCounter], Iterator[SourceRow]]


# ----------------------------------------------------------------------------- CSV, QnA TSV, XLSX


_QUESTION_KEYS = frozenset(("question", *_QUESTION_FALLBACKS))


def _title_from_questions(fields: dict[str, object]) -> bool:
    """A record without a title column or key whose questions are all it has
    (``Questions,Answers``, an intents file's ``patterns``): its first question is the title
    and the others its alternate questions. Whether it was so."""
    if "title" in fields:
        return False
    value = fields.get("questions")
    if isinstance(value, str):
        items: list[object] = list(split_list(value))
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        return False
    items = [item for item in items if not (isinstance(item, str) and not item.strip())]
    if not items:
        return False
    fields["title"], fields["questions"] = items[0], items[1:]
    return True


def _required(qna: bool) -> Callable[[list[str]], tuple[str, ...]]:
    """The columns a header must have: a title (``question`` in a QnA file) and a body, or,
    without a title column, alternate questions whose first is each row's title."""

    def required(header: list[str]) -> tuple[str, ...]:
        names = {n or c.strip().lower() for c, n in zip(header, column_names(header), strict=True)}
        title = "question" if qna else "title"
        if "title" not in names and "questions" in names:
            title = "questions"
        return (title, "answer" if qna else "body")

    return required


def _tabular(rows: Iterator[CsvRow], display: str, problems: Problems):
    for row in rows:
        fields: dict[str, object] = {k: v for k, v in row.values.items() if k in TABULAR_KEYS}
        qna = _title_from_questions(fields) or any(_key(a) in _QUESTION_KEYS for a in row.aliased)
        for key in _OPTIONAL:
            if key in fields and not str(fields[key]).strip():
                fields[key] = None
        if fields.get("source") is None:
            fields["source"] = display
        apply_metadata(fields, display, row.line, problems)
        yield SourceRow(display, row.line, fields, qna=qna)


_HEADERLESS_COLUMNS = ("question", "answer", "source")


def _headerless_faq(first: list[str]) -> list[str] | None:
    """The columns of an FAQ CSV without a header row, as Dialogflow's knowledge connectors and
    Amazon Kendra take one: question, answer and optionally a source URL. Only when the first
    record reads as a question and its answer rather than as column names: two or three cells,
    none a column name, a question ending in '?' or of three words or more, an answer of two
    words or more."""
    cells = [cell.strip() for cell in first]
    if not 2 <= len(cells) <= 3 or not all(cells[:2]):
        return None
    keys = {_key(cell) for cell in cells}
    if any(name is not None for name in column_names(cells)) or keys & set(TABULAR_KEYS):
        return None
    question, answer = cells[0], cells[1]
    if not (question.endswith("?") or len(question.split()) >= 3) or len(answer.split()) < 2:
        return None
    return list(_HEADERLESS_COLUMNS[: len(cells)])


def read_csv(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    options = {"required": _required(qna=False), "known": TABULAR_KEYS, "merged": MERGED,
               "headerless": _headerless_faq}  # fmt: skip
    rows = csv_rows(path, display, problems, aliases=column_names, on_bytes=on_bytes, **options)
    return _tabular(rows, display, problems)


def read_qna_tsv(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    known = TABULAR_KEYS + QNA_IGNORED
    options = {"delimiter": "\t", "required": _required(qna=True), "known": known,
               "merged": MERGED}  # fmt: skip
    rows = csv_rows(path, display, problems, aliases=column_names, on_bytes=on_bytes, **options)
    return _tabular(map(_escaped_line_breaks, rows), display, problems)


def _escaped_line_breaks(row: CsvRow) -> CsvRow:
    """A TSV cannot hold a line break in a value unquoted, so QnA Maker writes the Markdown
    answer's as ``\\n``: an answer without real line breaks gets them back."""
    body = row.values.get("body")
    if body and "\\n" in body and "\n" not in body:
        row.values["body"] = body.replace("\\r\\n", "\n").replace("\\n", "\n")
    return row


def _sheet_required(header: list[str]) -> tuple[str, ...]:
    """A sheet naming ``Question`` or ``Answer`` is a QnA export and needs both; else it is
    read like a CSV."""
    names = {cell.strip().lower() for cell in header}
    return _required(qna=bool(names & {"question", "answer"}))(header)


def read_xlsx(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    """The first sheet; line numbers are its row numbers."""
    records = sheet_records(path, on_bytes)
    options = {"required": _sheet_required, "known": TABULAR_KEYS + QNA_IGNORED, "merged": MERGED}
    rows = table_rows(records, display, problems, aliases=column_names, **options)
    return _tabular(rows, display, problems)


# ----------------------------------------------------------------------------- JSON, JSONL


def _object_fields(obj: object, display: str, line: int, problems: Problems) -> SourceRow | None:
    if not isinstance(obj, dict):
        problems.add(display, line, f"expected an object, found {type(obj).__name__}")
        return None
    keys = [str(k) for k in obj]
    qna = False
    fields: dict[str, object] = {}
    spelled: dict[str, str] = {}
    for key, name, value in zip(keys, column_names(keys), obj.values(), strict=True):
        qna = qna or (name == "title" and _key(key) in _QUESTION_KEYS)
        name = name or key.lower()
        if name not in fields:
            fields[name], spelled[name] = value, key
        elif name in MERGED:
            fields[name] = _merged(fields[name], value)
        else:
            problems.add(display, line, f"has both '{spelled[name]}' and '{key}'; keep one")
            return None
    unknown = [spelled[k] for k in fields if k not in TABULAR_KEYS]
    if unknown:
        _note_once(problems, display, line, f"ignoring unknown key(s) {', '.join(unknown)}")
    fields = {k: v for k, v in fields.items() if k in TABULAR_KEYS}
    qna = _title_from_questions(fields) or qna
    if fields.get("source") is None:
        fields["source"] = display
    apply_metadata(fields, display, line, problems)
    return SourceRow(display, line, fields, qna=qna)


def _note_once(problems: Problems, display: str, line: int, text: str) -> None:
    """A note for the first object of a file that has it, not for each of thousands."""
    if not any(n.startswith(f"{display}:") and n.endswith(f": {text}") for n in problems.notes):
        problems.note(display, line, text)


def _merged(first: object, more: object) -> object:
    """Two values of one list field (``questions``): texts joined by a line break, else one
    list (a text split as ``records.split_list`` reads it; other values are left for the
    record's check to name)."""
    if more is None or more == "":
        return first
    if first is None or first == "":
        return more
    if isinstance(first, str) and isinstance(more, str):
        return f"{first}\n{more}"
    items: list[object] = []
    for value in (first, more):
        if isinstance(value, str):
            items.extend(split_list(value))
        elif isinstance(value, list | tuple):
            items.extend(value)
        else:
            items.append(value)
    return items


def _json_int(digits: str) -> int | str:
    """A JSON integer; one too long for Python to convert (over 4,300 digits: no id or count)
    stays its digits, as a number where text belongs is read as its text."""
    try:
        return int(digits)
    except ValueError:
        return digits


_JSON = json.JSONDecoder(parse_int=_json_int)


def read_jsonl(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    count = 0
    tally = _Tally()
    for lineno, line in enumerate(decoded_lines(path, display, problems, on_bytes), 1):
        if not line.strip():
            continue
        count += 1
        try:
            obj = _JSON.decode(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            problems.add(display, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        yield from _element_rows(obj, "object", f"line {lineno}", display, lineno, problems, tally)
    if count == 0 and not problems.locations & {(display, 1)}:
        problems.add(display, 1, "file is empty")
    else:
        tally.check(display, 1, problems)


@dataclass
class _Tally:
    """Export pages met among a file's list elements or lines, and the records read."""

    pages: int = 0
    rows: int = 0

    def check(self, display: str, line: int, problems: Problems) -> None:
        if self.pages and not self.rows and not problems:
            problems.add(display, line, "the export's pages hold no records")


def _element_rows(
    obj: object,
    label: str,
    page_label: str,
    display: str,
    line: int,
    problems: Problems,
    tally: _Tally,
):
    """The rows of one element of a JSON list or one JSONL line: the records of an export's
    page (named ``page_label.articles[i]``), else one article object (named ``label``)."""
    if (key := _page_key(obj)) is not None:
        tally.pages += 1
        rows = _page_rows(obj, key, page_label, display, line, problems)
    else:
        row = _object_row(obj, label, display, line, problems)
        rows = () if row is None else (row,)
    for row in rows:
        tally.rows += 1
        yield row


_WS = re.compile(r"\s*")


def read_json(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    """A JSON list of objects, decoded one element at a time so each knows its line; or an
    export object (``_json_export``)."""
    text = read_document(path, display, problems, on_bytes)
    if text is None:
        return
    pos = _WS.match(text, 0).end()
    if text[pos] == "{" and '"dialog_nodes"' in text:
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            document = None  # the export reader names where it breaks
        if watson_skill.is_skill(document):
            yield from watson_skill.skill_rows(document, display, problems)  # type: ignore
            return
    if text[pos] == "{":
        yield from _json_export(text, pos, display, problems)
        return
    if text[pos] != "[":
        problems.add(display, _line_at(text, pos), f"expected {_JSON_SHAPES}")
        return
    items = _list_items(text, pos, display, problems)
    tally = _Tally()
    while True:
        try:
            line, index, obj = next(items)
        except StopIteration as end:
            _nothing_after(text, end.value, display, problems)
            tally.check(display, _line_at(text, pos), problems)
            return
        yield from _element_rows(obj, f"[{index}]", f"[{index}]", display, line, problems, tally)


def _nothing_after(text: str, end: int | None, display: str, problems: Problems) -> None:
    """Report text after the JSON document that ends at ``end`` (two documents in one file,
    such as two pages of an export appended to each other): it would otherwise be lost."""
    if end is None:
        return
    rest = _WS.match(text, end).end()
    if rest < len(text):
        problems.add(
            display,
            _line_at(text, rest),
            "more JSON after the end of the first document (two exports in one file?); "
            "give each its own file, or join their lists",
        )


def _object_row(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """One object of a JSON list or a JSONL line, read by its shape: a Zendesk article
    (``html_url`` or ``section_id`` beside ``title`` and ``body``: its HTML body, draft flag
    and section as the export's), a Freshdesk or Freshservice solution article (``title``,
    ``description`` and ``folder_id`` or ``description_text``), a QnA Maker item
    (``questions`` and ``answer``, no title), else an article object with our keys."""
    if isinstance(obj, dict):
        keys = {str(k).casefold() for k in obj}
        if {"title", "body"} <= keys and keys & {"html_url", "section_id"}:
            return _zendesk_article(obj, label, display, line, problems)
        if _freshdesk_shape(keys):
            return _freshdesk_article(obj, label, display, line, problems)
        if {"questions", "answer"} <= keys and not keys & {"title", "question"}:
            return _qna_item(obj, label, display, line, problems)
        if _botpress_shape(obj):
            return _botpress_item(obj, label, display, line, problems)
    return _object_fields(obj, display, line, problems)


_JSON_SHAPES = (
    "a JSON list of article objects ('[' ...) or an export: an object with 'articles' "
    "(Zendesk), 'qnaDocuments' (QnA Maker), 'assets' (question answering), 'FaqDocuments' "
    "(Amazon Kendra) or 'qna' (QnABot on AWS)"
)


def _list_items(text: str, pos: int, display: str, problems: Problems, empty_ok: bool = False):
    """(line, index, value) of each element of the JSON list at ``pos``; returns the position
    after the list, or None after reporting a problem (an empty list is one unless
    ``empty_ok``)."""
    line = _line_at(text, pos)
    pos += 1
    counted_to = pos
    index = 0
    while True:
        pos = _WS.match(text, pos).end()
        if pos < len(text) and text[pos] == "]" and index == 0:
            if empty_ok:
                return pos + 1
            problems.add(display, line, "the list is empty")
            return None
        if index:
            if pos < len(text) and text[pos] == "]":
                return pos + 1
            if pos >= len(text) or text[pos] != ",":
                problems.add(display, _line_at(text, pos), "expected ',' or ']' after an object")
                return None
            pos = _WS.match(text, pos + 1).end()
        line += text.count("\n", counted_to, pos)
        counted_to = pos
        try:
            obj, pos = _JSON.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            problems.add(display, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            return None
        yield line, index, obj
        index += 1


# A member of an export object read by a handler: (text, position of the value, the key as
# spelled, display, problems) -> rows; returns the position after the value, or None after
# reporting a problem.
_Handler = Callable[[str, int, str, str, Problems], Generator[SourceRow, None, int | None]]
_Convert = Callable[[object, str, str, int, Problems], SourceRow | None]


def _json_export(text: str, pos: int, display: str, problems: Problems):
    """The records of an export object, found by the key that holds them (any case):
    ``articles`` (a Zendesk Help Center export, ``GET /api/v2/help_center/articles``),
    ``qnaDocuments`` (QnA Maker's "Download knowledgebase"), ``assets`` with ``qnas`` (an
    Azure AI Language question answering project export), ``FaqDocuments`` (an Amazon Kendra
    FAQ in its JSON format) or ``qna`` (a QnABot on AWS export). Other members (``count``,
    ``next_page``, ``metadata``, ``synonyms``...) are skipped. Several such objects one after
    another (the pages of a paginated API saved to one file) are read in turn. An object with
    none of those keys but one list of objects (``{"faqs": [...]}``) is read as a list of
    article objects, with a note."""
    handlers, previous_end = _EXPORTS, None
    while True:
        try:
            walked = yield from _members(text, pos, display, problems, handlers)
            if walked is not None and walked[1] is None and previous_end is not None:
                _nothing_after(text, previous_end, display, problems)  # not another page
                return
            if walked is not None and walked[1] is None and (key := _only_list_of_objects(text)):
                problems.note(display, 1, f"'{key}' read as a list of article objects")
                walked = yield from _members(
                    text, pos, display, problems, {key.casefold(): _records(_article_object)}
                )
                if walked is not None:
                    _nothing_after(text, walked[0], display, problems)
                return
        except json.JSONDecodeError as exc:
            problems.add(display, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
            return
        if walked is None:
            return
        if walked[1] is None:
            problems.add(display, _line_at(text, pos), f"expected {_JSON_SHAPES}")
            return
        # Pages of an API's answer saved one after another: each is an export of its own.
        previous_end = walked[0]
        pos = _WS.match(text, previous_end).end()
        if not text.startswith("{", pos):
            _nothing_after(text, previous_end, display, problems)
            return
        handlers = _LATER_PAGES  # the last page of a cursor's answer may be empty


def _only_list_of_objects(text: str) -> str | None:
    """The key of the one member of the JSON object ``text`` that is a non-empty list of
    objects, or None when there is no such member or more than one."""
    document = _JSON.decode(text)
    keys = [key for key, value in document.items()
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value)]  # fmt: skip
    return keys[0] if len(keys) == 1 else None


def _article_object(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    row = _object_row(obj, label, display, line, problems)
    if row is not None and row.label is None:
        row.label = label
    return row


def _members(text: str, pos: int, display: str, problems: Problems, handlers: dict[str, _Handler]):
    """Walk the JSON object at ``pos``: the first member whose key, case aside, has a handler
    is read by it; every other member is skipped. Returns (the position after the object, the
    key handled or None), or None after reporting a problem."""
    handled: str | None = None
    pos += 1
    while True:
        pos = _WS.match(text, pos).end()
        if text.startswith("}", pos):
            return pos + 1, handled
        key, pos = _JSON.raw_decode(text, pos)
        pos = _WS.match(text, pos).end()
        if not isinstance(key, str) or not text.startswith(":", pos):
            problems.add(display, _line_at(text, pos), "invalid JSON: expected a key")
            return None
        pos = _WS.match(text, pos + 1).end()
        handler = handlers.get(key.casefold()) if handled is None else None
        if handler is not None:
            handled = key
            pos = yield from handler(text, pos, key, display, problems)
            if pos is None:
                return None
        else:
            _, pos = _JSON.raw_decode(text, pos)
        pos = _WS.match(text, pos).end()
        if text.startswith(",", pos):
            pos += 1
        elif not text.startswith("}", pos):
            problems.add(display, _line_at(text, pos), "expected ',' or '}' in the object")
            return None


def _records(convert: _Convert, empty_ok: bool = False) -> _Handler:
    """A handler for a list of records, each made a row by ``convert(obj, label, ...)`` with
    the label ``key[index]``."""

    def read(text: str, pos: int, key: str, display: str, problems: Problems):
        if not text.startswith("[", pos):
            problems.add(display, _line_at(text, pos), f"'{key}' must be a list")
            return None
        items = _list_items(text, pos, display, problems, empty_ok)
        while True:
            try:
                line, index, obj = next(items)
            except StopIteration as end:
                return end.value
            row = convert(obj, f"{key}[{index}]", display, line, problems)
            if row is not None:
                yield row

    return read


def _assets(text: str, pos: int, key: str, display: str, problems: Problems):
    """A question answering export's ``assets`` object: its ``qnas`` list."""
    line = _line_at(text, pos)
    if not text.startswith("{", pos):
        problems.add(display, line, f"'{key}' must be an object")
        return None
    walked = yield from _members(text, pos, display, problems, {"qnas": _records(_qna_item)})
    if walked is None:
        return None
    if walked[1] is None:
        problems.add(display, line, f"'{key}' has no 'qnas' list")
        return None
    return walked[0]


def _export_record(
    obj: object, label: str, display: str, line: int, problems: Problems, id_key: str = ""
) -> tuple[dict, str] | None:
    """``obj`` as a record of an export (an object) and its label, which names its ``id_key``
    when it has one (``[3] (id 42)``); None after reporting anything else."""
    if not isinstance(obj, dict):
        problems.add(display, line, f"{label}: expected an object, found {type(obj).__name__}")
        return None
    if id_key and obj.get(id_key) is not None:
        label = f"{label} ({id_key} {obj[id_key]})"
    return obj, label


def _empty_draft(body: object, label: str, display: str, line: int, problems: Problems) -> bool:
    """Whether a help centre's draft has no body: work not started, nothing to store or to
    answer; warned about and not imported."""
    if body is None or (isinstance(body, str) and not has_text(body)):
        problems.warn(display, line, f"{label}: a draft without a body; not imported")
        return True
    return False


def _group_category(
    fields: dict[str, object],
    obj: dict,
    key: str,
    label: str,
    display: str,
    line: int,
    problems: Problems,
) -> None:
    """The category of a help centre's group (Zendesk's section, Freshdesk's folder): the
    number in ``key``, as ``section-<id>``/``folder-<id>`` (the key's first word)."""
    value = obj.get(key)
    if isinstance(value, int | str) and not isinstance(value, bool):
        if str(value).strip():
            fields["category"] = f"{key.split('_')[0]}-{value}"
    elif value is not None:
        problems.add(display, line, f"{label}: {key} must be a number")


def _zendesk_article(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """title, body (HTML), html_url -> source, section_id -> category ``section-<id>``,
    label_names -> tags, draft -> unpublished; the slug comes from the title."""
    record = _export_record(obj, label, display, line, problems, "id")
    if record is None:
        return None
    obj, label = record
    body, page = obj.get("body"), obj.get("html_url")
    if isinstance(body, str):
        body = html_fragment(body, page if isinstance(page, str) else None)
    if obj.get("draft") is True and _empty_draft(body, label, display, line, problems):
        return None
    fields: dict[str, object] = {
        "title": obj.get("title"),
        "body": body,
        "source": page or display,
        "tags": obj.get("label_names"),
    }
    _group_category(fields, obj, "section_id", label, display, line, problems)
    draft = obj.get("draft", False)
    if isinstance(draft, bool):
        fields["published"] = not draft
    elif draft is not None:
        problems.add(display, line, f"{label}: draft must be true or false")
    origin = None  # the same article in another locale is a translation, not a repeat
    if isinstance(obj.get("id"), int | str):
        origin = f"zendesk {obj['id']} {obj.get('locale') or ''}"
    return SourceRow(display, line, fields, label=label, origin=origin)


def _freshdesk_shape(keys: set[str]) -> bool:
    return (
        {"title", "description"} <= keys
        and "body" not in keys
        and bool(keys & {"folder_id", "description_text"})
    )


# Freshdesk's and Freshservice's article states.
_FRESHDESK_STATUS = {1: False, 2: True}  # draft, published


def _freshdesk_article(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """A Freshdesk or Freshservice solution article as their API returns it (``GET
    /api/v2/solutions/folders/{id}/articles``): title, description (HTML) -> body, status 2
    -> published and 1 -> draft, tags, folder_id -> category ``folder-<id>``; the slug comes
    from the title. Votes, hits, SEO data, the hierarchy and timestamps are not stored."""
    record = _export_record(obj, label, display, line, problems, "id")
    if record is None:
        return None
    obj, label = record
    body = obj.get("description")
    if isinstance(body, str):
        body = html_fragment(body)
        if not has_text(body) and isinstance(obj.get("description_text"), str):
            body = obj["description_text"]
    status = obj.get("status")
    published = _FRESHDESK_STATUS.get(status) if isinstance(status, int) else None
    if status is not None and (isinstance(status, bool) or published is None):
        problems.add(
            display, line, f"{label}: status {status!r} is neither 1 (draft) nor 2 (published)"
        )
        return None
    if published is False and _empty_draft(body, label, display, line, problems):
        return None
    fields: dict[str, object] = {
        "title": obj.get("title"),
        "body": body,
        "source": display,
        "tags": obj.get("tags"),
    }
    if published is not None:
        fields["published"] = published
    _group_category(fields, obj, "folder_id", label, display, line, problems)
    origin = None
    if isinstance(obj.get("id"), int | str):
        origin = f"freshdesk {obj['id']} {obj.get('language') or ''}"
    return SourceRow(display, line, fields, label=label, origin=origin)


def _help_centre_article(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """An item of an ``articles`` list: Zendesk's, or Freshdesk's saved under that key."""
    if isinstance(obj, dict) and _freshdesk_shape({str(k).casefold() for k in obj}):
        return _freshdesk_article(obj, label, display, line, problems)
    return _zendesk_article(obj, label, display, line, problems)


def _qna_item(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """A QnA Maker ``qnaDocuments`` item or a question answering ``qnas`` item, keys in any
    case: ``questions`` (the first is the title, the rest alternate questions), ``answer``
    (Markdown), ``source``, ``metadata`` (``name``/``value`` pairs or an object, read like the
    TSV's Metadata). Active-learning suggestions, prompts (``context``, ``dialog``), timestamps
    and the id are not stored; the slug comes from the metadata or the title."""
    record = _export_record(obj, label, display, line, problems)
    if record is None:
        return None
    obj = record[0]
    item = {str(k).casefold(): v for k, v in obj.items()}
    if item.get("id") is not None:
        label = f"{label} (id {item['id']})"
    reasons: list[str] = []
    questions, answer = item.get("questions"), item.get("answer")
    if isinstance(questions, list) and all(isinstance(q, str) for q in questions):
        # Each once, case and spacing aside, as when TSV rows are grouped.
        questions = unique_texts(questions)
        if not questions:
            reasons.append("has no questions")
    elif questions is None:
        reasons.append("has no questions")
    else:
        reasons.append("questions must be a list of texts")
    if answer is None or isinstance(answer, str) and not answer.strip():
        reasons.append("has no answer")
    elif not isinstance(answer, str):
        reasons.append(f"answer must be text, not {type(answer).__name__}")
    if reasons:
        for reason in reasons:
            problems.add(display, line, f"{label}: {reason}")
        return None
    fields: dict[str, object] = {
        "title": questions[0],
        "body": answer,
        "questions": questions[1:],
        "source": item.get("source") or display,
        "metadata": item.get("metadata"),
    }
    apply_metadata(fields, display, line, problems, label=label)
    return SourceRow(display, line, fields, label=label)


def _kendra_faq(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """An Amazon Kendra FAQ document (``FaqDocuments`` item), keys in any case: ``Question``,
    ``Answer``, and in ``Attributes`` the reserved ``_source_uri`` (source) and ``_category``;
    other attributes and the access control list are not stored."""
    record = _export_record(obj, label, display, line, problems)
    if record is None:
        return None
    obj = record[0]
    item = {str(k).casefold(): v for k, v in obj.items()}
    attributes = item.get("attributes")
    if attributes is None:
        attributes = {}
    if not isinstance(attributes, dict):
        problems.add(display, line, f"{label}: Attributes must be an object")
        return None
    fields: dict[str, object] = {
        "title": item.get("question"),
        "body": item.get("answer"),
        "source": attributes.get("_source_uri") or display,
        "category": attributes.get("_category"),
    }
    return SourceRow(display, line, fields, label=label, qna=True)


def _qnabot_item(
    obj: object, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """An item of a QnABot on AWS export (``qna`` list): ``q`` its questions (the first is the
    title), ``a`` the answer, or ``alt.markdown`` where the item has one, ``t`` (topic) the
    category; ``qid`` names it in messages. Response cards, SSML and the rest are not stored."""
    record = _export_record(obj, label, display, line, problems, "qid")
    if record is None:
        return None
    obj, label = record
    questions = obj.get("q")
    if isinstance(questions, str):
        questions = [questions]
    if not isinstance(questions, list) or not questions:
        problems.add(display, line, f"{label}: has no questions ('q')")
        return None
    alt = obj.get("alt")
    markdown = alt.get("markdown") if isinstance(alt, dict) else None
    answer = markdown if isinstance(markdown, str) and markdown.strip() else obj.get("a")
    fields: dict[str, object] = {
        "title": questions[0],
        "body": answer,
        "questions": questions[1:],
        "category": obj.get("t") or None,
        "source": display,
    }
    return SourceRow(display, line, fields, label=label, qna=True)


_BOTPRESS_LANGUAGE = "en"  # read first when an item has it; else its first language


def _botpress_shape(obj: dict) -> bool:
    data = next((v for k, v in obj.items() if str(k).casefold() == "data"), None)
    return (
        isinstance(data, dict)
        and isinstance(data.get("questions"), dict)
        and isinstance(data.get("answers"), dict)
    )


def _botpress_item(
    obj: dict, label: str, display: str, line: int, problems: Problems
) -> SourceRow | None:
    """An item of a Botpress Q&A export (``{"id", "data": {"questions": {lang: [...]},
    "answers": {lang: [...]}, "enabled", "contexts"}}``): in English, else the first language
    with questions, the first question is the title and the others alternate questions, the
    first answer the body (Botpress picks one at random); a context other than ``global`` (or
    the older ``category``) is the category, and ``enabled: false`` leaves it unpublished. An
    item that only redirects to a flow has no answer: left out with a warning."""
    record = _export_record(obj, label, display, line, problems, "id")
    if record is None:
        return None
    obj, label = record
    data = next(v for k, v in obj.items() if str(k).casefold() == "data")
    questions, answers = data["questions"], data["answers"]
    languages = [lang for lang, texts in questions.items() if isinstance(texts, list) and texts]
    language = (
        _BOTPRESS_LANGUAGE if _BOTPRESS_LANGUAGE in languages else next(iter(languages), None)
    )
    asked = questions.get(language) if language else None
    said = answers.get(language) if language else None
    if not asked or not all(isinstance(q, str) for q in asked):
        problems.add(display, line, f"{label}: has no questions")
        return None
    answer = first_variant(said or [])
    if not answer:
        problems.warn(
            display, line, f"{label}: no answer in '{language}' (a redirect to a flow?): skipped"
        )
        return None
    contexts = data.get("contexts")
    context = contexts[0] if isinstance(contexts, list) and contexts else data.get("category")
    fields: dict[str, object] = {
        "title": asked[0],
        "body": answer,
        "questions": asked[1:],
        "category": context if isinstance(context, str) and context != "global" else None,
        "published": data.get("enabled", True) is not False,
        "source": display,
    }
    return SourceRow(display, line, fields, label=label, qna=True)


# The list each paginated export keeps its records in, and how a record is read.
_PAGE_RECORDS: dict[str, _Convert] = {
    "articles": _help_centre_article,
    "qnadocuments": _qna_item,
    "faqdocuments": _kendra_faq,
    "qna": _qnabot_item,
}
_EXPORTS: dict[str, _Handler] = {
    **{key: _records(convert) for key, convert in _PAGE_RECORDS.items()},
    "assets": _assets,
}
_LATER_PAGES: dict[str, _Handler] = {
    key: _records(convert, empty_ok=True) for key, convert in _PAGE_RECORDS.items()
}
_ARTICLE_KEYS = frozenset({"title", "body", "question", "questions", "answer", "slug"})


def _page_key(obj: object) -> str | None:
    """The key of an export page's list of records when ``obj`` is one (``{"articles": [...],
    "next_page": ...}``, an element of a JSON list or a JSONL line), else None."""
    if not isinstance(obj, dict):
        return None
    keys = {str(k).casefold(): k for k in obj}
    if keys.keys() & _ARTICLE_KEYS:
        return None
    found = [k for folded, k in keys.items() if folded in _PAGE_RECORDS]
    return found[0] if len(found) == 1 and isinstance(obj[found[0]], list) else None


def _page_rows(obj: dict, key: str, label: str, display: str, line: int, problems: Problems):
    """The records of one export page met as an element of a list or a line of JSONL; each
    is named ``[page].articles[index]`` and placed on the page's line."""
    convert = _PAGE_RECORDS[key.casefold()]
    for index, item in enumerate(obj[key]):
        row = convert(item, f"{label}.{key}[{index}]", display, line, problems)
        if row is not None:
            yield row


def _line_at(text: str, pos: int) -> int:
    return 1 + text.count("\n", 0, pos)


# ----------------------------------------------------------------------------- Markdown

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)(?:\n)?^(?:---|\.\.\.)[ \t]*$\n?", re.S | re.M)
_H1 = re.compile(r"\A\s*#[ \t]+(.+?)[ \t#]*(?:\n|\Z)")
_SETEXT_H1 = re.compile(r"\A\s*([^\s].*?)[ \t]*\n=+[ \t]*(?:\n|\Z)")  # Title, then ===
_TOML_FRONT_MATTER = re.compile(r"\A\+\+\+[ \t]*\n(.*?)^\+\+\+[ \t]*$\n?", re.S | re.M)


_HUGE_NUMBER = "a number of over 4,300 digits; put it in quotes to make it text"


def _site_path_slug(fields: dict[str, object]) -> None:
    """A front matter ``slug`` that is a path on the site (Docusaurus writes ``slug:
    /billing/refunds``, and ``slug: /`` for the home page) gives the slug its words
    (``billing-refunds``); the site's root gives none, and the title is used."""
    slug = fields.get("slug")
    if isinstance(slug, str) and "/" in slug:
        words = slug.strip().strip("/")
        if words:
            fields["slug"] = slugify(words)
        else:
            del fields["slug"]


def read_markdown(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    text = read_document(path, display, problems, on_bytes)
    if text is None:
        return
    meta: object = {}
    body = text
    if text.startswith("+++"):  # Hugo's TOML front matter
        match = _TOML_FRONT_MATTER.match(text)
        if match is None:
            problems.add(display, 1, "front matter opened with '+++' is never closed")
            return
        body = text[match.end() :]
        try:
            meta = tomllib.loads(match.group(1))
        except tomllib.TOMLDecodeError as exc:
            problems.add(display, 1, f"invalid TOML front matter: {exc}")
            return
        except ValueError:  # an integer Python will not convert
            problems.add(display, 2, f"TOML front matter: {_HUGE_NUMBER}")
            return
    elif text.startswith("---"):
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
        except ValueError:  # an integer Python will not convert
            problems.add(display, 2, f"YAML front matter: {_HUGE_NUMBER}")
            return
        if not isinstance(meta, dict):
            problems.add(display, 2, "front matter must be key: value pairs")
            return
    fields = {str(k).lower(): v for k, v in meta.items() if str(k).lower() in FRONT_MATTER_KEYS}
    if not meta and _NOTION_FILE.search(path.name):
        body, properties = _notion_properties(body)
        fields.update(properties)
    _site_path_slug(fields)
    first_line = 1 + text.count("\n", 0, len(text) - len(body))
    body = plain_markdown(body, mdx=path.suffix.lower() == ".mdx")  # as many lines
    rows = markdown_faq_rows(body, first_line, fields, display, problems)
    if rows is not None:
        yield from rows
        return
    heading = _H1.match(body) or _SETEXT_H1.match(body)
    if "title" not in fields and heading:
        fields["title"] = heading.group(1)
    elif heading and " ".join(heading.group(1).split()) != " ".join(str(fields["title"]).split()):
        heading = None  # only a heading repeating the front matter's title goes, as in HTML
    if heading:
        first_line += body.count("\n", 0, heading.end())
        body = body[heading.end() :]
    rows = markdown_section_rows(body, first_line, fields, display, problems)
    if rows is not None:
        yield from rows
        return
    fields["body"] = body
    fields.setdefault("source", display)
    if _link_marks(body) < LINK_LIST_MIN_LINKS or not _skipped_link_list(
        render_body(body, as_written=True), display, problems
    ):
        yield SourceRow(display, 1, fields)


# Notion's Markdown export names a page "<title> <id>.md", the id 32 hex digits, and writes a
# database page's properties as "Name: value" lines between its title and its text.
_NOTION_FILE = re.compile(r"\s[0-9a-f]{32}\.md\Z")
_PROPERTY_LINE = re.compile(r"([^:]{1,40}):[ \t]+(\S.*)")


def _notion_properties(body: str) -> tuple[str, dict[str, object]]:
    """A Notion page's Markdown without the properties under its title (blank lines instead,
    so that lines keep their numbers), and the tags, category and state they give (the names
    Notion's HTML export is read by, app.kb.html_pages). Lines under the title that are not
    all properties are the page's text."""
    lines = body.split("\n")
    index = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    if index == len(lines) or not _H1.match(lines[index]):
        return body, {}
    index = next((i for i in range(index + 1, len(lines)) if lines[i].strip()), len(lines))
    start = index
    fields: dict[str, object] = {}
    while index < len(lines) and (found := _PROPERTY_LINE.fullmatch(lines[index].strip())):
        field = PROPERTY_FIELDS.get(found.group(1).strip().casefold())
        if field is not None and field not in fields:
            value = found.group(2).strip()
            tags = [tag.strip() for tag in value.split(",") if tag.strip()]  # Notion joins by ", "
            fields[field] = tags if field == "tags" else value
        index += 1
    if index == start or index < len(lines) and lines[index].strip():
        return body, {}
    lines[start:index] = [""] * (index - start)
    return "\n".join(lines), fields


def _link_marks(markdown: str) -> int:
    """How many links a Markdown body could hold at most, by the marks they need (a ``[`` for
    Markdown's, HTML anchors, autolinks, bare addresses): rendering only the bodies that could
    be a list of links keeps a 100,000-file import from rendering every one twice."""
    return sum(markdown.count(mark) for mark in ("[", "<a", "<http", "://"))


# ----------------------------------------------------------------------------- HTML


def read_html_page(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    """A page (app.kb.html_pages); an FAQ page gives an article per question."""
    text = read_document(path, display, problems, on_bytes, html=True)
    if text is not None:
        yield from _html_page_rows(text, display, problems)


def read_word_document(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    """A Word document, read as the page it is written as (app.kb.word_documents)."""
    try:
        text = docx_page(path)
    except NotAWordDocument as exc:
        problems.add(display, 1, str(exc))
        return
    on_bytes(path.stat().st_size)
    yield from _html_page_rows(text, display, problems, long=LONG_DOCUMENT_WORDS)


def read_pdf_document(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    """A PDF, read as the page it lays out (app.kb.pdf_documents); its bytes counted page by
    page, as a long manual takes a while."""
    size = path.stat().st_size
    counted_bytes = 0

    def on_page(done: int, pages: int) -> None:
        nonlocal counted_bytes
        on_bytes(size * done // pages - counted_bytes)
        counted_bytes = size * done // pages

    try:
        text = pdf_page(path, on_page)
    except PdfWithoutText as exc:  # nothing to import, and nothing the import could do
        problems.warn(display, 1, f"{exc}: skipped")
        return
    except NotAPdf as exc:
        problems.add(display, 1, str(exc))
        return
    on_bytes(size - counted_bytes)
    yield from _html_page_rows(text, display, problems, long=LONG_DOCUMENT_WORDS)


def read_text_document(path: Path, display: str, problems: Problems, on_bytes: ByteCounter):
    """A plain text file, read as the page it is written as (app.kb.text_documents)."""
    text = read_document(path, display, problems, on_bytes)
    if text is not None:
        yield from _html_page_rows(text_page(text, path.stem), display, problems)


def _html_page_rows(
    text: str, display: str, problems: Problems, long: int = LONG_PAGE_WORDS
) -> Iterator[SourceRow]:
    """The rows of a page's HTML: none for a page that is no answer (a Confluence export's
    table of contents, a form, a list of links, each with a warning), one per question of an
    FAQ page, one per section of a document in sections of ``long`` words or more (a manual),
    else one."""
    root = parse_html(text)
    if space_contents(root):
        problems.warn(
            display,
            1,
            "the table of contents of a Confluence space's export, not an answer: skipped",
        )
        return
    address = page_address(root)
    if address:
        resolve_addresses(root, address)
    rows = html_faq_rows(text, root, display, problems, address)
    if rows is not None:
        yield from rows
        return
    fields = page_fields(root)
    if fields is None:
        problems.add(display, 1, "no <title> and no <h1> to take the article's title from")
        return
    rows = section_rows(root, str(fields["title"]), display, problems, long)
    if rows is not None:
        yield from rows
        return
    fields["source"] = display
    form = form_to_fill(root, str(fields["body"]))
    if form is not None:
        kind = "a sign-in form" if form.sign_in else "a form to fill in"
        problems.warn(
            display,
            1,
            f"{kind} ({counted(form.fields, 'field')}, {form.share:.0%} of its text), not an "
            "answer: skipped",
        )
        return
    if not _skipped_link_list(str(fields["body"]), display, problems):
        yield SourceRow(display, 1, fields, page=True)


def _skipped_link_list(body_html: str, display: str, problems: Problems) -> bool:
    """Whether the page is a list of links (a home or section page of a saved help centre),
    left out with a warning: as an article it would answer with a list, and its link names
    (other articles' titles) would draw questions away from the articles themselves."""
    found = link_list(body_html)
    if found is not None:
        links, share = found
        problems.warn(
            display,
            1,
            f"a page of links to other pages ({links} links, {share:.0%} of its text), not "
            "an answer: skipped",
        )
    return found is not None


# ----------------------------------------------------------------------------- dispatch

READERS: dict[str, Reader] = {
    ".csv": read_csv,
    ".tsv": read_qna_tsv,
    ".qna": read_qna_file,
    ".xlsx": read_xlsx,
    ".json": read_json,
    ".jsonl": read_jsonl,
    ".ndjson": read_jsonl,
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".mdx": read_markdown,
    ".html": read_html_page,
    ".htm": read_html_page,
    ".docx": read_word_document,
    ".pdf": read_pdf_document,
    ".txt": read_text_document,
}
FOLDER_SUFFIXES = MARKDOWN_SUFFIXES + HTML_SUFFIXES + (".docx", ".pdf")
# Formats people have their FAQ in that are not read, and what to do instead.
_SAVE_AS_DOCX = "save it as .docx or .pdf (File > Save As, or Export) and import that"
_SAVE_AS_XLSX = "save it as .xlsx or .csv (File > Save As) and import that"
_NOT_READ = {
    ".doc": "a Word 97-2003 document: save it as .docx (Word or LibreOffice: Save As) and "
    "import that",
    ".odt": f"an OpenDocument text: {_SAVE_AS_DOCX}",
    ".rtf": f"a rich text document: {_SAVE_AS_DOCX}",
    ".pages": f"a Pages document: {_SAVE_AS_DOCX}",
    ".xls": f"an Excel 97-2003 workbook: {_SAVE_AS_XLSX}",
    ".ods": f"an OpenDocument spreadsheet: {_SAVE_AS_XLSX}",
    ".numbers": f"a Numbers spreadsheet: {_SAVE_AS_XLSX}",
    ".blob": "a Dialogflow CX agent exported as a blob: export it again as a JSON package (Agent "
    "settings > Export, Format: JSON package) and import that",
}


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith((".", "_")) for part in relative.parts)


# The start of an HTML document: a doctype or <html>, after an XML declaration and comments.
_HTML_START = re.compile(
    rb"\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*)*<(!doctype\s+html|html)[\s>]", re.I | re.S
)


def _file_head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(4096)
    except OSError:
        return b""


def _is_html_page(path: Path) -> bool:
    """Whether a file without a known extension is an HTML page, by its first bytes: a site
    mirrored without ``--adjust-extension`` saves its pages as ``articles/42-reset-your-pin``."""
    return _html_start(_file_head(path))


def _html_start(head: bytes) -> bool:
    return bool(_HTML_START.match(head.removeprefix(b"\xef\xbb\xbf")))


def _read_in_folder(name: str, head: Callable[[], bytes]) -> bool:
    """Whether a folder import (or an archive's) reads the file ``name``: Markdown, HTML, Word
    or PDF by its extension, or an HTML page without one of ours (``head()``: its first bytes).
    A name with a query (``index.html?page=2``, ``search?q=pin``) is a variant of another page,
    as a mirror saves them, and is not read; nor is a README."""
    suffix = PurePosixPath(name).suffix.lower()
    if name.lower() in SKIPPED_NAMES:
        return False
    if suffix in FOLDER_SUFFIXES:
        return True
    return suffix not in READERS and "?" not in name and _html_start(head())


def _folder_files(
    folder: Path,
    display: str,
    named: Callable[[Path], str],
    problems: Problems,
    kind: str,
    empty_ok: bool = False,
) -> list[tuple[Path, str]]:
    """(file, display name) for the Markdown, HTML and Word files in ``folder`` (``kind``: what
    the user named, a folder or an archive; none is a problem unless ``empty_ok``)."""
    found = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and not _is_hidden(p.relative_to(folder))
        and _read_in_folder(p.name, lambda p=p: _file_head(p))
    )
    if not found and not empty_ok:
        problems.add(
            display,
            1,
            f"{kind} has no Markdown (.md), HTML (.html), Word (.docx) or PDF (.pdf) files",
        )
    return [(p, named(p)) for p in found]


def expand_paths(
    paths: list[Path],
    problems: Problems,
    unpack_to: Path | None = None,
    unpacking: Callable[[int], AbstractContextManager[Progress]] | None = None,
) -> list[tuple[Path, str]]:
    """(file, display name) for every file to read; folders give their Markdown, HTML and Word
    documents, and so do zip archives, unpacked under ``unpack_to`` (app.kb.archives;
    ``unpacking(total bytes)`` gives a progress bar)."""
    files: list[tuple[Path, str]] = []
    for n, path in enumerate(paths):
        display = display_name(path)
        if path.is_dir() and _bot_reader(path) is not None:
            files.append((path, display))  # a bot's export, read as one
        elif path.is_dir():
            files.extend(_folder_files(path, display, display_name, problems, "folder"))
        elif not path.exists():
            problems.add(display, 1, "no such file or folder")
        elif (
            path.suffix.lower() == ".zip"
            and unpack_to is not None
            and (wanted := _bot_archive(path)) is not None
        ):
            folder = unpack_zip(path, display, unpack_to / str(n), wanted, problems, unpacking)
            if folder is not None:
                files.append((folder, display))
        elif path.suffix.lower() == ".zip" and unpack_to is not None:
            reported = len(problems.messages)
            folder = unpack_zip(
                path, display, unpack_to / str(n), _read_in_folder, problems, unpacking
            )
            if folder is not None:

                def named(p: Path, folder: Path = folder, display: str = display) -> str:
                    return f"{display}/{display_name(p.relative_to(folder))}"

                # an archive whose pages could not be unpacked has said so
                said = len(problems.messages) > reported
                files.extend(_folder_files(folder, display, named, problems, "archive", said))
        elif path.suffix.lower() in _NOT_READ:
            problems.add(display, 1, _NOT_READ[path.suffix.lower()])
        elif path.suffix.lower() not in READERS and not _is_html_page(path):
            supported = ", ".join(sorted([*READERS, ".zip"]))
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


BotRows = Callable[[Path, Callable[[Path], str], Problems], Iterator[SourceRow]]


def _bot_reader(folder: Path) -> BotRows | None:
    """How to read a folder that is a bot's export: a Dialogflow CX or ES agent, an Amazon Lex
    bot or a Rasa project (a CX agent has the ES agent's ``agent.json`` and ``intents/`` too)."""
    if dialogflow_cx.agent_root(folder) is not None:
        return dialogflow_cx.agent_rows
    if dialogflow_agent.agent_root(folder) is not None:
        return dialogflow_agent.agent_rows
    if lex_bot.bot_root(folder) is not None:
        return lex_bot.bot_rows
    if rasa_project.project_root(folder) is not None:
        return rasa_project.project_rows
    return None


def _bot_archive(path: Path) -> Callable[[str, Callable[[], bytes]], bool] | None:
    """Which members to unpack of an archive that is a bot's export, or None for another (its
    member names read once for all the kinds)."""
    names = zip_names(path)
    if (
        dialogflow_cx.zip_holds_agent(names)
        or dialogflow_agent.zip_holds_agent(names)
        or lex_bot.zip_holds_bot(names)
    ):
        return json_member
    if rasa_project.zip_holds_project(names):
        return rasa_project.wanted_member
    return None


def read_bot(folder: Path, display: str, problems: Problems) -> Iterator[SourceRow]:
    """A bot's exported folder (or the one its archive unpacked to), each file named as
    ``display`` and its path inside (``_bot_reader``)."""

    def named(path: Path) -> str:
        return f"{display}/{display_name(path.relative_to(folder))}"

    reader = _bot_reader(folder)
    if reader is None:  # an archive that unpacked nothing of it
        problems.add(display, 1, "holds no bot to read")
        return
    yield from reader(folder, named, problems)


def bytes_to_read(path: Path) -> int:
    """What reading ``path`` counts for the progress bar: a file's bytes, or those of the
    files of a folder read as one (a bot's export)."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def read_rows(
    files: list[tuple[Path, str]],
    problems: Problems,
    on_bytes: ByteCounter,
    sizes: Mapping[Path, int] | None = None,
) -> Iterator[SourceRow]:
    """The rows of ``files`` (as ``expand_paths`` gives them), each file's bytes counted by
    ``on_bytes`` as it is read; a folder (a bot's export) counts its ``sizes`` entry, or its
    files' bytes, once read."""
    for path, display in files:
        try:
            if path.is_dir():
                yield from group_questions(read_bot(path, display, problems), problems)
                on_bytes(sizes[path] if sizes and path in sizes else bytes_to_read(path))
                continue
            # a file of another extension got here as an HTML page (``_is_html_page``)
            reader = READERS.get(path.suffix.lower(), read_html_page)
            rows = reader(path, display, problems, on_bytes)
            yield from group_questions(rows, problems)
        except OSError as exc:
            problems.add(display, 1, f"cannot read: {exc.strerror or exc}")
        except RecursionError:  # thousands of unclosed elements or brackets
            problems.add(display, 1, "nested too deeply to read (unclosed tags or brackets?)")
