"""Contract of the chat API: shapes, storage, escalations, errors, feedback.

Input rules are in test_chat_inputs.py, rate limits in test_ratelimit.py, CORS in
test_chat_cors.py.

The app here has no models loaded, so every question takes the degrade path (stored, handed to
a person with reason "models_unavailable"); answered questions are covered with trained models
in test_chat_answers.py.
"""

from __future__ import annotations

import pytest
from fixtures_chat import add_message, api_error, chat, rows
from sqlalchemy import func, select

from app.db import session_scope
from app.message_view import PENDING_NOTICE
from app.models import Conversation, Feedback, Message, ReviewItem

# -- degrade path and storage ---------------------------------------------------------------------


def test_without_models_the_message_is_stored_and_handed_to_a_person(client, db_url):
    resp = chat(client, "  Where is my new card?  ")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["status"] == "pending_review"
    assert body["answer"] is None and body["confidence"] is None and body["route"] is None
    assert body["suggestions"] == []

    [customer] = rows(db_url, Message, role="customer")
    [bot] = rows(db_url, Message, role="bot")
    assert customer.text == "Where is my new card?"
    assert customer.conversation_id == body["conversation_id"] == bot.conversation_id
    assert (customer.seq, bot.seq) == (0, 1)
    assert bot.id == body["message_id"] and bot.in_reply_to == customer.id
    assert bot.status == "pending_review"
    assert bot.trace["escalation_reason"] == "models_unavailable"
    [item] = rows(db_url, ReviewItem)
    assert (item.reason, item.message_id, item.status) == (
        "models_unavailable",
        customer.id,
        "pending",
    )
    [conversation] = rows(db_url, Conversation)
    assert conversation.status == "pending"  # ConversationState.PENDING
    assert conversation.client_key and "127.0.0.1" not in conversation.client_key


def test_a_conversation_continues_with_its_id_in_order(client, db_url):
    first = chat(client, "hello").get_json()
    second = chat(client, "are you there?", conversation_id=first["conversation_id"]).get_json()
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
    assert len(rows(db_url, Conversation)) == 1


def test_conversation_shows_a_persons_reply_and_stops_waiting_when_resolved(client, db_url):
    body = chat(client, "my transfer vanished").get_json()
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


def test_a_long_conversation_shows_its_newest_messages_and_a_persons_latest_reply(client, db_url):
    from app.chat.service import HISTORY_LIMIT

    cid = chat(client, "my transfer vanished").get_json()["conversation_id"]
    with session_scope(db_url) as session:
        session.add_all(
            Message(conversation_id=cid, seq=seq, role="customer", text=f"message {seq}")
            for seq in range(2, HISTORY_LIMIT + 10)
        )
    reply_id = add_message(db_url, cid, "agent", "Here is the answer you waited for.")
    shown = client.get(f"/api/v1/conversations/{cid}").get_json()["messages"]
    assert len(shown) == HISTORY_LIMIT
    assert shown[-1]["id"] == reply_id  # the widget's poll finds the reply
    assert [m["seq"] for m in shown] == sorted(m["seq"] for m in shown)


def test_a_bots_draft_is_kept_for_the_reviewer_but_not_shown_to_the_customer(client, db_url):
    cid = chat(client, "hi").get_json()["conversation_id"]
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
    body = chat(client, message).get_json()
    assert body["status"] == "pending_review" and body["answer"] is None
    assert body["asked_for_person"] is True  # the widget thanks them rather than "not sure"
    [item] = rows(db_url, ReviewItem)
    assert item.reason == "asked_for_human"
    assert item.draft_message_id is None  # a bare request for a person needs no draft


def test_the_widgets_handoff_flag_escalates_any_message(client, db_url):
    body = chat(client, "My card payment was declined twice", handoff=True).get_json()
    assert body["status"] == "pending_review" and body["asked_for_person"] is True
    [item] = rows(db_url, ReviewItem)
    assert item.reason == "asked_for_human"


def test_questions_that_only_mention_staff_are_not_handoffs(client, db_url):
    body = chat(client, "How do I add a person to my joint account?").get_json()
    assert body["asked_for_person"] is False
    [item] = rows(db_url, ReviewItem)
    assert item.reason == "models_unavailable"


