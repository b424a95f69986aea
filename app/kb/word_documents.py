"""Word documents (``.docx``) as a source: an FAQ or a guide written in Word, as QnA Maker and
its successors take them.

A ``.docx`` is a zip of XML parts. Its body (``word/document.xml``) is written as a page of HTML
and read like any page (app.kb.html_pages): one article, one per question when it is laid out
as an FAQ, or one per section when it is a long document in sections, a manual
(app.kb.faq_pages). What the page keeps of the document:

- paragraphs styled as headings (``Heading 1`` ... ``Heading 6``, by the style's name in
  ``word/styles.xml``, which Word writes in English whatever the document's language, or by
  the style's outline level) become ``<h1>`` ... ``<h6>``; a short paragraph wholly in bold
  that does not end as a sentence does (``.``, ``!``, ``:``...) becomes an ``<h3>``, as people
  who do not use heading styles write their questions, and so does a numbered question in
  bold;
- the ``Title`` paragraph (not repeated in the body), else the document's title property
  (``docProps/core.xml``), else the first heading, else the file's name, is the title;
- bold, italic and underlined runs (written on the run or by its character style, such as
  ``Strong``; a paragraph style's bold is its look, and only makes a heading), line breaks,
  hyperlinks to web addresses (``word/_rels/document.xml.rels``), bulleted and numbered lists
  (``word/numbering.xml``), numbered on the paragraph or by its style (``List Bullet``, ``List
  Number 2``, a style based on one), nested by their level, and tables;
- inserted text of tracked changes, and not the deleted text; content controls' content.

Field codes, comments, footnotes, headers and footers, images and text boxes are not kept.
Each paragraph (or table) of the body is one line of the page, so a message's line number is
the paragraph's, counting empty paragraphs. A Word 97-2003 ``.doc`` is not read: the importer
says to save it as ``.docx``.
"""

from __future__ import annotations

import re
import zipfile
from html import escape
from pathlib import Path
from xml.etree import ElementTree

from app.kb.archives import ZIP_ERRORS

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"
# A part larger than this is not a document people wrote by hand: refused, not unpacked.
MAX_PART_BYTES = 256 * 1024**2
# A paragraph wholly in bold and at most this long is a heading, unless it ends as a sentence
# or a lead-in does (a bold warning inside an answer, a bold label before a list).
BOLD_HEADING_MAX_CHARS = 200
_SENTENCE_ENDS = (".", "!", ":", ";", ",")
# A numbered question in bold ("1. How do I...?" numbered by Word) is a heading, not a list item.
_QUESTION_ENDS = ("?", "\uff1f", "\u061f")
_HEADING_STYLE = re.compile(r"heading\s*([1-6])\Z", re.IGNORECASE)
# What holds runs inside a paragraph and is read through: inserted and moved-in text of tracked
# changes, smart tags, content controls, simple fields (their result).
_WRAPPERS = frozenset(W + tag for tag in ("ins", "moveTo", "smartTag", "sdt", "fldSimple"))


def bold_heading(text: str) -> bool:
    """Whether a paragraph of ``text`` wholly in bold reads as a heading: short, and not ended
    as a sentence or a lead-in is."""
    return len(text) <= BOLD_HEADING_MAX_CHARS and not text.endswith(_SENTENCE_ENDS)


class NotAWordDocument(ValueError):
    """The file cannot be read as a .docx; the message says why."""


def _part(archive: zipfile.ZipFile, name: str) -> ElementTree.Element | None:
    try:
        info = archive.getinfo(name)
    except KeyError:
        return None
    if info.file_size > MAX_PART_BYTES:
        raise NotAWordDocument(f"its {name} unpacks to {info.file_size:,} bytes")
    try:
        return ElementTree.fromstring(archive.read(info))
    except ElementTree.ParseError as exc:
        raise NotAWordDocument(f"its {name} is not valid XML ({exc})") from exc


def _on(props: ElementTree.Element | None, tag: str) -> bool:
    """Whether a run or paragraph property (``<w:b/>``, ``<w:b w:val="0"/>``) is on."""
    if props is None:
        return False
    found = props.find(W + tag)
    return found is not None and _value_on(found)


