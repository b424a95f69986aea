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
from urllib.parse import urlsplit

import nh3
from markdown_it_pyrs import MarkdownIt

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


def render_body(body: str) -> str:
    """Markdown or HTML in, safe HTML out (what the widget and the console display).

    Images are not shown inline (an image from another site would tell it who reads the
    answer): one at an absolute http(s) address becomes a link to it named by its alt text (or
    "Image"), any other its alt text, as HTML imports write them (``app/kb/html_pages.py``).
    """
    return _clean(_IMG_TAG.sub(_image_link, _MARKDOWN.render(body))).strip()


_IMG_TAG = re.compile(r"<img\b([^>]*)>", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"""([A-Za-z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>/]+))""")


def _image_link(match: re.Match) -> str:
    attrs: dict[str, str] = {}
    for name, double, single, bare in _ATTRIBUTE.findall(match.group(1)):
        attrs.setdefault(name.lower(), html.unescape(double or single or bare))
    src, alt = attrs.get("src", "").strip(), " ".join(attrs.get("alt", "").split())
    before = match.string[: match.start()].lower()
    in_link = max(before.rfind("<a "), before.rfind("<a>")) > before.rfind("</a>")
    if not in_link and urlsplit(src).scheme.lower() in ("http", "https"):
        return f'<a href="{html.escape(src)}">{html.escape(alt or "Image", quote=False)}</a>'
    return html.escape(alt, quote=False)
