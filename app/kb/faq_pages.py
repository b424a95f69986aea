"""FAQ pages: one HTML or Markdown page holding many questions, read as one article each.

A page is an FAQ page when it says so or when its content is laid out as questions; the first
rule that applies decides:

1. schema.org ``FAQPage`` JSON-LD, which most FAQ pages carry for search engines: a ``<script
   type="application/ld+json">`` holding an object whose ``@type`` is (or lists) ``FAQPage``,
   at the top, in a list or in a ``@graph``, with ``mainEntity`` a list of ``Question``s. Each
   ``name`` is a title (HTML stripped) and its ``acceptedAnswer``'s ``text`` (HTML) the body. A
   script that is not valid JSON is ignored, with a note when it mentions ``FAQPage``.
2. Question headings: in the page's content (as app.kb.html_pages finds it), the shallowest of
   ``<h2>``, ``<h3>``, ``<h4>`` with at least 3 headings ending in "?", and no fewer of them
   than of its other headings (a document mostly of topic headings is no FAQ). Each of those
   starts an article whose body is what follows it up to the next heading of that level or a
   higher one. Content before the first is not an article; a heading of that level not ending
   in "?" ends an answer without starting one.
3. Accordions: ``<details>`` blocks with a ``<summary>`` (at least 3: an article with one or two
   accordions stays one article; a ``<details>`` inside an answer stays in it), else ``<dl>``
   lists with at least 3 ``<dt>`` ending in "?": a question ``<dt>`` is answered by the
   ``<dd>``s after it, and ``<dt>``s in a row share them (the first is the title, the others
   alternate questions).
4. Question paragraphs: at least 3 ``<p>`` that are each a question wholly in bold
   (``<p><strong>Do you ship abroad?</strong></p>``) or marked as one ("Q: Do you ship
   abroad?"), and no fewer than the content's headings below ``<h1>``, as FAQs are written
   without heading styles (in a Word document a bold one is a heading already). Each starts
   an article whose body is what follows it up to the next question paragraph or heading.

A page that is none of these and is long, a manual (a Word document or PDF of 1,000 words or
more, an HTML page or a Markdown file of 3,000), is read in sections instead (``section_rows``,
``markdown_section_rows``): one article per heading of its shallowest level with 3 or more.

Markdown follows rule 2 with ``##`` or ``###`` headings (ATX, outside fenced code; each has
the id its trailing ``{#id}`` or, as published Markdown does, its text gives it), else rule 4
with lines that start a paragraph and are a question wholly in bold (``**Do you ship
abroad?**``) or marked ("Q: ...?").

Every article gets the page's category and tags (``<meta>``, or the front matter with its
``published``), the file as source with ``#id`` when its question has an id, and a slug derived
from the question. A question's mark ("Q:", "Q3.") is taken off its title, and then an answer's
("A:") off its answer. An answer without text is an error on the question's line (the element's
start tag; for JSON-LD the line of its ``name``, else of the script). A page none of the rules
apply to is one article, as before.

Text no article holds (before the first question, under a topic heading, a ``<dt>`` that is
not a question, outside the accordions) is left out with one note per page: how many words,
and the line where each run of it starts (``left_out_runs``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from app.kb.html_pages import (
    PAGE_SKIP,
    Node,
    html_fragment,
    page_content,
    page_meta_fields,
    parse_html,
    write_body,
)
from app.kb.records import SourceRow
from app.kb.textfiles import Problems
from app.vocab import counted, listed

MIN_QUESTIONS = 3
# A question paragraph longer than this is a paragraph that asks something, not a question.
QUESTION_PARAGRAPH_MAX_CHARS = 200
HTML_LEVELS = (2, 3, 4)  # heading levels that may hold the questions, shallowest first
MARKDOWN_LEVELS = (2, 3)
# Front matter that belongs to one article, not to every question of a page.
ONE_ARTICLE_KEYS = ("slug", "questions", "taught_questions")
_QUESTION_MARKS = ("?", "\uff1f", "\u061f")  # ASCII, full-width (CJK), Arabic
_PERMALINK = " \t\u00b6\u00a7#"  # a heading's trailing permalink sign (Sphinx's ¶, ...)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SCHEMA = ("https://schema.org/", "http://schema.org/", "schema:")
_LD_JSON = "application/ld+json"

_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_HEADING_ID = re.compile(r"[ \t]*\{#([^\s}]+)[^}]*\}\Z")


@dataclass(slots=True)
class FaqItem:
    """A question and its answer as the page has them."""

    title: str
    body: str  # HTML as app.kb.html_pages writes it, or Markdown
    line: int
    empty: bool  # the answer has no text
    anchor: str | None = None  # the question's id on the page
    alternates: list[str] = field(default_factory=list)
    label: str | None = None  # said before each problem


def _question(text: str) -> str | None:
    """``text`` when it is a question (ends with a question mark, a permalink sign aside)."""
    text = text.rstrip(_PERMALINK)
    return text if text.endswith(_QUESTION_MARKS) else None


def _question_level(headings: Iterable[tuple[int, str]], levels: tuple[int, ...]) -> int | None:
    """The first of ``levels`` with at least MIN_QUESTIONS question headings (level, text),
    and at least as many questions as other headings: a document whose headings are mostly
    topics ("Card limits") is not an FAQ, and splitting it at its few questions would drop
    the topics' text."""
    questions, others = Counter(), Counter()
    for level, text in headings:
        if text.strip():
            (questions if _question(text) is not None else others)[level] += 1
    return next(
        (
            level
            for level in levels
            if questions[level] >= MIN_QUESTIONS and questions[level] >= others[level]
        ),
        None,
    )


