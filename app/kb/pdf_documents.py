"""PDF documents (``.pdf``) as a source: a manual or an FAQ saved as PDF from Word, a browser
or a help-centre tool.

A PDF keeps where each character is drawn and in which font, not paragraphs or headings. Its
text, read with pdfminer.six in reading order (one column after the other), is laid out again as
a page of HTML and read like any page (app.kb.html_pages), as a Word document is
(app.kb.word_documents): one article, one per question when it is laid out as an FAQ, or one per
section when it is a long document in sections, a manual (app.kb.faq_pages). How the page is
rebuilt:

- a line's size is the size most of its characters have, and it is bold when all of them are
  in a bold face (``Arial-BoldMT``, ``Calibri,Bold``); the body size is the size most of the
  document's characters have; bold and italic words are kept as such;
- lines of one look follow each other in a paragraph until the gap between two is wider than
  the document's usual line spacing, for their size (``PARAGRAPH_GAP`` times it), the next line
  is indented, the line before ends a sentence well short of the right margin, or the next
  starts a list item; a paragraph goes on over a page or column break when it has not ended a
  sentence; a word broken over two lines with a hyphen is joined again;
- a paragraph of at most ``HEADING_MAX_WORDS`` words in a size ``HEADING_SCALE`` times the
  body's or more is a heading: ``<h2>`` for the largest size of the document's headings,
  ``<h3>`` for the next..., as ``<h1>`` is a web page's title; a short paragraph wholly in bold
  at a smaller size is a heading one level below those, unless it ends as a sentence does (the
  Word reader's rule);
- a paragraph starting with a bullet (``•``, Word's Symbol bullets, or a small shape drawn
  just before its first line, as browsers draw theirs) is a list item, and so is one starting
  with a dash or a number (``-``, ``1.``, ``b)``) after a sentence has ended or in a list;
- the title is the document's ``Title`` property (not a file name), else the first page's
  heading in the largest size when no other paragraph has that size, else the file's name; a
  first heading that is the title, or the title's own part beside a site's name (a web page
  printed), is the title and is not kept in the body;
- a line in the top or bottom tenth of the pages that recurs at that edge of at least half of
  them (its numbers aside), a running head or foot, is left out, and so is a page number there;
  so is a table of contents: its entries (a heading, dot leaders, a page number) and the short
  heading before them.

Text drawn inside a form (an XObject) covering half a page or more is the page's, as some PDF
printers draw each page as one form; a smaller form's (a chart's labels) is not. Tables are
rebuilt as tables (``_with_tables``: rows of cells side by side on one baseline, in the same
columns, with short cells; a drawn border between two cells keeps them apart); one without
borders whose cells stand too close to be told apart, or whose rows change columns, stays lines
of text. Links to web and e-mail addresses are kept (the link annotations over the words);
links within the document, images and notes at the foot of a page are not.
Each page is one line of the page, so a message's line number is the PDF's page number. A PDF
protected by a password or damaged is an error; one with no text (pages scanned as pictures)
is skipped with a warning, as there is nothing to import; each says what to do.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path

from app.kb.html_pages import title_part
from app.kb.word_documents import bold_heading

# A table's cells: side by side at least this many type sizes apart, a median of at most this
# many words a line (running text in columns has more), and a cell's lines at most this many
# type sizes apart.
TABLE_GAP = 0.5
TABLE_CELL_WORDS = 6
TABLE_LINE_PITCH = 2.2
# A table's border between cells: an upright rule at most this wide and at least this high.
RULE_MAX_WIDTH = 2.0
RULE_MIN_HEIGHT = 4.0
# A heading is drawn at least this much larger than the body text, and is short.
HEADING_SCALE = 1.15
HEADING_MAX_WORDS = 25
# A gap between two lines wider than this many times the document's usual line spacing ends a
# paragraph (paragraph spacing); lines of one paragraph sit at the usual spacing, give or take.
PARAGRAPH_GAP = 1.25
# The usual spacing is read off a document seen this many times, else taken as single spacing
# (1.2 times the type's size).
MIN_SPACINGS = 3
SINGLE_SPACING = 1.2
# A line ending a sentence this share of the column short of the right margin ends a paragraph
# (for documents without space between paragraphs).
SHORT_LINE = 0.15
# Running heads and feet live in the top and bottom tenth of a page.
MARGIN_SHARE = 0.1
# Faces by their names (a subset's "BAAAAA+" prefix aside): "Arial-BoldMT", "Calibri,Italic".
_BOLD_FACE = re.compile(r"bold|black|heavy|semibold|demibold|extrabold", re.IGNORECASE)
_ITALIC_FACE = re.compile(r"italic|oblique", re.IGNORECASE)
# A line ending so ends its sentence (or leads in to a list): a paragraph may end there.
_ENDED = (".", "!", "?", ":", "\u3002", "\uff1f", "\uff01")
_BROKEN_WORD = re.compile(r"-((?:</[abi]>)*)\Z")
# A link's target kept in the page: the web and e-mail addresses a reader can follow.
_LINK_TARGET = re.compile(r"(?:https?://|mailto:)\S+\Z", re.IGNORECASE)
_EMPTY_LINK = re.compile(r'<a href="[^"]*"></a>')
_LAST_LINK = re.compile(r'<a href="([^"]*)">(?:(?!<a ).)*</a>\Z')
_FIRST_LINK = re.compile(r'<a href="([^"]*)">')
# List items start with a bullet (Word's come from its Symbol and Wingdings fonts, in Unicode's
# private area), else a dash or a number, which start one only where a sentence has ended or a
# list is going on (a line of a paragraph may start with a dash or a number too).
_BULLET = re.compile(
    "[\u2022\u2023\u25aa\u25ab\u25cf\u25cb\u25a0\u25a1\u25e6\uf0a7\uf0b7\uf0d8]\\s+"
)
_DASH = re.compile("[-*\u2013\u2014]\\s+")
_NUMBER = re.compile(r"(?:\d{1,2}|[a-z])[.)]\s+")
_PAGE_NUMBER = re.compile(
    r"(?:page\s*)?[-\u2013(]?\s*#\s*[-\u2013)]?(?:\s*(?:of|/)\s*#)?", re.IGNORECASE
)
# An entry of a table of contents: a heading, dot leaders, its page number.
_CONTENTS = re.compile(r"(?:\.\s?){4,}\s*\d+\Z|\u2026\s*\d+\Z")
CONTENTS_HEADING_WORDS = 4
# A shape at most this wide and high (points) just before a line is a bullet drawn, not typed.
BULLET_MAX = 8
# Typeset ligatures ("ﬁ" in "ﬁle") as their letters, so that words are spelt as typed.
_LIGATURES = str.maketrans(
    {chr(c): unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)}
)
_FILE_NAME = re.compile(
    r"\.(?:docx?|odt|rtf|pdf|pages|txt|html?)\s*\Z|\AMicrosoft Word - |\Auntitled\Z", re.IGNORECASE
)
# pdfminer logs each damaged object it works round; what the import cannot read is its error.
logging.getLogger("pdfminer").setLevel(logging.ERROR)


_Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in points, y upwards


class NotAPdf(ValueError):
    """The file cannot be read as a PDF; the message says why."""


class PdfWithoutText(NotAPdf):
    """The PDF holds no text, only pictures of pages."""


@dataclass
class _Line:
    page: int
    x0: float
    x1: float
    y0: float  # the line's bottom: PDF's y grows upwards
    size: float
    bold: bool  # wholly in bold
    text: str
    html: str  # the text with its bold and italic runs marked
    table: bool = False  # a whole table: ``html`` is its <table>


@dataclass
class _Paragraph:
    page: int  # where it starts
    size: float
    bold: bool  # wholly in bold
    text: str = ""
    html: str = ""
    kind: str = "p"  # "p", "h2".."h6", "ul", "ol"

    def add(self, line: _Line) -> None:
        if self.text.endswith("-") and self.text[-2:-1].isalpha() and line.text[:1].islower():
            self.text = self.text[:-1] + line.text  # a word broken over two lines
            self.html = _joined(_BROKEN_WORD.sub(r"\1", self.html), "", line.html)
        else:
            self.text = f"{self.text} {line.text}" if self.text else line.text
            self.html = _joined(self.html, " ", line.html) if self.html else line.html


def _joined(html: str, space: str, more: str) -> str:
    """Two lines' HTML; a link going on from one line to the next stays one link."""
    ending, starting = _LAST_LINK.search(html), _FIRST_LINK.match(more)
    if ending and starting and ending.group(1) == starting.group(1):
        return f"{html[: -len('</a>')]}{space}{more[starting.end() :]}"
    return f"{html}{space}{more}"


