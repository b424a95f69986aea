"""E-mail follow-up: a customer who leaves an address while waiting for a person gets the
reviewer's replies by e-mail too, with a link that reopens the conversation in the widget.

The link carries the conversation id signed with SECRET_KEY (``/continue/<token>``, valid for
``FOLLOWUP_LINK_DAYS``); the page redirects to ``/#tierdesk-conversation=<id>``, which the widget
adopts (the id stays in the fragment, never in a server log).

Outside the business hours (``hours.py``) the widget says when a person will be back.
"""

from __future__ import annotations

import re

from flask import Blueprint, abort, current_app, redirect
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from app.models import Conversation, Message
from app.notify.outbox import queue_email

bp = Blueprint("followup", __name__)

FOLLOWUP_LINK_DAYS = 30
# A mailbox as people type one: a local part of letters, digits and the printable signs an
# address may hold (no quotes, angle brackets, spaces or control characters), and a domain of
# letter-digit-hyphen labels (no leading or trailing hyphen, at most 63 characters each, letters
# of any script) ending in a top-level name of two or more letters.
EMAIL_RE = re.compile(
    r"[\w.!#$%&'*+/=?^`{|}~-]{1,64}"
    r"@(?:(?!-)[\w-]{1,63}(?<!-)\.)+[^\W\d_]{2,63}"
)


def _serializer(secret: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt="tierdesk-followup")


def continue_link(config, conversation_id: str) -> str:
    token = _serializer(config["SECRET_KEY"]).dumps(conversation_id)
    return f"{(config.get('PUBLIC_URL') or '').rstrip('/')}/continue/{token}"


def valid_email(value: str | None) -> str | None:
    value = (value or "").strip()
    return value if len(value) <= 254 and EMAIL_RE.fullmatch(value) else None


def email_reply(
    session: Session, config, conversation: Conversation | None, reply: Message
) -> None:
    """Queue the reply as an e-mail when the customer left an address (and SMTP is set)."""
    if conversation is None or not conversation.customer_email or not config:
        return
    text = (
        f"{reply.text}\n\n"
        "Continue the conversation here:\n"
        f"{continue_link(config, conversation.id)}\n"
    )
    queue_email(
        session,
        config,
        conversation.customer_email,
        "A reply to your question",
        text,
        conversation_id=conversation.id,
    )


@bp.get("/continue/<token>")
def continue_conversation(token: str):
    try:
        conversation_id = _serializer(current_app.config["SECRET_KEY"]).loads(
            token, max_age=FOLLOWUP_LINK_DAYS * 86400
        )
    except BadSignature:
        abort(404)
    return redirect(f"/#tierdesk-conversation={conversation_id}")
