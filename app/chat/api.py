"""The chat API routes under /api/v1 (documented in ``openapi.py``)."""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, request
from sqlalchemy import select

from app.chat import cors
from app.chat.articles import ArticleCache
from app.chat.errors import ApiError
from app.chat.inputs import is_valid_id, parse_chat_request, parse_feedback_request
from app.chat.openapi import openapi_document
from app.chat.priority import chat_priority
from app.chat.service import (
    conversation_payload,
    find_conversation,
    handle_message,
    record_feedback,
    turn_payload,
)
from app.db import get_session
from app.metrics import FEEDBACK
from app.models import Conversation, Message
from app.privacy import identity as identities
from app.ratelimit import RateLimiter, client_address, client_key, parse_limit
from app.services import get_engine, get_redis

bp = Blueprint("chat", __name__)
bp.before_request(cors.handle_preflight)
bp.after_request(cors.add_headers)

_LIMITER_KEY = "tierdesk.ratelimiter"
_ARTICLES_KEY = "tierdesk.chat_articles"
# Reading a conversation (the widget polls it while a person is on the way) gets a larger
# budget than writing: polls every few seconds must not use up the customer's messages.
_READ_BUDGET_SCALE = 10


def _limiter() -> RateLimiter:
    limiter = current_app.extensions.get(_LIMITER_KEY)
    if limiter is None:
        limiter = RateLimiter(
            get_redis(),
            current_app.config["REDIS_PREFIX"],
            parse_limit(current_app.config["RATE_LIMIT"]),
        )
        current_app.extensions[_LIMITER_KEY] = limiter
    return limiter


def _articles() -> ArticleCache:
    return current_app.extensions.setdefault(_ARTICLES_KEY, ArticleCache())


def _client() -> str:
    address = client_address(request, int(current_app.config.get("TRUSTED_PROXIES", 0)))
    return client_key(address, current_app.config["SECRET_KEY"])


def _identity() -> identities.Identity:
    """The caller's verified customer identity, or anonymous; a forged one is a 403."""
    try:
        return identities.from_request(
            request, current_app.config.get("IDENTITY_SECRET"), current_app.config["SECRET_KEY"]
        )
    except identities.InvalidIdentity as exc:
        raise ApiError(403, "identity_invalid", str(exc)) from None


def _visible_conversation(session, conversation_id: str, who: identities.Identity):
    """The conversation when this caller may see it; otherwise None (reported as 404)."""
    conversation = (
        find_conversation(session, conversation_id) if is_valid_id(conversation_id) else None
    )
    if conversation is None or not who.may_access(conversation.customer_ref):
        return None
    return conversation


def _enforce_rate_limit(bucket: str, scale: int = 1) -> None:
    verdict = _limiter().hit(bucket, _client(), scale)
    if not verdict.allowed:
        raise ApiError(
            429,
            "rate_limited",
            f"Too many requests; try again in {verdict.retry_after} s.",
            {"Retry-After": str(verdict.retry_after)},
        )


@bp.post("/chat")
def chat():
    _enforce_rate_limit("write")
    who = _identity()
    req = parse_chat_request()
    session = get_session()
    conversation = None
    if req.conversation_id is not None:
        conversation = _visible_conversation(session, req.conversation_id, who)
        if conversation is None:
            raise ApiError(404, "conversation_not_found", "No conversation has this id.")
        if who.verified and conversation.customer_ref is None:
            conversation.customer_ref = who.ref  # the visitor logged in: the chat is theirs
    turn = handle_message(
        session,
        engine=get_engine(),
        priority=chat_priority(session, conversation, req.message, _client()),
        started=g.get("request_started"),
        text=req.message,
        conversation=conversation,
        client_key=_client(),
        handoff=req.handoff,
        articles=_articles(),
        customer_ref=who.ref,
        relaxed_commit=bool(current_app.config.get("CHAT_RELAXED_COMMIT")),
    )
    return jsonify(turn_payload(turn))


