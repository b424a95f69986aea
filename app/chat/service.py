"""What the chat API does with a message: store it, ask the engine, answer or hand over to a
person, and store the outcome with its routing trace.

Every customer message becomes a ``Message(role="customer")`` row and every turn of the bot a
``Message(role="bot")`` row that replies to it (``in_reply_to``):

- ``status="answered"``: the answer's text, sanitised HTML and article, shown to the customer;
- ``status="pending_review"``: the bot's draft (if it had one) with the routing trace, kept for
  the reviewer; customers see only a "a person will answer shortly" notice in its place.

A random ``SPOT_CHECK_SHARE`` of the answered turns also gets a ``SpotCheck`` row in the same
transaction, for a reviewer to judge afterwards (``app.review.spot_checks``).

A reviewer's reply arrives later as a ``Message(role="agent")`` written by the console.

The engine sees the customer's text as typed; what is stored (the message, the trace, a
feedback comment) is masked first (``app.privacy.mask``), and e-mail addresses are kept only as
keyed digests (``app.privacy.refs``) so that an export or erasure can find the conversation.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy import JSON, func, null, select
from sqlalchemy.orm import Session

from app import metrics
from app.chat.articles import ArticleCache, ArticleView
from app.chat.durability import relax_commit_durability
from app.message_view import article_ref, iso, message_payload
from app.models import (
    Article,
    Conversation,
    Feedback,
    Message,
    ReviewItem,
    new_id,
    next_seq,
    utcnow,
)
from app.nlp.person_request import asks_for_human
from app.nlp.types import Decision
from app.privacy import get_masker
from app.privacy.refs import email_refs
from app.vocab import OPEN_STATUSES, ConversationState, Reason

log = logging.getLogger(__name__)

HISTORY_LIMIT = 200
MAX_SUGGESTIONS = 5


@dataclass
class Turn:
    """The outcome of one customer message, as the API reports it."""

    conversation: Conversation
    customer: Message
    bot: Message | None  # None while a person holds the conversation (the bot is silent)
    article: ArticleView | None
    suggestions: list[dict[str, str]]
    asked_for_person: bool = False  # by the button or in words ("I want to talk to a human")


def _json_safe(value: Any) -> Any:
    """``value`` reduced to what a JSON column holds: NumPy numbers become floats, NaN null."""

    def fallback(obj: Any) -> Any:
        try:
            return float(obj)
        except (TypeError, ValueError):
            return str(obj)

    return json.loads(json.dumps(value, default=fallback), parse_constant=lambda _name: None)


# Parts of a routing trace tierdesk itself names, which the canary and experiment metrics read
# back from stored messages: never customer text, and a version id's timestamp digits
# (20261201-145707-...) can pass for a card number, so the masker must not touch them.
TRACE_KEPT_AS_IS = ("versions", "experiment")


def stored_trace(trace: dict, reason: str | None, masker) -> dict:
    """The trace as a bot message keeps it: JSON-safe, with the escalation reason, every string
    masked except ``TRACE_KEPT_AS_IS``."""
    trace = _json_safe(trace)
    kept = {k: trace.pop(k) for k in TRACE_KEPT_AS_IS if k in trace}
    return {**masker.mask_value({**trace, "escalation_reason": reason}), **kept}


def find_conversation(session: Session, conversation_id: str) -> Conversation | None:
    return session.get(Conversation, conversation_id)


def _suggestions(
    session: Session,
    decision: Decision | None,
    exclude: str | None,
    articles: ArticleCache,
    revision: object,
) -> list[dict]:
    if decision is None:
        return []
    out: list[dict] = []
    for candidate in decision.suggestions:
        if candidate.slug == exclude or any(s["slug"] == candidate.slug for s in out):
            continue
        view = articles.get(session, candidate.slug, revision)
        if view is not None:
            out.append({"slug": view.slug, "title": view.title})
        if len(out) == MAX_SUGGESTIONS:
            break
    return out


@dataclass
class EngineOutcome:
    decision: Decision | None
    failure: str | None = None  # why there is no decision


def _ask_engine(
    engine, text: str, conversation_id: str, priority=None, started: float | None = None
) -> EngineOutcome:
    """The engine's decision (it caches repeated questions itself), or why there is none.
    ``priority`` and ``started`` feed the engine's BERT admission control."""
    from app.nlp.engine import EngineNotReady

    if not getattr(engine, "ready", False):
        return EngineOutcome(None, Reason.MODELS_UNAVAILABLE)
    try:
        if priority is None:
            return EngineOutcome(engine.answer(text, conversation_id=conversation_id))
        return EngineOutcome(
            engine.answer(text, conversation_id=conversation_id, priority=priority, started=started)
        )
    except EngineNotReady:
        return EngineOutcome(None, Reason.MODELS_UNAVAILABLE)
    except Exception:  # noqa: BLE001 - a broken model must not lose the customer's message
        log.exception("the engine failed on a message; handing it to a person")
        return EngineOutcome(None, Reason.ENGINE_ERROR)


