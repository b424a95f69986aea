"""The review service (app/review/service.py): escalating a message (row first, then Redis),
and what a reviewer's reply, article answer or discard does to the item and the conversation."""

from __future__ import annotations

import pytest
from fixtures_review import escalate_in, item_row
from sqlalchemy import func, select

from app import metrics
from app.db import session_scope
from app.models import Article, Conversation, Message, ReviewItem
from app.review.service import ReviewError, discard, reply_with_article
from app.services import get_review_queue
from app.vocab import ConversationState, ReviewStatus


def test_escalation_is_recorded_then_queued(app, redis_client, redis_prefix):
    before = metrics.ESCALATIONS.labels("below_threshold")._value.get()
    item_id = escalate_in(app)
    row = item_row(app, item_id)
    assert row.status == "pending" and row.reason == "below_threshold"
    assert row.route == "complex" and row.intent == "card_arrival"
    assert redis_client.zscore(f"{redis_prefix}review:queue", str(item_id)) is not None
    assert metrics.ESCALATIONS.labels("below_threshold")._value.get() == before + 1
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert session.get(Conversation, row.conversation_id).status == "pending"


def test_same_message_escalated_twice_makes_one_item(app):
    from app.review.service import escalate

    item_id = escalate_in(app)
    row = item_row(app, item_id)
    with app.app_context(), session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        again = escalate(
            session,
            conversation=row.conversation_id,
            message=row.message_id,
            reason="asked_for_human",
            queue=get_review_queue(),
        )
        assert again.id == item_id
        assert session.scalar(select(func.count(ReviewItem.id))) == 1


def _publish(db_url: str, slug: str, body_html: str, body: str = "plain body") -> None:
    with session_scope(db_url) as session:
        session.add(Article(slug=slug, title="Card delivery", body=body, body_html=body_html))


def test_an_article_reply_keeps_its_html_and_quotes_it_as_plain_text(app, reviewer):
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    _publish(url, "card-arrival", "<p>Cards arrive in 5 days.</p><ul><li>Track it</li></ul>")
    item_id = escalate_in(app)
    with app.test_request_context(), session_scope(url) as session:  # as the console does
        item = session.get(ReviewItem, item_id)
        reply = reply_with_article(
            session, item, reviewer.id, "card-arrival", queue=get_review_queue()
        )
        assert reply.text == "Cards arrive in 5 days.\n\n- Track it"
        assert reply.html.startswith("<p>Cards arrive") and reply.article_slug == "card-arrival"
    row = item_row(app, item_id)
    assert row.status == ReviewStatus.RESOLVED and row.resolution == "article"


def test_an_article_without_html_is_quoted_from_its_body(app, reviewer):
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    _publish(url, "card-arrival", "", body="Cards arrive in 5 days.")
    item_id = escalate_in(app)
    with app.test_request_context(), session_scope(url) as session:
        reply = reply_with_article(
            session,
            session.get(ReviewItem, item_id),
            reviewer.id,
            "card-arrival",
            queue=get_review_queue(),
        )
        assert reply.text == "Cards arrive in 5 days."


def test_an_unknown_article_is_refused_and_the_item_stays_open(app, reviewer):
    item_id = escalate_in(app)
    with app.app_context(), session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        with pytest.raises(ReviewError, match="no-such-article"):
            reply_with_article(
                session,
                session.get(ReviewItem, item_id),
                reviewer.id,
                "no-such-article",
                queue=get_review_queue(),
            )
    assert item_row(app, item_id).status == ReviewStatus.PENDING


def test_discarding_closes_the_item_without_a_reply(app, reviewer):
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    item_id = escalate_in(app)
    with app.app_context(), session_scope(url) as session:
        with pytest.raises(ReviewError, match="empty"):
            discard(session, session.get(ReviewItem, item_id), reviewer.id, "   ", queue=None)
        discard(
            session,
            session.get(ReviewItem, item_id),
            reviewer.id,
            "spam",
            queue=get_review_queue(),
        )
    row = item_row(app, item_id)
    assert row.status == ReviewStatus.DISCARDED and row.resolution_note == "spam"
    with session_scope(url) as session:
        agents = session.scalar(
            select(func.count(Message.id)).where(
                Message.conversation_id == row.conversation_id, Message.role == "agent"
            )
        )
        assert agents == 0
        # Back with the bot (app/review/handoff.py).
        assert session.get(Conversation, row.conversation_id).status == ConversationState.BOT