class _Styles:
    """What the document's styles say, by style id, each through the styles it is based on:
    a paragraph style's heading level, ``Title``, bold and list (``List Bullet 2``: a list at
    its numbering's level, one deeper per number in the name); a character style's bold and
    italic (``Strong``, ``Emphasis``)."""

    def __init__(self, root: ElementTree.Element | None):
        self.level: dict[str, int] = {}
        self.title: set[str] = set()
        self.bold: set[str] = set()
        self.italic: set[str] = set()
        self.numbering: dict[str, tuple[str, int]] = {}  # numId, depth from 0
        if root is None:
            return
        styles = {style.get(W + "styleId") or "": style for style in root.iter(W + "style")}

        def chain(sid: str) -> list[ElementTree.Element]:
            found: list[ElementTree.Element] = []
            while sid in styles and len(found) < 10:
                found.append(styles[sid])
                based = styles[sid].find(W + "basedOn")
                sid = (based.get(W + "val") if based is not None else "") or ""
            return found

        for sid, style in styles.items():
            name_el = style.find(W + "name")
            name = " ".join(((name_el.get(W + "val") if name_el is not None else "") or "").split())
            found = _HEADING_STYLE.match(name)
            lineage = chain(sid)
            outline = _first(lineage, f"{W}pPr/{W}outlineLvl")
            if found:
                self.level[sid] = int(found.group(1))
            elif outline is not None and (outline.get(W + "val") or "").isdigit():
                level = int(outline.get(W + "val") or "9") + 1
                if level <= 6:
                    self.level[sid] = level
            if name.lower() == "title":
                self.title.add(sid)
            bold, italic = _first(lineage, f"{W}rPr/{W}b"), _first(lineage, f"{W}rPr/{W}i")
            if bold is not None and _value_on(bold):
                self.bold.add(sid)
            if italic is not None and _value_on(italic):
                self.italic.add(sid)
            num = _first(lineage, f"{W}pPr/{W}numPr/{W}numId")
            if num is not None and (num.get(W + "val") or "0") != "0":
                ilvl = _first(lineage, f"{W}pPr/{W}numPr/{W}ilvl")
                level = (ilvl.get(W + "val") if ilvl is not None else "") or "0"
                depth = int(level) if level.isdigit() else 0
                numbered = re.search(r"\s(\d)\Z", name)
                depth += int(numbered.group(1)) - 1 if numbered else 0
                self.numbering[sid] = (num.get(W + "val") or "", depth)


def _first(chain: list[ElementTree.Element], path: str) -> ElementTree.Element | None:
    """The element at ``path`` in the first style of ``chain`` that has one."""
    for style in chain:
        found = style.find(path)
        if found is not None:
            return found
    return None


def _value_on(element: ElementTree.Element) -> bool:
    return (element.get(W + "val") or "true").lower() not in ("0", "false", "off")


class _Numbering:
    """Whether a list (``numId``) at a level is numbered or bulleted."""

    def __init__(self, root: ElementTree.Element | None):
        self.formats: dict[tuple[str, str], str] = {}
        if root is None:
            return
        abstract: dict[str, dict[str, str]] = {}
        for item in root.iter(W + "abstractNum"):
            levels = {}
            for lvl in item.iter(W + "lvl"):
                fmt = lvl.find(W + "numFmt")
                levels[lvl.get(W + "ilvl") or "0"] = (
                    fmt.get(W + "val") if fmt is not None else "bullet"
                ) or "bullet"
            abstract[item.get(W + "abstractNumId") or ""] = levels
        for num in root.iter(W + "num"):
            ref = num.find(W + "abstractNumId")
            levels = abstract.get(ref.get(W + "val") or "" if ref is not None else "", {})
            for level, fmt in levels.items():
                self.formats[(num.get(W + "numId") or "", level)] = fmt

    def tag(self, num_id: str, level: str) -> str:
        return "ul" if self.formats.get((num_id, level), "bullet") in ("bullet", "none") else "ol"


