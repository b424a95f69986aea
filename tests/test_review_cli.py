"""``tierdesk reviewer ...`` and ``tierdesk review ...``."""

from __future__ import annotations

import json
from datetime import timedelta

from fixtures_review import answered_turn, escalate_in, login
from sqlalchemy import select, update

from app.cli import main
from app.db import session_scope
from app.models import Reviewer, ReviewItem, utcnow

STATS_KEYS = {"pending", "claimed", "resolved", "queued_in_redis", "oldest_pending_age_s"}


def test_reviewer_add_from_stdin_then_login(app, runner):
    result = runner.invoke(
        main,
        args=["reviewer", "add", "Dee@Example.com", "--password-stdin"],
        input="a long passphrase\n",
    )
    assert result.exit_code == 0, result.output
    assert "reviewer dee@example.com added" in result.output
    client = app.test_client()
    assert login(client, "dee@example.com", "a long passphrase").status_code == 302


def test_reviewer_add_prompts_twice(app, runner):
    mismatch = runner.invoke(
        main, args=["reviewer", "add", "eve@example.com"], input="first password\nsecond password\n"
    )
    assert mismatch.exit_code != 0
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert session.scalar(select(Reviewer)) is None
    ok = runner.invoke(
        main, args=["reviewer", "add", "eve@example.com"], input="same password\nsame password\n"
    )
    assert ok.exit_code == 0, ok.output


def test_reviewer_add_rejects_bad_input(runner):
    short = runner.invoke(
        main, args=["reviewer", "add", "f@example.com", "--password-stdin"], input="short\n"
    )
    assert short.exit_code == 1 and "at least 8 characters" in short.output
    bad = runner.invoke(
        main, args=["reviewer", "add", "not-an-email", "--password-stdin"], input="long enough pw\n"
    )
    assert bad.exit_code == 1 and "not an e-mail address" in bad.output
    runner.invoke(
        main,
        args=["reviewer", "add", "g@example.com", "--password-stdin"],
        input="long enough pw\n",
    )
    again = runner.invoke(
        main,
        args=["reviewer", "add", "g@example.com", "--password-stdin"],
        input="another long pw\n",
    )
    assert again.exit_code == 1 and "exists" in again.output
    reset = runner.invoke(
        main,
        args=["reviewer", "add", "g@example.com", "--password-stdin", "--reset"],
        input="another long pw\n",
    )
    assert reset.exit_code == 0 and "updated" in reset.output


def test_reviewer_list(runner):
    assert "no reviewers yet" in runner.invoke(main, args=["reviewer", "list"]).output
    runner.invoke(
        main,
        args=["reviewer", "add", "h@example.com", "--password-stdin"],
        input="long enough pw\n",
    )
    output = runner.invoke(main, args=["reviewer", "list"]).output
    assert output.startswith("h@example.com\tactive") and "last login never" in output


def test_review_stats_json(app, runner, redis_client):
    empty = json.loads(runner.invoke(main, args=["review", "stats", "--json"]).output)
    assert empty == {
        "pending": 0,
        "claimed": 0,
        "resolved": 0,
        "queued_in_redis": 0,
        "oldest_pending_age_s": None,
        "spot_checks": {
            "days": 14,
            "waiting": 0,
            "judged": 0,
            "right": 0,
            "accuracy": None,
            "interval_95": None,
        },
    }

    db_url = app.config["SQLALCHEMY_DATABASE_URI"]
    ids = [escalate_in(app, f"q{i}") for i in range(4)]
    with session_scope(db_url) as session:
        reviewer = Reviewer(email="r@example.com", password_hash="x")
        session.add(reviewer)
        session.flush()
        now = utcnow()
        session.execute(
            update(ReviewItem)
            .where(ReviewItem.id == ids[0])
            .values(status="resolved", resolved_at=now)
        )
        session.execute(
            update(ReviewItem)
            .where(ReviewItem.id == ids[1])
            .values(
                status="claimed",
                claimed_by=reviewer.id,
                lease_expires_at=now + timedelta(minutes=5),
            )
        )
        session.execute(
            update(ReviewItem)
            .where(ReviewItem.id == ids[2])
            .values(
                status="claimed",
                claimed_by=reviewer.id,
                lease_expires_at=now - timedelta(minutes=1),
                created_at=now - timedelta(minutes=10),
            )
        )
    result = runner.invoke(main, args=["review", "stats", "--json"])
    stats = json.loads(result.output)
    assert set(stats) == STATS_KEYS | {"spot_checks"}
    # The expired claim counts as pending; it is the oldest (10 minutes).
    assert (stats["pending"], stats["claimed"], stats["resolved"]) == (2, 1, 1)
    assert 590 <= stats["oldest_pending_age_s"] <= 700

    queue = app.extensions["tierdesk.review_queue"]
    redis_client.delete(queue.queue_key)
    reconciled = runner.invoke(main, args=["review", "reconcile"])
    assert reconciled.exit_code == 0 and "queued 2" in reconciled.output
    after = json.loads(runner.invoke(main, args=["review", "stats", "--json"]).output)
    assert after["queued_in_redis"] == after["pending"] == 2  # pending + expired-lease items


def test_review_stats_human_output(runner):
    output = runner.invoke(main, args=["review", "stats"]).output
    assert "pending: 0" in output and "queued_in_redis: 0" in output
    assert "spot_checks (last 14 days): none judged, 0 waiting" in output


def _spot_check(db_url, verdict: str | None, age: timedelta = timedelta(0)) -> None:
    """An answered turn drawn for a spot check, judged ``verdict`` (None: waiting)."""
    with session_scope(db_url) as session:
        check = answered_turn(session, "hi", "greeting", None, 0.05)
        check.verdict = verdict
        check.created_at = utcnow() - age


def test_review_stats_reports_the_spot_checked_accuracy(app, runner):
    db_url = app.config["SQLALCHEMY_DATABASE_URI"]
    for verdict in ["right"] * 9 + ["wrong", None]:
        _spot_check(db_url, verdict)
    _spot_check(db_url, "wrong", age=timedelta(days=20))  # outside the default window
    spot = json.loads(runner.invoke(main, args=["review", "stats", "--json"]).output)["spot_checks"]
    assert (spot["judged"], spot["right"], spot["waiting"], spot["accuracy"]) == (10, 9, 1, 0.9)
    low, high = spot["interval_95"]
    assert 0.55 < low < 0.9 < high < 1.0  # Wilson's interval of 9 right out of 10
    wider = json.loads(
        runner.invoke(main, args=["review", "stats", "--json", "--days", "30"]).output
    )["spot_checks"]
    assert (wider["days"], wider["judged"], wider["right"]) == (30, 11, 9)
    output = runner.invoke(main, args=["review", "stats"]).output
    assert "spot_checks (last 14 days): 9/10 right (90.0%, 95% interval" in output
    assert "1 waiting" in output
    refused = runner.invoke(main, args=["review", "stats", "--days", "0"])
    assert refused.exit_code == 2 and "--days" in refused.output