# The marks some FAQs put before each question and its answer ("Q: How do I...?" or "Q3.",
# then "A: You can..."): a question's is taken off its title, and then its answer's off the
# start of the answer (as text, in a first paragraph, in bold).
_Q_MARK = re.compile(r"\A(?:q|question)\s*\d*\s*[:.)]\s+(?=\S)", re.IGNORECASE)
_A_MARK = re.compile(
    r"\A(\s*(?:<p>)?\s*)(?:<b>|<strong>|\*\*)?(?:a|answer)\s*[:.)]\s*(?:</b>|</strong>|\*\*)?\s*",
    re.IGNORECASE,
)


def _unmarked(title: str, body: str) -> tuple[str, str]:
    """``title`` and ``body`` without a question's and an answer's marks."""
    mark = _Q_MARK.match(title)
    if mark is None:
        return title, body
    return title[mark.end() :], _A_MARK.sub(r"\1", body, count=1)


def _rows(
    items: list[FaqItem],
    common: dict[str, object],
    source: str,
    display: str,
    problems: Problems,
    split: str = "FAQ page",
    unit: str = "question",
    left_out: list[tuple[int, int]] | None = None,
) -> list[SourceRow]:
    """One row per item, with the page's ``common`` fields; a note says the page was split
    (``split``: as what; ``unit``: what each item's title and alternates are), another what
    text no item holds (``left_out``: its runs, as ``left_out_runs`` counts them)."""
    rows = []
    for item in items:
        if item.empty:
            reason = f"question {item.title!r} has no answer"
            problems.add(display, item.line, f"{item.label}: {reason}" if item.label else reason)
            continue
        title, body = _unmarked(item.title, item.body)
        fields: dict[str, object] = {
            **common,
            "title": title,
            "body": body,
            "source": f"{source}#{item.anchor}" if item.anchor else source,
        }
        if item.alternates:
            fields["questions"] = item.alternates
        rows.append(SourceRow(display, item.line, fields, label=item.label))
    found = counted(sum(1 + len(item.alternates) for item in items), unit)
    problems.note(display, 1, f"{split}: {found} read as {counted(len(rows), 'article')}")
    if left_out:
        words = counted(sum(count for _, count in left_out), "word")
        lines = listed([str(line) for line, _ in left_out])
        where = f"line {lines}" if len(left_out) == 1 else f"lines {lines}"
        problems.note(
            display,
            left_out[0][0],
            f"{split}: {words} of text outside any {unit} left out ({where})",
        )
    return rows


def _words(text: str) -> int:
    """How many words ``text`` has (runs of non-space holding a letter or digit)."""
    return sum(1 for word in text.split() if any(c.isalnum() for c in word))


def left_out_runs(runs: Iterable[Iterable[tuple[int, str]]]) -> list[tuple[int, int]]:
    """(line, words) of each run of text that has words: where its first words are, how many
    it has. A run is (line, text) pieces in the page's order."""
    counted_runs = []
    for run in runs:
        found = [(line, _words(text)) for line, text in run]
        words = [(line, count) for line, count in found if count]
        if words:
            counted_runs.append((words[0][0], sum(count for _, count in words)))
    return counted_runs


# ----------------------------------------------------------------------------- HTML


