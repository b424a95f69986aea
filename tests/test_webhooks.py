"""Signed webhooks and Slack notifications end to end, against a real local HTTP receiver started
by the test: events are written to the outbox with the change, delivered with an HMAC-SHA256
signature over the raw body, retried with backoff while the receiver is down, kept across a
restart, and visible (and retryable) in the console."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fixtures_review import build_app, csrf_from, login
from sqlalchemy import select, update

from app.db import session_scope
from app.models import Delivery, utcnow
from app.notify import outbox, signing

SECRET = "whsec-test-3f9a"


class Receiver:
    """A real HTTP server on a fixed loopback port that records what it receives; it can be
    stopped and started again on the same port, and told to answer with an error."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks/tierdesk"
        self.received: list[dict] = []
        self.status = 200
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append(
                    {"path": self.path, "headers": dict(self.headers), "raw": raw}
                )
                self.send_response(receiver.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.allow_reuse_address = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


@pytest.fixture
def receiver():
    server = Receiver()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def hooked_app(make_app, receiver):
    return make_app(
        WEBHOOK_URLS=[receiver.url],
        WEBHOOK_SECRET=SECRET,
        SLACK_WEBHOOK_URL=receiver.url.replace("tierdesk", "slack"),
    )


def _deliver(app) -> int:
    return outbox.deliver_due(app.config["SQLALCHEMY_DATABASE_URI"], app.config)


def _rows(app) -> list[Delivery]:
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        return session.scalars(select(Delivery).order_by(Delivery.id)).all()


def _make_due(app) -> None:
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        session.execute(update(Delivery).values(next_attempt_at=utcnow() - timedelta(seconds=1)))


def test_escalation_reaches_the_receiver_signed(hooked_app, receiver):
    client = hooked_app.test_client()
    body = client.post("/api/v1/chat", json={"message": "my card never came"}).get_json()
    assert _deliver(hooked_app) == 2  # the webhook and the Slack message
    hooks = [r for r in receiver.received if r["path"] == "/hooks/tierdesk"]
    [slack] = [r for r in receiver.received if r["path"] == "/hooks/slack"]
    [hook] = hooks
    # The signature is over the raw bytes, checked before parsing.
    header = hook["headers"]["Tierdesk-Signature"]
    assert signing.verify(SECRET, hook["raw"], header)
    assert not signing.verify(SECRET, hook["raw"] + b" ", header)
    assert not signing.verify("another-secret", hook["raw"], header)
    event = json.loads(hook["raw"])
    assert event["event"] == "conversation.escalated" == hook["headers"]["Tierdesk-Event"]
    assert event["data"]["conversation_id"] == body["conversation_id"]
    assert event["data"]["state"] == "pending" and event["data"]["reason"] == "models_unavailable"
    assert "waiting for a person" in json.loads(slack["raw"])["text"]
    assert "Tierdesk-Signature" not in slack["headers"]
    assert {r.status for r in _rows(hooked_app)} == {"delivered"}


def test_every_handoff_event_is_sent(hooked_app, receiver, reviewer):
    client = hooked_app.test_client()
    cid = client.post("/api/v1/chat", json={"message": "help"}).get_json()["conversation_id"]
    console = hooked_app.test_client()
    login(console, reviewer.email, reviewer.password)
    token = csrf_from(console.get("/console/").get_data(as_text=True))
    console.post("/console/claim", data={"csrf_token": token})
    console.post(
        "/console/items/1/reply",
        data={"csrf_token": token, "text": "Hello!", "then": "with_person"},
    )
    console.post("/console/items/1/resolve", data={"csrf_token": token})
    agent = client.get(f"/api/v1/conversations/{cid}").get_json()["messages"][-1]
    client.post(
        f"/api/v1/messages/{agent['id']}/feedback",
        json={"helpful": True, "comment": "thanks! my card is 4111 1111 1111 1111"},
    )
    _deliver(hooked_app)
    events = [
        json.loads(r["raw"])["event"] for r in receiver.received if r["path"] == "/hooks/tierdesk"
    ]
    assert events == [
        "conversation.escalated",
        "conversation.taken_over",
        "conversation.replied",
        "conversation.resolved",
        "feedback.given",
    ]
    for r in receiver.received:
        if r["path"] == "/hooks/tierdesk":
            assert signing.verify(SECRET, r["raw"], r["headers"]["Tierdesk-Signature"])
    feedback = json.loads(receiver.received[-1]["raw"])["data"]
    assert feedback["comment"] == "thanks! my card is [card ****1111]"  # masked, as stored
    assert not any(b"4111 1111" in r["raw"] for r in receiver.received)


def test_a_receiver_that_is_down_gets_the_event_later_even_after_a_restart(
    hooked_app, receiver, db_url, redis_client, redis_prefix, tmp_path
):
    receiver.stop()
    client = hooked_app.test_client()
    client.post("/api/v1/chat", json={"message": "is anyone there"})
    assert _deliver(hooked_app) == 0
    first = [r for r in _rows(hooked_app) if r.channel == "webhook"][0]
    assert (first.status, first.attempts) == ("pending", 1)
    assert "ConnectionRefused" in first.last_error or "refused" in first.last_error.lower()
    assert first.next_attempt_at > utcnow()  # backed off
    assert _deliver(hooked_app) == 0  # not due yet: nothing is attempted
    assert [r for r in _rows(hooked_app) if r.channel == "webhook"][0].attempts == 1

    # A new process (a restart) finds the row in the database and delivers it once it is due.
    receiver.start()
    restarted = build_app(
        db_url,
        redis_client,
        redis_prefix,
        tmp_path / "restarted",
        WEBHOOK_URLS=[receiver.url],
        WEBHOOK_SECRET=SECRET,
    )
    deadline = time.monotonic() + outbox.backoff_seconds(1) + 5
    while time.monotonic() < deadline and not receiver.received:
        _deliver(restarted)
        time.sleep(0.2)
    [hook] = [r for r in receiver.received if r["path"] == "/hooks/tierdesk"]
    assert signing.verify(SECRET, hook["raw"], hook["headers"]["Tierdesk-Signature"])
    delivered = [r for r in _rows(hooked_app) if r.channel == "webhook"][0]
    assert (delivered.status, delivered.attempts) == ("delivered", 2)


def test_errors_are_retried_with_backoff_then_marked_failed_and_retryable(
    make_app, receiver, reviewer
):
    app = make_app(WEBHOOK_URLS=[receiver.url], WEBHOOK_SECRET=SECRET, DELIVERY_MAX_ATTEMPTS=3)
    receiver.status = 500
    app.test_client().post("/api/v1/chat", json={"message": "hello"})
    for attempt in (1, 2, 3):
        _make_due(app)
        _deliver(app)
        [row] = _rows(app)
        assert row.attempts == attempt and row.last_error == "HTTP 500"
    assert row.status == "failed"
    assert len(receiver.received) == 3
    assert [outbox.backoff_seconds(n) for n in (1, 2, 3, 20)] == [2, 4, 8, 3600]

    console = app.test_client()
    login(console, reviewer.email, reviewer.password)
    page = console.get("/console/deliveries").get_data(as_text=True)
    assert "HTTP 500" in page and "failed" in page
    console.post(f"/console/deliveries/{row.id}/retry", data={"csrf_token": csrf_from(page)})
    receiver.status = 204
    _deliver(app)
    [row] = _rows(app)
    assert row.status == "delivered" and len(receiver.received) == 4


def test_without_endpoints_nothing_is_queued(app):
    app.test_client().post("/api/v1/chat", json={"message": "hello"})
    assert _rows(app) == []


def test_a_slack_warning_when_an_item_passes_the_first_response_target(
    make_app, receiver, redis_client, redis_prefix
):
    from app.review.console_handoff import warn_breaches

    app = make_app(SLACK_WEBHOOK_URL=receiver.url, FIRST_RESPONSE_TARGET_SECONDS=60)
    app.test_client().post("/api/v1/chat", json={"message": "hello"})
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    assert warn_breaches(url, redis_client, redis_prefix, app.config) == 0  # not late yet
    from app.models import ReviewItem

    with session_scope(url) as session:
        session.execute(update(ReviewItem).values(created_at=utcnow() - timedelta(minutes=5)))
    assert warn_breaches(url, redis_client, redis_prefix, app.config) == 1
    assert warn_breaches(url, redis_client, redis_prefix, app.config) == 0  # once per item
    _deliver(app)
    texts = [json.loads(r["raw"])["text"] for r in receiver.received]
    assert any("has waited" in t for t in texts), texts
