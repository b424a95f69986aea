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
        session.add(Conversation(id="a" * 32, status="open"))
        session.commit()
    for _ in range(3):  # whichever pooled connection comes next has the old setting back
        with factory() as session:
            assert _setting(session, dialect) == before
            assert session.get(Conversation, "a" * 32) is not None


def test_serialized_write_excludes_other_threads_and_processes(db_url):
    import fcntl
    import multiprocessing
    import threading

    from app.db import serialized_write

    factory = session_factory(db_url)
    lock_file = db_url.split("///", 1)[1] + "-writelock"
    inside: list[int] = []
    overlaps: list[int] = []

    def writer(n: int) -> None:
        with factory() as session, serialized_write(session):
            inside.append(n)
            if len(inside) > 1:
                overlaps.append(n)
            session.add(Conversation(id=f"{n:032x}", status="open"))
            session.commit()
            inside.remove(n)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []

    def try_lock(result) -> None:  # another process: the OS lock is held while inside
        with open(lock_file, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                result.put("acquired")
            except BlockingIOError:
                result.put("blocked")

    ctx = multiprocessing.get_context("fork")
    result = ctx.Queue()
    with factory() as session, serialized_write(session):
        child = ctx.Process(target=try_lock, args=(result,))
        child.start()
        child.join(10)
    assert result.get(timeout=5) == "blocked"
    with factory() as session:
        assert session.query(Conversation).count() == 8


def test_serialized_write_is_a_no_op_without_a_sqlite_file(pg_url):
    from app.db import serialized_write

    with session_factory(pg_url)() as session, serialized_write(session):
        session.add(Conversation(id="b" * 32, status="open"))
        session.commit()
