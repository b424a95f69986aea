"""E-mail follow-up end to end against a real local SMTP server (aiosmtpd) started by the test:
the customer leaves an address while waiting, the reviewer's reply is sent there with a link
that reopens the conversation; a server that is down is retried; business hours."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from email import message_from_bytes

import pytest
from aiosmtpd.controller import Controller
from fixtures_review import csrf_from, login

from app.notify import outbox
from app.notify.hours import availability, parse_business_hours


class Inbox:
    def __init__(self) -> None:
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        self.messages.append((envelope.rcpt_tos, message_from_bytes(envelope.content)))
        return "250 OK"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    yield controller, inbox
    controller.stop()


@pytest.fixture
def mail_app(make_app, smtp):
    controller, _inbox = smtp
    return make_app(
        SMTP_HOST="127.0.0.1",
        SMTP_PORT=controller.port,
        SMTP_FROM="help@northwind.example",
        PUBLIC_URL="https://support.northwind.example",
    )


def _waiting_conversation(client) -> str:
    body = client.post("/api/v1/chat", json={"message": "where is my card"}).get_json()
    assert body["status"] == "pending_review"
    return body["conversation_id"]


def _reply(app, reviewer, text: str) -> None:
    console = app.test_client()
    login(console, reviewer.email, reviewer.password)
    token = csrf_from(console.get("/console/").get_data(as_text=True))
    console.post("/console/claim", data={"csrf_token": token})
    response = console.post("/console/items/1/reply", data={"csrf_token": token, "text": text})
    assert response.status_code == 302


def test_the_reply_is_e_mailed_with_a_link_that_reopens_the_conversation(mail_app, smtp, reviewer):
    _controller, inbox = smtp
    client = mail_app.test_client()
    cid = _waiting_conversation(client)
    left = client.post(f"/api/v1/conversations/{cid}/email", json={"email": "kim@example.org"})
    assert left.status_code == 200 and left.get_json()["email"] is True
    assert client.get(f"/api/v1/conversations/{cid}").get_json()["handoff"]["email"] is True

    _reply(mail_app, reviewer, "Your card was posted today.")
    assert outbox.deliver_due(mail_app.config["SQLALCHEMY_DATABASE_URI"], mail_app.config) == 1
    [(recipients, message)] = inbox.messages
    assert recipients == ["kim@example.org"]
    assert message["From"] == "help@northwind.example"
    text = message.get_payload(decode=True).decode()
    assert "Your card was posted today." in text
    link = next(line for line in text.splitlines() if "/continue/" in line)
    assert link.startswith("https://support.northwind.example/continue/")

    opened = client.get(link.replace("https://support.northwind.example", ""))
    assert opened.status_code == 302
    assert opened.headers["Location"] == f"/#tierdesk-conversation={cid}"
    assert client.get("/continue/forged-token").status_code == 404


def test_a_down_smtp_server_is_retried(make_app, reviewer):
    port = _free_port()  # nothing listens here yet
    app = make_app(SMTP_HOST="127.0.0.1", SMTP_PORT=port)
    client = app.test_client()
    cid = _waiting_conversation(client)
    client.post(f"/api/v1/conversations/{cid}/email", json={"email": "kim@example.org"})
    _reply(app, reviewer, "Posted.")
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    assert outbox.deliver_due(url, app.config) == 0
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        from sqlalchemy import update

        from app.db import session_scope
        from app.models import Delivery, utcnow

        with session_scope(url) as session:
            session.execute(update(Delivery).values(next_attempt_at=utcnow()))
        assert outbox.deliver_due(url, app.config) == 1
    finally:
        controller.stop()
    assert [r for r, _ in inbox.messages] == [["kim@example.org"]]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "not-an-address",
        "a@b",
        "x" * 400 + "@example.com",
        42,
        "\ud800@example.com",  # a lone surrogate: the database cannot store it
        "a\u0000@example.com",
        "<script>x</script>@example.com",
        "a@-x.com",
        "a@[127.0.0.1]",
        "a@" + "x" * 64 + ".com",
    ],
)
def test_a_bad_address_is_a_400(client, bad):
    cid = _waiting_conversation(client)
    response = client.post(f"/api/v1/conversations/{cid}/email", json={"email": bad})
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_email"


@pytest.mark.parametrize("good", ["a.b+c@sub.example.co.uk", "jörg@münchen.de"])
def test_addresses_people_use_are_taken(client, good):
    cid = _waiting_conversation(client)
    response = client.post(f"/api/v1/conversations/{cid}/email", json={"email": good})
    assert response.status_code == 200


def test_unknown_conversation_is_a_404(client):
    response = client.post(f"/api/v1/conversations/{'0' * 32}/email", json={"email": "a@b.co"})
    assert response.status_code == 404


def test_no_smtp_server_means_no_e_mail(app, client, reviewer):
    cid = _waiting_conversation(client)
    client.post(f"/api/v1/conversations/{cid}/email", json={"email": "kim@example.org"})
    _reply(app, reviewer, "Posted.")
    assert outbox.deliver_due(app.config["SQLALCHEMY_DATABASE_URI"], app.config) == 0


def test_business_hours():
    hours = parse_business_hours("mon-fri 09:00-17:00 Europe/Berlin")
    tuesday_noon = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)  # 12:00 in Berlin
    saturday = datetime(2026, 12, 5, 11, 0, tzinfo=UTC)
    assert hours.is_open(tuesday_noon) and not hours.is_open(saturday)
    assert hours.next_opening(saturday) == datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    config = {"BUSINESS_HOURS": "mon-fri 09:00-17:00 Europe/Berlin"}
    assert availability(config, tuesday_noon) == {"people_available": True, "back_at": None}
    away = availability(config, saturday)
    assert away["people_available"] is False and away["back_at"].startswith("2026-12-07T08:00")
    assert availability({}, saturday)["people_available"] is True
    for bad in ("weekdays", "mon-fri 9-17", "mon-fri 09:00-17:00 Mars/Olympus"):
        with pytest.raises(ValueError, match="TIERDESK_BUSINESS_HOURS"):
            parse_business_hours(bad)
