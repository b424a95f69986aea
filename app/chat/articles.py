"""Published articles as the chat API shows them, cached per process.

An answered question needs its article's title, sanitised HTML and plain text. Reading them
from the database on every request cost more than the fast tier itself, so each worker keeps
them for ``TTL_SECONDS`` and drops them all as soon as the engine's KB or model revision moves
(an import or a training run), so an answer never comes with an article older than the router
that chose it by more than a few seconds.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.kb.plain_text import html_to_text
from app.models import Article

TTL_SECONDS = 10.0


@dataclass(frozen=True)
class ArticleView:
    slug: str
    title: str
    html: str
    text: str


class ArticleCache:
    def __init__(self, ttl_seconds: float = TTL_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._entries: dict[str, tuple[float, ArticleView | None]] = {}
        self._revision: object = None
        self._lock = threading.Lock()

    def get(self, session: Session, slug: str, revision: object = None) -> ArticleView | None:
        """The published article ``slug`` (None when absent or unpublished)."""
        now = time.monotonic()
        with self._lock:
            if revision != self._revision:
                self._entries.clear()
                self._revision = revision
            entry = self._entries.get(slug)
        if entry is not None and entry[0] > now:
            return entry[1]
        view = _load(session, slug)
        with self._lock:
            self._entries[slug] = (now + self.ttl_seconds, view)
        return view


def _load(session: Session, slug: str) -> ArticleView | None:
    row = session.execute(
        select(Article.slug, Article.title, Article.body_html).where(
            Article.slug == slug, Article.published.is_(True)
        )
    ).first()
    if row is None:
        return None
    return ArticleView(row.slug, row.title, row.body_html or "", html_to_text(row.body_html or ""))
