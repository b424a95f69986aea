"""The chat API routes under /api/v1 (documented in ``openapi.py``)."""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, request

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
from app.models import Message
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
    req = parse_chat_request()
    session = get_session()
    conversation = None
    if req.conversation_id is not None:
        if is_valid_id(req.conversation_id):
            conversation = find_conversation(session, req.conversation_id)
        if conversation is None:
            raise ApiError(404, "conversation_not_found", "No conversation has this id.")
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
        relaxed_commit=bool(current_app.config.get("CHAT_RELAXED_COMMIT")),
    )
    return jsonify(turn_payload(turn))


@bp.get("/conversations/<conversation_id>")
def get_conversation(conversation_id: str):
    _enforce_rate_limit("read", _READ_BUDGET_SCALE)
    session = get_session()
    conversation = (
        find_conversation(session, conversation_id) if is_valid_id(conversation_id) else None
    )
    if conversation is None:
        raise ApiError(404, "conversation_not_found", "No conversation has this id.")
    return jsonify(conversation_payload(session, conversation))


@bp.post("/messages/<message_id>/feedback")
def feedback(message_id: str):
    _enforce_rate_limit("write")
    req = parse_feedback_request()
    session = get_session()
    message = session.get(Message, message_id) if is_valid_id(message_id) else None
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


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())
