"""An article's sanitised HTML as readable plain text: what the chat API returns beside the
HTML (``app.chat.articles``) and what a reviewer's article reply quotes (``app.review.service``).
"""

from __future__ import annotations

import re
from html import unescape
from html.parser import HTMLParser

_LINKED = re.compile(r"(https?://|mailto:)", re.IGNORECASE)
_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "blockquote",
        "pre",
        "section",
        "article",
    }
)


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0
        self._links: list[tuple[int, str]] = []  # open <a>: where its text starts, its address

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")
        if tag == "a":
            self._links.append((len(self.parts), (dict(attrs).get("href") or "").strip()))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")
        if tag == "a" and self._links:
            # A link keeps where it goes: "the refund form (https://...)", as text channels
            # show links; not when its text is the address already.
            start, href = self._links.pop()
            address = href.removeprefix("mailto:")
            text = "".join(self.parts[start:])
            if _LINKED.match(href) and address not in text:
                self.parts.append(f" ({address})")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """Readable plain text of an HTML fragment: tags dropped, paragraphs on their own lines."""
    parser = _TextExtractor()
    parser.feed(html or "")
    parser.close()
    text = unescape("".join(parser.parts))
    lines = [re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