def html_faq_rows(
    text: str, root: Node, display: str, problems: Problems, address: str | None = None
) -> list[SourceRow] | None:
    """The articles of the page ``text`` (parsed as ``root``), or None when it is not an FAQ
    page (see the module docstring); ``address`` is where the page was published, against
    which the JSON-LD answers' relative links resolve (the page's own already are)."""
    items = _json_ld_items(text, root, display, problems, address)
    left_out: list[tuple[int, int]] = []
    if items is None:
        content = page_content(root)
        found = (
            _heading_items(content)
            or _details_items(content)
            or _definition_items(content)
            or _paragraph_items(content)
        )
        if found is not None:
            items, left_out = found
    if not items:
        return None
    return _rows(items, page_meta_fields(root), display, display, problems, left_out=left_out)


class _Found(NamedTuple):
    """What a rule found on a page: the items, and the runs of text none of them holds as
    ``left_out_runs`` counts them."""

    items: list[FaqItem]
    left_out: list[tuple[int, int]]


# A long document (a Word manual) in sections: one article per section.
MIN_SECTIONS = 3
LONG_DOCUMENT_WORDS = 1000
# A web page is long when it is a manual on one page: a help centre's articles are shorter.
LONG_PAGE_WORDS = 3000
SECTION_LEVELS = (1, 2, 3)
SECTION_WORDS = 500  # at most, on average: an answer, not a chapter


def section_rows(
    root: Node, title: str, display: str, problems: Problems, long: int = LONG_DOCUMENT_WORDS
) -> list[SourceRow] | None:
    """The articles of a long document in sections, or None when it is not one: at least
    ``long`` words and at least ``MIN_SECTIONS`` headings at one of
    ``SECTION_LEVELS`` (the document's ``title`` is not among its headings): the shallowest
    such level whose sections hold at most ``SECTION_WORDS`` words on average, else the
    deepest (a manual's chapters are read by their sections). Each such heading starts an
    article titled by it, whose body is what follows up to the next heading of that level or a
    higher one; so does a heading of a higher level (a chapter's), whose own text before its
    first section is an article too; what precedes the first heading is an article with the
    document's title. A heading with no text of its own (a chapter straight into its first
    section, a section to come) is left out."""
    content = page_content(root)
    words = len(content.text().split())
    if words < long:
        return None
    headings = [node for node in _elements(content) if node.tag in _HEADINGS]
    level = _section_level(Counter(_HEADINGS[h.tag] for h in headings if h.text()), words)
    if level is None:
        return None
    answers: dict[Node, Node | None] = {}
    sections: list[tuple[Node, Node]] = []
    for heading in headings:
        if _HEADINGS[heading.tag] <= level:
            starts = bool(heading.text())
            answers[heading] = Node("#answer") if starts else None
            if starts:
                sections.append((heading, answers[heading]))
    lead = Node("#answer")
    splitter = _Splitter(content, answers, lead)
    splitter.visit(content)
    items = [_html_item(h.text(), answer, h.line, _anchor(h)) for h, answer in sections]
    opening = _html_item(title, lead, 1, None)
    kept = ([] if opening.empty else [opening]) + [item for item in items if not item.empty]
    common = page_meta_fields(root)
    return _rows(
        kept,
        common,
        display,
        display,
        problems,
        "document in sections",
        "section",
        left_out_runs(splitter.left_out),
    )


def _section_level(counts: Counter[int], words: int) -> int | None:
    """The heading level a document of ``words`` words with ``counts`` headings at each level
    is split at, or None: the shallowest of ``SECTION_LEVELS`` with ``MIN_SECTIONS`` headings
    whose sections average at most ``SECTION_WORDS`` words, else the deepest with enough (a
    manual whose chapters are each a manual of their own is read by their sections)."""
    levels = [n for n in SECTION_LEVELS if counts[n] >= MIN_SECTIONS]
    if not levels:
        return None
    return next((n for n in levels if words / counts[n] <= SECTION_WORDS), levels[-1])


def _elements(root: Node, leaves: frozenset[str] = frozenset()) -> Iterator[Node]:
    """The elements under ``root`` in document order, without page furniture and what is never
    content; ``leaves`` are yielded but not looked inside."""
    stack: list[Node | str] = list(reversed(root.children))
    while stack:
        item = stack.pop()
        if isinstance(item, str) or item.tag in PAGE_SKIP:
            continue
        yield item
        if item.tag not in leaves:
            stack.extend(reversed(item.children))


