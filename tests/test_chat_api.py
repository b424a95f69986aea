"""Contract of the chat API: shapes, storage, escalations, input rules, errors, limits, CORS.

The app here has no models loaded, so every question takes the degrade path (stored, handed to
a person with reason "models_unavailable"); answered questions are covered with trained models
in test_chat_answers.py.
"""

from __future__ import annotations

import pytest
import redis
from fixtures_chat import add_message
from redis.backoff import NoBackoff
from redis.retry import Retry
from sqlalchemy import func, select

from app.chat.service import PENDING_NOTICE
from app.db import session_scope
from app.models import Conversation, Feedback, Message, ReviewItem


def _chat(client, message, **extra):
    return client.post("/api/v1/chat", json={"message": message, **extra})


def _rows(db_url, model, **where):
    with session_scope(db_url) as session:
        query = select(model)
        for key, value in where.items():
            query = query.where(getattr(model, key) == value)
        rows = session.scalars(query).all()
        session.expunge_all()
        return rows


def _error(resp, status, code):
    assert resp.status_code == status, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]


# -- degrade path and storage ---------------------------------------------------------------------


def test_without_models_the_message_is_stored_and_handed_to_a_person(client, db_url):
    resp = _chat(client, "  Where is my new card?  ")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["status"] == "pending_review"
    assert body["answer"] is None and body["confidence"] is None and body["route"] is None
    assert body["suggestions"] == []

    [customer] = _rows(db_url, Message, role="customer")
    [bot] = _rows(db_url, Message, role="bot")
    assert customer.text == "Where is my new card?"
    assert customer.conversation_id == body["conversation_id"] == bot.conversation_id
    assert (customer.seq, bot.seq) == (0, 1)
    assert bot.id == body["message_id"] and bot.in_reply_to == customer.id
    assert bot.status == "pending_review"
    assert bot.trace["escalation_reason"] == "models_unavailable"
    [item] = _rows(db_url, ReviewItem)
    assert (item.reason, item.message_id, item.status) == (
        "models_unavailable",
        customer.id,
        "pending",
    )
    [conversation] = _rows(db_url, Conversation)
    assert conversation.status == "pending"  # ConversationState.PENDING
    assert conversation.client_key and "127.0.0.1" not in conversation.client_key


def test_a_conversation_continues_with_its_id_in_order(client, db_url):
    first = _chat(client, "hello").get_json()
    second = _chat(client, "are you there?", conversation_id=first["conversation_id"]).get_json()
    assert second["conversation_id"] == first["conversation_id"]
    messages = client.get(f"/api/v1/conversations/{first['conversation_id']}").get_json()
    assert [(m["seq"], m["role"]) for m in messages["messages"]] == [
        (0, "customer"),
        (1, "bot"),
        (2, "customer"),
        (3, "bot"),
    ]
    assert [m["text"] for m in messages["messages"] if m["role"] == "customer"] == [
        "hello",
        "are you there?",
    ]
    assert len(_rows(db_url, Conversation)) == 1


def test_conversation_shows_a_persons_reply_and_stops_waiting_when_resolved(client, db_url):
    body = _chat(client, "my transfer vanished").get_json()
    cid = body["conversation_id"]
    waiting = client.get(f"/api/v1/conversations/{cid}").get_json()
    assert waiting["awaiting_person"] is True and waiting["status"] == "pending_review"
    assert waiting["messages"][1]["text"] == PENDING_NOTICE

    customer_id = waiting["messages"][0]["id"]
    reply_id = add_message(
        db_url, cid, "agent", "I found it: it arrives <b>tomorrow</b>.", in_reply_to=customer_id
    )
    with session_scope(db_url) as session:
        session.scalar(select(ReviewItem)).status = "resolved"

    after = client.get(f"/api/v1/conversations/{cid}").get_json()
    agent = after["messages"][-1]
    assert agent["id"] == reply_id and agent["role"] == "agent"
    assert agent["text"] == "I found it: it arrives <b>tomorrow</b>."  # text, never HTML
    assert agent["html"] is None and agent["in_reply_to"] == customer_id
    assert after["awaiting_person"] is False and after["status"] == "open"


def test_a_bots_draft_is_kept_for_the_reviewer_but_not_shown_to_the_customer(client, db_url):
    cid = _chat(client, "hi").get_json()["conversation_id"]
    add_message(
        db_url,
        cid,
        "bot",
        "Unsure draft about fees",
        status="pending_review",
        article_slug="card-arrival",
        confidence=0.2,
    )
    shown = client.get(f"/api/v1/conversations/{cid}").get_json()["messages"][-1]
    assert shown["text"] == PENDING_NOTICE and shown["article"] is None and shown["html"] is None


