"""Reading and validating request bodies of the chat API.

Rules: JSON only (415 otherwise), a body that parses as a JSON object (400 otherwise), at most
``MAX_CONTENT_LENGTH`` bytes (413, enforced by Flask), fields of the documented types (400),
messages of 1 to 2,000 characters after control characters are stripped and the text trimmed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from flask import request

from app.chat.errors import ApiError
from app.chat.text import MAX_MESSAGE_CHARS, clean_message

_ID_RE = re.compile(r"^[0-9a-f]{32}$")
MAX_COMMENT_CHARS = 2000


def read_json_object() -> dict[str, Any]:
    """The request body as a JSON object, or an ``ApiError``."""
    if request.mimetype != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            "Send the body as JSON with Content-Type: application/json.",
        )
    raw = request.get_data(cache=True)  # raises 413 beyond MAX_CONTENT_LENGTH
    try:
        body = json.loads(raw.decode("utf-8-sig"))  # a BOM some clients write is no error
    except UnicodeDecodeError:
        raise ApiError(400, "invalid_json", "The body is not valid UTF-8.") from None
    except (ValueError, RecursionError):
        raise ApiError(400, "invalid_json", "The body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_json", "The body must be a JSON object.")
    return body


def is_valid_id(value: str) -> bool:
    return bool(_ID_RE.fullmatch(value))


@dataclass(frozen=True)
class ChatRequest:
    message: str
    conversation_id: str | None
    handoff: bool


def parse_chat_request() -> ChatRequest:
    body = read_json_object()
    message = body.get("message")
    if message is None:
        raise ApiError(400, "missing_field", "The field 'message' is required.")
    if not isinstance(message, str):
        raise ApiError(400, "invalid_field", "The field 'message' must be a string.")
    text = clean_message(message)
    if not text:
        raise ApiError(400, "message_empty", "The message is empty.")
    if len(text) > MAX_MESSAGE_CHARS:
        raise ApiError(
            400, "message_too_long", f"The message is longer than {MAX_MESSAGE_CHARS} characters."
        )
    conversation_id = body.get("conversation_id")
    if conversation_id is not None and not isinstance(conversation_id, str):
        raise ApiError(400, "invalid_field", "The field 'conversation_id' must be a string.")
    handoff = body.get("handoff", False)
    if not isinstance(handoff, bool):
        raise ApiError(400, "invalid_field", "The field 'handoff' must be true or false.")
    return ChatRequest(text, conversation_id or None, handoff)


@dataclass(frozen=True)
class FeedbackRequest:
    helpful: bool
    comment: str | None


def parse_feedback_request() -> FeedbackRequest:
    body = read_json_object()
    helpful = body.get("helpful")
    if not isinstance(helpful, bool):
        raise ApiError(
            400,
            "invalid_field" if "helpful" in body else "missing_field",
            "The field 'helpful' must be true or false.",
        )
    comment = body.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise ApiError(400, "invalid_field", "The field 'comment' must be a string.")
    if comment is not None:
        comment = clean_message(comment) or None
        if comment and len(comment) > MAX_COMMENT_CHARS:
            raise ApiError(
                400,
                "comment_too_long",
                f"The comment is longer than {MAX_COMMENT_CHARS} characters.",
            )
    return FeedbackRequest(helpful, comment)
