"""Database engine and sessions.

One engine per database URL; Flask requests get a session on ``g`` that is closed on teardown.
CLI commands and background work use ``session_scope`` for a commit-or-rollback block.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flask import Flask, current_app, g
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

_engines: dict[str, Engine] = {}
# One sessionmaker per engine: each ``sessionmaker()`` defines a new Session subclass, and
# SQLAlchemy sets up event dispatch for every new class (measured: ~0.8 ms per request when a
# factory was built for each request's session).
_factories: dict[str, sessionmaker[Session]] = {}


# The first line of a driver error that says the schema is missing or older than the code
# (SQLite, PostgreSQL): the cure is ``tierdesk db upgrade``, not trying again.
SCHEMA_HINTS = ("no such table", "no such column", "does not exist", "undefinedtable")


def schema_missing(message: str) -> bool:
    """True when a database error's first line says the tierdesk schema is not there."""
    first_line = message.splitlines()[0].lower() if message else ""
    return any(hint in first_line for hint in SCHEMA_HINTS)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


def get_engine(url: str) -> Engine:
    """The process-wide engine for ``url`` (SQLite files get their folder created)."""
    engine = _engines.get(url)
    if engine is None:
        # A pre-ping (one round trip per checkout) matters only for a server that can drop
        # connections; a SQLite file cannot.
        kwargs: dict = {"future": True, "pool_pre_ping": not url.startswith("sqlite")}
        if url.startswith("sqlite"):
            path = url.split("///", 1)[-1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(engine, "connect", _sqlite_pragmas)
        _engines[url] = engine
    return engine


def dispose_engine(url: str) -> None:
    engine = _engines.pop(url, None)
    _factories.pop(url, None)
    if engine is not None:
        engine.dispose()


def session_factory(url: str) -> sessionmaker[Session]:
    """The process-wide session factory for ``url`` (sessions do not expire on commit)."""
    engine = get_engine(url)
    factory = _factories.get(url)
    if factory is None or factory.kw.get("bind") is not engine:
        factory = sessionmaker(bind=engine, expire_on_commit=False)
        _factories[url] = factory
    return factory


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error."""
    url = url or current_app.config["SQLALCHEMY_DATABASE_URI"]
    session = session_factory(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def get_session() -> Session:
    """The request's session (opened lazily, closed on teardown)."""
    if "db_session" not in g:
        g.db_session = session_factory(current_app.config["SQLALCHEMY_DATABASE_URI"])()
    return g.db_session


def _close_session(_exc: BaseException | None) -> None:
    session = g.pop("db_session", None)
    if session is not None:
        session.close()


def init_app(app: Flask) -> None:
    app.teardown_appcontext(_close_session)


ROW_ID_MAX = 2**63 - 1  # a signed 64-bit integer, the widest id either database stores


def row_id(text: str | None) -> int | None:
    """``text`` as an id or position to compare with stored ones (a query parameter, a form
    field), or None when it is not ASCII decimal digits (an optional ``-``) within what the
    database stores: ``int("²")`` fails and 2**63 overflows the driver."""
    if not text or not re.fullmatch(r"-?[0-9]{1,19}", text):
        return None
    value = int(text)
    return value if -ROW_ID_MAX <= value <= ROW_ID_MAX else None