def _escalate(
    session: Session,
    conversation: Conversation,
    customer: Message,
    reason: str,
    draft: Message | None,
) -> None:
    from app.review.service import escalate
    from app.services import get_review_queue

    session.commit()  # the customer's message and the bot's draft are safe before anything else
    escalate(
        session,
        conversation=conversation,
        message=customer,
        reason=reason,
        draft_message=draft,
        intent=draft.intent if draft else None,
        route=draft.route if draft else None,
        queue=get_review_queue(),
    )


def _escalation_reason(
    wants_person: bool, outcome: EngineOutcome, article: ArticleView | None
) -> str | None:
    """Why this turn goes to a person, or None when the bot answers it."""
    decision = outcome.decision
    if wants_person:
        return Reason.ASKED_FOR_HUMAN
    if decision is None:
        return outcome.failure
    if decision.escalate:
        return decision.escalation_reason or Reason.BELOW_THRESHOLD
    if article is None:
        return Reason.NO_ANSWER
    return None


def handle_message(
    session: Session,
    *,
    engine,
    text: str,
    conversation: Conversation | None,
    client_key: str,
    handoff: bool,
    articles: ArticleCache,
    relaxed_commit: bool = False,
    customer_ref: str | None = None,
    priority=None,
    started: float | None = None,
) -> Turn:
    """Answer ``text`` or hand it to a person, and store the turn; see the module docstring.

    The engine is asked before anything is written, so that an answered turn is a single
    transaction (with ``relaxed_commit``, one that does not wait for the disk flush).

    The conversation's handoff state (app/review/handoff.py) decides who answers: with a person,
    the bot is not asked and the message joins the reviewer's item; while pending, an unsure
    turn joins the waiting item instead of opening another; a resolved conversation reopens.
    """
    state = conversation.status if conversation is not None else ConversationState.BOT
    held = state == ConversationState.WITH_PERSON
    wants_person = handoff or asks_for_human(text)
    outcome = EngineOutcome(None)
    # the id exists before the engine is asked: a canary answers whole conversations
    conversation_id = conversation.id if conversation is not None else new_id()
    if not held and (handoff or not wants_person):
        # A plain "talk to a person" needs no draft; a hand-off with a question gets one.
        outcome = _ask_engine(engine, text, conversation_id, priority, started)
    decision = outcome.decision
    proposed = decision.article if decision is not None else None
    revision = getattr(engine, "revisions", None)
    article = articles.get(session, proposed.slug, revision) if proposed else None
    reason = _escalation_reason(wants_person, outcome, article)
    suggestions = _suggestions(
        session, decision, article.slug if article else None, articles, revision
    )
    seq = 0 if conversation is None else next_seq(session, conversation.id)

    new_conversation = conversation is None
    if conversation is None:
        conversation = Conversation(
            id=conversation_id,
            client_key=client_key,
            customer_ref=customer_ref,
            status=ConversationState.BOT,
        )
    masker = get_masker()
    trace = stored_trace(decision.trace if decision is not None else {}, reason, masker)
    refs = email_refs(current_app.config["SECRET_KEY"], conversation.id, masker.emails(text))
    route = decision.route if decision is not None else None
    intent = decision.intent if decision is not None else None
    customer = Message(
        id=new_id(),
        conversation_id=conversation.id,
        seq=seq,
        role="customer",
        text=masker.mask(text),
        route=route,
        intent=intent,
    )
    bot = Message(
        id=new_id(),
        conversation_id=conversation.id,
        seq=seq + 1,
        role="bot",
        in_reply_to=customer.id,
        status="pending_review" if reason else "answered",
        text=article.text if article else "",
        html=article.html if article else None,
        article_slug=article.slug if article else None,
        confidence=float(decision.confidence) if decision is not None else None,
        route=route,
        intent=intent,
        trace=trace,
    )
    if held:
        session.add_all([customer, *refs])
        session.commit()
        _tell_console(conversation, customer, session)
        return Turn(conversation, customer, None, None, [])
    if reason and state == ConversationState.PENDING and awaiting_person(session, conversation.id):
        session.add_all([customer, bot, *refs])  # joins the waiting item: the reviewer sees it
        session.commit()
        _tell_console(conversation, customer, session)
    elif reason:
        if new_conversation:
            session.add(conversation)
        session.add_all([customer, bot, *refs])
        _escalate(session, conversation, customer, reason, bot if decision is not None else None)
    else:
        if state == ConversationState.RESOLVED:
            from app.review.handoff import apply as move_handoff

            move_handoff(session, conversation, "reopen", strict=False)
        check = _spot_check(customer, bot, current_app.config.get("SPOT_CHECK_SHARE", 0.0))
        _store_answered_turn(
            session,
            conversation if new_conversation else None,
            [customer, bot],
            relaxed_commit,
            [*refs, check] if check is not None else refs,
        )
        if check is not None:
            metrics.SPOT_CHECKS.labels("drawn").inc()
    return Turn(
        conversation,
        customer,
        bot,
        article if not reason else None,
        suggestions,
        reason == Reason.ASKED_FOR_HUMAN,
    )


