"""The OpenAPI document is valid and describes what the endpoints really return.

Real responses of every endpoint (successes and each kind of error) are validated against the
response schema the document declares for their path, method and status code.
"""

from __future__ import annotations

import jsonschema
import pytest
from fixtures_chat import add_message
from openapi_spec_validator import validate

from app.db import session_scope
from app.models import ReviewItem


@pytest.fixture
def spec(client):
    resp = client.get("/api/v1/openapi.json")
    assert resp.status_code == 200
    return resp.get_json()


def _check(spec, template, method, resp):
    """Validate ``resp`` against the schema of ``template``/``method``/status in ``spec``."""
    responses = spec["paths"][template][method]["responses"]
    status = str(resp.status_code)
    assert status in responses, f"{method.upper()} {template} returned undocumented {status}"
    declared = responses[status]
    schema = declared["content"]["application/json"]["schema"]
    assert resp.mimetype == "application/json"
    jsonschema.validate(
        resp.get_json(),
        {**schema, "components": spec["components"]},
        cls=jsonschema.Draft202012Validator,
    )
    for header in declared.get("headers", {}):
        assert header in resp.headers, f"{status} must carry {header}"
    return resp.get_json()


def test_the_document_is_valid_openapi_3_1(spec):
    validate(spec)
    assert spec["openapi"].startswith("3.1")
    assert set(spec["paths"]) == {
        "/chat",
        "/conversations/{conversation_id}",
        "/conversations/{conversation_id}/events",
        "/conversations/{conversation_id}/email",
        "/messages/{message_id}/feedback",
        "/customer/conversations",
        "/openapi.json",
    }


def test_real_responses_match_the_document(client, db_url, spec, sample_articles, make_app):
    chat = "/chat"
    body = _check(spec, chat, "post", client.post("/api/v1/chat", json={"message": "hello"}))
    cid = body["conversation_id"]
    _check(spec, chat, "post", client.post("/api/v1/chat", json={"message": " "}))
    _check(
        spec, chat, "post", client.post("/api/v1/chat", data="{", content_type="application/json")
    )
    _check(spec, chat, "post", client.post("/api/v1/chat", data="hi", content_type="text/plain"))
    _check(
        spec,
        chat,
        "post",
        client.post("/api/v1/chat", data="x" * 70_000, content_type="application/json"),
    )
    _check(
        spec,
        chat,
        "post",
        client.post("/api/v1/chat", json={"message": "hi", "conversation_id": "0" * 32}),
    )
    _check(
        spec,
        chat,
        "post",
        client.post(
            "/api/v1/chat", json={"message": "hi"}, headers={"Origin": "https://evil.example"}
        ),
    )

    with session_scope(db_url) as session:
        for item in session.query(ReviewItem):
            item.status = "resolved"
    customer = add_message(db_url, cid, "customer", "where is my card")
    answer = add_message(
        db_url,
        cid,
        "bot",
        "New cards arrive within 5 working days.",
        status="answered",
        html="<p>New cards arrive soon.</p>",
        article_slug="card-arrival",
        in_reply_to=customer,
        confidence=0.9,
        route="simple",
        intent="card_arrival",
    )
    add_message(
        db_url, cid, "agent", "Also see this", article_slug="exchange-rate", in_reply_to=customer
    )
    conv = "/conversations/{conversation_id}"
    history = _check(spec, conv, "get", client.get(f"/api/v1/conversations/{cid}"))
    assert {m["role"] for m in history["messages"]} == {"customer", "bot", "agent"}
    assert history["messages"][-1]["article"]["url"] == "/kb/exchange-rate"
    _check(spec, conv, "get", client.get(f"/api/v1/conversations/{'f' * 32}"))

    feedback = "/messages/{message_id}/feedback"
    _check(
        spec,
        feedback,
        "post",
        client.post(
            f"/api/v1/messages/{answer}/feedback", json={"helpful": False, "comment": "no"}
        ),
    )
    _check(
        spec,
        feedback,
        "post",
        client.post(f"/api/v1/messages/{customer}/feedback", json={"helpful": True}),
    )
    _check(
        spec,
        feedback,
        "post",
        client.post(f"/api/v1/messages/{'e' * 32}/feedback", json={"helpful": True}),
    )
    _check(
        spec,
        feedback,
        "post",
        client.post(f"/api/v1/messages/{answer}/feedback", json={"helpful": 1}),
    )

    limited = make_app(RATE_LIMIT="1/hour").test_client()
    limited.post("/api/v1/chat", json={"message": "first"})
    _check(spec, chat, "post", limited.post("/api/v1/chat", json={"message": "second"}))
