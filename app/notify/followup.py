"""E-mail follow-up: a customer who leaves an address while waiting for a person gets the
reviewer's replies by e-mail too, with a link that reopens the conversation in the widget.

The link carries the conversation id signed with SECRET_KEY (``/continue/<token>``, valid for
``FOLLOWUP_LINK_DAYS``); the page redirects to ``/#tierdesk-conversation=<id>``, which the widget
adopts (the id stays in the fragment, never in a server log).

Business hours (``TIERDESK_BUSINESS_HOURS``, e.g. ``mon-fri 09:00-17:00 Europe/Berlin``): outside
them the widget says when a person will be back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from flask import Blueprint, abort, current_app, redirect
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from app.models import Conversation, Message
from app.notify.outbox import queue_email

bp = Blueprint("followup", __name__)

FOLLOWUP_LINK_DAYS = 30
EMAIL_RE = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]{2,}$")
DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def _serializer(secret: str) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(secret, salt="tierdesk-followup")


def continue_link(config, conversation_id: str) -> str:
    token = _serializer(config["SECRET_KEY"]).dumps(conversation_id)
    return f"{(config.get('PUBLIC_URL') or '').rstrip('/')}/continue/{token}"


def valid_email(value: str | None) -> str | None:
    value = (value or "").strip()
    return value if len(value) <= 320 and EMAIL_RE.match(value) else None


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
    queue_email(session, config, conversation.customer_email, "A reply to your question", text)


@bp.get("/continue/<token>")
def continue_conversation(token: str):
    try:
        conversation_id = _serializer(current_app.config["SECRET_KEY"]).loads(
            token, max_age=FOLLOWUP_LINK_DAYS * 86400
        )
    except BadSignature:
        abort(404)
    return redirect(f"/#tierdesk-conversation={conversation_id}")


# -- business hours -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BusinessHours:
    days: frozenset[int]  # 0 = Monday
    opens: time
    closes: time
    zone: ZoneInfo

    def is_open(self, moment: datetime) -> bool:
        local = moment.astimezone(self.zone)
        return local.weekday() in self.days and self.opens <= local.time() < self.closes

    def next_opening(self, moment: datetime) -> datetime:
        local = moment.astimezone(self.zone)
        for offset in range(8):
            day = (local + timedelta(days=offset)).date()
            start = datetime.combine(day, self.opens, self.zone)
            if day.weekday() in self.days and start > local:
                return start.astimezone(UTC)
        return moment


def parse_business_hours(spec: str | None) -> BusinessHours | None:
    """``"mon-fri 09:00-17:00 [Zone/Name]"`` (UTC without a zone); None: always staffed."""
    if not spec:
        return None
    match = re.fullmatch(
        r"\s*([a-z]{3})(?:-([a-z]{3}))?\s+(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})(?:\s+(\S+))?\s*",
        spec.lower(),
    )
    if not match or match.group(1) not in DAYS or (match.group(2) or "mon") not in DAYS:
        raise ValueError(f"TIERDESK_BUSINESS_HOURS: expected 'mon-fri 09:00-17:00', got {spec!r}")
    first = DAYS.index(match.group(1))
    last = DAYS.index(match.group(2)) if match.group(2) else first
    days = {d % 7 for d in range(first, last + 1 if last >= first else last + 8)}
    try:
        zone = ZoneInfo(spec.split()[-1]) if match.group(7) else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"TIERDESK_BUSINESS_HOURS: unknown time zone in {spec!r}") from None
    opens = time(int(match.group(3)), int(match.group(4)))
    closes = time(int(match.group(5)), int(match.group(6)))
    return BusinessHours(frozenset(days), opens, closes, zone)


def availability(config, now: datetime | None = None) -> dict:
    """``{"people_available", "back_at"}`` for the widget."""
    hours = parse_business_hours(config.get("BUSINESS_HOURS"))
    now = now or datetime.now(UTC)
    if hours is None or hours.is_open(now):
        return {"people_available": True, "back_at": None}
    back = hours.next_opening(now)
    return {"people_available": False, "back_at": back.isoformat(timespec="minutes")}
