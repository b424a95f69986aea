"""The outbox: every outgoing webhook call, Slack notification and e-mail is a ``deliveries``
row written in the transaction of the change it reports, then delivered by a background thread
with retries and exponential backoff. A crash or restart loses nothing: pending rows are
picked up by the next process (a row is locked for ``LOCK_SECONDS`` while one process sends
it, so two workers do not both send it).

Webhook body (the exact bytes are signed, see ``signing.py``)::

    {"id": "<event id>", "event": "conversation.escalated", "created_at": "...Z",
     "data": {"conversation_id": ..., "state": ..., ...}}

Events: conversation.escalated, conversation.taken_over, conversation.replied,
conversation.handed_back, conversation.resolved, conversation.returned_to_queue,
conversation.reopened, feedback.given.
"""

from __future__ import annotations

import json
import logging
import smtplib
import threading
import time
import urllib.error
import urllib.request
import uuid
from datetime import timedelta
from email.message import EmailMessage
from email.parser import Parser
from urllib.parse import urlsplit

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.db import session_scope
from app.models import Delivery, utcnow
from app.notify import signing
from app.vocab import DeliveryStatus

log = logging.getLogger(__name__)

LOCK_SECONDS = 60
HTTP_TIMEOUT_SECONDS = 5
BACKOFF_BASE_SECONDS = 2.0
BACKOFF_MAX_SECONDS = 3600.0
SLACK_EVENTS = ("conversation.escalated", "review.breach_warning")


def _iso_now() -> str:
    return utcnow().isoformat(timespec="milliseconds") + "Z"


def webhook_urls(config) -> list[str]:
    return [u for u in (config.get("WEBHOOK_URLS") or []) if u]


def record_event(session: Session, config, event: str, data: dict) -> list[Delivery]:
    """Queue ``event`` for every configured webhook (and Slack, for the events people need to
    hear about) in the caller's transaction."""
    rows: list[Delivery] = []
    about = data.get("conversation_id")
    body = json.dumps(
        {"id": uuid.uuid4().hex, "event": event, "created_at": _iso_now(), "data": data},
        separators=(",", ":"),
        sort_keys=True,
    )
    for url in webhook_urls(config):
        rows.append(
            Delivery(channel="webhook", target=url, event=event, body=body, conversation_id=about)
        )
    slack = config.get("SLACK_WEBHOOK_URL")
    if slack and event in SLACK_EVENTS:
        rows.append(
            Delivery(
                channel="slack",
                conversation_id=about,
                target=slack,
                event=event,
                body=json.dumps({"text": slack_text(config, event, data)}),
            )
        )
    session.add_all(rows)
    return rows


def slack_text(config, event: str, data: dict) -> str:
    base = (config.get("PUBLIC_URL") or "").rstrip("/")
    item = data.get("review_item_id")
    link = f" <{base}/console/items/{item}|item #{item}>" if base and item else ""
    if event == "review.breach_warning":
        return f":warning: A question has waited {data.get('waited_s')} s for a person.{link}"
    return f"A customer is waiting for a person ({data.get('reason') or 'escalated'}).{link}"


def queue_email(
    session: Session,
    config,
    to: str,
    subject: str,
    text: str,
    conversation_id: str | None = None,
) -> Delivery | None:
    """Queue an e-mail (None when no SMTP server is configured)."""
    if not config.get("SMTP_HOST"):
        return None
    message = EmailMessage()
    message["From"] = config.get("SMTP_FROM") or "support@localhost"
    message["To"] = to
    message["Subject"] = subject
    message.set_content(text)
    row = Delivery(
        channel="email",
        target=to,
        event="email",
        body=message.as_string(),
        conversation_id=conversation_id,
    )
    session.add(row)
    return row


# -- delivering ---------------------------------------------------------------------------------


class DeliveryFailed(Exception):
    pass


def backoff_seconds(attempts: int) -> float:
    """Wait before attempt ``attempts + 1``: 2, 4, 8 ... seconds, at most an hour."""
    return min(BACKOFF_BASE_SECONDS * 2 ** max(attempts - 1, 0), BACKOFF_MAX_SECONDS)


