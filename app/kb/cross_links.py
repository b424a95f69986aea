"""Links from one imported article to another become links to that article's page.

A help centre saved as files links its articles to each other by file name: ``[fees](fees.md)``
in Markdown, ``<a href="../billing/fees.html">`` in a saved page. In the widget such a link would
resolve against tierdesk's own address and lead nowhere, so once every file of an import is read
and every slug settled, a relative link whose target is one of the import's files (resolved from
the linking file's folder) is rewritten to that article's page, ``/kb/<slug>``. A file split into
several articles (an FAQ page) is linked through the fragment that names a question
(``faq.html#refunds``); without one, or for a file not in the import, the link is left as it is.
Links in both Markdown forms (inline ``[text](target)`` and reference definitions ``[id]:
target``) and in HTML (``href="target"``) are read. A file imported on its own later links the
same way to the files of earlier imports, known by the ``source`` their articles keep (the file's
path as that import named it, so resolved from the same working folder).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

ARTICLE_PAGE = "/kb/{slug}"

_MD_INLINE = re.compile(r"(\]\(\s*)(<[^>\n]*>|[^)\s]+)")
_MD_REFERENCE = re.compile(r"^( {0,3}\[[^\]\n]+\]:[ \t]*)(<[^>\n]*>|\S+)", re.MULTILINE)
_HTML_HREF = re.compile(r"""(\bhref\s*=\s*)("[^"]*"|'[^']*')""", re.IGNORECASE)


@dataclass(frozen=True)
class LinkedArticle:
    """Where an imported article came from and the slug it was given."""

    file: str  # as the import names it (``tierdesk kb import``'s argument, joined with the path)
    source: str | None  # ``file#anchor`` for an article split out of an FAQ page
    slug: str


def _file_key(name: str) -> str:
    return os.path.normcase(os.path.abspath(name))


def stored_file(slug: str, source: str | None) -> LinkedArticle | None:
    """A stored article as a link target, when its ``source`` is the file it was imported
    from (a path as the import named it, ``file#anchor`` for a question of an FAQ page); None
    for an address, or a source the file gave."""
    if not source or urlsplit(source).scheme or source.startswith("..."):
        return None
    return LinkedArticle(source.split("#", 1)[0], source, slug)


class ArticleLinks:
    """Resolves relative link targets among the files of one import and, for files it does
    not hold, those of earlier imports (``stored``)."""

    def __init__(
        self, articles: Sequence[LinkedArticle], stored: Sequence[LinkedArticle] = ()
    ) -> None:
        self._by_file: dict[str, list[LinkedArticle]] = {}
        for article in articles:
            self._by_file.setdefault(_file_key(article.file), []).append(article)
        imported = set(self._by_file)
        slugs = {article.slug for article in articles}
        for article in stored:
            key = _file_key(article.file)
            if key not in imported and article.slug not in slugs:
                self._by_file.setdefault(key, []).append(article)

    def target(self, href: str, linking_file: str) -> str | None:
        """The article page ``href`` (as written in ``linking_file``) leads to, or None."""
        found = self._article(href, linking_file)
        return None if found is None else ARTICLE_PAGE.format(slug=found.slug)

    def leads_elsewhere(self, href: str, linking_file: str) -> bool:
        """Whether ``href`` leads to an article of another file than ``linking_file``."""
        found = self._article(href, linking_file)
        return found is not None and _file_key(found.file) != _file_key(linking_file)

    def _article(self, href: str, linking_file: str) -> LinkedArticle | None:
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
            return None
        path = os.path.join(os.path.dirname(linking_file), unquote(parts.path))
        found = self._by_file.get(_file_key(path))
        if not found:
            return None
        if len(found) > 1:  # an FAQ page: the fragment names the question
            found = [
                a for a in found if parts.fragment and a.source == f"{a.file}#{parts.fragment}"
            ]
            if len(found) != 1:
                return None
        return found[0]

    def rewrite(self, body: str, linking_file: str) -> str:
        """``body`` with every link to another imported file pointing at its article page."""
        return rewrite_links(body, lambda href: self.target(href, linking_file))


def rewrite_links(body: str, target: Callable[[str], str | None]) -> str:
    """``body`` with each link target ``t`` (Markdown inline or reference, or an HTML
    ``href``) for which ``target(t)`` is not None replaced by it."""

    def markdown(match: re.Match) -> str:
        written = match.group(2)
        bare = written[1:-1] if written.startswith("<") else written
        new = target(bare)
        return match.group(0) if new is None else match.group(1) + new

    def html(match: re.Match) -> str:
        quoted = match.group(2)
        new = target(quoted[1:-1].strip())
        return match.group(0) if new is None else f'{match.group(1)}"{new}"'

    if "](" in body:
        body = _MD_INLINE.sub(markdown, body)
    if "]:" in body:
        body = _MD_REFERENCE.sub(markdown, body)
    if "href" in body:
        body = _HTML_HREF.sub(html, body)
    return body
