"""Retention: exactly the expired conversations go (SQLite and PostgreSQL), in batches, with
their review items in Redis; taught examples live longer; the job reports and audits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fixtures_review import build_app, escalate_in
from sqlalchemy import select, update

from app.cli import main
from app.db import session_scope
from app.models import (
    AuditEvent,
    Conversation,
    Feedback,
    Message,
    ReviewItem,
    TrainingExample,
    utcnow,
)
from app.privacy.retention import RetentionScheduler, RetentionSettingsError, check_settings, purge


def _age(url: str, conversation_id: str, days: float) -> None:
    """Move a conversation and all its rows ``days`` into the past."""
    when = utcnow() - timedelta(days=days)
    with session_scope(url) as session:
        session.execute(
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(created_at=when, updated_at=when)
        )
        session.execute(
            update(Message)
            .where(Message.conversation_id == conversation_id)
            .values(created_at=when)
        )
        session.execute(
            update(ReviewItem)
            .where(ReviewItem.conversation_id == conversation_id)
            .values(created_at=when)
        )


def _conversation_with_review(app) -> str:
    item_id = escalate_in(app, "my card never came")
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        item = session.get(ReviewItem, item_id)
        session.add(Feedback(message_id=item.message_id, helpful=False))
        return item.conversation_id


@pytest.fixture
def retention_app(any_db_url, redis_client, redis_prefix, tmp_path):
    return build_app(any_db_url, redis_client, redis_prefix, tmp_path, RETENTION_DAYS=30)


def test_purge_removes_exactly_the_expired_conversations(retention_app, redis_client, redis_prefix):
    app = retention_app
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    ages = {"old": 45, "older": 400, "fresh": 3, "edge_kept": 29.9}
    ids = {name: _conversation_with_review(app) for name in ages}
    for name, days in ages.items():
        _age(url, ids[name], days)
    # Started long ago but the customer wrote again yesterday: kept.
    revived = _conversation_with_review(app)
    _age(url, revived, 90)
    with session_scope(url) as session:
        conversation = session.get(Conversation, revived)
        session.add(Message(conversation_id=revived, seq=9, role="customer", text="still there?"))
        session.flush()
        assert conversation.created_at < utcnow() - timedelta(days=80)
    meta_key = f"{redis_prefix}review:meta"
    assert len(redis_client.hkeys(meta_key)) == 5

    with app.app_context():
        from app.services import get_review_queue

        dry = purge(app.config, queue=get_review_queue(), dry_run=True)
        assert dry.conversations == 2 and dry.dry_run
        report = purge(app.config, queue=get_review_queue(), batch=1, actor="test")

    assert (report.conversations, report.review_items, report.feedback) == (2, 2, 2)
    assert report.messages == 4 and report.batches == 2  # batches of one conversation
    with session_scope(url) as session:
        left = set(session.scalars(select(Conversation.id)))
        assert left == {ids["fresh"], ids["edge_kept"], revived}
        assert (
            session.scalar(
                select(ReviewItem.id).where(
                    ReviewItem.conversation_id.in_([ids["old"], ids["older"]])
                )
            )
            is None
        )
        (event,) = session.scalars(select(AuditEvent).where(AuditEvent.action == "purge"))
        assert event.actor == "test" and event.detail["conversations"] == 2
    assert len(redis_client.hkeys(meta_key)) == 3
    with app.app_context():
        assert purge(app.config).conversations == 0  # nothing else has expired


def test_taught_examples_are_kept_longer(make_app):
    app = make_app(RETENTION_DAYS=30, TRAINING_RETENTION_DAYS=365)
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    now = utcnow()
    with session_scope(url) as session:
        session.add_all(
            [
                TrainingExample(
                    text="taught long ago",
                    intent="x",
                    origin="reviewer",
                    created_at=now - timedelta(days=400),
                ),
                TrainingExample(
                    text="taught last month",
                    intent="x",
                    origin="reviewer",
                    created_at=now - timedelta(days=40),
                ),
                TrainingExample(
                    text="imported long ago",
                    intent="x",
                    origin="import",
                    created_at=now - timedelta(days=900),
                ),
            ]
        )
    report = purge(app.config)
    assert report.training_examples == 1
    with session_scope(url) as session:
        assert set(session.scalars(select(TrainingExample.text))) == {
            "taught last month",
            "imported long ago",
        }


def test_purge_command_reports(app, runner):
    result = runner.invoke(main, ["privacy", "purge"])
    assert result.exit_code == 0, result.output
    assert "retention is off (TIERDESK_RETENTION_DAYS=0)" in result.output
    app.config["RETENTION_DAYS"] = 7
    old = _conversation_with_review(app)
    _age(app.config["SQLALCHEMY_DATABASE_URI"], old, 8)
    result = runner.invoke(main, ["privacy", "purge", "--dry-run"])
    assert "would delete 1 conversation(s)" in result.output, result.output
    result = runner.invoke(main, ["privacy", "purge"])
    assert "deleted 1 conversation(s)" in result.output, result.output


@pytest.mark.parametrize(
    ("days", "training", "message"),
    [(30, 10, "must be at least TIERDESK_RETENTION_DAYS"), (-1, 0, "must be 0")],
)
def test_contradicting_settings_are_refused(make_app, days, training, message):
    with pytest.raises(RetentionSettingsError, match=message):
        check_settings({"RETENTION_DAYS": days, "TRAINING_RETENTION_DAYS": training})
    with pytest.raises(RetentionSettingsError, match=message):
        make_app(RETENTION_DAYS=days, TRAINING_RETENTION_DAYS=training)


def test_scheduler_runs_in_one_process_at_a_time(app, redis_client):
    app.config["RETENTION_DAYS"] = 7
    old = _conversation_with_review(app)
    _age(app.config["SQLALCHEMY_DATABASE_URI"], old, 8)
    with app.app_context():
        from app.services import get_review_queue

        first = RetentionScheduler(app.config, redis_client, get_review_queue(), interval=60)
        second = RetentionScheduler(app.config, redis_client, get_review_queue(), interval=60)
        report = first.run_once()
        assert report is not None and report.conversations == 1
        assert second.run_once() is None  # the lock: the other worker skips this interval
