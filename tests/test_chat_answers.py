"""The answered path with real trained models (the routing area's ``trained_app``)."""

from __future__ import annotations

import jsonschema
import pytest
from sqlalchemy import select

from app.chat.openapi import SCHEMAS
from app.db import session_scope
from app.models import Article, Feedback, Message, ReviewItem

pytestmark = pytest.mark.slow


def _alternate_questions(db_url: str, limit: int = 12) -> list[tuple[str, str, str]]:
    """(question, article slug, intent) for the first alternate question of some articles."""
    with session_scope(db_url) as session:
        articles = session.scalars(
            select(Article).where(Article.published.is_(True)).order_by(Article.slug)
        ).all()
        return [(a.questions[0], a.slug, a.category) for a in articles if a.questions][:limit]


def _schema(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}", "components": {"schemas": SCHEMAS}}


def test_known_questions_are_answered_with_their_article_and_stored(trained_app):
    client = trained_app.test_client()
    db_url = trained_app.config["SQLALCHEMY_DATABASE_URI"]
    asked = _alternate_questions(db_url)
    answered = []
    for question, slug, _intent in asked:
        resp = client.post("/api/v1/chat", json={"message": question})
        assert resp.status_code == 200
        body = resp.get_json()
        jsonschema.validate(body, _schema("ChatResponse"), cls=jsonschema.Draft202012Validator)
        if body["status"] == "answered":
            answered.append((body, slug))
    # A KB's own alternate questions are the easiest queries there are: most must be answered.
    assert len(answered) >= len(asked) // 2, f"only {len(answered)} of {len(asked)} answered"
    right = sum(body["answer"]["article"]["slug"] == slug for body, slug in answered)
    assert right >= 0.8 * len(answered)

    body, _slug = answered[0]
    answer = body["answer"]
    assert answer["article"]["url"] == f"/kb/{answer['article']['slug']}"
    assert answer["text"] and "<" not in answer["text"] and answer["html"].startswith("<")
    assert 0.0 <= body["confidence"] <= 1.0 and body["route"] in {"simple", "complex"}
    assert all(s["slug"] != answer["article"]["slug"] for s in body["suggestions"])
    with session_scope(db_url) as session:
        bot = session.get(Message, body["message_id"])
        customer = session.get(Message, bot.in_reply_to)
        assert (bot.status, bot.article_slug) == ("answered", answer["article"]["slug"])
        assert bot.trace and bot.trace["escalation_reason"] is None
        assert bot.route == customer.route == body["route"] and bot.intent == customer.intent
        assert abs(bot.confidence - body["confidence"]) < 1e-9

    history = client.get(f"/api/v1/conversations/{body['conversation_id']}").get_json()
    jsonschema.validate(history, _schema("Conversation"), cls=jsonschema.Draft202012Validator)
    shown = history["messages"][-1]
    assert shown["status"] == "answered" and shown["article"] == answer["article"]
    assert shown["html"] == answer["html"]


def test_not_helpful_on_a_live_answer_goes_to_review_with_the_draft(trained_app):
    client = trained_app.test_client()
    db_url = trained_app.config["SQLALCHEMY_DATABASE_URI"]
    for question, _slug, _intent in _alternate_questions(db_url):
        body = client.post("/api/v1/chat", json={"message": question}).get_json()
        if body["status"] == "answered":
            break
    else:
        pytest.fail("no question was answered")
    vote = client.post(
        f"/api/v1/messages/{body['message_id']}/feedback",
        json={"helpful": False, "comment": "wrong article"},
    ).get_json()
    assert vote["escalated"] is True
    with session_scope(db_url) as session:
        item = session.scalar(select(ReviewItem))
        assert (item.reason, item.draft_message_id) == ("not_helpful", body["message_id"])
        assert session.scalar(select(Feedback)).comment == "wrong article"


def test_nonsense_is_handed_to_a_person_with_the_routers_reason(trained_app):
    client = trained_app.test_client()
    db_url = trained_app.config["SQLALCHEMY_DATABASE_URI"]
    body = client.post("/api/v1/chat", json={"message": "purple elephants sing opera on mars"})
    assert body.get_json()["status"] == "pending_review"
    with session_scope(db_url) as session:
        item = session.scalar(select(ReviewItem))
        assert item.reason not in {"models_unavailable", "engine_error"}
        draft = session.get(Message, item.draft_message_id)
        assert draft.status == "pending_review" and draft.trace