def pdf_page(path: Path, on_page: Callable[[int, int], None] | None = None) -> str:
    """The PDF at ``path`` as a page of HTML, a page of the PDF per line; ``on_page(done,
    pages)`` after each page is read."""
    lines, heights, title = _read(path, on_page)
    if not lines:
        raise PdfWithoutText(
            "a PDF with no text, only pictures of its pages (a scanned document): run it "
            "through text recognition (OCR) first, or import the document it was made from"
        )
    lines = _without_contents(_without_running_heads(lines, heights))
    body_size = _most_common(((line.size, len(line.text)) for line in lines), default=0.0)
    lines = [
        line
        for _, page in itertools.groupby(lines, key=lambda line: line.page)
        for line in _with_tables(list(page))
    ]
    paragraphs = _paragraphs(lines, body_size)
    title = _classify(paragraphs, body_size, title) or path.stem
    return _write(title, paragraphs)


def _read(
    path: Path, on_page: Callable[[int, int], None] | None
) -> tuple[list[_Line], list[float], str | None]:
    """The document's text lines in reading order, each page's height, its Title property."""
    # imported here, when a PDF is read: 0.1 s that no other import pays
    from pdfminer.converter import PDFPageAggregator
    from pdfminer.layout import LAParams, LTChar, LTCurve, LTFigure, LTTextBox, LTTextLine
    from pdfminer.pdfdocument import PDFDocument, PDFPasswordIncorrect
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdfparser import PDFParser
    from pdfminer.utils import decode_text

    lines: list[_Line] = []
    heights: list[float] = []
    title = None
    try:
        with path.open("rb") as handle:
            document = PDFDocument(PDFParser(handle))
            for info in document.info:
                value = info.get("Title") if isinstance(info, dict) else None
                if isinstance(value, bytes):
                    title = " ".join(decode_text(value).split()) or None
            pages = list(PDFPage.create_pages(document))
            resources = PDFResourceManager()
            # text inside drawn forms too: some programs draw each page as one form
            device = PDFPageAggregator(resources, laparams=LAParams(all_texts=True))
            interpreter = PDFPageInterpreter(resources, device)
            for number, page in enumerate(pages, 1):
                interpreter.process_page(page)
                layout = device.get_result()
                links = _page_links(page)
                heights.append(layout.height)
                items = list(_page_items(layout, layout.width * layout.height, LTFigure))
                bullets = [
                    i.bbox for i in items if isinstance(i, LTCurve) and _bullet_sized(i.bbox)
                ]
                rules = [i.bbox for i in items if isinstance(i, LTCurve) and _upright_rule(i.bbox)]
                for box in items:
                    for row in box if isinstance(box, LTTextBox) else ():
                        if not isinstance(row, LTTextLine):
                            continue
                        for part in _between_rules(list(row), rules, LTChar):
                            line = _line(number, part, LTChar, links)
                            if line is not None:
                                lines.append(_bulleted(line, row.bbox, bullets))
                if on_page is not None:
                    on_page(number, len(pages))
    except PDFPasswordIncorrect:
        raise NotAPdf(
            "a PDF protected by a password: save a copy without one (print it to PDF, or "
            "remove the password in the program that made it) and import that"
        ) from None
    except Exception as exc:  # pdfminer raises many kinds (its own, KeyError, zlib.error...)
        reason = str(exc).strip() or type(exc).__name__
        raise NotAPdf(f"not a PDF, or a damaged one ({reason})") from exc
    if title and _FILE_NAME.search(title):
        title = None
    return lines, heights, title


