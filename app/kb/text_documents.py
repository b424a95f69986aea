"""Plain text files (``.txt``) as a source: an FAQ or an article typed in a text editor or
pasted out of an e-mail, with no markup at all.

The text is written as a page of HTML and read like any page (app.kb.html_pages), so an FAQ
gives one article per question (app.kb.faq_pages) and anything else one article:

- paragraphs are separated by blank lines; the lines of a paragraph are one text, as an editor
  wraps them (Markdown reads them so too), except lines that start a list item (``-``, ``*``,
  ``•``, ``1.``, ``a)``), which are the items of a list;
- a paragraph whose first line is a question (ends with ``?``, at most
  ``faq_pages.QUESTION_PARAGRAPH_MAX_CHARS`` characters) starts with that question as a
  paragraph of its own, wholly in bold: the FAQ page rule for question paragraphs then reads
  three or more of them as an FAQ, each answered by what follows it; ``Q:`` and ``A:`` marks are
  read by that rule as they are in any page;
- a heading is a line underlined with ``===`` or ``---``, a line starting with Markdown's
  ``#`` marks (pasted from a Markdown file), or a paragraph of one short line in capitals
  (``RETURNS AND REFUNDS``, at most ``TITLE_MAX_WORDS`` words, not ending as a sentence or a
  question does, and not a label such as ``NOTE`` or ``WARNING:`` that introduces the paragraph
  below it); a heading ends the answer above it, and a long text's headings cut it into
  sections as a page's do;
- the first paragraph is the title when it is one short line that does not end as a sentence
  or a question does (at most ``TITLE_MAX_WORDS`` words), or a heading, else the file's name
  is;
- web and e-mail addresses become links.

Each paragraph is written on the line of the page where it starts in the text, so a message's
line number is the text's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape

from app.kb.faq_pages import QUESTION_PARAGRAPH_MAX_CHARS

TITLE_MAX_WORDS = 12
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*\u2022\u2023\u25e6]|(\d{1,3}|[a-z])[.)])[ \t]+(?=\S)")
_UNDERLINE = re.compile(r"[ \t]*(=+|-+)[ \t]*")
_HASH_HEADING = re.compile(r"[ \t]*(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*")
# Labels in capitals that introduce the paragraph below them within an answer ("NOTE", then what
# to note): text, not headings, which would end the answer.
_LABELS = frozenset(
    ("note", "notes", "please note", "warning", "important", "tip", "tips", "caution", "attention")
    + ("hint", "remember", "info", "danger", "example", "examples")
)
_ADDRESS = re.compile(
    r"\b(?:https?://|mailto:)[^\s<>\"']+[^\s<>\"'.,;:!?)\]]|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"
)
_ENDED = (".", "!", "?", ":", ";", ",")


@dataclass(slots=True)
class _Block:
    line: int  # where it starts in the text, from 1
    lines: list[str]


def text_page(text: str, name: str) -> str:
    """The text of a ``.txt`` file as a page of HTML titled by its first line or ``name``."""
    blocks = list(_blocks(text.replace("\r\n", "\n").replace("\r", "\n").split("\n")))
    title = name
    if blocks and _is_title(blocks[0]):
        title = _title(blocks.pop(0))
    parts: list[str] = [f"<html><head><title>{escape(title)}</title></head><body>"]
    written = 1  # the page's line being written
    for block in blocks:
        if block.line > written:
            parts.append("\n" * (block.line - written))
            written = block.line
        parts.append(_block_html(block))
    parts.append("</body></html>")
    return "".join(parts)


def _blocks(lines: list[str]):
    """The paragraphs, each with its first line's number."""
    current: _Block | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            if current is not None:
                yield current
            current = None
        elif current is None:
            current = _Block(number, [line])
        else:
            current.lines.append(line)
    if current is not None:
        yield current


def _short_line(text: str) -> bool:
    """One line short enough for a title or heading, not ending as a sentence or question does
    and not a list item."""
    return (
        0 < len(text.split()) <= TITLE_MAX_WORDS
        and not text.endswith(_ENDED)
        and not _LIST_ITEM.match(text)
    )


def _heading(block: _Block) -> tuple[int, str] | None:
    """The level (2 to 6; the title is the page's 1) and text of a block that is a heading."""
    lines = block.lines
    if len(lines) == 2 and _UNDERLINE.fullmatch(lines[1]):
        return (2 if lines[1].strip().startswith("=") else 3), lines[0].strip()
    if len(lines) != 1:
        return None
    marked = _HASH_HEADING.fullmatch(lines[0])
    if marked and marked.group(2):
        return min(len(marked.group(1)) + 1, 6), marked.group(2)
    text = lines[0].strip().removesuffix(":").strip()
    if text.upper() == text != text.lower() and _short_line(text) and text.lower() not in _LABELS:
        return 2, text
    return None


def _is_title(block: _Block) -> bool:
    return _heading(block) is not None or (
        len(block.lines) == 1 and _short_line(block.lines[0].strip())
    )


def _title(block: _Block) -> str:
    heading = _heading(block)
    return heading[1] if heading else block.lines[0].strip()


def _block_html(block: _Block) -> str:
    heading = _heading(block)
    if heading:
        level, text = heading
        return f"<h{level}>{_inline(text)}</h{level}>"
    lines = block.lines
    out: list[str] = []
    first = lines[0].strip()
    if (
        first.endswith("?")
        and len(first) <= QUESTION_PARAGRAPH_MAX_CHARS
        and not _LIST_ITEM.match(first)
    ):
        out.append(f"<p><strong>{_inline(first)}</strong></p>")
        lines = lines[1:]
    paragraph: list[str] = []
    items: list[str] = []
    numbered = False
    for line in lines:
        mark = _LIST_ITEM.match(line)
        if mark:
            if paragraph:
                out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
                paragraph = []
            if not items:
                numbered = mark.group(1) is not None
            items.append(line[mark.end() :])
        elif items and line[:1] in " \t":  # an item's wrapped line
            items[-1] += " " + line.strip()
        else:
            if items:
                out.append(_list(items, numbered))
                items = []
            paragraph.append(line.strip())
    if paragraph:
        out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    if items:
        out.append(_list(items, numbered))
    return "".join(out)


def _list(items: list[str], numbered: bool) -> str:
    tag = "ol" if numbered else "ul"
    return f"<{tag}>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + f"</{tag}>"


def _inline(text: str) -> str:
    """``text`` escaped, its web and e-mail addresses as links."""
    out: list[str] = []
    end = 0
    for found in _ADDRESS.finditer(text):
        out.append(escape(text[end : found.start()]))
        address = found.group()
        target = (
            address if "://" in address or address.startswith("mailto:") else f"mailto:{address}"
        )
        out.append(f'<a href="{escape(target)}">{escape(address)}</a>')
        end = found.end()
    out.append(escape(text[end:]))
    return " ".join("".join(out).split())
