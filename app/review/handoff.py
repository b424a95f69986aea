"""The conversation state machine: who answers a conversation, the bot or a person.

::

            escalate              take_over (claim, reply)
    bot ──────────────► pending ──────────────────────► with_person
     ▲ ▲                 │  ▲      return_to_queue        │   │
     │ │   hand_back     │  └─────────────────────────────┘   │
     │ └─────────────────┴──────────── hand_back ─────────────┘
     │                   │ resolve                            │ resolve
     │      reopen       ▼                                    ▼
     └─────────────── resolved ◄──────────────────────────────┘

- ``bot``: the bot answers; an unsure answer or "talk to a person" escalates.
- ``pending``: a review item waits in the queue; the bot still answers what it is sure of and
  the customer's unsure questions join the waiting item instead of opening more.
- ``with_person``: a reviewer claimed the item (or replied): the bot is silent and every
  customer message joins that reviewer's item, live in the console. Left longer than
  ``HANDOFF_REPLY_TIMEOUT_SECONDS`` without a reply to a waiting customer, or when the
  reviewer's lease ran out, it returns to the queue (``return_to_queue``; priority +1 when the
  customer was kept waiting).
- ``resolved``: closed by a reviewer; the customer's next message reopens it with the bot.

``apply`` is the only code that writes ``conversations.status``: one guarded UPDATE (``WHERE
status = <the state it read>``), so two workers cannot both move a conversation from the same
state. Each change also queues its webhook event (``app/notify``) in the same transaction and
publishes a live event to the widget and the console after the commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from flask import current_app, has_app_context
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.live.bus import LiveHub, on_commit
from app.models import Conversation, Message, Reviewer, ReviewItem, utcnow
from app.vocab import ConversationState, ReviewStatus

log = logging.getLogger(__name__)

S = ConversationState


@dataclass(frozen=True)
class Transition:
    sources: frozenset[str]
    target: str
    webhook: str  # the event name receivers get


TRANSITIONS: dict[str, Transition] = {
    "escalate": Transition(frozenset({S.BOT, S.RESOLVED}), S.PENDING, "conversation.escalated"),
    "take_over": Transition(
        frozenset({S.BOT, S.PENDING, S.WITH_PERSON}), S.WITH_PERSON, "conversation.taken_over"
    ),
    "return_to_queue": Transition(
        frozenset({S.WITH_PERSON}), S.PENDING, "conversation.returned_to_queue"
    ),
    "hand_back": Transition(
        frozenset({S.PENDING, S.WITH_PERSON}), S.BOT, "conversation.handed_back"
    ),
    "resolve": Transition(
        frozenset({S.PENDING, S.WITH_PERSON}), S.RESOLVED, "conversation.resolved"
    ),
    "reopen": Transition(frozenset({S.RESOLVED}), S.BOT, "conversation.reopened"),
}


class HandoffError(Exception):
    """A change the state machine does not allow (shown to the reviewer, never a 500)."""


@dataclass(frozen=True)
class Change:
    conversation_id: str
    event: str
    before: str
    after: str
    reviewer_id: int | None


def agent_name(email: str | None) -> str | None:
    """What the widget shows for a reviewer: the e-mail's local part, capitalised."""
    if not email:
        return None
    local = email.split("@", 1)[0].replace(".", " ").replace("_", " ").strip()
    return " ".join(part.capitalize() for part in local.split()) or None


def live_hub() -> LiveHub | None:
    """The live event hub of this app (None outside an app context: CLI and plain tests)."""
    if not has_app_context():
        return None
    from app.live.stream import get_hub

    return get_hub()