@pytest.mark.parametrize("cid", ["0" * 32, "not-an-id", "../../etc/passwd", "' OR 1=1 --"])
def test_unknown_conversations_get_404(client, db_url, cid):
    api_error(chat(client, "hello", conversation_id=cid), 404, "conversation_not_found")
    resp = client.get(f"/api/v1/conversations/{cid}")
    assert resp.status_code == 404  # "../" never reaches the route: the router's JSON 404
    assert resp.get_json()["error"]["code"] in {"conversation_not_found", "not_found"}
    assert rows(db_url, Message) == []


def test_flask_errors_on_api_paths_are_json_and_elsewhere_html(client):
    api_error(client.get("/api/v1/no-such-thing"), 404, "not_found")
    resp = client.get("/api/v1/chat")
    api_error(resp, 405, "method_not_allowed")
    assert "POST" in resp.headers["Allow"]
    api_error(client.delete("/api/v1/conversations/" + "0" * 32), 405, "method_not_allowed")
    page = client.get("/no-such-page")
    assert page.status_code == 404 and page.mimetype == "text/html"


# -- feedback -------------------------------------------------------------------------------------


@pytest.fixture
def answered(client, db_url, sample_articles):
    """A conversation whose last message is an answer of the bot (as the router stores it)."""
    body = chat(client, "where is my card").get_json()
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
    [vote] = rows(db_url, Feedback)
    assert (vote.message_id, vote.helpful, vote.comment) == (answered["bot_id"], True, "Great")
    assert [i.status for i in rows(db_url, ReviewItem)] == ["resolved"]


def test_a_not_helpful_vote_sends_the_question_to_a_person_once(client, db_url, answered):
    url = f"/api/v1/messages/{answered['bot_id']}/feedback"
    first = client.post(url, json={"helpful": False}).get_json()
    second = client.post(url, json={"helpful": False, "comment": "still wrong"}).get_json()
    assert first["escalated"] is True and first["conversation_status"] == "pending_review"
    assert second["escalated"] is False
    [item] = rows(db_url, ReviewItem, reason="not_helpful")
    assert item.message_id == answered["customer_id"]
    assert item.draft_message_id == answered["bot_id"] and item.intent == "card_arrival"
    # One vote per answer: the second changed it and added its comment
    [vote] = rows(db_url, Feedback)
    assert (vote.helpful, vote.comment) == (False, "still wrong")
    conversation = client.get(f"/api/v1/conversations/{answered['conversation_id']}").get_json()
    assert conversation["awaiting_person"] is True


def test_voting_again_changes_the_vote_and_the_conversation_shows_it(client, db_url, answered):
    url = f"/api/v1/messages/{answered['bot_id']}/feedback"
    history = f"/api/v1/conversations/{answered['conversation_id']}"
    assert {m["feedback"] for m in client.get(history).get_json()["messages"]} == {None}
    client.post(url, json={"helpful": True, "comment": "thanks"})
    client.post(url, json={"helpful": False})  # a reloaded page, another device
    [vote] = rows(db_url, Feedback)
    assert (vote.helpful, vote.comment) == (False, "thanks")
    votes = {m["id"]: m["feedback"] for m in client.get(history).get_json()["messages"]}
    assert votes.pop(answered["bot_id"]) is False
    assert set(votes.values()) == {None} and answered["customer_id"] in votes


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
    api_error(client.post(url, json={}), 400, "missing_field")
    api_error(client.post(url, json={"helpful": "no"}), 400, "invalid_field")
    api_error(client.post(url, json={"helpful": True, "comment": 5}), 400, "invalid_field")
    api_error(
        client.post(url, json={"helpful": True, "comment": "x" * 2001}), 400, "comment_too_long"
    )
    api_error(
        client.post(url, data="helpful", content_type="text/plain"), 415, "unsupported_media_type"
    )
    api_error(
        client.post(f"/api/v1/messages/{'0' * 32}/feedback", json={"helpful": True}),
        404,
        "message_not_found",
    )
    api_error(
        client.post(f"/api/v1/messages/{answered['customer_id']}/feedback", json={"helpful": True}),
        409,
        "not_an_answer",
    )
    pending_bot = chat(client, "another").get_json()["message_id"]
    api_error(
        client.post(f"/api/v1/messages/{pending_bot}/feedback", json={"helpful": False}),
        409,
        "not_an_answer",
    )
    assert rows(db_url, Feedback) == []


def test_messages_are_counted_in_the_database_exactly(client, db_url):
    for i in range(5):
        chat(client, f"message {i}")
    with session_scope(db_url) as session:
        assert session.scalar(select(func.count(Message.id))) == 10
