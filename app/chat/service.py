"""What the chat API does with a message: store it, ask the engine, answer or hand over to a
person, and store the outcome with its routing trace.

Every customer message becomes a ``Message(role="customer")`` row and every turn of the bot a
``Message(role="bot")`` row that replies to it (``in_reply_to``):

- ``status="answered"``: the answer's text, sanitised HTML and article, shown to the customer;
- ``status="pending_review"``: the bot's draft (if it had one) with the routing trace, kept for
  the reviewer; customers see only a "a person will answer shortly" notice in its place.

A reviewer's reply arrives later as a ``Message(role="agent")`` written by the console.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import url_for
from sqlalchemy import JSON, func, null, select
from sqlalchemy.orm import Session

from app.chat.articles import ArticleCache, ArticleView
from app.chat.durability import relax_commit_durability
from app.chat.text import asks_for_human
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
from app.nlp.types import Decision
from app.vocab import OPEN_STATUSES, Reason

log = logging.getLogger(__name__)

PENDING_NOTICE = "Thanks for your patience: a person from our team will answer here shortly."
HISTORY_LIMIT = 200
MAX_SUGGESTIONS = 5


@dataclass
class Turn:
    """The outcome of one customer message, as the API reports it."""

    conversation: Conversation
    customer: Message
    bot: Message
    article: ArticleView | None
    suggestions: list[dict[str, str]]


def _json_safe(value: Any) -> Any:
    """``value`` reduced to what a JSON column holds: NumPy numbers become floats, NaN null."""

    def fallback(obj: Any) -> Any:
        try:
            return float(obj)
        except (TypeError, ValueError):
            return str(obj)

    return json.loads(json.dumps(value, default=fallback), parse_constant=lambda _name: None)


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


def _ask_engine(engine, text: str, priority=None, started: float | None = None) -> EngineOutcome:
    """The engine's decision (it caches repeated questions itself), or why there is none.
    ``priority`` and ``started`` feed the engine's BERT admission control."""
    from app.nlp.engine import EngineNotReady

    if not getattr(engine, "ready", False):
        return EngineOutcome(None, Reason.MODELS_UNAVAILABLE)
    try:
        if priority is None:
            return EngineOutcome(engine.answer(text))
        return EngineOutcome(engine.answer(text, priority=priority, started=started))
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

    conversation.status = "pending_review"
    session.commit()  # the customer's message and the bot's draft are safe before anything else
    escalate(
        session,
        conversation=conversation,
        message=customer,
        reason=reason,
        draft_message=draft,
        intent=draft.intent if draft else None,
        route=draft.route if draft else None,
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
    priority=None,
    started: float | None = None,
) -> Turn:
    """Answer ``text`` or hand it to a person, and store the turn; see the module docstring.

    The engine is asked before anything is written, so that an answered turn is a single
    transaction (with ``relaxed_commit``, one that does not wait for the disk flush).
    """
    wants_person = handoff or asks_for_human(text)
    outcome = EngineOutcome(None)
    if handoff or not wants_person:
        # A plain "talk to a person" needs no draft; a hand-off with a question gets one.
        outcome = _ask_engine(engine, text, priority, started)
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
        conversation = Conversation(id=new_id(), client_key=client_key, status="open")
    trace = _json_safe(decision.trace) if decision is not None else {}
    trace = {**trace, "escalation_reason": reason}
    route = decision.route if decision is not None else None
    intent = decision.intent if decision is not None else None
    customer = Message(
        id=new_id(),
        conversation_id=conversation.id,
        seq=seq,
        role="customer",
        text=text,
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
    if reason:
        if new_conversation:
            session.add(conversation)
        session.add_all([customer, bot])
        _escalate(session, conversation, customer, reason, bot if decision is not None else None)
    else:
        _store_answered_turn(
            session, conversation if new_conversation else None, [customer, bot], relaxed_commit
        )
    return Turn(conversation, customer, bot, article if not reason else None, suggestions)


def _store_answered_turn(
    session: Session,
    new_conversation: Conversation | None,
    messages: list[Message],
    relaxed_commit: bool,
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


def article_ref(slug: str, title: str) -> dict[str, str]:
    return {"slug": slug, "title": title, "url": url_for("web.article", slug=slug)}


def turn_payload(turn: Turn) -> dict[str, Any]:
    """The documented response of ``POST /api/v1/chat``."""
    bot = turn.bot
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
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="milliseconds") + "Z" if value else None


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
    messages = list(
        session.scalars(
            select(Message)
            .where(Message.conversation_id == conversation.id)
            .order_by(Message.seq, Message.created_at)
            .limit(HISTORY_LIMIT)
        )
    )
    slugs = {m.article_slug for m in messages if m.article_slug}
    articles = {a.slug: a for a in session.scalars(select(Article).where(Article.slug.in_(slugs)))}
    waiting = awaiting_person(session, conversation.id)
    return {
        "conversation_id": conversation.id,
        "status": "pending_review" if waiting else "open",
        "awaiting_person": waiting,
        "created_at": _iso(conversation.created_at),
        "messages": [_message_payload(m, articles) for m in messages],
    }


def _message_payload(message: Message, articles: dict[str, Article]) -> dict[str, Any]:
    text, html, article = message.text, None, None
    linked = articles.get(message.article_slug or "")
    if message.role == "bot" and message.status != "answered":
        text = PENDING_NOTICE  # the draft is for the reviewer, not the customer
    elif message.role == "bot":
        html = message.html
        if linked is not None:
            article = article_ref(linked.slug, linked.title)
    elif message.role == "agent" and linked is not None:
        # A reviewer's reply by article: its HTML is the KB's sanitised HTML, never free text.
        html = linked.body_html
        article = article_ref(linked.slug, linked.title)
    return {
        "id": message.id,
        "role": message.role,
        "seq": message.seq,
        "text": text,
        "html": html,
        "article": article,
        "status": message.status if message.role == "bot" else None,
        "in_reply_to": message.in_reply_to,
        "created_at": _iso(message.created_at),
    }


@dataclass
class FeedbackOutcome:
    feedback: Feedback
    escalated: bool
    conversation_status: str


def record_feedback(
    session: Session, message: Message, helpful: bool, comment: str | None
) -> FeedbackOutcome:
    """Store a vote on an answer; "not helpful" hands the question to a person (once)."""
    feedback = Feedback(message_id=message.id, helpful=helpful, comment=comment)
    session.add(feedback)
    session.flush()
    conversation = session.get(Conversation, message.conversation_id)
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