def _page_links(page) -> list[tuple[_Box, str]]:
    """Where the page's links to web and e-mail addresses are, and their targets: its link
    annotations whose action opens an address (links within the document are not kept). None
    on a rotated page, whose annotations are placed before the rotation and its text after; a
    damaged annotation is no link, and the page's text is read all the same."""
    from pdfminer.pdftypes import resolve1
    from pdfminer.psparser import PSLiteral

    def name(value: object) -> str | None:
        value = resolve1(value)
        return value.name if isinstance(value, PSLiteral) else None

    def link(annotation: object) -> tuple[_Box, str] | None:
        annotation = resolve1(annotation)
        if not isinstance(annotation, dict) or name(annotation.get("Subtype")) != "Link":
            return None
        action = resolve1(annotation.get("A"))
        if not isinstance(action, dict) or name(action.get("S")) != "URI":
            return None
        target = resolve1(action.get("URI"))
        if isinstance(target, bytes):
            target = target.decode("utf-8", "replace")
        rect = resolve1(annotation.get("Rect"))
        numbers = [resolve1(n) for n in rect] if isinstance(rect, list) else []
        if (
            not isinstance(target, str)
            or not _LINK_TARGET.match(target.strip())
            or len(numbers) != 4
            or not all(isinstance(n, int | float) for n in numbers)
        ):
            return None
        x0, y0, x1, y1 = numbers
        return (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)), target.strip()

    links = []
    try:
        annotations = [] if resolve1(getattr(page, "rotate", 0)) else resolve1(page.annots)
    except Exception:  # pdfminer raises many kinds on a damaged object
        annotations = []
    for annotation in annotations if isinstance(annotations, list) else ():
        try:
            found = link(annotation)
        except Exception:
            found = None
        if found is not None:
            links.append(found)
    return links