def _html_item(title: str, answer: Node, line: int, anchor: str | None, **kwargs) -> FaqItem:
    body = write_body(answer, PAGE_SKIP)
    return FaqItem(title, body, line, not parse_html(body).text(), anchor, **kwargs)


def _is(item: Node | str, *tags: str) -> bool:
    return isinstance(item, Node) and item.tag in tags


def _own_id(node: Node) -> str | None:
    return (dict(node.attrs).get("id") or "").strip() or None


def _anchor(node: Node) -> str | None:
    """The id a link to ``node`` uses: its own, else that of an ``<a id>`` or ``<a name>``
    inside it."""
    found = _own_id(node)
    for link in [] if found else node.find_all("a"):
        attrs = dict(link.attrs)
        found = (attrs.get("id") or attrs.get("name") or "").strip() or None
        if found:
            break
    return found


def _strings(
    item: Node | str, line: int, kept: frozenset[Node] | set[Node] = frozenset()
) -> Iterator[tuple[int, str] | None]:
    """(line, text) of each string in ``item`` in document order, with the line of the element
    holding it (``line`` for ``item``'s own); None for each element of ``kept``, which is not
    looked inside, nor are headings and what is never content."""
    stack: list[tuple[Node | str, int]] = [(item, line)]
    while stack:
        item, line = stack.pop()
        if isinstance(item, str):
            yield line, item
        elif item in kept:
            yield None
        elif item.tag not in _HEADINGS and item.tag not in PAGE_SKIP:
            stack.extend((child, item.line) for child in reversed(item.children))


def _outside(content: Node, kept: set[Node]) -> list[tuple[int, int]]:
    """The runs of text in ``content`` outside the elements of ``kept`` (see ``_Found``)."""
    runs: list[list[tuple[int, str]]] = [[]]
    for piece in _strings(content, content.line, kept):
        if piece is None:
            runs.append([])
        else:
            runs[-1].append(piece)
    return left_out_runs(runs)


def _heading_items(content: Node) -> _Found | None:
    """Rule 2: question headings."""
    headings = [node for node in _elements(content) if node.tag in _HEADINGS]
    level = _question_level(((_HEADINGS[h.tag], h.text()) for h in headings), HTML_LEVELS)
    if level is None:
        return None
    answers: dict[Node, Node | None] = {}  # heading ending an answer -> the answer it starts
    questions: list[tuple[Node, str, Node]] = []
    for heading in headings:
        if _HEADINGS[heading.tag] > level:
            continue
        question = _question(heading.text()) if _HEADINGS[heading.tag] == level else None
        answers[heading] = None if question is None else Node("#answer")
        if question is not None:
            questions.append((heading, question, answers[heading]))
    splitter = _Splitter(content, answers)
    splitter.visit(content)
    items = [_html_item(q, answer, h.line, _anchor(h)) for h, q, answer in questions]
    return _Found(items, left_out_runs(splitter.left_out))


class _Splitter:
    """Copies what follows each heading of ``answers`` (up to the next) into its answer, or
    drops it (None), keeping its text in ``left_out``, a run for each such heading and one for
    what precedes the first (when there is no ``lead``). An element holding one of the headings
    is copied in part: a shallow copy in each answer it contributes to, made when its first
    content is."""

    def __init__(
        self, content: Node, answers: dict[Node, Node | None], lead: Node | None = None
    ) -> None:
        self.answers = answers
        self.holders = _holders(content, answers)
        self.answer: Node | None = lead  # what precedes the first heading goes here
        self.path: list[Node] = []  # the holders around the current position
        self.copies: list[Node] = []  # their copies in the current answer, outermost first
        self.left_out: list[list[tuple[int, str]]] = [[]]

    def visit(self, node: Node) -> None:
        for child in node.children:
            if isinstance(child, Node) and child in self.answers:
                self.answer = self.answers[child]
                self.copies = []
                if self.answer is None:
                    self.left_out.append([])
            elif isinstance(child, Node) and child in self.holders:
                self.path.append(child)
                self.visit(child)
                self.path.pop()
                del self.copies[len(self.path) :]
            elif self.answer is not None:
                self._add(child)
            else:
                self.left_out[-1].extend(p for p in _strings(child, node.line) if p is not None)

    def _add(self, item: Node | str) -> None:
        assert self.answer is not None
        while len(self.copies) < len(self.path):
            original = self.path[len(self.copies)]
            copy = Node(original.tag, original.attrs, line=original.line)
            (self.copies[-1] if self.copies else self.answer).children.append(copy)
            self.copies.append(copy)
        (self.copies[-1] if self.copies else self.answer).children.append(item)


