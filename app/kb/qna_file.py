"""Bot Framework ``.qna`` files: QnA Maker's text format, as ``bf qnamaker:convert`` writes a
knowledge base and as Bot Framework samples and templates ship their QnA content.

A pair is a question heading, its variations, optional filters and a fenced answer::

    > !# @qna.pair.source = Editorial
    <a id = "12"></a>
    ## ? How do I reset my PIN?
    - I forgot my PIN
    **Filters:**
    - category = cards
    ```markdown
    Open the app and ...
    ```
    **Prompts:**
    - [Card settings](#13)

Each pair is one article, as each document of QnA Maker's JSON download is: the first question
is the title, the variations are its alternate questions, the answer is its body, the filters
are read as a QnA TSV's Metadata (``category``, ``slug`` and ``tags`` understood, other pairs
kept as ``name:value`` tags) and the pair's source, when one is given, is its source. Comments
(``>``), model description lines (``> !# @kb.name = ...``), the pair id, follow-up prompts and
QnA alterations are not stored; a reference to another file or a URL (``[name](target)`` on a
line of its own) is not followed, and says so in a note. Anything else is an error on its line,
as are a pair without an answer and an answer whose fence is never closed.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.kb.qna import apply_metadata, question_key
from app.kb.records import SourceRow
from app.kb.textfiles import ByteCounter, Problems, read_document

__all__ = ["read_qna_file"]

_QUESTION = re.compile(r"^\s*#+\s*\?\s*(.*?)\s*$")
_HEADING = re.compile(r"^\s*#+(?:\s|$)")
_ITEM = re.compile(r"^\s*[-*+](?:\s+(.*?))?\s*$")
_SECTION = re.compile(r"^\s*\*{2,3}\s*(filters|prompts)\s*:?\s*\*{2,3}\s*:?\s*$", re.I)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w.+-]*)\s*$")
_ANCHOR = re.compile(r"""^\s*<a\s+id\s*=\s*["']?([^"'\s/>]*)["']?\s*(?:/>|>\s*</a>)\s*$""", re.I)
_DIRECTIVE = re.compile(r"^\s*>\s*!#\s*@([\w.-]+)\s*=\s*(.*?)\s*$")
_REFERENCE = re.compile(r"^\s*\[([^\]]*)\]\(([^)]*)\)\s*$")
_ALTERATIONS = re.compile(r"^\s*\$.*:\s*qna-alterations\b", re.I)
_FILTER = re.compile(r"^([^=:]+?)\s*[=:]\s*(.*)$")


@dataclass(slots=True)
class _Pair:
    line: int
    questions: list[tuple[str, int]]
    source: str | None
    filters: list[dict[str, str]] = field(default_factory=list)
    answer: str | None = None
    broken: bool = False


def _shown(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def _fenced(lines: list[str], start: int) -> tuple[str, int] | None:
    """The text of the fenced block opened on ``lines[start]`` and the index of its closing
    line, or None when it is never closed. The block is dedented, so a pair written indented
    (as older examples of the format are) keeps its Markdown."""
    opener = _FENCE.match(lines[start])
    assert opener is not None
    fence = opener.group(1)
    for end in range(start + 1, len(lines)):
        closing = lines[end].strip()
        if closing and set(closing) == {fence[0]} and len(closing) >= len(fence):
            return textwrap.dedent("\n".join(lines[start + 1 : end])).strip(), end
    return None


def read_qna_file(
    path: Path, display: str, problems: Problems, on_bytes: ByteCounter
) -> Iterator[SourceRow]:
    text = read_document(path, display, problems, on_bytes)
    if text is None:
        return
    lines = text.split("\n")
    pair: _Pair | None = None
    section: str | None = None  # what a '- item' line belongs to
    source: str | None = None  # '> !# @qna.pair.source = ...', for the next pair
    noted: set[str] = set()

    def note_once(kind: str, line: int, message: str) -> None:
        if kind not in noted:
            noted.add(kind)
            problems.note(display, line, message)

    def error(line: int, reason: str) -> None:
        problems.add(display, line, reason)
        if pair is not None:
            pair.broken = True

    index = 0
    while index < len(lines):
        raw, number = lines[index], index + 1
        index += 1
        if not raw.strip():
            continue
        if question := _QUESTION.match(raw):
            if pair is not None:
                yield from _row(pair, display, problems)
            pair, section = _Pair(number, [], source), "questions"
            source = None
            if question.group(1):
                pair.questions.append((question.group(1), number))
            else:
                error(number, "a question heading ('# ?') without a question")
        elif _FENCE.match(raw):
            block = _fenced(lines, index - 1)
            if block is None:
                error(number, "the answer's fence (```) is never closed")
                break
            answer, end = block
            index = end + 1
            section = None
            if pair is None:
                error(number, "an answer before any question ('# ? question' comes first)")
            elif pair.answer is not None:
                error(number, f"a second answer for the question on line {pair.line}")
            elif not answer:
                error(number, f"the answer to the question on line {pair.line} is empty")
            else:
                pair.answer = answer
        elif raw.lstrip().startswith(">"):
            directive = _DIRECTIVE.match(raw)
            if directive and directive.group(1).casefold() == "qna.pair.source":
                source = directive.group(2) or None
        elif _ANCHOR.match(raw):
            pass  # the next pair's id: prompts link to it, and prompts are not stored
        elif heading := _SECTION.match(raw):
            section = heading.group(1).casefold()
            if pair is None:
                error(number, f"'{raw.strip()}' before any question ('# ? question')")
            elif section == "prompts":
                note_once("prompts", number, "follow-up prompts are not stored")
        elif _ALTERATIONS.match(raw):
            section = "alterations"
            note_once("alterations", number, "QnA alterations (synonym lists) are not stored")
        elif item := _ITEM.match(raw):
            if item.group(1):  # an empty '-' line lists nothing
                _item(item.group(1), number, section, pair, error)
        elif reference := _REFERENCE.match(raw):
            problems.note(
                display,
                number,
                f"the reference to {reference.group(2)!r} is not followed; import what it "
                "points to by itself",
            )
        elif _HEADING.match(raw):
            section = "skipped"  # its '- utterance' lines are not named one by one
            error(number, f"a heading that is not a question: {_shown(raw.strip())} (a pair "
                          "starts with '# ? question'; .lu intents belong in a .lu file)")  # fmt: skip
        else:
            error(number, f"expected '# ? question', '- variation', '**Filters:**', a fenced "
                          f"answer (```) or a '>' comment, found {_shown(raw.strip())}")  # fmt: skip
    if pair is not None:
        yield from _row(pair, display, problems)


def _item(text: str, number: int, section: str | None, pair: _Pair | None, error) -> None:
    """A '- ...' line: a variation of the question, a filter, a prompt or an alteration."""
    if section in ("prompts", "alterations", "skipped"):
        return
    if pair is None or section is None:
        error(number, f"{_shown('- ' + text)} belongs to no question (variations follow their "
                      "'# ? question', filters a '**Filters:**' line)")  # fmt: skip
    elif section == "questions":
        pair.questions.append((text, number))
    elif filter_ := _FILTER.match(text):
        name, value = filter_.group(1).strip(), filter_.group(2).strip()
        pair.filters.append({"name": name, "value": value})
    else:
        error(number, f"a filter must be 'name = value', found {_shown(text)}")


def _row(pair: _Pair, display: str, problems: Problems) -> Iterator[SourceRow]:
    if pair.broken:  # its errors are said already
        return
    if pair.answer is None:
        problems.add(display, pair.line, "the question has no answer (a fenced ``` block after "
                                         "its questions and filters)")  # fmt: skip
        return
    lines: dict[str, int] = {}
    questions: list[str] = []
    for text, line in pair.questions:
        key = question_key(text)
        if key not in lines:  # each once, case and spacing aside
            lines[key] = line
            questions.append(text)
    fields: dict[str, object] = {
        "title": questions[0],
        "body": pair.answer,
        "questions": questions[1:],
        "source": pair.source or display,
        "metadata": pair.filters or None,
    }
    apply_metadata(fields, display, pair.line, problems)
    yield SourceRow(display, pair.line, fields, question_lines=lines)
