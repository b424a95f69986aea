"""Review operations shared by the chat API, the console and the CLI.

Every operation writes the database first and commits; Redis is touched afterwards and its
errors are logged and swallowed, because the reconciler rebuilds the queue from the rows.
"""

from __future__ import annotations

import logging

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import metrics
from app.models import Conversation, Intent, Message, ReviewItem

log = logging.getLogger(__name__)

# Escalation reasons besides the router's (app.nlp.types.ESCALATION_REASONS).
REASON_NOT_HELPFUL = "not_helpful"
REASON_ASKED_FOR_HUMAN = "asked_for_human"

# Priority points: each point is a head start of REVIEW_PRIORITY_STEP_SECONDS in the queue.
PRIORITY_COMPLEX = 1  # complex intent or the complex route
PRIORITY_ASKED_AGAIN = 1  # the customer already asked something in this conversation
PRIORITY_ASKED_FOR_HUMAN = 1  # the customer explicitly asked for a person or voted "not helpful"


def _resolve(session: Session, model, value):
    return value if isinstance(value, model) else session.get(model, value)


def _intent_is_complex(session: Session, intent: str | None) -> bool:
    if not intent:
        return False
    tier = session.scalar(select(Intent.tier).where(Intent.name == intent))
    return tier == "complex"


def compute_priority(
    session: Session,
    *,
    conversation_id: str,
    reason: str,
    intent: str | None,
    route: str | None,
) -> int:
    """Urgency points of a new item; its age adds to them at claim time (see queue.py)."""
    priority = 0
    if route == "complex" or _intent_is_complex(session, intent):
        priority += PRIORITY_COMPLEX
    customer_messages = session.scalar(
        select(func.count()).select_from(Message).where(
            Message.conversation_id == conversation_id, Message.role == "customer"
        )
    )
    if (customer_messages or 0) >= 2:
        priority += PRIORITY_ASKED_AGAIN
    if reason in (REASON_ASKED_FOR_HUMAN, REASON_NOT_HELPFUL):
        priority += PRIORITY_ASKED_FOR_HUMAN
    return priority


def escalate(
    session: Session,
    *,
    conversation: Conversation | str,
    message: Message | str,
    reason: str,
    draft_message: Message | str | None = None,
    intent: str | None = None,
    route: str | None = None,
) -> ReviewItem:
    """Record that a human must look at ``message`` and queue it for the reviewers.

    The row is committed before Redis is touched (the database is the source of truth); when
    Redis is unavailable the error is logged and the reconciler queues the item later. An open
    item for the same customer message is returned instead of creating a second one (a "not
    helpful" vote and a "talk to a person" on the same answer make one item).
    """
    conversation = _resolve(session, Conversation, conversation)
    message = _resolve(session, Message, message)
    if conversation is None or message is None:
        raise ValueError("escalate needs an existing conversation and message")
    draft_id = draft_message.id if isinstance(draft_message, Message) else draft_message
    if draft_message is not None and (intent is None or route is None):
        draft = _resolve(session, Message, draft_message)
        if draft is not None:
            intent = intent or draft.intent
            route = route or draft.route

    existing = session.scalar(
        select(ReviewItem).where(
            ReviewItem.message_id == message.id, ReviewItem.status.in_(("pending", "claimed"))
        )
    )
    if existing is not None:
        return existing

    item = ReviewItem(
        conversation_id=conversation.id,
        message_id=message.id,
        draft_message_id=draft_id,
        reason=(reason or "unspecified")[:64],
        intent=intent,
        route=route,
        status="pending",
        priority=compute_priority(
            session, conversation_id=conversation.id, reason=reason, intent=intent, route=route
        ),
    )
    session.add(item)
    conversation.status = "pending_review"
    session.commit()
    metrics.ESCALATIONS.labels(item.reason).inc()
    _enqueue(item)
    return item


def _enqueue(item: ReviewItem) -> None:
    try:
        from app.services import get_review_queue

        queued = get_review_queue().enqueue(item)
    except Exception:  # noqa: BLE001 - the row is committed; the reconciler will queue it
        log.exception("review item %s recorded but not queued; the reconciler will queue it",
                      item.id)
        return
    if not queued:
        log.warning("review item %s recorded; Redis unavailable, queued by the reconciler later",
                    item.id)
