"""Search over the published knowledge-base articles for the public /kb pages.

Plain SQL ``LIKE`` on the title, alternate questions and body narrows the candidates (fine for
a knowledge base of a few thousand articles on SQLite or PostgreSQL), then a small score ranks
them: words found in the title count most, then the alternate questions, then the body.
"""

from __future__ import annotations

import re

from sqlalchemy import String, cast, func, or_, select
from sqlalchemy.orm import Session

from app.models import Article

MAX_QUERY_CHARS = 200
MAX_TERMS = 8
MAX_RESULTS = 20
_CANDIDATES = 500
_WORD_RE = re.compile(r"\w{2,}", re.UNICODE)
_STOP_WORDS = frozenset(
    "the a an to of and or is are my me i you your do does did how what why when where can "
    "in on for it be with this that there have has was not at by from".split()
)


def _terms(query: str) -> list[str]:
    words = [w.lower() for w in _WORD_RE.findall(query)]
    terms = [w for w in words if w not in _STOP_WORDS] or words
    return list(dict.fromkeys(terms))[:MAX_TERMS]


def _like(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def published_article(session: Session, slug: str) -> Article | None:
    return session.scalar(select(Article).where(Article.slug == slug, Article.published.is_(True)))


def search_articles(session: Session, query: str) -> list[Article]:
    """Published articles matching ``query``, best first."""
    terms = _terms(query)
    if not terms:
        return []
    fields = (
        func.lower(Article.title),
        func.lower(cast(Article.questions, String)),
        func.lower(Article.body),
    )
    matches = [field.like(_like(term), escape="\\") for term in terms for field in fields]
    candidates = session.scalars(
        select(Article).where(Article.published.is_(True), or_(*matches)).limit(_CANDIDATES)
    ).all()

    def score(article: Article) -> float:
        title = article.title.lower()
        questions = " ".join(str(q) for q in (article.questions or [])).lower()
        body = article.body.lower()
        return sum(3.0 * (t in title) + 2.0 * (t in questions) + 1.0 * (t in body) for t in terms)

    ranked = sorted(candidates, key=lambda a: (-score(a), a.title))
    return ranked[:MAX_RESULTS]


def related_articles(session: Session, article: Article, limit: int = 4) -> list[Article]:
    if not article.category:
        return []
    return list(
        session.scalars(
            select(Article)
            .where(
                Article.category == article.category,
                Article.id != article.id,
                Article.published.is_(True),
            )
            .order_by(Article.title)
            .limit(limit)
        )
    )


def popular_articles(session: Session, limit: int = 6) -> list[Article]:
    """A few articles for the home page (the first by title; the demo has no view counts)."""
    return list(
        session.scalars(
            select(Article).where(Article.published.is_(True)).order_by(Article.title).limit(limit)
        )
    )