def _holders(content: Node, targets: Iterable[Node]) -> set[Node]:
    """The elements between ``content`` and each of ``targets``."""
    parents: dict[Node, Node] = {}
    for node in (content, *_elements(content)):
        for child in node.children:
            if isinstance(child, Node):
                parents[child] = node
    holders: set[Node] = set()
    for target in targets:
        node = parents.get(target)
        while node is not None and node is not content and node not in holders:
            holders.add(node)
            node = parents.get(node)
    return holders


def _details_items(content: Node) -> _Found | None:
    """Rule 3: ``<details>`` accordions."""
    found: list[tuple[Node, Node]] = []  # (details, summary)
    for node in _elements(content, leaves=frozenset({"details"})):
        if node.tag == "details":
            summary = next((c for c in node.children if _is(c, "summary")), None)
            if summary is not None:
                found.append((node, summary))
    if len(found) < MIN_QUESTIONS:  # one or two accordions in an article are part of it
        return None
    items = []
    for details, summary in found:
        answer = Node("#answer", children=[c for c in details.children if c is not summary])
        title = _question(summary.text()) or summary.text()
        items.append(_html_item(title, answer, summary.line, _own_id(details) or _anchor(summary)))
    return _Found(items, _outside(content, {details for details, _ in found}))


def _definition_items(content: Node) -> _Found | None:
    """Rule 3: ``<dl>`` lists of questions."""
    groups: list[tuple[list[Node], list[Node]]] = []  # (<dt>s in a row, the <dd>s after them)
    for dl in _elements(content, leaves=frozenset({"dl"})):
        if dl.tag != "dl":
            continue
        last: str | None = None
        for child in _list_entries(dl):
            if child.tag == "dt":
                if last != "dt":
                    groups.append(([], []))
                groups[-1][0].append(child)
            elif groups and last is not None:  # a <dd> before any <dt> answers nothing
                groups[-1][1].append(child)
            last = child.tag
    if sum(1 for terms, _ in groups for dt in terms if _question(dt.text())) < MIN_QUESTIONS:
        return None
    items = []
    kept: set[Node] = set()
    for terms, definitions in groups:
        asked = [(dt, q) for dt in terms if (q := _question(dt.text())) is not None]
        if not asked:
            continue
        kept.update(terms + definitions)
        # Each <dd> in a container of its own, so that two never share a paragraph.
        answer = Node("#answer", children=[Node("div", children=dd.children) for dd in definitions])
        first, title = asked[0]
        alternates = [q for _, q in asked[1:]]
        items.append(_html_item(title, answer, first.line, _anchor(first), alternates=alternates))
    return _Found(items, _outside(content, kept))


def _paragraph_items(content: Node) -> _Found | None:
    """Rule 4: question paragraphs."""
    elements = list(_elements(content, leaves=frozenset({"p"})))
    asked = [(p, q) for p in elements if p.tag == "p" and (q := _paragraph_question(p))]
    topics = sum(1 for node in elements if node.tag in _HEADINGS and node.tag != "h1")
    if len(asked) < max(MIN_QUESTIONS, topics):  # an <h1> is the page's title
        return None
    answers: dict[Node, Node | None] = {node: None for node in elements if node.tag in _HEADINGS}
    answers.update((p, Node("#answer")) for p, _ in asked)
    splitter = _Splitter(content, answers)
    splitter.visit(content)
    items = [_html_item(q, answers[p], p.line, _anchor(p)) for p, q in asked]
    return _Found(items, left_out_runs(splitter.left_out))


def _paragraph_question(paragraph: Node) -> str | None:
    """The question a paragraph is, wholly in bold or marked ("Q:"), else None."""
    text = paragraph.text().strip()
    if len(text) > QUESTION_PARAGRAPH_MAX_CHARS or _question(text) is None:
        return None
    if _Q_MARK.match(text):
        return text
    inside = [c for c in paragraph.children if not (isinstance(c, str) and not c.strip())]
    return text if len(inside) == 1 and _is(inside[0], "b", "strong") else None


def _list_entries(dl: Node) -> Iterator[Node]:
    """A ``<dl>``'s ``<dt>`` and ``<dd>`` elements, also those grouped in a ``<div>``."""
    for child in dl.children:
        if _is(child, "dt", "dd"):
            yield child
        elif _is(child, "div"):
            yield from (c for c in child.children if _is(c, "dt", "dd"))


