"""What a saved site's theme writes around every article, taken off the articles' bodies.

A help centre saved page by page wraps each article in its theme's own text. Some of it is in
page furniture (``<nav>``, ``<header>``, ``<footer>``, ``<aside>``), which is dropped as each page
is read (app.kb.html_pages); the rest is in ordinary blocks inside the content: "Was this
article helpful?", "Related articles" and its list, "Comments", "0 comments", "Please sign in to
leave a comment.". As answer text it is noise, and the list's names (other articles' titles)
draw questions to the wrong article. It is only recognisable across pages: a block of the body
(a top-level paragraph, heading, list, table...) whose text is on at least ``TEMPLATE_SHARE`` of
an import's pages, and on at least ``TEMPLATE_MIN_PAGES`` of them, is the theme's.

Only what leads and trails an article is taken off, never text between its own blocks:

- from the start, the theme's blocks;
- from the end, the theme's blocks, and sections (a heading and the blocks after it) whose
  heading is the theme's and whose other blocks are the theme's or only links (a "Related
  articles" list differs on every page; its heading does not).

A body that would be left with nothing keeps all its text. Markdown files and exports are
written by people article by article and are left as they are. The theme an import learns is
kept (as numbers, not text) for the next import of too few pages to tell one, so that a page
saved again and imported on its own is trimmed as it was with its site.

Titles are trimmed the same way: a part at a title's start or end, joined to the rest by a
separator, that is on at least that share of the pages is the site's name ("Northwind Help :
Card limits", as a Confluence space's export titles every page; "Card limits | Northwind") and
is taken off.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from app.kb.html_pages import Node, link_share, parse_html

TEMPLATE_MIN_PAGES = 4
TEMPLATE_SHARE = 0.5
_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())


@dataclass(frozen=True, slots=True)
class _Block:
    """A top-level block of a body, as much of it as the pass needs (not its tree: an import
    may hold 100,000 pages)."""

    tag: str
    line: int  # where it starts in the body
    key: int  # its text, case and spacing folded, as ``_key`` (0: no text)
    heading: bool
    only_links: bool


def _key(text: str) -> int:
    """A block's text as a number that is the same in every process (an import stores the
    theme it learnt for the next one)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()) >> 1


def _learnt(
    keys_per_page: list[set[int]], known: frozenset[int]
) -> tuple[frozenset[int], frozenset[int]]:
    """(learnt, used): the keys on at least ``TEMPLATE_SHARE`` of an import's pages and on at
    least ``TEMPLATE_MIN_PAGES`` of them, and the theme to use: those, or with too few pages
    to tell, ``known`` (what an earlier import learnt)."""
    if len(keys_per_page) < TEMPLATE_MIN_PAGES:
        return frozenset(), known
    needed = max(TEMPLATE_MIN_PAGES, math.ceil(TEMPLATE_SHARE * len(keys_per_page)))
    pages = Counter(key for keys in keys_per_page for key in keys if key)
    learnt = frozenset(key for key, count in pages.items() if count >= needed)
    return learnt, learnt


def _blocks(body: str) -> list[_Block]:
    blocks = []
    for node in parse_html(body).children:
        if isinstance(node, Node):
            count, share = link_share(node)
            text = " ".join(node.text().casefold().split())
            blocks.append(
                _Block(
                    node.tag,
                    node.line,
                    _key(text) if text else 0,
                    node.tag in _HEADINGS,
                    count > 0 and share == 1.0,
                )
            )
    return blocks


def _kept(blocks: list[_Block], theme: set[int]) -> tuple[int, int]:
    """The range of ``blocks`` that is the article's own: without the theme's leading and
    trailing blocks and trailing sections."""
    start = 0
    while start < len(blocks) and blocks[start].key in theme:
        start += 1
    end = len(blocks)
    while end > start:
        if blocks[end - 1].key in theme:
            end -= 1
            continue
        heading = next((i for i in range(end - 1, start - 1, -1) if blocks[i].heading), None)
        if heading is None or blocks[heading].key not in theme:
            break
        if not all(b.key in theme or b.only_links for b in blocks[heading + 1 : end]):
            break
        end = heading
    return start, end


def _starts_line(lines: list[str], block: _Block) -> bool:
    line = block.line - 1
    return 0 <= line < len(lines) and lines[line].lstrip().lower().startswith(f"<{block.tag}")


def strip_theme(
    bodies: list[str],
    known: frozenset[int] = frozenset(),
    on_page: Callable[[int], object] | None = None,
) -> tuple[list[str], frozenset[int]]:
    """Each of an import's page bodies (written HTML, one block starting each line) without
    the theme's text (see the module docstring), and the theme learnt from them: the blocks
    they share, or, with too few pages to tell, none, and ``known`` (the theme an earlier
    import learnt) is used instead. ``on_page(1)`` is called as each body is read (a progress
    bar's ``update``)."""
    if not bodies or (len(bodies) < TEMPLATE_MIN_PAGES and not known):
        return bodies, frozenset()
    parsed = []
    for body in bodies:
        parsed.append(_blocks(body))
        if on_page is not None:
            on_page(1)
    learnt, theme = _learnt([{b.key for b in blocks} for blocks in parsed], known)
    stripped = []
    for body, blocks in zip(bodies, parsed, strict=True):
        start, end = _kept(blocks, theme)
        lines = body.split("\n")
        cut = [blocks[i] for i in (start, end) if i < len(blocks)]
        if (
            (start, end) == (0, len(blocks))
            or start >= end
            or not all(_starts_line(lines, b) for b in cut)
        ):
            stripped.append(body)
            continue
        last = blocks[end].line - 1 if end < len(blocks) else len(lines)
        stripped.append("\n".join(lines[blocks[start].line - 1 : last]).strip())
    return stripped, learnt


# What joins a page's own title to the site's name: a dash, colon or slash with a space on
# either side ("Northwind Help : Card limits", "Refunds - Acme"), or a bar, middle dot or
# guillemet, spaced or not ("Acme|Refunds"). A colon or dash inside words ("Step 1: Install",
# "E-mail") joins nothing.
_TITLE_JOIN = re.compile(r"\s+[-–—:/]+\s+|\s*[|·•»]+\s*")


def _title_ends(title: str) -> list[tuple[str, str]]:
    """A title's first part and the rest, and its last part and the rest, when a separator
    joins parts (empty otherwise)."""
    joins = list(_TITLE_JOIN.finditer(title))
    if not joins:
        return []
    first, last = joins[0], joins[-1]
    ends = [
        (title[: first.start()], title[first.end() :]),
        (title[last.end() :], title[: last.start()]),
    ]
    return [(part, rest.strip()) for part, rest in ends if part.strip() and rest.strip()]


def _part_key(part: str) -> int:
    return _key(" ".join(part.casefold().split()))


def strip_site_titles(
    titles: list[str], known: frozenset[int] = frozenset()
) -> tuple[list[str], frozenset[int]]:
    """Each of an import's page titles without the site's name (see the module docstring),
    and the names learnt from them; with too few pages to tell, the parts in ``known`` (the
    theme an earlier import learnt) are taken off instead."""
    learnt, theme = _learnt(
        [{_part_key(part) for part, _ in _title_ends(title)} for title in titles], known
    )
    if not theme:
        return titles, learnt
    trimmed = []
    for title in titles:
        trimmed.append(
            next((rest for part, rest in _title_ends(title) if _part_key(part) in theme), title)
        )
    return trimmed, learnt