def _link_at(links: list[tuple[_Box, str]], box: _Box) -> str | None:
    """The target of the link the middle of ``box`` (a character) lies in."""
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    for (x0, y0, x1, y1), target in links:
        if x0 <= x <= x1 and y0 <= y <= y1:
            return target
    return None


def _page_items(container, page_area: float, figure_type) -> Iterator:
    """The layout items of a page, and of a drawn form (a figure) that covers half of it or more,
    as a program that draws each page as one form writes it; the text of a smaller figure (a
    chart's labels, a diagram's) is not the page's."""
    for item in container:
        if isinstance(item, figure_type):
            if item.width * item.height * 2 >= page_area:
                yield from _page_items(item, page_area, figure_type)
        else:
            yield item


def _upright_rule(box: _Box) -> bool:
    """Whether a drawn shape is an upright rule (a table's border between two cells)."""
    return box[2] - box[0] <= RULE_MAX_WIDTH and box[3] - box[1] >= RULE_MIN_HEIGHT


def _between_rules(items: list, rules: list[_Box], char_type) -> list[list]:
    """A line's characters (and pdfminer's spaces) in the parts an upright rule drawn across it
    separates: pdfminer joins two table cells' text into one line when they are close."""
    if not rules:
        return [items]
    parts: list[list] = [[]]
    previous = None
    for item in items:
        if isinstance(item, char_type) and item.get_text().strip():
            if previous is not None and any(
                previous.x1 - 0.5 <= (x0 + x1) / 2 <= item.x0 + 0.5
                and y0 <= (item.y0 + item.y1) / 2 <= y1
                for x0, y0, x1, y1 in rules
            ):
                parts.append([])
            previous = item
        parts[-1].append(item)
    return parts


def _line(page: int, row, char_type, links: list[tuple[_Box, str]] | None = None) -> _Line | None:
    """The text line of pdfminer's layout whose characters (and spaces) are ``row``, or None
    when it has no text; its characters inside one of ``links`` are that link's words."""
    sizes: Counter[float] = Counter()
    bold = 0
    drawn: list[_Box] = []  # the boxes of the characters that show
    runs: list[tuple[str, bool, bool, str | None]] = []  # text, bold, italic, link
    look: tuple[bool, bool, str | None] = (False, False, None)
    for item in row:
        text = item.get_text().translate(_LIGATURES)
        if isinstance(item, char_type):  # else a space pdfminer put between words
            face = item.fontname.split("+")[-1]  # without a subset's prefix ("BAAAAA+")
            link = _link_at(links, item.bbox) if links else None
            look = (bool(_BOLD_FACE.search(face)), bool(_ITALIC_FACE.search(face)), link)
            if text.strip():
                drawn.append(item.bbox)
                sizes[round(item.size * 2) / 2] += 1
                bold += look[0]
        if runs and runs[-1][1:] == look:
            runs[-1] = (runs[-1][0] + text, *look)
        else:
            runs.append((text, *look))
    text = " ".join("".join(run for run, *_ in runs).split())
    if not drawn or not text:
        return None
    parts = []
    for link, group in itertools.groupby(runs, key=lambda run: run[3]):
        inner = "".join(_marked(*run[:3]) for run in group)
        parts.append(f'<a href="{escape(link)}">{inner}</a>' if link else inner)
    html = " ".join("".join(parts).split())
    for closing in ("</i>", "</b>", "</a>"):  # inside out
        html = html.replace(f" {closing}", f"{closing} ")
    return _Line(
        page,
        min(box[0] for box in drawn),
        max(box[2] for box in drawn),
        min(box[1] for box in drawn),
        sizes.most_common(1)[0][0],
        bold == len(drawn),
        text,
        html.strip(),
    )