@bp.get("/conversations/<conversation_id>")
def get_conversation(conversation_id: str):
    _enforce_rate_limit("read", _READ_BUDGET_SCALE)
    who = _identity()
    session = get_session()
    conversation = _visible_conversation(session, conversation_id, who)
    if conversation is None:
        raise ApiError(404, "conversation_not_found", "No conversation has this id.")
    return jsonify(conversation_payload(session, conversation))


def _conversation_or_404(conversation_id: str):
    session = get_session()
    conversation = (
        find_conversation(session, conversation_id) if is_valid_id(conversation_id) else None
    )
    if conversation is None:
        raise ApiError(404, "conversation_not_found", "No conversation has this id.")
    return session, conversation


@bp.get("/conversations/<conversation_id>/events")
def conversation_events(conversation_id: str):
    """Server-sent events of the conversation (app/live): replies, typing, state changes."""
    from app.live.bus import conversation_channel
    from app.live.stream import event_stream, streams_supported

    _enforce_rate_limit("read", _READ_BUDGET_SCALE)
    _session, conversation = _conversation_or_404(conversation_id)
    if not streams_supported():
        raise ApiError(
            503, "live_unavailable", "Live updates are not served here; poll the conversation."
        )
    channel = conversation_channel(current_app.config["REDIS_PREFIX"], conversation.id)
    return event_stream([channel], {"conversation_id": conversation.id})


@bp.post("/conversations/<conversation_id>/email")
def conversation_email(conversation_id: str):
    """Leave an e-mail address: a person's replies are then also sent there."""
    from app.chat.inputs import read_json_object
    from app.notify.followup import valid_email

    _enforce_rate_limit("write")
    body = read_json_object()
    session, conversation = _conversation_or_404(conversation_id)
    raw = body.get("email")
    email = valid_email(raw) if isinstance(raw, str) else None
    if email is None:
        raise ApiError(400, "invalid_email", "Give an e-mail address such as ana@example.com.")
    conversation.customer_email = email
    session.commit()
    return jsonify({"conversation_id": conversation.id, "email": True})


@bp.post("/messages/<message_id>/feedback")
def feedback(message_id: str):
    _enforce_rate_limit("write")
    who = _identity()
    req = parse_feedback_request()
    session = get_session()
    message = session.get(Message, message_id) if is_valid_id(message_id) else None
    if message is not None and _visible_conversation(session, message.conversation_id, who) is None:
        message = None  # another customer's message: as unknown as a wrong id
    if message is None:
        raise ApiError(404, "message_not_found", "No message has this id.")
    if message.role == "customer" or (message.role == "bot" and message.status != "answered"):
        raise ApiError(
            409, "not_an_answer", "Feedback applies to answers of the bot or of a person only."
        )
    outcome = record_feedback(session, message, req.helpful, req.comment)
    FEEDBACK.labels("true" if req.helpful else "false").inc()  # the dashboard's decay signal
    return jsonify(
        {
            "feedback_id": outcome.feedback.id,
            "message_id": message.id,
            "helpful": req.helpful,
            "escalated": outcome.escalated,
            "conversation_status": outcome.conversation_status,
        }
    )


@bp.get("/customer/conversations")
def customer_conversations():
    """A verified customer's conversations, newest first (the widget resumes the first)."""
    _enforce_rate_limit("read", _READ_BUDGET_SCALE)
    who = _identity()
    if not who.verified:
        raise ApiError(
            401, "identity_required", "Only a verified customer identity lists conversations."
        )
    rows = get_session().scalars(
        select(Conversation)
        .where(Conversation.customer_ref == who.ref)
        .order_by(Conversation.updated_at.desc(), Conversation.created_at.desc())
        .limit(50)
    )
    return jsonify(
        {
            "conversations": [
                {
                    "conversation_id": c.id,
                    "created_at": c.created_at.isoformat(timespec="milliseconds") + "Z",
                    "status": c.status,
                }
                for c in rows
            ]
        }
    )


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())
