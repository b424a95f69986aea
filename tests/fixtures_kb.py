"""Fixtures of the kb area, shared with other tests through pytest_plugins.

- ``kb_records``: a small, varied set of ``ArticleRecord``s (a bank's FAQ).
- ``loaded_kb``: those records imported into the test app's SQLite database (``db_url``),
  through ``import_paths`` like the CLI; returns the slugs.
- ``write_kb_file``: writes a text or bytes file under tmp_path and returns its path.

Helpers for import tests (plain functions): ``run_import``, ``rejected`` (the problems of a
rejected import), ``articles`` (slug -> Article) and ``snapshot`` (every article column and
the KB revision: "nothing changed" means equal).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.kb.importer import ImportRejected, import_paths
from app.kb.records import ArticleRecord
from app.models import Article
from app.state import KB_REVISION, get_revision


def run_import(url, paths, **kwargs):
    with session_scope(url) as session:
        return import_paths(session, list(paths), **kwargs)


def rejected(url, paths, **kwargs) -> list[str]:
    with pytest.raises(ImportRejected) as info:
        run_import(url, paths, **kwargs)
    return info.value.report.problems


def articles(url) -> dict[str, Article]:
    with session_scope(url) as session:
        return {a.slug: a for a in session.scalars(select(Article))}


def snapshot(url) -> list[tuple]:
    """Every column of every article plus the KB revision: 'nothing changed' means equal."""
    with session_scope(url) as session:
        rows = session.execute(select(Article.__table__).order_by(Article.slug)).all()
        return [tuple(r) for r in rows] + [("revision", get_revision(session, KB_REVISION))]


KB_RECORDS = [
    ArticleRecord(
        title="Where is my new card?",
        body="Cards arrive within **5 working days**. Track the delivery in the app under "
        "*Cards > Delivery*.",
        slug="card-arrival",
        category="card_arrival",
        tags=("cards", "delivery"),
        questions=("My card has not come yet", "How long does card delivery take?"),
    ),
    ArticleRecord(
        title="How do I reset my PIN?",
        body="Open the app, choose *Security*, then *Change PIN*. You need your current PIN "
        "or a one-time code sent to your phone.",
        slug="change-pin",
        category="change_pin",
        tags=("security",),
        questions=("I forgot my PIN", "Can I change my card PIN?"),
    ),
    ArticleRecord(
        title="Fees for international transfers",
        body="Transfers in euros are free. Other currencies cost 0.5% of the amount, with "
        "a minimum of 1 EUR.",
        slug="transfer-fee-charged",
        category="transfer_fee_charged",
        tags=("transfers", "fees"),
        questions=("Why was I charged for a transfer?", "What does a transfer abroad cost?"),
    ),
]


@pytest.fixture
def kb_records() -> list[ArticleRecord]:
    return list(KB_RECORDS)


@pytest.fixture
def write_kb_file(tmp_path) -> Callable[[str, str | bytes], Path]:
    def write(name: str, content: str | bytes) -> Path:
        path = tmp_path / "kb_input" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        return path

    return write


@pytest.fixture
def loaded_kb(db_url, kb_records, write_kb_file) -> list[str]:
    """The sample articles imported into ``db_url``; returns their slugs."""
    from app.kb.importer import import_paths

    lines = [
        json.dumps(
            {
                "slug": r.slug,
                "title": r.title,
                "body": r.body,
                "category": r.category,
                "tags": list(r.tags),
                "questions": list(r.questions),
            }
        )
        for r in kb_records
    ]
    path = write_kb_file("sample.jsonl", "\n".join(lines) + "\n")
    with session_scope(db_url) as session:
        import_paths(session, [path])
    return [r.slug for r in kb_records]