def _spot_check(customer: Message, bot: Message, share: float):
    """The answered turn's ``SpotCheck`` row when it is drawn (probability ``share``), for the
    turn's own transaction; else None (``app.review.spot_checks``)."""
    if share <= 0.0:
        return None
    from app.review.spot_checks import draw, spot_check_of

    return spot_check_of(customer, bot, share) if draw(share) else None


def _tell_console(conversation: Conversation, customer: Message, session: Session) -> None:
    """A customer message that joined an open item, live in the console."""
    from app.live.stream import get_hub

    item_id = session.scalar(
        select(func.max(ReviewItem.id)).where(
            ReviewItem.conversation_id == conversation.id, ReviewItem.status.in_(OPEN_STATUSES)
        )
    )
    get_hub().to_console(
        {
            "type": "message",
            "conversation_id": conversation.id,
            "item_id": item_id,
            "message": {
                "id": customer.id,
                "role": "customer",
                "text": customer.text,
                "created_at": iso(customer.created_at),
            },
        }
    )


def _store_answered_turn(
    session: Session,
    new_conversation: Conversation | None,
    messages: list[Message],
    relaxed_commit: bool,
    extra: list | None = None,
) -> None:
    """One transaction of plain Core INSERTs: an answered turn is the hot path, and the ORM's
    unit of work cost several times more than the INSERTs themselves (measured here)."""
    now = utcnow()
    conversation_rows = (
        [_row(new_conversation, created_at=now, updated_at=now)]
        if new_conversation is not None
        else None
    )
    message_rows = [_row(m, created_at=now) for m in messages]
    if relaxed_commit:
        relax_commit_durability(session)
    if conversation_rows:
        session.execute(Conversation.__table__.insert(), conversation_rows)
    session.execute(Message.__table__.insert(), message_rows)
    if extra:
        session.add_all(extra)  # after the conversation row: they refer to it
    session.commit()


def _row(obj, **values: Any) -> dict[str, Any]:
    """Every column of a transient ORM object as INSERT parameters (unset ones are NULL)."""
    state = obj.__dict__
    row = {c.key: state.get(c.key) for c in obj.__table__.columns}
    row.update(values)
    for column in obj.__table__.columns:
        if row[column.key] is None and isinstance(column.type, JSON):
            row[column.key] = null()  # SQL NULL, not the JSON text 'null'
    return row


def turn_payload(turn: Turn) -> dict[str, Any]:
    """The documented response of ``POST /api/v1/chat``."""
    bot = turn.bot
    if bot is None:  # a person holds the conversation; the message is theirs to answer
        return {
            "conversation_id": turn.conversation.id,
            "message_id": turn.customer.id,
            "status": ConversationState.WITH_PERSON.value,
            "answer": None,
            "confidence": None,
            "route": None,
            "suggestions": [],
            "asked_for_person": False,
        }
    answer = None
    if bot.status == "answered" and turn.article is not None:
        answer = {
            "text": bot.text,
            "html": bot.html or "",
            "article": article_ref(turn.article.slug, turn.article.title),
        }
    return {
        "conversation_id": turn.conversation.id,
        "message_id": bot.id,
        "status": bot.status,
        "answer": answer,
        "confidence": bot.confidence,
        "route": bot.route,
        "suggestions": turn.suggestions,
        "asked_for_person": turn.asked_for_person,
    }


