"""``tierdesk kb export``: every article as JSONL, in the form ``kb import`` reads back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.files import atomic_write
from app.models import Article

EXPORT_FIELDS = (
    "slug",
    "title",
    "body",
    "category",
    "tags",
    "questions",
    "taught_questions",  # those of ``questions`` reviewers taught: imports keep them
    "source",
    "published",
)


def write_articles(session: Session, out: TextIO) -> int:
    """Write one JSON object per article (published or not), ordered by slug."""
    columns = [getattr(Article, name) for name in EXPORT_FIELDS]
    count = 0
    result = session.execute(
        select(*columns).order_by(Article.slug).execution_options(yield_per=1000)
    )
    for row in result:
        out.write(json.dumps(dict(zip(EXPORT_FIELDS, row, strict=True)), ensure_ascii=False))
        out.write("\n")
        count += 1
    return count


def export_articles(session: Session, path: Path) -> int:
    """Export to ``path`` atomically: readers never see a half-written file."""
    with atomic_write(path) as out:
        count = write_articles(session, out)
    return count