def _bullet_sized(box: _Box) -> bool:
    """Whether a shape is the size of a drawn bullet (a browser draws its discs and squares)."""
    width, height = box[2] - box[0], box[3] - box[1]
    return 1 < width <= BULLET_MAX and 1 < height <= BULLET_MAX


def _bulleted(line: _Line, box: _Box, bullets: list[_Box]) -> _Line:
    """``line``, marked as a list item's first line when a drawn bullet stands just before it."""
    x0, y0, _x1, y1 = box
    for _, bottom, right, top in bullets:
        if right <= x0 + 1 and x0 - right <= 2 * line.size and y0 <= (bottom + top) / 2 <= y1:
            return replace(line, text=f"\u2022 {line.text}", html=f"\u2022 {line.html}")
    return line


def _marked(text: str, bold: bool, italic: bool) -> str:
    if not text.strip():
        return escape(text)
    html = escape(text)
    if italic:
        html = f"<i>{html}</i>"
    return f"<b>{html}</b>" if bold else html


def _most_common(weighted: Iterable[tuple[float, int]], default: float) -> float:
    counts: Counter[float] = Counter()
    for value, weight in weighted:
        counts[value] += weight
    return counts.most_common(1)[0][0] if counts else default


def _without_running_heads(lines: list[_Line], heights: list[float]) -> list[_Line]:
    """``lines`` without running heads and feet, and page numbers, in the pages' margins: a
    line there is one when it recurs at the same edge (top or bottom) of at least half of the
    pages (and two), its numbers aside."""

    def edge(line: _Line) -> str | None:
        height = heights[line.page - 1]
        if line.y0 > height * (1 - MARGIN_SHARE):
            return "top"
        return "bottom" if line.y0 < height * MARGIN_SHARE else None

    def key(line: _Line) -> str:
        return re.sub(r"\d+", "#", line.text.lower())

    places = [(line, edge(line), key(line)) for line in lines]
    pages: dict[tuple[str, str], set[int]] = {}
    for line, side, text in places:
        if side is not None:
            pages.setdefault((side, text), set()).add(line.page)
    recurring = max(2, math.ceil(len(heights) / 2))
    return [
        line
        for line, side, text in places
        if side is None or (len(pages[side, text]) < recurring and not _PAGE_NUMBER.fullmatch(text))
    ]


def _without_contents(lines: list[_Line]) -> list[_Line]:
    """``lines`` without a table of contents: its entries (a heading, dot leaders, a page
    number) and, before two or more of them, its own short heading ("Contents")."""
    entry = [bool(_CONTENTS.search(line.text)) for line in lines]
    heading = [
        not entry[i]
        and i + 2 < len(lines)
        and entry[i + 1]
        and entry[i + 2]
        and len(lines[i].text.split()) <= CONTENTS_HEADING_WORDS
        for i in range(len(lines))
    ]
    return [
        line for line, *left_out in zip(lines, entry, heading, strict=True) if not any(left_out)
    ]


def _paragraphs(lines: list[_Line], body_size: float) -> list[_Paragraph]:
    """``lines`` joined into paragraphs. The usual spacing is the commonest distance between
    two lines of body text that follow each other on a page, when it is seen often enough to
    be the spacing within paragraphs rather than between them."""
    distances = Counter(
        round((a.y0 - b.y0) * 2) / 2
        for a, b in zip(lines, lines[1:], strict=False)
        if a.page == b.page and a.size == b.size == body_size and a.y0 > b.y0
    )
    spacing, seen = distances.most_common(1)[0] if distances else (0.0, 0)
    # per point of the type's size; too few lines to tell, single spacing
    pitch = spacing / body_size if seen >= MIN_SPACINGS and body_size > 0 else SINGLE_SPACING
    right = max((line.x1 for line in lines), default=0.0)
    paragraphs: list[_Paragraph] = []
    current: _Paragraph | None = None
    previous: _Line | None = None
    for line in lines:
        if (
            current is None
            or previous is None
            or _starts_paragraph(previous, line, pitch, right, current)
        ):
            current = _Paragraph(line.page, line.size, line.bold)
            if line.table:
                current.kind = "table"
            paragraphs.append(current)
        current.add(line)
        previous = line
    return paragraphs