def awaiting_person(session: Session, conversation_id: str) -> bool:
    """True while a review item of the conversation is still open (pending or claimed)."""
    return bool(
        session.scalar(
            select(func.count(ReviewItem.id)).where(
                ReviewItem.conversation_id == conversation_id,
                ReviewItem.status.in_(OPEN_STATUSES),
            )
        )
    )


def conversation_payload(session: Session, conversation: Conversation) -> dict[str, Any]:
    """The documented response of ``GET /api/v1/conversations/<id>``."""
    # The newest HISTORY_LIMIT messages, oldest first: a person's reply in a long conversation
    # must reach the widget (it polls this), not be cut off after the first messages.
    messages = list(
        session.scalars(
            select(Message)
            .where(Message.conversation_id == conversation.id)
            .order_by(Message.seq.desc(), Message.created_at.desc())
            .limit(HISTORY_LIMIT)
        )
    )[::-1]
    slugs = {m.article_slug for m in messages if m.article_slug}
    articles = {a.slug: a for a in session.scalars(select(Article).where(Article.slug.in_(slugs)))}
    answers = [m.id for m in messages if m.role != "customer"]
    votes = dict(
        session.execute(
            select(Feedback.message_id, Feedback.helpful)
            .where(Feedback.message_id.in_(answers))
            .order_by(Feedback.id)  # one per answer; of rows stored twice, the last
        ).all()
    )
    waiting = awaiting_person(session, conversation.id)
    from flask import current_app

    from app.notify.hours import availability
    from app.review.handoff import state_payload

    return {
        "conversation_id": conversation.id,
        "status": "pending_review" if waiting else "open",
        "awaiting_person": waiting,
        "handoff": {
            **state_payload(session, conversation),
            **availability(current_app.config),
            "email": bool(conversation.customer_email),
        },
        "created_at": iso(conversation.created_at),
        "messages": [message_payload(m, articles, votes) for m in messages],
    }


@dataclass
class FeedbackOutcome:
    feedback: Feedback
    escalated: bool
    conversation_status: str


def record_feedback(
    session: Session, message: Message, helpful: bool, comment: str | None
) -> FeedbackOutcome:
    """Store the customer's vote on an answer; "not helpful" hands the question to a person
    (once). An answer has one vote: voting again (another device, a reloaded page) changes it,
    keeping an earlier comment when the new vote has none, so the canary's thumbs-down rate
    counts answers, not clicks."""
    from flask import current_app

    from app.notify.outbox import record_event

    masked = get_masker().mask(comment)
    feedback = session.scalar(
        select(Feedback)
        .where(Feedback.message_id == message.id)
        .order_by(Feedback.id.desc())  # rows stored twice before votes were one: the last
        .limit(1)
    )
    if feedback is None:
        feedback = Feedback(message_id=message.id, helpful=helpful, comment=masked)
        session.add(feedback)
    else:
        feedback.helpful, feedback.created_at = helpful, utcnow()
        if masked is not None:
            feedback.comment = masked
    session.flush()
    conversation = session.get(Conversation, message.conversation_id)
    record_event(
        session,
        current_app.config,
        "feedback.given",
        {
            "conversation_id": conversation.id,
            "message_id": message.id,
            "role": message.role,
            "helpful": helpful,
            "comment": feedback.comment,  # masked, as stored
        },
    )
    escalated = False
    question = session.get(Message, message.in_reply_to) if message.in_reply_to else None
    if not helpful and question is not None and not _has_open_review(session, question.id):
        _escalate(
            session,
            conversation,
            question,
            Reason.NOT_HELPFUL,
            message if message.role == "bot" else None,
        )
        escalated = True
    else:
        session.commit()
    status = "pending_review" if awaiting_person(session, conversation.id) else "open"
    return FeedbackOutcome(feedback, escalated, status)


def _has_open_review(session: Session, customer_message_id: str) -> bool:
    return bool(
        session.scalar(
            select(func.count(ReviewItem.id)).where(
                ReviewItem.message_id == customer_message_id,
                ReviewItem.status.in_(OPEN_STATUSES),
            )
        )
    )
