"""Relaxed commit durability of answered turns stays inside its own transaction."""

from __future__ import annotations

from sqlalchemy import text

from app.chat.durability import relax_commit_durability
from app.db import session_factory
from app.models import Conversation


def _setting(session, dialect: str) -> str:
    query = "PRAGMA synchronous" if dialect == "sqlite" else "SHOW synchronous_commit"
    return str(session.execute(text(query)).scalar())


def test_relaxed_commit_applies_to_one_transaction_only(any_db_url):
    factory = session_factory(any_db_url)
    dialect = "sqlite" if any_db_url.startswith("sqlite") else "postgresql"
    with factory() as session:
        before = _setting(session, dialect)
        session.rollback()
        assert relax_commit_durability(session) is True
        assert _setting(session, dialect) in {"1", "off"}  # NORMAL / off while it lasts
        session.add(Conversation(id="a" * 32, status="bot"))
        session.commit()
    for _ in range(3):  # whichever pooled connection comes next has the old setting back
        with factory() as session:
            assert _setting(session, dialect) == before
            assert session.get(Conversation, "a" * 32) is not None