def _send_http(delivery: Delivery, config) -> None:
    body = delivery.body.encode()
    headers = {"Content-Type": "application/json", "User-Agent": "tierdesk-webhooks"}
    if delivery.channel == "webhook":
        headers["Tierdesk-Event"] = delivery.event
        headers["Tierdesk-Delivery"] = str(delivery.id)
        secret = config.get("WEBHOOK_SECRET")
        if secret:
            headers[signing.HEADER] = signing.sign(secret, body)
    if urlsplit(delivery.target).scheme not in ("http", "https"):
        raise DeliveryFailed(f"not an http(s) URL: {delivery.target}")
    request = urllib.request.Request(delivery.target, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
            response.read(1024)
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryFailed(f"{exc.__class__.__name__}: {exc}") from exc


def _send_email(delivery: Delivery, config) -> None:
    message = Parser().parsestr(delivery.body)
    try:
        with smtplib.SMTP(
            config["SMTP_HOST"], int(config.get("SMTP_PORT") or 25), timeout=10
        ) as smtp:
            if config.get("SMTP_STARTTLS"):
                smtp.starttls()
            if config.get("SMTP_USER"):
                smtp.login(config["SMTP_USER"], config.get("SMTP_PASSWORD") or "")
            smtp.send_message(message)
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryFailed(f"{exc.__class__.__name__}: {exc}") from exc


def _claim(session: Session, delivery_id: int, now) -> bool:
    result = session.execute(
        update(Delivery)
        .where(
            Delivery.id == delivery_id,
            Delivery.status == DeliveryStatus.PENDING,
            or_(Delivery.locked_until.is_(None), Delivery.locked_until < now),
        )
        .values(locked_until=now + timedelta(seconds=LOCK_SECONDS))
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return result.rowcount == 1


def deliver_due(db_url: str, config, limit: int = 50) -> int:
    """Send every delivery that is due; returns how many were delivered."""
    now = utcnow()
    delivered = 0
    max_attempts = int(config.get("DELIVERY_MAX_ATTEMPTS", 10))
    with session_scope(db_url) as session:
        due = session.scalars(
            select(Delivery.id)
            .where(
                Delivery.status == DeliveryStatus.PENDING,
                Delivery.next_attempt_at <= now,
                or_(Delivery.locked_until.is_(None), Delivery.locked_until < now),
            )
            .order_by(Delivery.id)
            .limit(limit)
        ).all()
        for delivery_id in due:
            if not _claim(session, delivery_id, now):
                continue
            delivery = session.get(Delivery, delivery_id)
            try:
                (_send_email if delivery.channel == "email" else _send_http)(delivery, config)
            except DeliveryFailed as exc:
                delivery.attempts += 1
                delivery.last_error = str(exc)[:2000]
                delivery.locked_until = None
                if delivery.attempts >= max_attempts:
                    delivery.status = DeliveryStatus.FAILED
                    log.error("delivery %s failed for good: %s", delivery.id, exc)
                else:
                    delivery.next_attempt_at = utcnow() + timedelta(
                        seconds=backoff_seconds(delivery.attempts)
                    )
                    log.warning("delivery %s failed (%s); retrying", delivery.id, exc)
            else:
                delivery.attempts += 1
                delivery.status = DeliveryStatus.DELIVERED
                delivery.delivered_at = utcnow()
                delivery.locked_until = None
                delivered += 1
            session.commit()
    return delivered


def retry(session: Session, delivery_id: int) -> bool:
    """Give a failed delivery a fresh set of attempts (from the console)."""
    result = session.execute(
        update(Delivery)
        .where(Delivery.id == delivery_id, Delivery.status == DeliveryStatus.FAILED)
        .values(status=DeliveryStatus.PENDING, attempts=0, next_attempt_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return result.rowcount == 1


class Deliverer:
    """Delivers due rows every ``interval`` seconds (sooner when ``wake`` is called)."""

    def __init__(self, db_url: str, config, interval: float = 1.0) -> None:
        self.db_url = db_url
        self.config = config
        self.interval = interval
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deliverer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                deliver_due(self.db_url, self.config)
            except Exception:  # noqa: BLE001 - a database hiccup must not end the thread
                log.exception("delivering the outbox failed; retrying")
                time.sleep(self.interval)
            self._wake.wait(self.interval)
            self._wake.clear()