def _starts_paragraph(
    previous: _Line, line: _Line, pitch: float, right: float, current: _Paragraph
) -> bool:
    """Whether ``line`` starts a paragraph after ``previous``, the last line of ``current``."""
    if abs(line.size - previous.size) > 0.5 or line.bold != previous.bold:
        return True
    if line.table or previous.table:
        return True
    ended = previous.text.endswith(_ENDED)
    in_list = _list_mark(current.text) is not None
    if _BULLET.match(line.text) or (ended or in_list) and _list_mark(line.text):
        return True
    gap = previous.y0 - line.y0
    if line.page != previous.page or gap < -line.size / 2:  # a page or a column ends
        return ended
    if gap > pitch * line.size * PARAGRAPH_GAP + 0.5:  # spacing grows with the type's size
        return True
    if line.x0 > previous.x0 + line.size and not in_list:
        return True  # a first line indented
    return ended and previous.x1 < right - (right - previous.x0) * SHORT_LINE


def _with_tables(lines: list[_Line]) -> list[_Line]:
    """A page's ``lines`` with each table's lines replaced by one line holding the table, where
    its first line was. A table is two or more rows, one after the other, each of two or more
    lines side by side on one baseline (a cell's first line each), whose cells start in the
    same columns, with short cells (``TABLE_CELL_WORDS`` words a line at most, as a median):
    two columns of running text are not a table. A cell's further lines are the lines below
    its first, inside its column, down to the next row; a line across columns ends the table."""
    rows = _rows(lines)
    below = sorted(lines, key=lambda line: -line.y0)
    in_rows = {id(line) for row in rows for line in row}
    tables: list[list[list[_Line]]] = []
    index = 0
    while index < len(rows) - 1:
        table = _table_from(rows, index, below, in_rows)
        if table is None:
            index += 1
            continue
        tables.append(table)
        index += len(table)
    if not tables:
        return lines
    replaced: dict[int, _Line | None] = {}
    order = {id(line): index for index, line in enumerate(lines)}
    for table in tables:
        members = [line for row in table for cell in row for line in cell]
        cells = [[_cell_html(cell) for cell in row] for row in table]
        header = all(line.bold for cell in table[0] for line in cell[:1] if cell)
        html = _table_html(cells, header)
        first = min(members, key=lambda line: order[id(line)])
        replaced.update({id(line): None for line in members})
        replaced[id(first)] = replace(
            first,
            x0=min(line.x0 for line in members),
            x1=max(line.x1 for line in members),
            y0=min(line.y0 for line in members),
            bold=False,
            text=" ".join(line.text for line in members),
            html=html,
            table=True,
        )
    out = []
    for line in lines:
        if id(line) in replaced:
            if replaced[id(line)] is not None:
                out.append(replaced[id(line)])
        else:
            out.append(line)
    return out


def _rows(lines: list[_Line]) -> list[list[_Line]]:
    """The page's rows of lines side by side on one baseline, top down, each left to right:
    only those of two lines or more that do not overlap and stand apart."""
    ordered = sorted(lines, key=lambda line: (-line.y0, line.x0))
    rows: list[list[_Line]] = []
    group: list[_Line] = []
    for line in ordered:
        if group and abs(group[0].y0 - line.y0) <= group[0].size * 0.25:
            group.append(line)
            continue
        if len(group) >= 2:
            rows.append(group)
        group = [line]
    if len(group) >= 2:
        rows.append(group)
    return [
        row
        for row in rows
        if all(b.x0 >= a.x1 + a.size * TABLE_GAP for a, b in zip(row, row[1:], strict=False))
    ]