@pytest.mark.parametrize(
    "message",
    [
        "Can I talk to a real person?",
        "human please",
        "I want to speak to an agent",
        "connect me to a representative",
        "AGENT",
        "let me chat with someone",
    ],
)
def test_asking_for_a_person_escalates_without_a_bot_answer(client, db_url, message):
    body = _chat(client, message).get_json()
    assert body["status"] == "pending_review" and body["answer"] is None
    [item] = _rows(db_url, ReviewItem)
    assert item.reason == "asked_for_human"
    assert item.draft_message_id is None  # a bare request for a person needs no draft


def test_the_widgets_handoff_flag_escalates_any_message(client, db_url):
    body = _chat(client, "My card payment was declined twice", handoff=True).get_json()
    assert body["status"] == "pending_review"
    [item] = _rows(db_url, ReviewItem)
    assert item.reason == "asked_for_human"


def test_questions_that_only_mention_staff_are_not_handoffs(client, db_url):
    _chat(client, "How do I add a person to my joint account?")
    [item] = _rows(db_url, ReviewItem)
    assert item.reason == "models_unavailable"


# -- input rules ----------------------------------------------------------------------------------


def test_control_characters_are_stripped_and_any_script_or_emoji_is_kept(client, db_url):
    text = "Carte bloquée 💳 卡被冻结 البطاقة 👩‍👩‍👧"
    body = _chat(client, f"\x00\x1b[31m{text}\x07\u0085").get_json()
    assert body["status"] == "pending_review"
    [customer] = _rows(db_url, Message, role="customer")
    assert customer.text == f"[31m{text}"


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"message": ""}, "message_empty"),
        ({"message": " \n\t "}, "message_empty"),
        ({"message": "\x00\x01\x02"}, "message_empty"),
        ({"message": "x" * 2001}, "message_too_long"),
        ({}, "missing_field"),
        ({"message": None}, "missing_field"),
        ({"message": 42}, "invalid_field"),
        ({"message": ["hi"]}, "invalid_field"),
        ({"message": "hi", "conversation_id": 7}, "invalid_field"),
        ({"message": "hi", "handoff": "yes"}, "invalid_field"),
    ],
)
def test_invalid_messages_get_400_and_store_nothing(client, db_url, payload, code):
    _error(client.post("/api/v1/chat", json=payload), 400, code)
    assert _rows(db_url, Message) == [] and _rows(db_url, Conversation) == []


def test_message_limits_count_characters_after_trimming(client, db_url):
    assert _chat(client, "   " + "é" * 2000 + "   ").status_code == 200
    assert _chat(client, "a").status_code == 200
    _error(_chat(client, "🙂" * 2001), 400, "message_too_long")