# ----------------------------------------------------------------------------- JSON-LD


def _json_ld_items(
    text: str, root: Node, display: str, problems: Problems, address: str | None
) -> list[FaqItem] | None:
    """Rule 1: the questions of the page's FAQPage JSON-LD, or None when it has none."""
    items: list[FaqItem] = []
    found = False
    for script in root.find_all("script"):
        kind = (dict(script.attrs).get("type") or "").split(";")[0].strip().lower()
        if kind != _LD_JSON:
            continue
        raw = "".join(child for child in script.children if isinstance(child, str))
        first_line = _start_line(text, raw, script.line)
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            if "FAQPage" in raw:
                line, reason = first_line, "nested too deeply"
                if isinstance(exc, json.JSONDecodeError):
                    line, reason = first_line + exc.lineno - 1, f"{exc.msg} (column {exc.colno})"
                problems.note(display, line, f"ignoring FAQPage JSON-LD, not valid JSON: {reason}")
            continue
        nodes = _nodes_by_id(data)
        for page in _faq_pages(data):
            entities = page.get("mainEntity")
            if isinstance(entities, dict):
                entities = [entities]
            if isinstance(entities, list) and entities:
                entities = [_resolved(entity, nodes) for entity in entities]
                found = True
                items.extend(
                    _entity_items(entities, raw, first_line, len(items), display, problems, address)
                )
    return items if found else None


def _start_line(text: str, raw: str, line: int) -> int:
    """The line of ``text`` on which ``raw``, the content of an element starting on ``line``,
    starts."""
    start = 0
    for _ in range(line - 1):
        start = text.find("\n", start) + 1
    pos = text.find(raw, start) if raw else -1
    return line if pos < 0 else line + text.count("\n", start, pos)


def _types(obj: dict) -> set[str]:
    kinds = obj.get("@type")
    names = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    found = set()
    for name in names:
        if isinstance(name, str):
            for prefix in _SCHEMA:
                name = name.removeprefix(prefix)
            found.add(name)
    return found


def _nodes_by_id(data: object) -> dict[str, dict]:
    """Every object of ``data`` that has an ``@id`` and more, by that id."""
    nodes: dict[str, dict] = {}
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, dict):
            node_id = value.get("@id")
            if isinstance(node_id, str) and len(value) > 1:
                nodes.setdefault(node_id, value)
            stack.extend(value.values())
    return nodes


def _resolved(entity: object, nodes: dict[str, dict]) -> object:
    """A reference (``{"@id": ...}`` alone, as Yoast SEO writes an FAQ page's questions) made
    the object it names elsewhere in the page's graph; anything else as it is."""
    if isinstance(entity, dict) and set(entity) == {"@id"}:
        return nodes.get(entity["@id"], entity) if isinstance(entity["@id"], str) else entity
    return entity


def _faq_pages(data: object) -> list[dict]:
    """Every object typed FAQPage in ``data``: itself, in a list, in a ``@graph`` or deeper."""
    pages = []
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(reversed(value))
        elif isinstance(value, dict):
            if "FAQPage" in _types(value):
                pages.append(value)
            else:
                stack.extend(reversed(list(value.values())))
    return pages


def _entity_items(
    entities: list,
    raw: str,
    first_line: int,
    before: int,
    display: str,
    problems: Problems,
    address: str | None,
) -> list[FaqItem]:
    """An FAQPage's ``mainEntity`` Questions; ``before`` questions were read already."""
    items = []
    searched = 0  # names are looked for in ``raw`` in order, to give each its line
    for number, entity in enumerate(entities, before + 1):
        label = f"FAQPage question {number}"
        if not isinstance(entity, dict):
            kind = type(entity).__name__
            problems.add(display, first_line, f"{label}: expected an object, found {kind}")
            continue
        name = entity.get("name")
        title = parse_html(name).text() if isinstance(name, str) else ""
        line = first_line
        if isinstance(name, str):
            pos, searched = _find_string(raw, name, searched)
            if pos >= 0:
                line = first_line + raw.count("\n", 0, pos)
        answer = entity.get("acceptedAnswer")
        if isinstance(answer, list):
            answer = next((a for a in answer if isinstance(a, dict)), None)
        answer_text = answer.get("text") if isinstance(answer, dict) else None
        body = html_fragment(answer_text, address) if isinstance(answer_text, str) else ""
        anchor = None
        for key in ("url", "@id"):
            value = entity.get(key)
            if anchor is None and isinstance(value, str) and "#" in value:
                anchor = value.split("#", 1)[1].strip() or None
        empty = not parse_html(body).text()
        items.append(FaqItem(title, body, line, empty, anchor, label=label))
    return items


