"""HTML as a source: whole pages (``*.html``) and HTML bodies from exports (Zendesk).

Pages are parsed with the standard library's ``html.parser`` into a small tree (with the
usual implied end tags: ``<p>`` before a block, ``<li>`` before the next ``<li>``...). The title
is the ``<title>``, else the first ``<h1>`` (the main content's before the page's); the body is
the ``<main>`` (or ``role="main"``), else the first ``<article>``, else ``#main-content``, else
the ``<body>``, without ``<nav>``, ``<header>``, ``<footer>``, ``<aside>`` and what is never
content (scripts, styles, form controls, frames, SVG...). The ``<h1>`` that gave the title, or
that repeats it, is not repeated in the body. Optional ``<meta name="category">`` and ``<meta
name="keywords">`` (comma-separated), or the page's own properties (Notion's export), give
category and tags. An FAQ page (many questions and their answers) is read as one article per
question instead: see app.kb.faq_pages. Pages that are no answer are told here for the reader
to leave out: a list of links (``link_list``), a form to fill in (``form_to_fill``), a
Confluence export's table of contents (``space_contents``). Each element knows the line its
start tag is on.

Bodies are written back as HTML the Markdown renderer passes through unchanged: tags outside the
allow-list are unwrapped (their text kept), whitespace outside ``<pre>`` collapsed, every block
starts a line, text outside any block is put in a ``<p>``, and a blank line before each ``<pre>``
lets code keep its blank lines. The record check then filters it with the allow-list (nh3) like
every other HTML body.

Media the widget does not show inline become links to what they show, so that an answer that is
a screenshot or a video keeps it: an ``<img>`` a link named by its ``alt`` text (or "Image"),
an ``<iframe>`` or ``<video>`` one named by its ``title`` (or "Video", "Embedded content from
<host>"); inside a link, or without an absolute http(s) address, only the name (an image's alt
text) is kept. A body that knows where it was published (a Zendesk article's ``html_url``, a
saved page's ``<base href>``, canonical link or ``og:url``) has its relative links and media
addresses made absolute against it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from app.kb.sanitize import ALLOWED_ATTRIBUTES, ALLOWED_TAGS, web_address

HTML_SUFFIXES = (".html", ".htm")

VOID = frozenset(
    "area base br col embed hr img input keygen link meta param source track wbr".split()
)
# Never article content, wherever it appears (pages and bodies alike). A <form> is unwrapped,
# not dropped: some sites put the whole page in one (ASP.NET WebForms); its controls go.
NOT_CONTENT = frozenset(
    "script style noscript template iframe object embed svg math canvas button select "
    "textarea input head title".split()
)
# Page furniture: dropped from a page's content, kept (unwrapped) in an exported body.
PAGE_FURNITURE = frozenset({"nav", "header", "footer", "aside"})
PAGE_SKIP = NOT_CONTENT | PAGE_FURNITURE
# Allowed tags that are blocks: each starts a line of the written body.
BLOCKS = frozenset(
    "p h1 h2 h3 h4 h5 h6 ul ol li dl dt dd table thead tbody tr td th blockquote pre hr".split()
)
# Tags outside the allow-list that hold blocks; text directly inside them gets a <p>.
CONTAINERS = frozenset(
    "html body main article section div header footer nav aside figure figcaption details "
    "summary address center fieldset hgroup search".split()
)
# A start tag that implies the end of an open <p> (HTML's "close a p element").
_CLOSES_P = BLOCKS | CONTAINERS | frozenset({"form", "menu", "dir", "listing", "plaintext"})
# Implied ends: a start tag -> (tags it closes, tags that stop the search).
_IMPLIED = {
    "li": ({"li"}, {"ul", "ol", "menu"}),
    "dt": ({"dt", "dd"}, {"dl"}),
    "dd": ({"dt", "dd"}, {"dl"}),
    "tr": ({"tr", "td", "th"}, {"table", "thead", "tbody", "tfoot"}),
    "td": ({"td", "th"}, {"tr", "table"}),
    "th": ({"td", "th"}, {"tr", "table"}),
    "thead": ({"thead", "tbody", "tfoot", "tr", "td", "th"}, {"table"}),
    "tbody": ({"thead", "tbody", "tfoot", "tr", "td", "th"}, {"table"}),
    "tfoot": ({"thead", "tbody", "tfoot", "tr", "td", "th"}, {"table"}),
    "option": ({"option"}, {"select", "datalist"}),
}
_HEAD_TAGS = frozenset("title meta link base style script noscript template".split())
_INLINE = (ALLOWED_TAGS - BLOCKS) | frozenset({"span", "font", "mark", "time", "label", "img"})
_HTML_SPACE = re.compile(r"[ \t\n\r\f]+")
# Written as a link to what they show (see the module docstring), wherever they are.
MEDIA = frozenset({"img", "iframe", "video"})


@dataclass(eq=False)
class Node:
    tag: str
    attrs: list[tuple[str, str | None]] = field(default_factory=list)
    children: list[Node | str] = field(default_factory=list)
    line: int = 1  # where the start tag is in the page

    def text(self) -> str:
        """The text inside, whitespace collapsed (a ``<br>`` counts as a space)."""
        parts: list[str] = []
        stack: list[Node | str] = [self]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                parts.append(item)
            elif item.tag == "br":
                parts.append(" ")
            elif item is self or item.tag not in NOT_CONTENT:
                stack.extend(reversed(item.children))
        return " ".join("".join(parts).split())

    def find(self, tag: str, skip: frozenset[str] = frozenset()) -> Node | None:
        """The first element named ``tag`` in document order, not looking inside ``skip``."""
        stack: list[Node | str] = list(reversed(self.children))
        while stack:
            item = stack.pop()
            if isinstance(item, str) or item.tag in skip:
                continue
            if item.tag == tag:
                return item
            stack.extend(reversed(item.children))
        return None

    def find_all(self, tag: str) -> list[Node]:
        found: list[Node] = []
        stack: list[Node | str] = list(reversed(self.children))
        while stack:
            item = stack.pop()
            if isinstance(item, Node):
                if item.tag == tag:
                    found.append(item)
                stack.extend(reversed(item.children))
        return found


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root")
        self.stack = [self.root]

    def _close_to(self, index: int) -> None:
        del self.stack[index:]

    def _imply_ends(self, tag: str) -> None:
        if tag not in _HEAD_TAGS:  # content: a <head> left open ends here
            for index in range(len(self.stack) - 1, 0, -1):
                if self.stack[index].tag == "head":
                    self._close_to(index)
                    break
        if tag in _CLOSES_P:
            for index in range(len(self.stack) - 1, 0, -1):
                open_tag = self.stack[index].tag
                if open_tag == "p":
                    self._close_to(index)
                    break
                if open_tag not in _INLINE:
                    break
        if tag in _IMPLIED:  # close the outermost of them below the nearest stop
            closes, stops = _IMPLIED[tag]
            outermost = None
            for index in range(len(self.stack) - 1, 0, -1):
                open_tag = self.stack[index].tag
                if open_tag in stops:
                    break
                if open_tag in closes:
                    outermost = index
            if outermost is not None:
                self._close_to(outermost)

    def handle_starttag(self, tag, attrs):
        self._imply_ends(tag)
        node = Node(tag, attrs, line=self.getpos()[0])
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):  # <br/>, or XHTML's <p/>
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        for index in range(len(self.stack) - 1, 0, -1):
            if self.stack[index].tag == tag:
                self._close_to(index)
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse_html(text: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    _label_buttons(builder.root)
    return builder.root


# Elements whose text names what follows: an accordion's question is often a <button> in one.
_LABELS = frozenset("h1 h2 h3 h4 h5 h6 dt summary th".split())


def _label_buttons(root: Node) -> None:
    """A ``<button>`` inside a heading (a Bootstrap or WordPress accordion's question) is its
    text, read as a ``<span>``; any other button is a control and is dropped with the rest of
    ``NOT_CONTENT``."""
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, in_label = stack.pop()
        if in_label and node.tag == "button":
            node.tag = "span"
        in_label = in_label or node.tag in _LABELS
        stack.extend((child, in_label) for child in node.children if isinstance(child, Node))


# ----------------------------------------------------------------------------- writing


class _Writer:
    """Writes a tree as Markdown-proof, allow-listed HTML (see the module docstring)."""

    def __init__(self, skip: frozenset[str], omit: Node | None) -> None:
        self.skip = skip
        self.omit = omit
        self.in_link = 0
        self.out: list[str] = []
        self.in_pre = 0
        self.depth = 0  # allowed block elements open; text outside all of them gets a <p>
        self.auto_p = False  # that <p> is open
        self.space = False  # collapsed whitespace not written yet
        self.line_start = True  # nothing written since the last block start tag

    def _block_start(self, start_tag: str, blank_line: bool = False) -> None:
        self.space = False
        if self.out and not self.in_pre:
            self.out.append("\n\n" if blank_line else "\n")
        self.out.append(start_tag)
        self.line_start = True

    def _inline(self, text: str) -> None:
        if self.depth == 0 and not self.auto_p and not self.in_pre:
            self._block_start("<p>")
            self.auto_p = True
        if self.space and not self.line_start:
            self.out.append(" ")
        self.space = False
        self.line_start = False
        self.out.append(text)

    def _close_auto_p(self) -> None:
        if self.auto_p:
            self.out.append("</p>")
            self.auto_p = self.space = False

    def text(self, data: str) -> None:
        if self.in_pre:
            self.out.append(escape(data, quote=False))
            self.line_start = False
            return
        data = _HTML_SPACE.sub(" ", data)
        stripped = data.strip(" ")
        if data.startswith(" "):
            self.space = True
        if stripped:
            self._inline(escape(stripped, quote=False))
            self.space = data.endswith(" ")

    def _media(self, node: Node) -> None:
        attrs = dict(node.attrs)
        src = attrs.get("src")
        if node.tag == "video" and not src:
            source = node.find("source")
            src = dict(source.attrs).get("src") if source else None
        url = (src or "").strip() or None
        if node.tag == "img":
            name = " ".join((attrs.get("alt") or "").split())
            label = name or "Image"
        else:
            name = ""
            label = " ".join((attrs.get("title") or "").split())
            if not label and node.tag == "video":
                label = "Video"
        absolute = url is not None and urlsplit(url).scheme in ("http", "https")
        if not label and absolute:
            label = f"Embedded content from {urlsplit(url).hostname}"
        if absolute and not self.in_link:
            link = f'<a href="{escape(url, quote=True)}">{escape(label, quote=False)}</a>'
            if node.tag == "img":
                self._inline(link)
            elif self.depth == 0 and not self.in_pre:  # an embed: a paragraph of its own
                self._close_auto_p()
                self._block_start("<p>")
                self.out.append(link + "</p>")
            else:
                self.space = True
                self._inline(link)
                self.space = True
        elif name or (self.in_link and label):
            self._inline(escape(name or label, quote=False))

    def node(self, node: Node) -> None:
        tag = node.tag
        if node is self.omit:
            return
        if tag in MEDIA:
            self._media(node)
            return
        if tag in self.skip:
            return
        if tag not in ALLOWED_TAGS:
            boundary = tag in CONTAINERS and self.depth == 0
            if boundary:
                self._close_auto_p()
            self.children(node)
            if boundary:
                self._close_auto_p()
            return
        allowed = ALLOWED_ATTRIBUTES.get(tag, ())
        start = "<{}{}>".format(
            tag,
            "".join(
                f' {name}="{escape(value or "", quote=True)}"'
                for name, value in node.attrs
                if name in allowed
            ),
        )
        block = tag in BLOCKS
        if block:
            self._close_auto_p()
            self._block_start(start, blank_line=tag == "pre")
        else:
            self._inline(start)
        if tag in VOID:
            return
        children = node.children
        if tag == "pre" and children and isinstance(children[0], str):
            # A newline right after <pre> is not content (HTML drops it too).
            children = [children[0].removeprefix("\n"), *children[1:]]
        self.in_pre += tag == "pre"
        self.in_link += tag == "a"
        self.depth += block
        for child in children:
            if isinstance(child, str):
                self.text(child)
            else:
                self.node(child)
        self.depth -= block
        self.in_link -= tag == "a"
        self.in_pre -= tag == "pre"
        if block:
            self.space = False
        self.out.append(f"</{tag}>")

    def children(self, node: Node) -> None:
        for child in node.children:
            if isinstance(child, str):
                self.text(child)
            else:
                self.node(child)

    def result(self) -> str:
        self._close_auto_p()
        return "".join(self.out).strip()


def write_body(node: Node, skip: frozenset[str] = NOT_CONTENT, omit: Node | None = None) -> str:
    writer = _Writer(skip, omit)
    writer.children(node)
    return writer.result()


def html_fragment(html: str, base: str | None = None) -> str:
    """An exported HTML body (Zendesk's ``body``) in the form pages are stored in; ``base``
    is the page it was published at (``resolve_addresses``)."""
    root = parse_html(html.replace("\r\n", "\n").replace("\r", "\n"))
    if base:
        resolve_addresses(root, base)
    return write_body(root)


_ADDRESSES = ("href", "src")


def resolve_addresses(root: Node, base: str) -> None:
    """Make the links and media addresses under ``root`` absolute against ``base`` (the page
    they were published on), in place: in the widget a relative link would point at tierdesk."""
    stack: list[Node | str] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            continue
        if any(name in _ADDRESSES for name, _ in node.attrs):
            node.attrs = [
                (name, _absolute(base, value) if name in _ADDRESSES and value else value)
                for name, value in node.attrs
            ]
        stack.extend(node.children)


def _absolute(base: str, value: str) -> str:
    value = value.strip()
    return value if urlsplit(value).scheme else urljoin(base, value)


def page_address(root: Node) -> str | None:
    """Where a saved page was published, when it says: its ``<base href>``, else its canonical
    link, else its ``og:url`` (absolute http(s) addresses only)."""
    candidates = [
        *(dict(n.attrs).get("href") for n in root.find_all("base")),
        *(
            dict(n.attrs).get("href")
            for n in root.find_all("link")
            if "canonical" in (dict(n.attrs).get("rel") or "").lower().split()
        ),
        *(
            dict(n.attrs).get("content")
            for n in root.find_all("meta")
            if (dict(n.attrs).get("property") or "").lower() == "og:url"
        ),
    ]
    for value in candidates:
        value = (value or "").strip()
        if web_address(value):
            return value
    return None


# ----------------------------------------------------------------------------- pages


def _meta(root: Node) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in root.find_all("meta"):
        attrs = dict(node.attrs)
        name, content = (attrs.get("name") or "").strip().lower(), attrs.get("content")
        if name and content is not None and name not in found:
            found[name] = content
    return found


def _marked(root: Node, attr: str, value: str) -> Node | None:
    """The first element whose ``attr`` is ``value`` (case folded), not looking inside page
    furniture."""
    stack: list[Node | str] = list(reversed(root.children))
    while stack:
        item = stack.pop()
        if isinstance(item, str) or item.tag in PAGE_SKIP:
            continue
        if (dict(item.attrs).get(attr) or "").strip().casefold() == value:
            return item
        stack.extend(reversed(item.children))
    return None


def page_content(root: Node) -> Node:
    """The page's content: the ``<main>`` or the element marked ``role="main"``, else the first
    ``<article>``, else the element with the id ``main-content`` (the usual target of a "skip to
    content" link, and where Confluence's exports keep a page's text apart from its
    breadcrumbs, author line and attachments list), else the ``<body>``."""
    return (
        root.find("main", PAGE_SKIP)
        or _marked(root, "role", "main")
        or root.find("article", PAGE_SKIP)
        or _marked(root, "id", "main-content")
        or root.find("body", PAGE_SKIP)
        or root.find("html")
        or root
    )


# A page's own properties, as Notion's HTML export writes a database page's: a
# ``<table class="properties">`` in the page's ``<header>``, a row per property, its name in a
# ``<th>`` and its values in the ``<td>`` (each of several in a span of its own). The properties
# read, by name: the page's tags, its category and its state (published, draft...).
PROPERTY_FIELDS = {
    **dict.fromkeys(("tags", "labels", "keywords"), "tags"),
    **dict.fromkeys(("category", "section", "topic", "collection"), "category"),
    **dict.fromkeys(("status", "state"), "status"),
}
_VALUE_CLASSES = frozenset({"selected-value", "status-value"})


def _properties(root: Node) -> dict[str, object]:
    fields: dict[str, object] = {}
    for header in root.find_all("header"):
        for table in header.find_all("table"):
            if "properties" not in (dict(table.attrs).get("class") or "").split():
                continue
            for row in table.find_all("tr"):
                name, cell = row.find("th"), row.find("td")
                field = PROPERTY_FIELDS.get(name.text().casefold()) if name else None
                if field is None or cell is None or field in fields:
                    continue
                values = [
                    span.text()
                    for span in cell.find_all("span")
                    if _VALUE_CLASSES & set((dict(span.attrs).get("class") or "").split())
                ] or [cell.text()]
                values = [v for v in values if v]
                if values:
                    fields[field] = values if field == "tags" else values[0]
    return fields


def page_meta_fields(root: Node) -> dict[str, object]:
    """Category and tags from ``<meta name="category">`` and ``<meta name="keywords">``, else
    from the page's own properties (Notion's export: tags, category and status)."""
    fields: dict[str, object] = _properties(root)
    meta = _meta(root)
    if meta.get("category", "").strip():
        fields["category"] = meta["category"].strip()
    if "keywords" in meta:
        fields["tags"] = [t.strip() for t in meta["keywords"].split(",") if t.strip()]
    return fields


def space_contents(root: Node) -> bool:
    """Whether the page is the table of contents of a Confluence space's HTML export: its
    ``index.html`` holds the space's details (key, name, creator) as the page's content and
    its page tree under the heading "Available Pages:", which the export writes in English
    whatever the site's language."""
    return any(
        "pagesectiontitle" in (dict(h.attrs).get("class") or "").casefold().split()
        and h.text().rstrip(":").strip().casefold() == "available pages"
        for h in root.find_all("h2")
    )


# What stands between a page's own title and the site's name in its <title>:
# "Refunds – Acme Help", "Acme Help | Refunds", "Refunds :: Acme".
_TITLE_JOIN_AFTER = re.compile(r"\s*[-–—|·•:»/]+\s*\S")
_TITLE_JOIN_BEFORE = re.compile(r"\S\s*[-–—|·•:»/]+\s*$")


def title_part(title: str, part: str) -> bool:
    """Whether ``part`` is the whole ``title``, or the ``title`` is ``part`` and something else
    joined by a separator (either way round)."""
    t, p = title.casefold(), part.casefold()
    if not p:
        return False
    if t == p:
        return True
    if t.startswith(p) and _TITLE_JOIN_AFTER.match(t[len(p) :]):
        return True
    return t.endswith(p) and bool(_TITLE_JOIN_BEFORE.search(t[: -len(p)]))


def _site_name(root: Node) -> str:
    for node in root.find_all("meta"):
        attrs = dict(node.attrs)
        key = (attrs.get("property") or attrs.get("name") or "").strip().lower()
        if key in ("og:site_name", "application-name") and (attrs.get("content") or "").strip():
            return " ".join((attrs.get("content") or "").split())
    return ""


_SEPARATORS = " \t-–—|·•:»/"


def _without_site_name(title: str, site: str) -> str:
    """``title`` without ``site`` (the site's name) and the separator joining them."""
    if title.casefold() == site.casefold() or not title_part(title, site):
        return title
    if title.casefold().startswith(site.casefold()):
        return title[len(site) :].lstrip(_SEPARATORS)
    return title[: -len(site)].rstrip(_SEPARATORS)


_SECTIONING = frozenset({"main", "article"})


def _headings(content: Node) -> list[Node]:
    """The content's ``<h1>`` elements, outside page furniture; a ``<header>`` inside a
    ``<main>`` or ``<article>`` is the article's own (its title, author and date), not the
    page's, and is looked in."""
    found: list[Node] = []
    stack: list[tuple[Node | str, bool]] = [
        (child, content.tag in _SECTIONING) for child in reversed(content.children)
    ]
    while stack:
        item, inside = stack.pop()
        if isinstance(item, str) or item.tag in NOT_CONTENT:
            continue
        if item.tag in PAGE_FURNITURE and not (inside and item.tag == "header"):
            continue
        if item.tag == "h1":
            found.append(item)
        else:
            inside = inside or item.tag in _SECTIONING
            stack.extend((child, inside) for child in reversed(item.children))
    return found


def page_fields(root: Node) -> dict[str, object] | None:
    """Title, body, category and tags of a parsed page; None when it has no title and no
    <h1>.

    A ``<title>`` usually carries the site's name too ("Refunds – Acme Help Centre"), and the
    content's ``<h1>`` the page's own: when the ``<title>`` is a content ``<h1>`` joined to
    something else by a separator (a dash, ``|``, ``·``, ``:``, ``»``...), that ``<h1>`` is
    the title (the longest such, should there be several, and never one that is only the
    site's name); otherwise the site's name (``og:site_name`` or ``application-name``) is taken
    off the ``<title>``'s start or end. The ``<h1>`` that is the title is not repeated in the
    body."""
    content = page_content(root)
    title_node = root.find("title")
    title = title_node.text() if title_node is not None else ""
    site = _site_name(root)
    headings = [h for h in _headings(content) if h.text() and h.text() != site]
    h1 = headings[0] if headings else root.find("h1")
    if not title:
        if h1 is None or not h1.text():
            return None
        title = h1.text()
    named = [h for h in headings if title_part(title, h.text())]
    if named:
        h1 = max(named, key=lambda h: len(h.text()))
        title = h1.text()
    else:
        title = _without_site_name(title, site)
    omit = h1 if h1 is not None and h1.text() == title else None
    fields: dict[str, object] = {"title": title, "body": write_body(content, PAGE_SKIP, omit)}
    fields.update(page_meta_fields(root))
    return fields


# A page whose text is mostly links standing alone (a help centre's home page, a section's list
# of articles) points to answers rather than giving one.
LINK_LIST_MIN_LINKS = 2
LINK_LIST_SHARE = 0.8
_WORD = re.compile(r"\w")


def link_share(root: Node, leads: Callable[[str], bool] | None = None) -> tuple[int, float]:
    """(links, share of the words that are theirs) under ``root``, counting only links that
    stand alone in their block (a list item, a paragraph, a heading, a cell: no other words
    beside them), and with ``leads``, only those whose address it accepts (the others are
    words). Links inside a sentence ("see refunds, fees and the policy") count for nothing:
    they are an answer's words."""
    # text and links by the block they are directly in (nested blocks are blocks of their own)
    text: dict[int, list[str]] = {}
    links: dict[int, list[str]] = {}
    stack: list[tuple[Node | str, int, bool]] = [(root, 0, False)]
    while stack:
        item, block, in_link = stack.pop()
        if isinstance(item, str):
            text.setdefault(block, []).append(item)
            if in_link:
                links[block][-1] += item
            continue
        if item.tag in NOT_CONTENT:
            continue
        if (item.tag in BLOCKS or item.tag in CONTAINERS) and not in_link:
            block = id(item)  # a link wrapped around blocks (a tile) stays one link
        href = dict(item.attrs).get("href") if item.tag == "a" else None
        if href and not in_link and (leads is None or leads(href)):
            links.setdefault(block, []).append("")
            in_link = True
        stack.extend((child, block, in_link) for child in reversed(item.children))
    total = linked = count = 0
    for block, parts in text.items():
        chars = len(_WORD.findall("".join(parts)))
        total += chars
        names = links.get(block, [])
        if names and chars == sum(len(_WORD.findall(name)) for name in names):
            linked += chars
            count += len(names)
    return count, linked / total if total else 0.0


_ANCHOR = re.compile(r"<a\b[^>]*>(.*?)</a>", re.IGNORECASE | re.DOTALL)
_ANY_TAG = re.compile(r"<[^>]*>")


def _words(html: str) -> int:
    return len(_WORD.findall(_ANY_TAG.sub(" ", html)))


def links_could_make(body: str, share: float) -> bool:
    """A cheap bound before parsing ``body`` (HTML): whether the text of all its links is at
    least ``share`` of its words (the links ``link_share`` counts are fewer)."""
    total = _words(body)
    return bool(total) and sum(_words(m.group(1)) for m in _ANCHOR.finditer(body)) >= share * total


def link_list(body: str) -> tuple[int, float] | None:
    """(links, share of the words that are theirs) when ``body`` (HTML) is a list of links to
    other pages rather than an answer: at least ``LINK_LIST_MIN_LINKS`` links standing alone
    in their blocks (``link_share``) whose names are at least ``LINK_LIST_SHARE`` of its
    words; else None."""
    if not links_could_make(body, LINK_LIST_SHARE):
        return None
    count, share = link_share(parse_html(body))
    return (count, share) if count >= LINK_LIST_MIN_LINKS and share >= LINK_LIST_SHARE else None


# A form with at least two fields to fill in (a request form, a contact form) is for the reader
# to fill, not an answer to read, and one with a password field is a sign-in or sign-up form. A
# search box, buttons, boxes to tick and hidden fields are no fields to fill, so a page that one
# form wraps whole (ASP.NET WebForms) is read as a page.
FORM_MIN_FIELDS = 2
FORM_SHARE = 0.5
_TEXT_INPUTS = frozenset(
    "text email password tel number url date datetime-local month week time file".split()
)


@dataclass(frozen=True, slots=True)
class FormPage:
    fields: int
    share: float  # of the body's text that is the forms'
    sign_in: bool  # a form has a password field


def _fields_to_fill(form: Node) -> tuple[int, bool]:
    """How many fields to fill in ``form`` holds, and whether one is a password field."""
    count, password = 0, False
    stack: list[Node | str] = list(form.children)
    while stack:
        item = stack.pop()
        if not isinstance(item, Node):
            continue
        if item.tag in ("textarea", "select"):
            count += 1
        elif item.tag == "input":
            kind = (dict(item.attrs).get("type") or "text").strip().casefold()
            count += kind in _TEXT_INPUTS
            password = password or kind == "password"
        stack.extend(item.children)
    return count, password


def _chars(node: Node) -> int:
    """The word characters of the text under ``node``, page furniture left out."""
    count = 0
    stack: list[Node | str] = list(node.children)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            count += len(_WORD.findall(item))
        elif item.tag not in PAGE_SKIP:
            stack.extend(item.children)
    return count


def form_to_fill(root: Node, body: str) -> FormPage | None:
    """The page's forms to fill in when they make it a form rather than an answer: a sign-in
    or sign-up form (a password field), or forms with at least ``FORM_MIN_FIELDS`` fields
    whose text (labels and hints) is at least ``FORM_SHARE`` of ``body``'s, the page's body
    as written (without the ``<h1>`` that is its title)."""
    fields = inside = 0
    sign_in = False
    stack: list[Node | str] = [page_content(root)]
    while stack:
        item = stack.pop()
        if not isinstance(item, Node) or item.tag in PAGE_SKIP:
            continue
        if item.tag == "form" and (dict(item.attrs).get("role") or "").casefold() != "search":
            count, password = _fields_to_fill(item)
            if count >= FORM_MIN_FIELDS or password:
                fields += count
                inside += _chars(item)
                sign_in = sign_in or password
            continue
        stack.extend(item.children)
    if not fields:
        return None
    total = _words(body)
    share = min(1.0, inside / total) if total else 1.0
    return FormPage(fields, share, sign_in) if sign_in or share >= FORM_SHARE else None
