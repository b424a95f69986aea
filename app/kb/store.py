"""Writing articles: one at a time (the reviewer console) or in bulk (imports).

Every write goes through ``prepare_record`` so both paths store identical values. Bulk writes
look existing articles up by slug in chunks and insert or update with executemany, so a
100,000-article import makes a few hundred statements, not 100,000.

The alternate questions reviewers teach an article (``add_taught_question``) are kept apart as
well as among its questions, so that a new version of the article from its source keeps them
(``with_taught``), and the articles they write have ``CONSOLE_SOURCE`` as their source, so that
an import replacing the knowledge base leaves them be: what people teach is not undone by the
next import.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from sqlalchemy import insert, select, text, update
from sqlalchemy.orm import Session

from app.kb.qna import question_key
from app.kb.records import (
    MAX_QUESTIONS,
    ArticleRecord,
    InvalidArticle,
    PreparedArticle,
    content_hash,
    prepare_record,
)
from app.kb.sanitize import render_body
from app.models import Article, utcnow

__all__ = [
    "ArticleRecord",
    "InvalidArticle",
    "UpsertResult",
    "ExistingArticle",
    "upsert_article",
    "find_existing",
    "change_of",
    "with_taught",
    "add_taught_question",
    "CONSOLE_SOURCE",
    "insert_articles",
    "update_articles",
    "unpublish_articles",
]

UpsertResult = Literal["created", "updated", "unchanged"]
CONSOLE_SOURCE = "reviewer console"  # the source of the articles reviewers write
LOOKUP_CHUNK = 500  # slugs per IN (...) query: far below every backend's parameter limit
WRITE_CHUNK = 1000  # rows per executemany, bounding memory for rendered HTML


@dataclass(frozen=True, slots=True)
class ExistingArticle:
    id: int
    content_hash: str
    published: bool
    version: int
    taught: tuple[str, ...] = ()  # the alternate questions reviewers taught it


def chunked(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def find_existing(session: Session, slugs: Sequence[str]) -> dict[str, ExistingArticle]:
    found: dict[str, ExistingArticle] = {}
    columns = (
        Article.slug,
        Article.id,
        Article.content_hash,
        Article.published,
        Article.version,
        Article.taught_questions,
    )
    for chunk in chunked(slugs, LOOKUP_CHUNK):
        for slug, *rest, taught in session.execute(select(*columns).where(Article.slug.in_(chunk))):
            found[slug] = ExistingArticle(*rest, tuple(taught or ()))
    return found


def with_taught(article: PreparedArticle, existing: ExistingArticle | None) -> PreparedArticle:
    """``article`` with the questions reviewers taught the stored one it replaces: among its
    taught ones, and among its questions after its own, except those it has (or has as its
    title). An import does not undo what people taught."""
    if existing is None or not existing.taught:
        return article
    known = {question_key(text) for text in (article.title, *article.questions)}
    added = [text for text in existing.taught if question_key(text) not in known]
    taught = list(dict.fromkeys([*existing.taught, *article.taught]))
    if not added:
        return replace(article, taught=taught)
    questions = [*article.questions, *added][:MAX_QUESTIONS]
    digest = content_hash(
        article.title, article.body, article.category, article.tags, questions, article.source
    )
    return replace(article, questions=questions, content_hash=digest, taught=taught)


def add_taught_question(session: Session, slug: str, question: str) -> None:
    """Remember that a reviewer taught the article ``slug`` the alternate question ``question``
    (already among its questions): imports keep it."""
    question = " ".join(question.split())  # as the article's questions are stored
    taught = session.scalar(select(Article.taught_questions).where(Article.slug == slug))
    if taught is not None and question not in taught:
        session.execute(
            update(Article)
            .where(Article.slug == slug)
            .values(taught_questions=[*taught, question])
            .execution_options(synchronize_session=False)
        )


def change_of(article: PreparedArticle, existing: ExistingArticle | None) -> UpsertResult:
    """What writing ``article`` (``with_taught`` already applied) does to ``existing``: its
    content, its published flag or which of its questions reviewers taught may change."""
    if existing is None:
        return "created"
    if (
        existing.content_hash == article.content_hash
        and existing.published == article.published
        and set(existing.taught) == set(article.taught)
    ):
        return "unchanged"
    return "updated"


def _values(article: PreparedArticle, now: datetime) -> dict:
    return {
        "slug": article.slug,
        "title": article.title,
        "body": article.body,
        "body_html": render_body(article.body, article.source),
        "category": article.category,
        "tags": article.tags,
        "questions": article.questions,
        "taught_questions": article.taught,
        "source": article.source,
        "published": article.published,
        "content_hash": article.content_hash,
        "updated_at": now,
    }


def insert_articles(session: Session, articles: Iterable[PreparedArticle], on_row=None) -> None:
    now = utcnow()
    batch: list[dict] = []
    for article in articles:
        batch.append({**_values(article, now), "version": 1, "created_at": now})
        if len(batch) >= WRITE_CHUNK:
            session.execute(insert(Article.__table__), batch)
            if on_row:
                on_row(len(batch))
            batch = []
    if batch:
        session.execute(insert(Article.__table__), batch)
        if on_row:
            on_row(len(batch))


def update_articles(
    session: Session,
    changes: Iterable[tuple[PreparedArticle, ExistingArticle]],
    on_row=None,
) -> None:
    now = utcnow()
    batch: list[dict] = []

    def flush() -> None:
        session.execute(update(Article), batch)
        if on_row:
            on_row(len(batch))

    for article, existing in changes:
        batch.append({**_values(article, now), "id": existing.id, "version": existing.version + 1})
        if len(batch) >= WRITE_CHUNK:
            flush()
            batch = []
    if batch:
        flush()


def unpublish_articles(session: Session, ids: Sequence[int]) -> None:
    now = utcnow()
    for chunk in chunked(list(ids), LOOKUP_CHUNK):
        session.execute(
            update(Article)
            .where(Article.id.in_(chunk))
            .values(published=False, version=Article.version + 1, updated_at=now)
            .execution_options(synchronize_session=False)
        )


def refresh_statistics(session: Session) -> None:
    """Let PostgreSQL's planner see a bulk load at once.

    Until autovacuum analyses the table, a freshly loaded ``articles`` has no statistics and the
    planner may scan it for each slug look-up (measured: re-importing 10,000 articles just after
    loading them took 8 s in look-ups, 0.6 s after ANALYZE). SQLite needs nothing.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("ANALYZE articles"))


def upsert_article(session: Session, record: ArticleRecord) -> UpsertResult:
    """Create or update the article with ``record``'s slug (derived from the title if absent).

    Raises ``InvalidArticle`` for bad input. Does not commit and does not bump the KB
    revision: callers do that once per batch (``app.state.bump_revision(session, KB_REVISION)``).
    """
    article = prepare_record(record)
    existing = find_existing(session, [article.slug]).get(article.slug)
    article = with_taught(article, existing)
    result = change_of(article, existing)
    if result == "created":
        insert_articles(session, [article])
    elif result == "updated":
        update_articles(session, [(article, existing)])
    for obj in list(session.identity_map.values()):
        if isinstance(obj, Article) and obj.slug == article.slug:
            session.expire(obj)  # a loaded copy must not keep showing the old row
    return result
