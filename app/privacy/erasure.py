"""Export and erasure of what is stored about one customer.

A customer is found by a conversation id, or by an e-mail address: the conversations where
they typed it (``pii_refs`` digests), those where they left it for e-mail follow-up
(``conversations.customer_email``) and those of a verified widget identity equal to it
(``conversations.customer_ref``). The texts are stored masked, so an export holds the masked
text: that is everything tierdesk keeps.

Erasing deletes, in one transaction, the conversations with their messages, feedback, review
items and their internal notes, digests and outgoing deliveries (webhooks, e-mails), then removes the review items from Redis and moves the erasure revision so
that every running server drops its cached answers (the answer cache is keyed by the question
as typed). The audit log records that an erasure happened, by whom and how many rows; not
which customer or what was erased. Training examples a reviewer taught are not linked to a
conversation and are kept (masked) until their own retention.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from app.models import (
    Conversation,
    Delivery,
    Feedback,
    Message,
    PiiRef,
    ReviewItem,
    ReviewNote,
    SpotCheck,
    utcnow,
)
from app.privacy.refs import digest
from app.review import audit
from app.state import ERASURE_REVISION, bump_revision
from app.vocab import AuditAction

log = logging.getLogger(__name__)


class NotFound(LookupError):
    """Nothing is stored for the customer asked for."""


def find_conversations(
    session: Session,
    secret: str,
    *,
    conversation_id: str | None = None,
    email: str | None = None,
) -> list[str]:
    """Ids of the customer's conversations, oldest first."""
    if (conversation_id is None) == (email is None):
        raise ValueError("give a conversation id or an e-mail address")
    if conversation_id is not None:
        query = select(Conversation.id).where(Conversation.id == conversation_id.strip())
    else:
        address = email.strip().lower()
        by_text = select(PiiRef.conversation_id).where(
            PiiRef.kind == "email", PiiRef.digest == digest(secret, "email", address)
        )
        # A verified identity that is an e-mail address, as the host site spelled it or in
        # lower case (customer ids are compared exactly).
        identities = {digest(secret, "customer", v) for v in (email.strip(), address)}
        query = select(Conversation.id).where(
            or_(
                Conversation.id.in_(by_text),
                Conversation.customer_ref.in_(identities),
                func.lower(Conversation.customer_email) == address,  # left for e-mail follow-up
            )
        )
    return list(session.scalars(query.order_by(Conversation.created_at, Conversation.id)))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") + "Z" if value else None


def _row(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {}
    for column in obj.__table__.columns:
        if column.key in skip:
            continue
        value = getattr(obj, column.key)
        out[column.key] = _iso(value) if isinstance(value, datetime) else value
    return out


def export(session: Session, conversation_ids: list[str]) -> dict[str, Any]:
    """Everything stored about these conversations, as one JSON-ready document."""
    conversations = []
    for cid in conversation_ids:
        conversation = session.get(Conversation, cid)
        if conversation is None:
            continue
        messages = list(
            session.scalars(
                select(Message).where(Message.conversation_id == cid).order_by(Message.seq)
            )
        )
        ids = [m.id for m in messages]
        feedback = list(session.scalars(select(Feedback).where(Feedback.message_id.in_(ids))))
        items = list(session.scalars(select(ReviewItem).where(ReviewItem.conversation_id == cid)))
        entry = _row(conversation, skip=("customer_ref", "client_key"))
        entry["verified_identity"] = conversation.customer_ref is not None
        entry["messages"] = [_row(m) for m in messages]
        entry["feedback"] = [_row(f) for f in feedback]
        entry["review_items"] = [_row(i) for i in items]
        entry["spot_checks"] = [
            _row(c)
            for c in session.scalars(select(SpotCheck).where(SpotCheck.conversation_id == cid))
        ]
        entry["review_notes"] = [
            _row(n)
            for n in session.scalars(
                select(ReviewNote).where(ReviewNote.item_id.in_([i.id for i in items]))
            )
        ]
        conversations.append(entry)
    return {
        "exported_at": _iso(utcnow()),
        "note": "Texts are stored with card numbers, IBANs, e-mail addresses and phone "
        "numbers masked; this is everything tierdesk keeps about these conversations.",
        "conversations": conversations,
    }


@dataclass
class ErasureReport:
    conversations: int = 0
    messages: int = 0
    feedback: int = 0
    review_items: int = 0
    pii_refs: int = 0
    review_notes: int = 0
    deliveries: int = 0
    spot_checks: int = 0
    redis_items: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "messages": self.messages,
            "feedback": self.feedback,
            "review_items": self.review_items,
            "pii_refs": self.pii_refs,
            "review_notes": self.review_notes,
            "deliveries": self.deliveries,
            "spot_checks": self.spot_checks,
        }

    def summary(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in self.as_dict().items())


def delete_conversations(
    session: Session, conversation_ids: list[str]
) -> tuple[ErasureReport, list[int]]:
    """Delete the rows of these conversations in ``session`` (the caller commits); returns the
    counts and the review item ids to remove from Redis. Shared by erasure and retention."""
    report = ErasureReport()
    if not conversation_ids:
        return report, []
    message_ids = select(Message.id).where(Message.conversation_id.in_(conversation_ids))
    item_ids = list(
        session.scalars(
            select(ReviewItem.id).where(ReviewItem.conversation_id.in_(conversation_ids))
        )
    )
    report.feedback = _count(session, delete(Feedback).where(Feedback.message_id.in_(message_ids)))
    report.review_notes = _count(
        session, delete(ReviewNote).where(ReviewNote.item_id.in_(item_ids))
    )
    report.deliveries = _count(
        session, delete(Delivery).where(Delivery.conversation_id.in_(conversation_ids))
    )
    report.review_items = _count(
        session, delete(ReviewItem).where(ReviewItem.conversation_id.in_(conversation_ids))
    )
    report.spot_checks = _count(
        session, delete(SpotCheck).where(SpotCheck.conversation_id.in_(conversation_ids))
    )
    report.pii_refs = _count(
        session, delete(PiiRef).where(PiiRef.conversation_id.in_(conversation_ids))
    )
    report.messages = _count(
        session, delete(Message).where(Message.conversation_id.in_(conversation_ids))
    )
    report.conversations = _count(
        session, delete(Conversation).where(Conversation.id.in_(conversation_ids))
    )
    return report, item_ids


def _count(session: Session, statement) -> int:
    return session.execute(statement.execution_options(synchronize_session=False)).rowcount or 0


def forget_in_redis(queue, item_ids: list[int], report: ErasureReport) -> None:
    if queue is None or not item_ids:
        return
    # complete() logs and swallows Redis errors: the rows are gone, so the next claim or
    # reconcile drops any id left behind.
    for item_id in item_ids:
        queue.complete(item_id)
    report.redis_items = len(item_ids)


def erase(
    session: Session,
    conversation_ids: list[str],
    *,
    queue=None,
    engine=None,
    reviewer_id: int | None = None,
    actor: str | None = None,
) -> ErasureReport:
    """Delete everything stored about these conversations everywhere; audited (counts only)."""
    if not conversation_ids:
        raise NotFound("nothing is stored for this customer")
    report, item_ids = delete_conversations(session, conversation_ids)
    bump_revision(session, ERASURE_REVISION)
    audit.record(
        session,
        AuditAction.ERASE,
        reviewer_id=reviewer_id,
        actor=actor,
        detail=report.as_dict(),
    )
    session.commit()
    forget_in_redis(queue, item_ids, report)
    if engine is not None:
        engine.forget_cached_answers()
    return report