def _find_string(raw: str, value: str, start: int) -> tuple[int, int]:
    """(position, end) of ``value`` as a JSON string in ``raw`` from ``start``; (-1, start)
    when it is spelled in a way not tried (escapes differ between writers)."""
    for ascii_only in (False, True):
        spelled = json.dumps(value, ensure_ascii=ascii_only)
        for needle in (spelled, spelled.replace("/", "\\/")):
            pos = raw.find(needle, start)
            if pos >= 0:
                return pos, pos + len(needle)
    return -1, start


# ----------------------------------------------------------------------------- Markdown


def markdown_faq_rows(
    body: str, first_line: int, fields: dict[str, object], display: str, problems: Problems
) -> list[SourceRow] | None:
    """The articles of a Markdown page whose ``body`` starts on ``first_line`` (after the front
    matter, read into ``fields``), or None when it is not an FAQ page."""
    lines = body.split("\n")
    headings = list(_markdown_headings(lines))
    level = _question_level(((lvl, text) for _, lvl, text, _ in headings), MARKDOWN_LEVELS)
    if level is None:
        found = _markdown_paragraph_items(lines, headings, first_line)
        if found is None:
            return None
        items, kept = found
    else:
        items, kept = [], set()
        for lvl, item, span in _markdown_sections(lines, headings, level, first_line):
            if lvl == level and (question := _question(item.title)) is not None:
                items.append(replace(item, title=question))
                kept.update(span)
    runs: list[list[tuple[int, str]]] = [[]]
    starts = {index for index, *_ in headings}
    for index, line in enumerate(lines):  # what no question holds, a run after each heading
        if index in kept or index in starts:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((first_line + index, line))
    return _markdown_rows(items, fields, display, problems, left_out=left_out_runs(runs))


def _markdown_sections(
    lines: list[str], headings: list[tuple[int, int, str, str | None]], level: int, first_line: int
) -> Iterator[tuple[int, FaqItem, range]]:
    """(level, item, span) for each heading at ``level`` or above: its text, the lines up to
    the next such heading, its line in the file (``first_line`` is the first of ``lines``) and
    its id; ``span``: the indexes of its lines in ``lines``, the heading's first."""
    bounds = [h for h in headings if h[1] <= level]
    ends = [index for index, *_ in bounds[1:]] + [len(lines)]
    for (index, lvl, text, anchor), end in zip(bounds, ends, strict=True):
        answer = "\n".join(lines[index + 1 : end]).strip()
        yield lvl, FaqItem(text, answer, first_line + index, not answer, anchor), range(index, end)


def _markdown_rows(
    items: list[FaqItem],
    fields: dict[str, object],
    display: str,
    problems: Problems,
    split: str = "FAQ page",
    unit: str = "question",
    left_out: list[tuple[int, int]] | None = None,
) -> list[SourceRow]:
    """The rows of a Markdown page's items, with the page's category, tags and state (the
    other arguments as ``_rows`` takes them)."""
    ignored = [key for key in ONE_ARTICLE_KEYS if key in fields]
    if ignored:
        keys = ", ".join(ignored)
        problems.note(display, 1, f"ignoring front matter {keys}: each {unit} is an article")
    common = {k: fields[k] for k in ("category", "tags", "published") if k in fields}
    source = fields.get("source")
    source = source if isinstance(source, str) else display
    return _rows(items, common, source, display, problems, split, unit, left_out)


