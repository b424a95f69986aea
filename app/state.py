"""Revision counters shared by every process through the database.

A KB import or a training run bumps a counter; running servers compare it with the revision
their in-memory indexes were built from and reload when it moved (no restart needed).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import SystemState

KB_REVISION = "kb_revision"
MODEL_REVISION = "model_revision"
# Moves at every erasure: running servers drop their cached answers (app/privacy/erasure.py).
ERASURE_REVISION = "erasure_revision"


def get_revision(session: Session, key: str) -> int:
    value = session.scalar(select(SystemState.value).where(SystemState.key == key))
    return int(value) if value is not None else 0


def bump_revision(session: Session, key: str) -> int:
    """Increment ``key`` inside the caller's transaction and return the new value."""
    row = session.get(SystemState, key, with_for_update=True)
    if row is None:
        row = SystemState(key=key, value="1")
        session.add(row)
    else:
        row.value = str(int(row.value) + 1)
    session.flush()
    return int(row.value)