class _Writer:
    def __init__(self, styles: _Styles, numbering: _Numbering, links: dict[str, str]):
        self.styles, self.numbering, self.links = styles, numbering, links
        self.lines: list[str] = []
        self.lists: list[str] = []  # the open lists' tags, outermost first
        self.title: str | None = None
        self.first_heading: str | None = None

    # -- inline

    def _runs(self, parent: ElementTree.Element, style_bold: bool) -> tuple[str, str, bool]:
        """(HTML, text, every run with text is bold) of a paragraph's or hyperlink's runs."""
        html: list[str] = []
        text: list[str] = []
        all_bold = True
        for child in parent:
            tag = child.tag
            if tag == W + "r":
                props = child.find(W + "rPr")
                char_style = props.find(W + "rStyle") if props is not None else None
                char = (char_style.get(W + "val") if char_style is not None else "") or ""
                # bold and italic written on the run, or by its character style ("Strong"), are
                # kept; a paragraph style's bold is its look, and only makes a heading
                bold = _on(props, "b") or (char in self.styles.bold and not _off(props, "b"))
                italic = _on(props, "i") or (char in self.styles.italic and not _off(props, "i"))
                underline = _underlined(props)
                looks_bold = bold or (style_bold and not _off(props, "b"))
                piece: list[str] = []
                for item in child:
                    if item.tag == W + "t":
                        piece.append(escape(item.text or "", quote=False))
                        text.append(item.text or "")
                    elif item.tag in (W + "tab", W + "noBreakHyphen"):
                        piece.append(" " if item.tag == W + "tab" else "-")
                        text.append(" ")
                    elif item.tag in (W + "br", W + "cr"):
                        piece.append("<br>")
                        text.append(" ")
                run = "".join(piece)
                if run.strip():
                    all_bold = all_bold and looks_bold
                    for on, name in ((underline, "u"), (italic, "i"), (bold, "b")):
                        if on:
                            run = f"<{name}>{run}</{name}>"
                html.append(run)
            elif tag == W + "hyperlink":
                inner, inner_text, bold = self._runs(child, style_bold)
                target = self.links.get(child.get(R + "id") or "")
                if target and inner_text.strip():
                    all_bold = all_bold and bold
                    html.append(f'<a href="{escape(target)}">{inner}</a>')
                else:
                    all_bold = all_bold and (bold or not inner_text.strip())
                    html.append(inner)
                text.append(inner_text)
            elif tag in _WRAPPERS:
                holder = child.find(W + "sdtContent") if tag == W + "sdt" else child
                if holder is None:
                    continue
                inner, inner_text, bold = self._runs(holder, style_bold)
                all_bold = all_bold and (bold or not inner_text.strip())
                html.append(inner)
                text.append(inner_text)
        return "".join(html), "".join(text), all_bold

    # -- blocks

    def _close_lists(self, depth: int = 0) -> None:
        while len(self.lists) > depth:
            tag = self.lists.pop()
            self.lines[-1] += f"</li></{tag}>"

    def paragraph(self, p: ElementTree.Element) -> None:
        props = p.find(W + "pPr")
        style_el = props.find(W + "pStyle") if props is not None else None
        style = (style_el.get(W + "val") if style_el is not None else "") or ""
        html, text, all_bold = self._runs(p, style in self.styles.bold)
        html, text = html.strip(), " ".join(text.split())
        num = props.find(W + "numPr") if props is not None else None
        listed: tuple[str, int] | None = self.styles.numbering.get(style)
        if num is not None:
            num_id_el, level_el = num.find(W + "numId"), num.find(W + "ilvl")
            num_id = (num_id_el.get(W + "val") if num_id_el is not None else "") or ""
            level = (level_el.get(W + "val") if level_el is not None else "") or "0"
            # numId 0 takes a list style's numbering off the paragraph
            listed = (num_id, int(level) if level.isdigit() else 0) if num_id != "0" else None
        if listed is not None and text and not (all_bold and text.endswith(_QUESTION_ENDS)):
            self._item(html, *listed)
            return
        self._close_lists()
        if not text:
            self.lines.append("")
            return
        level = self.styles.level.get(style)
        if style in self.styles.title and self.title is None:
            self.title = text  # the page's <title>, not a heading among the others
            self.lines.append("")
        elif style in self.styles.title:
            self.lines.append(f"<h1>{html}</h1>")
        elif level is not None:
            self.first_heading = self.first_heading or text
            self.lines.append(f"<h{level}>{html}</h{level}>")
        elif all_bold and bold_heading(text):
            self.lines.append(f"<h3>{html}</h3>")
        else:
            self.lines.append(f"<p>{html}</p>")

    def _item(self, html: str, num_id: str, level: int) -> None:
        depth = min(level, 8) + 1
        tag = self.numbering.tag(num_id, str(level))
        if len(self.lists) > depth:
            self._close_lists(depth)
        if len(self.lists) == depth:
            self.lines.append(f"</li><li>{html}")
            return
        opened = ""
        while len(self.lists) < depth:  # a deeper list opens inside the open item
            self.lists.append(tag)
            opened += f"<{tag}><li>"
        self.lines.append(f"{opened}{html}")

    def table(self, tbl: ElementTree.Element) -> None:
        self._close_lists()
        rows = []
        for tr in tbl.iter(W + "tr"):
            cells = []
            for tc in tr.findall(W + "tc"):
                parts = [self._runs(p, False)[0].strip() for p in tc.iter(W + "p")]
                cells.append("<td>" + "<br>".join(part for part in parts if part) + "</td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
        self.lines.append("<table>" + "".join(rows) + "</table>")

    def body(self, body: ElementTree.Element) -> None:
        for child in body:
            if child.tag == W + "p":
                self.paragraph(child)
            elif child.tag == W + "tbl":
                self.table(child)
            elif child.tag == W + "sdt":
                content = child.find(W + "sdtContent")
                if content is not None:
                    self.body(content)
        self._close_lists()


def _off(props: ElementTree.Element | None, tag: str) -> bool:
    """Whether a run turns off what its style turns on (``<w:b w:val="0"/>``)."""
    found = props.find(W + tag) if props is not None else None
    return found is not None and (found.get(W + "val") or "").lower() in ("0", "false", "off")


def _underlined(props: ElementTree.Element | None) -> bool:
    found = props.find(W + "u") if props is not None else None
    return found is not None and (found.get(W + "val") or "single").lower() != "none"


def _links(root: ElementTree.Element | None) -> dict[str, str]:
    """Relationship id -> web address, for the document's external hyperlinks."""
    links: dict[str, str] = {}
    if root is None:
        return links
    for rel in root:
        target = rel.get("Target") or ""
        if rel.get("TargetMode") == "External" and target.lower().startswith(
            ("http://", "https://", "mailto:")
        ):
            links[rel.get("Id") or ""] = target
    return links


def docx_page(path: Path) -> str:
    """The document at ``path`` as a page of HTML, its body from the first line (see the
    module docstring); raises ``NotAWordDocument``."""
    try:
        archive = zipfile.ZipFile(path)
    except ZIP_ERRORS as exc:
        if isinstance(exc, OSError) and not isinstance(exc, zipfile.BadZipFile):
            raise
        raise NotAWordDocument("not a Word document (.docx), or a damaged one") from exc
    with archive:
        try:
            document = _part(archive, "word/document.xml")
            if document is None:
                raise NotAWordDocument("a zip without word/document.xml: not a Word document")
            writer = _Writer(
                _Styles(_part(archive, "word/styles.xml")),
                _Numbering(_part(archive, "word/numbering.xml")),
                _links(_part(archive, "word/_rels/document.xml.rels")),
            )
            core = _part(archive, "docProps/core.xml")
        except ZIP_ERRORS as exc:
            raise NotAWordDocument(f"a damaged Word document: {exc}") from exc
    body = document.find(W + "body")
    if body is not None:
        writer.body(body)
    stated = core.find(_DC_TITLE) if core is not None else None
    title = (
        writer.title
        or (" ".join((stated.text or "").split()) if stated is not None else "")
        or writer.first_heading
        or " ".join(path.stem.replace("_", " ").split())
    )
    lines = writer.lines or [""]
    head = f"<html><head><title>{escape(title, quote=False)}</title></head><body><main>"
    return head + lines[0] + "\n" + "\n".join(lines[1:]) + "</main></body></html>\n"