def markdown_section_rows(
    body: str, first_line: int, fields: dict[str, object], display: str, problems: Problems
) -> list[SourceRow] | None:
    """The articles of a long Markdown page in sections (a manual on one page) whose ``body``
    starts on ``first_line``, its title in ``fields`` and out of the body, or None when it is
    not one: ``LONG_PAGE_WORDS`` words or more, split as ``section_rows`` splits an HTML page,
    at ``#`` to ``###`` headings outside fenced code."""
    title = fields.get("title")
    words = sum(1 for word in body.split() if any(c.isalnum() for c in word))
    if not isinstance(title, str) or words < LONG_PAGE_WORDS:
        return None
    lines = body.split("\n")
    headings = [h for h in _markdown_headings(lines) if h[1] in SECTION_LEVELS and h[2]]
    level = _section_level(Counter(level for _, level, _, _ in headings), words)
    if level is None:
        return None
    opening = "\n".join(lines[: next(h[0] for h in headings if h[1] <= level)]).strip()
    items = [FaqItem(title, opening, first_line, not opening, None)]
    items += [item for _, item, _ in _markdown_sections(lines, headings, level, first_line)]
    kept = [item for item in items if not item.empty]
    return _markdown_rows(kept, fields, display, problems, "document in sections", "section")


def _outside_code(lines: list[str]) -> Iterator[int]:
    """The indexes of the lines outside fenced code."""
    fence: str | None = None
    for index, line in enumerate(lines):
        opening = _FENCE.match(line)
        if fence is not None:
            if (
                opening
                and opening.group(1)[0] == fence[0]
                and len(opening.group(1)) >= len(fence)
                and not line[opening.end() :].strip()
            ):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        yield index


def _markdown_headings(lines: list[str]) -> Iterator[tuple[int, int, str, str | None]]:
    """(line index, level, text, id) of each ATX heading outside fenced code: its own
    ``{#id}``, else the id the page gets from its text where it is published (``heading_id``)."""
    seen: Counter[str] = Counter()
    for index in _outside_code(lines):
        heading = _ATX.fullmatch(lines[index])
        if heading:
            text = (heading.group(2) or "").strip()
            explicit = _HEADING_ID.search(text)
            if explicit:
                text = text[: explicit.start()].rstrip()
                anchor: str | None = explicit.group(1)
            else:
                anchor = heading_id(text, seen)
            yield index, len(heading.group(1)), text, anchor


_INLINE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")


def heading_id(text: str, seen: Counter[str]) -> str | None:
    """The id a Markdown heading gets from its text where Markdown is published (GitHub,
    GitLab, Docusaurus and most static sites): the text as read (a link's or image's words,
    no tags), in lower case, without punctuation or symbols, each space a hyphen; the second
    heading of the same id gets ``-1``, the third ``-2``. ``seen`` counts the page's ids so far.
    None for a heading with no letters or digits."""
    words = _TAG.sub("", _INLINE_LINK.sub(r"\1", text)).lower()
    kept = "".join(c for c in words if c in " -_" or unicodedata.category(c)[0] in "LNM")
    base = kept.strip().replace(" ", "-")
    if not base.strip("-_"):
        return None
    count = seen[base]
    seen[base] += 1
    return base if count == 0 else f"{base}-{count}"


def _markdown_paragraph_items(
    lines: list[str], headings: list[tuple[int, int, str, str | None]], first_line: int
) -> tuple[list[FaqItem], set[int]] | None:
    """Rule 4 in Markdown: question paragraphs (``**Do you ship abroad?**`` or ``Q: Do you
    ship abroad?`` on a line that starts a paragraph), at least 3 and no fewer than the
    headings below ``#``; each is answered by the lines up to the next one or a heading. With
    the items, the indexes of the lines they hold."""
    ends = {index for index, *_ in headings}
    asked = []
    for index in _outside_code(lines):
        starts = index == 0 or not lines[index - 1].strip() or index - 1 in ends
        question = _markdown_question(lines[index]) if starts and index not in ends else None
        if question is not None:
            asked.append((index, question))
    if len(asked) < max(MIN_QUESTIONS, sum(1 for _, level, *_ in headings if level > 1)):
        return None
    bounds = sorted(ends | {index for index, _ in asked}) + [len(lines)]
    items, kept = [], set()
    for index, question in asked:
        end = next(bound for bound in bounds if bound > index)
        answer = "\n".join(lines[index + 1 : end]).strip()
        items.append(FaqItem(question, answer, first_line + index, not answer, None))
        kept.update(range(index, end))
    return items, kept


_MARKDOWN_BOLD = re.compile(r"(\*\*|__)(.+?)\1")


def _markdown_question(line: str) -> str | None:
    """The question a line is, wholly in bold or marked ("Q:"), else None."""
    text = line.strip()
    bold = _MARKDOWN_BOLD.fullmatch(text)
    if bold is not None:
        text = bold.group(2).strip()
    elif not _Q_MARK.match(text):
        return None
    return _question(text) if len(text) <= QUESTION_PARAGRAPH_MAX_CHARS else None