def _table_from(
    rows: list[list[_Line]], start: int, below: list[_Line], in_rows: set[int]
) -> list[list[list[_Line]]] | None:
    """The table whose first row is ``rows[start]``, as rows of cells of lines, or None
    (``below``: the page's lines top down; ``in_rows``: the ids of the lines of ``rows``). Its
    columns are where the rows' cells lie: each cell of a row overlaps one column, its own
    (left-aligned, centred or right-aligned alike), and the columns never overlap."""
    columns = [[line.x0, line.x1] for line in rows[start]]

    def overlapped(line: _Line) -> list[int]:
        return [n for n, (x0, x1) in enumerate(columns) if line.x0 < x1 and x0 < line.x1]

    def column(line: _Line) -> int | None:
        found = overlapped(line)
        return found[0] if len(found) == 1 else None

    anchors: list[list[_Line]] = [rows[start]]
    for row in rows[start + 1 :]:
        places = [column(line) for line in row]
        if None in places or len(set(places)) != len(places):
            break
        widened = [list(bounds) for bounds in columns]
        for line, place in zip(row, places, strict=True):
            widened[place] = [min(widened[place][0], line.x0), max(widened[place][1], line.x1)]
        if any(a[1] > b[0] for a, b in zip(widened, widened[1:], strict=False)):
            break
        columns[:] = widened
        anchors.append(row)
    if (
        len(anchors) < 2
        or _median_words(line for row in anchors for line in row) > TABLE_CELL_WORDS
    ):
        return None  # before the rows' further lines are looked for: two columns of text
    table: list[list[list[_Line]]] = []
    for row in anchors:
        cells: list[list[_Line]] = [[] for _ in columns]
        for line in row:
            cells[column(line)].append(line)  # type: ignore[index]
        table.append(cells)
    for number in range(len(table) - 1):
        if not _between_rows(below, table, number, in_rows, column):
            del table[number + 1 :]  # a line across the columns: the table ends above it
            break
    if len(table) < 2:
        return None
    bottom = _last_row_lines(below, table, in_rows, column)
    following = rows[start + len(table)] if start + len(table) < len(rows) else None
    if following is not None:
        baselines = [_baseline(cells) for cells in table]
        spacing = max(a - b for a, b in zip(baselines, baselines[1:], strict=False))
        near = max(following[0].size * TABLE_LINE_PITCH, spacing * 1.5)
        if min(bottom, baselines[-1]) - following[0].y0 <= near:
            return None  # a row in other columns goes on right below: not a table understood
    if _median_words(line for row in table for cell in row for line in cell) > TABLE_CELL_WORDS:
        return None
    return table