@pytest.mark.parametrize(
    ("data", "content_type", "status", "code"),
    [
        ("{", "application/json", 400, "invalid_json"),
        ('"just a string"', "application/json", 400, "invalid_json"),
        ("[1, 2]", "application/json", 400, "invalid_json"),
        (b'{"message": "\xff\xfe"}', "application/json", 400, "invalid_json"),
        ("[" * 5000 + "]" * 5000, "application/json", 400, "invalid_json"),
        ('{"message": "hi"}', "text/plain", 415, "unsupported_media_type"),
        ("message=hi", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        ('{"message": "hi"}', None, 415, "unsupported_media_type"),
    ],
)
def test_bodies_that_are_not_a_json_object_are_refused(
    client, db_url, data, content_type, status, code
):
    headers = {"Content-Type": content_type} if content_type else {}
    _error(client.post("/api/v1/chat", data=data, headers=headers), status, code)
    assert _rows(db_url, Message) == []


def test_bodies_over_64_kib_get_413_json(client, db_url):
    resp = client.post(
        "/api/v1/chat", data='{"message": "' + "a" * 70_000 + '"}', content_type="application/json"
    )
    _error(resp, 413, "payload_too_large")
    assert _rows(db_url, Message) == []


@pytest.mark.parametrize("cid", ["0" * 32, "not-an-id", "../../etc/passwd", "' OR 1=1 --"])
def test_unknown_conversations_get_404(client, db_url, cid):
    _error(_chat(client, "hello", conversation_id=cid), 404, "conversation_not_found")
    resp = client.get(f"/api/v1/conversations/{cid}")
    assert resp.status_code == 404  # "../" never reaches the route: the router's JSON 404
    assert resp.get_json()["error"]["code"] in {"conversation_not_found", "not_found"}
    assert _rows(db_url, Message) == []


def test_flask_errors_on_api_paths_are_json_and_elsewhere_html(client):
    _error(client.get("/api/v1/no-such-thing"), 404, "not_found")
    resp = client.get("/api/v1/chat")
    _error(resp, 405, "method_not_allowed")
    assert "POST" in resp.headers["Allow"]
    _error(client.delete("/api/v1/conversations/" + "0" * 32), 405, "method_not_allowed")
    page = client.get("/no-such-page")
    assert page.status_code == 404 and page.mimetype == "text/html"


# -- feedback -------------------------------------------------------------------------------------


@pytest.fixture
def answered(client, db_url, sample_articles):
    """A conversation whose last message is an answer of the bot (as the router stores it)."""
    body = _chat(client, "where is my card").get_json()
    with session_scope(db_url) as session:
        for item in session.scalars(select(ReviewItem)):
            item.status = "resolved"
    customer_id = add_message(db_url, body["conversation_id"], "customer", "and how long?")
    bot_id = add_message(
        db_url,
        body["conversation_id"],
        "bot",
        "New cards arrive soon.",
        status="answered",
        article_slug="card-arrival",
        html="<p>x</p>",
        in_reply_to=customer_id,
        route="simple",
        intent="card_arrival",
        confidence=0.93,
    )
    return {
        "conversation_id": body["conversation_id"],
        "bot_id": bot_id,
        "customer_id": customer_id,
    }


def test_a_helpful_vote_is_stored_and_escalates_nothing(client, db_url, answered):
    resp = client.post(
        f"/api/v1/messages/{answered['bot_id']}/feedback",
        json={"helpful": True, "comment": " Great\x00 "},
    )
    assert resp.status_code == 200
    assert resp.get_json() | {"feedback_id": 0} == {
        "feedback_id": 0,
        "message_id": answered["bot_id"],
        "helpful": True,
        "escalated": False,
        "conversation_status": "open",
    }
    [vote] = _rows(db_url, Feedback)
    assert (vote.message_id, vote.helpful, vote.comment) == (answered["bot_id"], True, "Great")
    assert [i.status for i in _rows(db_url, ReviewItem)] == ["resolved"]


def test_a_not_helpful_vote_sends_the_question_to_a_person_once(client, db_url, answered):
    url = f"/api/v1/messages/{answered['bot_id']}/feedback"
    first = client.post(url, json={"helpful": False}).get_json()
    second = client.post(url, json={"helpful": False, "comment": "still wrong"}).get_json()
    assert first["escalated"] is True and first["conversation_status"] == "pending_review"
    assert second["escalated"] is False
    [item] = _rows(db_url, ReviewItem, reason="not_helpful")
    assert item.message_id == answered["customer_id"]
    assert item.draft_message_id == answered["bot_id"] and item.intent == "card_arrival"
    assert len(_rows(db_url, Feedback)) == 2
    conversation = client.get(f"/api/v1/conversations/{answered['conversation_id']}").get_json()
    assert conversation["awaiting_person"] is True


def test_feedback_on_a_persons_reply_is_accepted(client, db_url, answered):
    agent_id = add_message(
        db_url,
        answered["conversation_id"],
        "agent",
        "Here you go",
        in_reply_to=answered["customer_id"],
    )
    resp = client.post(f"/api/v1/messages/{agent_id}/feedback", json={"helpful": True})
    assert resp.status_code == 200


def test_feedback_errors(client, db_url, answered):
    url = f"/api/v1/messages/{answered['bot_id']}/feedback"
    _error(client.post(url, json={}), 400, "missing_field")
    _error(client.post(url, json={"helpful": "no"}), 400, "invalid_field")
    _error(client.post(url, json={"helpful": True, "comment": 5}), 400, "invalid_field")
    _error(client.post(url, json={"helpful": True, "comment": "x" * 2001}), 400, "comment_too_long")
    _error(
        client.post(url, data="helpful", content_type="text/plain"), 415, "unsupported_media_type"
    )
    _error(
        client.post(f"/api/v1/messages/{'0' * 32}/feedback", json={"helpful": True}),
        404,
        "message_not_found",
    )
    _error(
        client.post(f"/api/v1/messages/{answered['customer_id']}/feedback", json={"helpful": True}),
        409,
        "not_an_answer",
    )
    pending_bot = _chat(client, "another").get_json()["message_id"]
    _error(
        client.post(f"/api/v1/messages/{pending_bot}/feedback", json={"helpful": False}),
        409,
        "not_an_answer",
    )
    assert _rows(db_url, Feedback) == []


# -- rate limit -----------------------------------------------------------------------------------


def test_rate_limit_answers_429_with_retry_after(make_app, db_url):
    client = make_app(RATE_LIMIT="3/hour").test_client()
    assert [_chat(client, f"q{i}").status_code for i in range(3)] == [200, 200, 200]
    resp = _chat(client, "one too many")
    _error(resp, 429, "rate_limited")
    assert 1 <= int(resp.headers["Retry-After"]) <= 3600
    assert len(_rows(db_url, Message, role="customer")) == 3
    # Another client has its own budget; a forged X-Forwarded-For is not trusted by default.
    other = make_app(RATE_LIMIT="3/hour").test_client()
    forged = other.post(
        "/api/v1/chat", json={"message": "hi"}, headers={"X-Forwarded-For": "203.0.113.9"}
    )
    assert forged.status_code == 429
    elsewhere = other.post(
        "/api/v1/chat", json={"message": "hi"}, environ_base={"REMOTE_ADDR": "198.51.100.7"}
    )
    assert elsewhere.status_code == 200


def test_forwarded_for_is_used_behind_a_trusted_proxy(make_app):
    client = make_app(RATE_LIMIT="1/hour", TRUSTED_PROXIES=1).test_client()

    def ask(address):
        return client.post(
            "/api/v1/chat",
            json={"message": "hi"},
            headers={"X-Forwarded-For": f"10.9.9.9, {address}"},
        ).status_code

    assert [ask("203.0.113.1"), ask("203.0.113.1"), ask("203.0.113.2")] == [200, 429, 200]


def test_polling_a_conversation_has_a_larger_budget_than_writing(make_app):
    client = make_app(RATE_LIMIT="1/hour").test_client()
    cid = _chat(client, "hi").get_json()["conversation_id"]
    assert _chat(client, "again", conversation_id=cid).status_code == 429
    codes = [client.get(f"/api/v1/conversations/{cid}").status_code for _ in range(10)]
    assert codes == [200] * 10
    assert client.get(f"/api/v1/conversations/{cid}").status_code == 429


def test_when_redis_is_down_chat_still_works_and_nothing_is_lost(make_app, db_url):
    dead = redis.Redis(
        host="127.0.0.1",
        port=1,
        socket_connect_timeout=0.2,
        socket_timeout=0.2,
        decode_responses=True,
        retry=Retry(NoBackoff(), 0),  # fail at once instead of retrying a server that is down
    )
    client = make_app(REDIS_CLIENT=dead, RATE_LIMIT="1/hour").test_client()
    bodies = [_chat(client, f"question {i}") for i in range(3)]  # limit fails open
    assert [r.status_code for r in bodies] == [200, 200, 200]
    assert len(_rows(db_url, ReviewItem)) == 3  # recorded in the DB, queued by the reconciler


# -- CORS -----------------------------------------------------------------------------------------


def test_cors_allows_configured_origins_only(make_app, db_url):
    client = make_app(CORS_ORIGINS=["https://shop.example"]).test_client()
    preflight = client.options(
        "/api/v1/chat",
        headers={
            "Origin": "https://shop.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://shop.example"
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    assert "Content-Type" in preflight.headers["Access-Control-Allow-Headers"]
    allowed = client.post(
        "/api/v1/chat", json={"message": "hi"}, headers={"Origin": "https://shop.example"}
    )
    assert allowed.status_code == 200
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://shop.example"

    evil = {"Origin": "https://evil.example"}
    refused = client.options(
        "/api/v1/chat", headers={**evil, "Access-Control-Request-Method": "POST"}
    )
    _error(refused, 403, "origin_not_allowed")
    assert "Access-Control-Allow-Origin" not in refused.headers
    post = client.post("/api/v1/chat", json={"message": "hi"}, headers=evil)
    _error(post, 403, "origin_not_allowed")
    assert len(_rows(db_url, Message, role="customer")) == 1

    same_site = client.post(
        "/api/v1/chat", json={"message": "hi"}, headers={"Origin": "http://localhost"}
    )
    assert same_site.status_code == 200
    assert "Access-Control-Allow-Origin" not in same_site.headers


def test_no_cross_origin_access_by_default(client):
    resp = client.post(
        "/api/v1/chat", json={"message": "hi"}, headers={"Origin": "https://shop.example"}
    )
    _error(resp, 403, "origin_not_allowed")


def test_messages_are_counted_in_the_database_exactly(client, db_url):
    for i in range(5):
        _chat(client, f"message {i}")
    with session_scope(db_url) as session:
        assert session.scalar(select(func.count(Message.id))) == 10