def apply(
    session: Session,
    conversation: Conversation,
    event: str,
    *,
    reviewer_id: int | None = None,
    hub: LiveHub | None = None,
    config=None,
    details: dict | None = None,
    strict: bool = True,
) -> Change | None:
    """Move ``conversation`` by ``event`` inside the caller's transaction (the caller commits).

    Returns the change, or None when the conversation already is where ``event`` leads (a
    repeated claim, a second escalation while pending), or, with ``strict=False``, when the
    event does not apply to its state. Raises ``HandoffError`` otherwise. ``details`` go into
    the webhook event's data.
    """
    rule = TRANSITIONS[event]
    before = conversation.status
    assignee = reviewer_id if rule.target == S.WITH_PERSON else None
    if before == rule.target and (
        rule.target != S.WITH_PERSON or conversation.assigned_to == assignee
    ):
        return None
    if before not in rule.sources:
        if not strict:
            return None
        raise HandoffError(f"A conversation that is {before} cannot {event.replace('_', ' ')}.")
    now = utcnow()
    result = session.execute(
        update(Conversation)
        .where(Conversation.id == conversation.id, Conversation.status == before)
        .values(status=rule.target, assigned_to=assignee, state_changed_at=now)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        if strict:
            raise HandoffError("The conversation changed meanwhile; reload and try again.")
        # Another request moved it first (two escalations of one conversation at once): take
        # its state as it is now and apply the event to that, as if it had come second.
        current = session.scalar(
            select(Conversation.status).where(Conversation.id == conversation.id)
        )
        if current is None or current == before:
            raise HandoffError("The conversation changed meanwhile; reload and try again.")
        set_committed_value(conversation, "status", current)
        return apply(session, conversation, event, reviewer_id=reviewer_id, hub=hub,
                     config=config, details=details, strict=False)  # fmt: skip
    set_committed_value(conversation, "status", rule.target)
    set_committed_value(conversation, "assigned_to", assignee)
    set_committed_value(conversation, "state_changed_at", now)
    change = Change(conversation.id, event, before, rule.target, reviewer_id)
    _announce(session, change, rule, hub or live_hub(), config, details or {})
    return change


def _announce(
    session: Session, change: Change, rule: Transition, hub, config, details: dict
) -> None:
    name = None
    if change.after == S.WITH_PERSON and change.reviewer_id is not None:
        reviewer = session.get(Reviewer, change.reviewer_id)
        name = agent_name(reviewer.email if reviewer else None)
    item_id = session.scalar(
        select(func.max(ReviewItem.id)).where(ReviewItem.conversation_id == change.conversation_id)
    )
    config = config if config is not None else (current_app.config if has_app_context() else {})
    from app.notify.outbox import record_event

    record_event(
        session,
        config,
        rule.webhook,
        {
            "conversation_id": change.conversation_id,
            "state": change.after,
            "previous_state": change.before,
            "review_item_id": item_id,
            "reviewer": name,
            **details,
        },
    )
    if hub is None:
        return

    def publish() -> None:
        hub.to_conversation(
            change.conversation_id, {"type": "state", "state": change.after, "agent": name}
        )
        hub.to_console(
            {
                "type": "queue",
                "event": change.event,
                "state": change.after,
                "conversation_id": change.conversation_id,
                "item_id": item_id,
            }
        )

    on_commit(session, publish)


def state_payload(session: Session, conversation: Conversation) -> dict:
    """The ``handoff`` object of the conversation API: the state and who is answering."""
    name = None
    if conversation.status == S.WITH_PERSON and conversation.assigned_to:
        reviewer = session.get(Reviewer, conversation.assigned_to)
        name = agent_name(reviewer.email if reviewer else None)
    return {"state": conversation.status, "agent": name}


# -- conversations left with a person --------------------------------------------------------------


def sweep(db_url: str, queue, hub: LiveHub | None, config) -> int:
    """Return to the queue every conversation whose person let go of it: the reviewer's lease
    ran out, or the customer has waited ``HANDOFF_REPLY_TIMEOUT_SECONDS`` for a reply (then
    with one more priority point). Returns how many went back."""
    from app.db import session_scope

    timeout = timedelta(seconds=int(config.get("HANDOFF_REPLY_TIMEOUT_SECONDS", 600)))
    now = utcnow()
    returned: list[ReviewItem] = []
    with session_scope(db_url) as session:
        held = session.scalars(
            select(Conversation).where(Conversation.status == S.WITH_PERSON).limit(1000)
        ).all()
        for conversation in held:
            item = session.scalar(
                select(ReviewItem)
                .where(
                    ReviewItem.conversation_id == conversation.id,
                    ReviewItem.status.in_((ReviewStatus.PENDING, ReviewStatus.CLAIMED)),
                )
                .order_by(ReviewItem.id.desc())
            )
            last = dict(
                session.execute(
                    select(Message.role, func.max(Message.created_at))
                    .where(Message.conversation_id == conversation.id)
                    .group_by(Message.role)
                ).all()
            )
            customer_at, agent_at = last.get("customer"), last.get("agent")
            since = max(filter(None, [customer_at, conversation.state_changed_at]), default=None)
            waiting = customer_at is not None and (agent_at is None or customer_at > agent_at)
            kept_waiting = waiting and since is not None and now - since > timeout
            lease_live = (
                item is not None
                and item.status == ReviewStatus.CLAIMED
                and item.claimed_by == conversation.assigned_to
                and item.lease_expires_at is not None
                and item.lease_expires_at > now
            )
            if lease_live and not kept_waiting:
                continue
            if item is not None:
                item.status = ReviewStatus.PENDING
                item.claimed_by = None
                item.lease_expires_at = None
                if kept_waiting:
                    item.priority += 1
                returned.append(item)
            apply(session, conversation, "return_to_queue", hub=hub, config=config)
            log.info(
                "conversation %s returned to the queue (%s)",
                conversation.id,
                "customer kept waiting" if kept_waiting else "lease ran out",
            )
    for item in returned:
        queue.complete(item.id)  # drop the old lease and score
        queue.enqueue(item)  # queued again with the new priority
    return len(returned)