def _median_words(lines: Iterable[_Line]) -> int:
    words = sorted(len(line.text.split()) for line in lines)
    return words[len(words) // 2]


def _baseline(cells: list[list[_Line]]) -> float:
    return max(cell[0].y0 for cell in cells if cell)


def _between_rows(below, table, number: int, in_rows: set[int], column) -> bool:
    """Gives the lines between rows ``number`` and ``number + 1`` to their cells, or returns
    False when one of them lies across columns (the table ends before the next row). A line
    goes on the cell above it in its column (a top-aligned cell's further lines), or to the
    cell of the row below when that row has no line of its own in the column and its baseline
    is nearer (a cell of several lines centred on its row, as browsers print them)."""
    upper, lower = table[number], table[number + 1]
    top, bottom = _baseline(upper), _baseline(lower)
    own = {id(line) for cells in (upper, lower) for cell in cells for line in cell}
    between = [
        line for line in below if id(line) not in own and bottom - line.size * 0.25 < line.y0 < top
    ]
    if any(id(line) in in_rows for line in between):
        return False
    places = [column(line) for line in between]
    if None in places:
        return False
    first_of_lower = {place for place, cell in enumerate(lower) if cell}
    for line, place in zip(between, places, strict=True):
        nearer_lower = line.y0 - bottom < top - line.y0
        if place not in first_of_lower and (not upper[place] or nearer_lower):
            lower[place].append(line)
        else:
            upper[place].append(line)
    for cell in lower:
        cell.sort(key=lambda line: -line.y0)
    return True


def _last_row_lines(below, table, in_rows: set[int], column) -> float:
    """The last row's cells get the lines just below them, inside their column; returns the
    table's lowest baseline."""
    cells = table[-1]
    taken = {id(line) for row in table for cell in row for line in cell}
    lowest = min(line.y0 for cell in cells for line in cell)
    for line in below:
        if id(line) in taken or line.y0 >= lowest + line.size * 0.25:
            continue
        place = None if id(line) in in_rows else column(line)
        if place is None:
            break
        last = min(cells[place], key=lambda other: other.y0) if cells[place] else None
        if last is None or last.y0 - line.y0 > line.size * TABLE_LINE_PITCH:
            break
        cells[place].append(line)
        lowest = min(lowest, line.y0)
    return lowest


def _cell_html(cell: list[_Line]) -> str:
    """A cell's lines joined as a paragraph's are (broken words, links going on)."""
    if not cell:
        return ""
    paragraph = _Paragraph(cell[0].page, cell[0].size, False)
    for line in cell:
        paragraph.add(line)
    return paragraph.html


def _table_html(cells: list[list[str]], header: bool) -> str:
    rows = []
    for number, row in enumerate(cells):
        tag = "th" if header and number == 0 else "td"
        rows.append("<tr>" + "".join(f"<{tag}>{cell}</{tag}>" for cell in row) + "</tr>")
    return "<table>" + "".join(rows) + "</table>"


def _list_mark(text: str) -> tuple[str, re.Match] | None:
    """("ul" or "ol", the mark) when ``text`` starts as a list item does."""
    for kind, mark in (("ul", _BULLET), ("ul", _DASH), ("ol", _NUMBER)):
        found = mark.match(text)
        if found:
            return kind, found
    return None


def _classify(paragraphs: list[_Paragraph], body_size: float, title: str | None) -> str | None:
    """Sets each paragraph's kind, and returns the document's title, a paragraph that is its
    title taken out of ``paragraphs``."""
    large = [
        p
        for p in paragraphs
        if p.kind != "table"
        and p.size >= body_size * HEADING_SCALE
        and len(p.text.split()) <= HEADING_MAX_WORDS
    ]
    if large and large[0].page == 1:
        first = large[0]
        if title is None:
            largest = max(p.size for p in paragraphs)
            if first.size == largest and sum(p.size == largest for p in paragraphs) == 1:
                title = first.text
        if title is not None and title_part(title, first.text):
            # the title's own heading; a web page printed has the site's name in its title
            title = first.text
            paragraphs.remove(first)
            large.remove(first)
    # <h1> is the page's title, as on a web page: the headings start at <h2>
    sizes = sorted({round(p.size) for p in large}, reverse=True)[:4]
    levels = {size: level for level, size in enumerate(sizes, 2)}
    below = len(sizes) + 2  # the level of headings in bold at the body's size
    chosen = set(map(id, large))
    for paragraph in paragraphs:
        if paragraph.kind == "table":
            continue
        if id(paragraph) in chosen:
            paragraph.kind = f"h{levels.get(round(paragraph.size), below - 1)}"
        elif paragraph.bold and bold_heading(paragraph.text):
            paragraph.kind = f"h{below}"
        elif (item := _list_mark(paragraph.text)) is not None:
            paragraph.kind = item[0]
            paragraph.html = _without_chars(paragraph.html, item[1].end())
    return title


def _write(title: str, paragraphs: list[_Paragraph]) -> str:
    """The page of HTML: each paragraph as its kind, list items in lists, a line per page."""
    open_list: str | None = None
    page = 1
    parts = [f"<html><head><title>{escape(title)}</title></head><body>"]
    for paragraph in paragraphs:
        while page < paragraph.page:
            parts.append("\n")
            page += 1
        if paragraph.kind in ("ul", "ol"):
            if open_list != paragraph.kind:
                if open_list:
                    parts.append(f"</{open_list}>")
                parts.append(f"<{paragraph.kind}>")
                open_list = paragraph.kind
            parts.append(f"<li>{paragraph.html}</li>")
            continue
        if open_list:
            parts.append(f"</{open_list}>")
            open_list = None
        if paragraph.kind == "table":
            parts.append(paragraph.html)
            continue
        tag = paragraph.kind
        inner = paragraph.html if tag == "p" else escape(paragraph.text)
        parts.append(f"<{tag}>{inner}</{tag}>")
    if open_list:
        parts.append(f"</{open_list}>")
    parts.append("</body></html>")
    return "".join(parts)


def _without_chars(html: str, count: int) -> str:
    """``html`` without its first ``count`` characters of text (its tags kept)."""
    out: list[str] = []
    index = 0
    while index < len(html) and count > 0:
        if html[index] == "<":
            end = html.index(">", index) + 1
            out.append(html[index:end])
            index = end
            continue
        if html[index] == "&":  # one character escaped
            index = html.index(";", index) + 1
        else:
            index += 1
        count -= 1
    html = ("".join(out) + html[index:].lstrip()).replace("<b></b>", "").replace("<i></i>", "")
    return _EMPTY_LINK.sub("", html)
