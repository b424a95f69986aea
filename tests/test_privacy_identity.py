"""Verified widget identities: history on any device for a signed customer id; a forged,
missing or other customer's signature never reveals a conversation."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from app.cli import main
from app.db import session_scope
from app.models import Conversation, Message
from app.privacy.identity import sign

SECRET = "host-site-identity-secret"


def _headers(customer_id: str, secret: str = SECRET) -> dict[str, str]:
    return {
        "X-Tierdesk-Customer-Id": customer_id,
        "X-Tierdesk-Customer-Hash": sign(secret, customer_id),
    }


@pytest.fixture
def identity_app(make_app):
    return make_app(IDENTITY_SECRET=SECRET)


def _chat(client, headers=None, **body):
    return client.post(
        "/api/v1/chat", json={"message": "my card never came", **body}, headers=headers or {}
    )


def _stored_messages(app) -> int:
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        return session.scalar(select(func.count(Message.id)))


def test_a_verified_customer_sees_their_history_on_another_device(identity_app):
    laptop, phone = identity_app.test_client(), identity_app.test_client()
    first = _chat(laptop, _headers("cust-42")).get_json()
    cid = first["conversation_id"]
    assert uuid.UUID(cid).version == 4  # 122 random bits: unguessable for anonymous visitors
    listed = phone.get("/api/v1/customer/conversations", headers=_headers("cust-42")).get_json()
    assert [c["conversation_id"] for c in listed["conversations"]] == [cid]
    history = phone.get(f"/api/v1/conversations/{cid}", headers=_headers("cust-42"))
    assert history.status_code == 200
    assert history.get_json()["messages"][0]["text"] == "my card never came"
    assert _chat(phone, _headers("cust-42"), conversation_id=cid).status_code == 200
    with session_scope(identity_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        ref = session.get(Conversation, cid).customer_ref
    assert ref and "cust-42" not in ref  # a keyed digest, not the id


@pytest.mark.parametrize(
    "headers",
    [
        {},  # anonymous, holding the id
        _headers("cust-43"),  # another verified customer
        _headers("cust-42", secret="guessed-secret"),  # forged
        {"X-Tierdesk-Customer-Id": "cust-42"},  # signature missing
    ],
    ids=["anonymous", "other-customer", "forged", "unsigned"],
)
def test_nobody_else_reaches_a_verified_conversation(identity_app, headers):
    owner = identity_app.test_client()
    cid = _chat(owner, _headers("cust-42")).get_json()["conversation_id"]
    history = owner.get(f"/api/v1/conversations/{cid}", headers=_headers("cust-42")).get_json()
    answer_id = history["messages"][-1]["id"]
    before = _stored_messages(identity_app)
    intruder = identity_app.test_client()
    responses = [
        intruder.get(f"/api/v1/conversations/{cid}", headers=headers),
        _chat(intruder, headers, conversation_id=cid),
        intruder.post(
            f"/api/v1/messages/{answer_id}/feedback", json={"helpful": False}, headers=headers
        ),
    ]
    forged = headers and "cust-43" not in headers.get("X-Tierdesk-Customer-Id", "")
    for response in responses:
        body = response.get_json()
        if forged:
            assert response.status_code == 403 and body["error"]["code"] == "identity_invalid"
        else:
            assert response.status_code == 404 and cid not in response.get_data(as_text=True)
    listed = intruder.get("/api/v1/customer/conversations", headers=headers)
    assert listed.status_code in (401, 403) if not headers or forged else listed.status_code == 200
    if listed.status_code == 200:
        assert listed.get_json() == {"conversations": []}
    assert _stored_messages(identity_app) == before  # nothing was written


def test_an_anonymous_conversation_becomes_the_customers_when_they_log_in(identity_app):
    browser = identity_app.test_client()
    cid = _chat(browser).get_json()["conversation_id"]
    assert browser.get(f"/api/v1/conversations/{cid}").status_code == 200  # bearer id
    assert _chat(browser, _headers("cust-7"), conversation_id=cid).status_code == 200
    assert browser.get(f"/api/v1/conversations/{cid}").status_code == 404  # now theirs only
    assert (
        browser.get(f"/api/v1/conversations/{cid}", headers=_headers("cust-7")).status_code == 200
    )


def test_without_a_configured_secret_everyone_is_anonymous(app):
    client = app.test_client()
    response = _chat(client, _headers("cust-42"))
    assert response.status_code == 200
    cid = response.get_json()["conversation_id"]
    assert client.get(f"/api/v1/conversations/{cid}").status_code == 200
    assert (
        client.get("/api/v1/customer/conversations", headers=_headers("cust-42")).status_code == 401
    )


def test_erasure_by_email_finds_a_verified_identity(identity_app):
    client = identity_app.test_client()
    cid = _chat(client, _headers("Lea@Example.org")).get_json()["conversation_id"]
    runner = identity_app.test_cli_runner()
    result = runner.invoke(main, ["privacy", "erase", "--email", "Lea@Example.org", "--yes"])
    assert result.exit_code == 0, result.output
    with session_scope(identity_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert session.get(Conversation, cid) is None


def test_preflight_allows_the_identity_headers(make_app):
    app = make_app(IDENTITY_SECRET=SECRET, CORS_ORIGINS=["https://bank.example"])
    response = app.test_client().options(
        "/api/v1/chat",
        headers={
            "Origin": "https://bank.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, x-tierdesk-customer-id, x-tierdesk-customer-hash",
        },
    )
    assert response.status_code == 204
    allowed = response.headers["Access-Control-Allow-Headers"]
    assert "X-Tierdesk-Customer-Id" in allowed and "X-Tierdesk-Customer-Hash" in allowed
