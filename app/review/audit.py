"""The audit log: who did what and when (``audit_log`` rows, shown to admins in the console).

Every reviewer reply and discard, and every admin action (reviewers, retention, erasure,
export, model activation), is recorded in the same transaction as the action itself, so an
action without its entry cannot be committed. Entries hold ids and counts, never customer text.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import AuditEvent, Reviewer


def record(
    session: Session,
    action: str,
    *,
    reviewer_id: int | None = None,
    actor: str | None = None,
    target: str | None = None,
    detail: dict[str, Any] | None = None,
) -> AuditEvent:
    """Add an entry to ``session`` (the caller commits it with the action).

    ``actor`` names a non-console actor ("cli", "scheduler"); a reviewer is named by id and
    recorded with their e-mail as it is now.
    """
    if actor is None:
        email = (
            session.scalar(select(Reviewer.email).where(Reviewer.id == reviewer_id))
            if reviewer_id is not None
            else None
        )
        actor = email or "unknown"
    event = AuditEvent(
        actor_id=reviewer_id,
        actor=actor[:320],
        action=str(action),
        target=None if target is None else str(target)[:200],
        detail=detail,
    )
    session.add(event)
    return event


def recent(session: Session, limit: int = 200, action: str | None = None) -> list[AuditEvent]:
    query = select(AuditEvent).order_by(AuditEvent.at.desc(), AuditEvent.id.desc()).limit(limit)
    if action:
        query = query.where(AuditEvent.action == action)
    return list(session.scalars(query))
