"""Article bodies: Markdown (or HTML) rendered, then cleaned with an allow-list.

Rendering uses markdown-it-pyrs (markdown-it in Rust, about 25 microseconds per article;
Python-Markdown takes about 1 ms, which alone would take 100 s for a 100,000-article import).
CommonMark with GitHub's tables, strikethrough and bare-URL links; raw HTML inside the Markdown
is kept by the renderer and then filtered by nh3 (ammonia): only the tags, attributes and URL
schemes below survive, so no script, style, event handler or ``javascript:`` URL is stored.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urljoin, urlsplit

import nh3
from markdown_it_pyrs import MarkdownIt

from app.kb.cross_links import ARTICLE_PAGE

ALLOWED_TAGS = frozenset(
    {
        "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "dl", "dt", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre",
        "s", "small", "strong", "sub", "sup", "table", "tbody", "td", "th", "thead", "tr",
        "u", "ul",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "ol": {"start"},
    "td": {"align"},
    "th": {"align"},
}
ALLOWED_URL_SCHEMES = frozenset({"http", "https", "mailto", "tel"})
LINK_REL = "noopener noreferrer nofollow"

# A start/end tag, comment or doctype; Markdown autolinks such as <https://x> and link targets
# such as <billing/fees.md> are not tags (a name is followed by a space, '>' or '/>').
_HTML_TAG = re.compile(r"<(?:/?[A-Za-z][A-Za-z0-9-]*(?=[\s>]|/>)|!--|!doctype)", re.IGNORECASE)
# An ampersand that does not start an entity, re-escaped to '&amp;' by the cleaner.
_ESCAPED_BARE_AMP = re.compile(r"&amp;(?![A-Za-z][A-Za-z0-9]*;|#[0-9]+;|#[xX][0-9A-Fa-f]+;)")


_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    attributes={tag: set(attrs) for tag, attrs in ALLOWED_ATTRIBUTES.items()},
    url_schemes=set(ALLOWED_URL_SCHEMES),
    link_rel=LINK_REL,
)
_MARKDOWN = MarkdownIt("commonmark").enable_many(["table", "strikethrough", "autolink_ext"])


def _clean(html: str) -> str:
    return _CLEANER.clean(html)


def contains_html(text: str) -> bool:
    return bool(_HTML_TAG.search(text))


_ANY_TAG = re.compile(r"<[^>]*>")


def has_text(body: str) -> bool:
    """Whether a cleaned body says anything: not only tags (``<p></p>``) and spaces."""
    if not contains_html(body):
        return bool(body.strip())
    return bool(html.unescape(_ANY_TAG.sub("", body)).strip())


def clean_source(body: str) -> str:
    """The body as it is stored: unchanged Markdown, or with its HTML filtered by the allow-list.

    Cleaning escapes '>' and '&' in text, which would break Markdown block quotes and plain
    ampersands, so those two escapes are undone (neither can start a tag). The result is a
    fixed point: cleaning it again changes nothing, which keeps re-imports unchanged.
    """
    if not contains_html(body):
        return body
    cleaned = _clean(body).replace("&gt;", ">")
    return _ESCAPED_BARE_AMP.sub("&", cleaned)


def render_body(body: str, source: str | None = None, *, as_written: bool = False) -> str:
    """Markdown or HTML in, safe HTML out (what the widget and the console display).

    Images are not shown inline (an image from another site would tell it who reads the
    answer): one at an absolute http(s) address becomes a link to it named by its alt text (or
    "Image"), any other its alt text, as HTML imports write them (``app/kb/html_pages.py``).

    Every link must lead somewhere from the widget, which resolves addresses against tierdesk's
    own: an address with a scheme or a host, and an article page (``/kb/<slug>``), stay; any
    other (``../fees.html``, ``/hc/requests/new``, ``#steps``) resolves against the article's
    ``source`` when that is an http(s) address (where it was published), and otherwise keeps
    only its text. ``as_written`` keeps every link as the body gives it (to read a body's
    structure, not to show it).
    """
    base = source if source and web_address(source) else None
    rendered = _IMG_TAG.sub(lambda m: _image_link(m, base), _MARKDOWN.render(body))
    cleaned = _clean(rendered)
    if not as_written:
        cleaned = _LINK.sub(lambda m: _followable_link(m, base), cleaned)
    return cleaned.strip()


def web_address(value: str) -> bool:
    """Whether ``value`` is an absolute http(s) address."""
    parts = urlsplit(value.strip())
    return parts.scheme.lower() in ("http", "https") and bool(parts.netloc)


ARTICLE_PAGES = ARTICLE_PAGE.split("{", 1)[0]  # "/kb/": tierdesk's own article pages
_LINK = re.compile(r"<a\b([^>]*)>(.*?)</a>", re.IGNORECASE | re.DOTALL)
_HREF = re.compile(r'\bhref="([^"]*)"')


def _followable_link(match: re.Match, base: str | None) -> str:
    """A cleaned ``<a>`` as the widget can follow it: as it is, resolved against ``base``, or
    only its content."""
    found = _HREF.search(match.group(1))
    if found is None:
        return match.group(0)
    href = html.unescape(found.group(1)).strip()
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or parts.path.startswith(ARTICLE_PAGES):
        return match.group(0)
    if base is None:
        return match.group(2)
    attrs = match.group(1)
    resolved = f'href="{html.escape(urljoin(base, href))}"'
    return f"<a{attrs[: found.start()]}{resolved}{attrs[found.end() :]}>{match.group(2)}</a>"


_IMG_TAG = re.compile(r"<img\b([^>]*)>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([A-Za-z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>/]+))""")


def _image_link(match: re.Match, base: str | None = None) -> str:
    attrs: dict[str, str] = {}
    for name, double, single, bare in _ATTRIBUTE.findall(match.group(1)):
        attrs.setdefault(name.lower(), html.unescape(double or single or bare))
    src, alt = attrs.get("src", "").strip(), " ".join(attrs.get("alt", "").split())
    if base and src and not urlsplit(src).scheme:
        src = urljoin(base, src)
    before = match.string[: match.start()].lower()
    in_link = max(before.rfind("<a "), before.rfind("<a>")) > before.rfind("</a>")
    if not in_link and urlsplit(src).scheme.lower() in ("http", "https"):
        return f'<a href="{html.escape(src)}">{html.escape(alt or "Image", quote=False)}</a>'
    return html.escape(alt, quote=False)
