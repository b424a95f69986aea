"""The review queue against a real Redis: escalation, priority, leases, reconcile, outages."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
import redis
from fixtures_review import build_app, escalate_in, item_row
from sqlalchemy import func, insert, select, update

from app.db import session_scope
from app.models import Conversation, Message, Reviewer, ReviewItem, utcnow
from app.review.queue import Reconciler, ReviewQueue
from app.review.service import ReviewError, send_reply
from app.services import get_review_queue


def _queue(app) -> ReviewQueue:
    with app.app_context():
        return get_review_queue()


def _reviewers(db_url: str, n: int) -> list[int]:
    with session_scope(db_url) as session:
        rows = [Reviewer(email=f"r{i}@example.com", password_hash="x") for i in range(n)]
        session.add_all(rows)
        session.flush()
        return [r.id for r in rows]


def _bulk_items(db_url: str, n: int) -> list[int]:
    """``n`` pending review items (one conversation each), written in one transaction."""
    with session_scope(db_url) as session:
        conversations = [Conversation(status="pending_review") for _ in range(n)]
        session.add_all(conversations)
        session.flush()
        messages = [
            Message(conversation_id=c.id, seq=0, role="customer", text=f"question {i}")
            for i, c in enumerate(conversations)
        ]
        session.add_all(messages)
        session.flush()
        session.execute(
            insert(ReviewItem),
            [
                {
                    "conversation_id": m.conversation_id,
                    "message_id": m.id,
                    "reason": "ambiguous",
                    "status": "pending",
                    "priority": 0,
                    "created_at": utcnow(),
                }
                for m in messages
            ],
        )
        return list(session.scalars(select(ReviewItem.id).order_by(ReviewItem.id)))


def _claim_all(queue: ReviewQueue, reviewer_id: int) -> list[int]:
    claimed = []
    while (claim := queue.claim_next(reviewer_id)) is not None:
        claimed.append(claim.item_id)
    return claimed


def test_priority_and_age_order_the_queue(app):
    db_url = app.config["SQLALCHEMY_DATABASE_URI"]
    (reviewer,) = _reviewers(db_url, 1)
    routine = escalate_in(app, "what is the fee", route="simple", intent=None)
    urgent = escalate_in(
        app, "dispute this charge", route="complex", intent=None, reason="asked_for_human"
    )
    # A customer who asks a second time in the same conversation also gains a point.
    again = escalate_in(
        app,
        "second try",
        route="simple",
        intent=None,
        conversation_id=item_row(app, routine).conversation_id,
    )
    assert item_row(app, urgent).priority == 2
    assert item_row(app, again).priority == 1
    assert item_row(app, routine).priority == 0
    queue = _queue(app)
    assert _claim_all(queue, reviewer) == [urgent, again, routine]

    # Age wins in the end: a routine item that waited long enough goes before a fresh urgent one.
    old = escalate_in(app, "old routine", route="simple", intent=None)
    fresh = escalate_in(app, "fresh urgent", route="complex", intent=None, reason="asked_for_human")
    with session_scope(db_url) as session:
        session.execute(
            update(ReviewItem)
            .where(ReviewItem.id == old)
            .values(created_at=utcnow() - timedelta(seconds=3 * queue.priority_step_seconds))
        )
    queue.client.delete(queue.queue_key)
    queue.reconcile()
    assert _claim_all(queue, reviewer) == [old, fresh]


def test_claim_filters_by_intent_route_and_reason(app):
    (reviewer,) = _reviewers(app.config["SQLALCHEMY_DATABASE_URI"], 1)
    card = escalate_in(app, "card?", route="simple", intent="card_arrival")
    refund = escalate_in(
        app, "refund?", route="complex", intent="request_refund", reason="tiers_disagree"
    )
    queue = _queue(app)
    assert queue.claim_next(reviewer, intent="nope") is None
    assert queue.claim_next(reviewer, reason="tiers_disagree").item_id == refund
    assert queue.claim_next(reviewer, route="complex") is None
    assert queue.claim_next(reviewer, intent="card_arrival", route="simple").item_id == card


def test_thousand_escalations_survive_flushall_and_restart(tmp_path, db_url, own_redis):
    """Acceptance: 1,000 escalations, FLUSHALL half way, a new app: each queued exactly once."""
    prefix = "tdtest:flush:"
    app = build_app(db_url, own_redis.client(), prefix, tmp_path)
    ids = [escalate_in(app, f"question {i}", draft_text=None) for i in range(500)]
    own_redis.client().flushall()
    ids += [escalate_in(app, f"question {i}", draft_text=None) for i in range(500, 1000)]
    assert len(set(ids)) == 1000

    restarted = build_app(db_url, own_redis.client(), prefix, tmp_path)  # a server restart
    queue = _queue(restarted)
    report = queue.reconcile()
    assert report.redis_ok and report.queued == 500
    assert sorted(queue.queued_ids()) == sorted(ids)
    assert queue.reconcile().queued == 0  # idempotent

    (reviewer,) = _reviewers(db_url, 1)
    claimed = _claim_all(queue, reviewer)
    assert len(claimed) == 1000 and set(claimed) == set(ids)


@pytest.mark.parametrize("n_items,n_claimers", [(500, 8)])
def test_concurrent_claimers_each_item_once(
    any_db_url, redis_url, redis_prefix, redis_client, n_items, n_claimers
):
    """Acceptance: 8 threads, each with its own Redis client, claim 500 items: once each."""
    ids = _bulk_items(any_db_url, n_items)
    reviewers = _reviewers(any_db_url, n_claimers)
    setup = ReviewQueue(redis_client, redis_prefix, any_db_url, lease_seconds=300)
    assert setup.reconcile().queued == n_items

    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(n_claimers)

    def work(reviewer_id: int) -> None:
        client = redis.Redis.from_url(redis_url, decode_responses=True)
        try:
            queue = ReviewQueue(client, redis_prefix, any_db_url, lease_seconds=300)
            start.wait()
            results[reviewer_id] = _claim_all(queue, reviewer_id)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=work, args=(r,)) for r in reviewers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    counts = Counter(i for claimed in results.values() for i in claimed)
    assert sorted(counts) == ids and set(counts.values()) == {1}
    assert sum(1 for claimed in results.values() if claimed) > 1  # they really competed
    with session_scope(any_db_url) as session:
        holders = dict(session.execute(select(ReviewItem.id, ReviewItem.claimed_by)).all())
    for reviewer_id, claimed in results.items():
        assert all(holders[i] == reviewer_id for i in claimed)


def test_expired_lease_returns_the_item(tmp_path, db_url, redis_client, redis_prefix):
    app = build_app(db_url, redis_client, redis_prefix, tmp_path, REVIEW_LEASE_SECONDS=1)
    first, second = _reviewers(db_url, 2)
    item_id = escalate_in(app)
    queue = _queue(app)
    assert queue.claim_next(first).item_id == item_id
    assert queue.claim_next(second) is None  # held
    time.sleep(1.3)
    claim = queue.claim_next(second)
    assert claim is not None and claim.item_id == item_id
    assert item_row(app, item_id).claimed_by == second
    # The first reviewer's late reply is refused: the item is someone else's now.
    with app.app_context(), session_scope(db_url) as session:
        with pytest.raises(ReviewError):
            send_reply(
                session,
                session.get(ReviewItem, item_id),
                first,
                "late answer",
                queue=queue,
            )


def test_reconcile_releases_expired_claims_and_restores_live_leases(app, redis_client):
    db_url = app.config["SQLALCHEMY_DATABASE_URI"]
    holder, other = _reviewers(db_url, 2)
    live, expired = escalate_in(app, "a"), escalate_in(app, "b")
    queue = _queue(app)
    assert {queue.claim_next(holder).item_id, queue.claim_next(holder).item_id} == {live, expired}
    with session_scope(db_url) as session:
        session.execute(
            update(ReviewItem)
            .where(ReviewItem.id == expired)
            .values(lease_expires_at=utcnow() - timedelta(seconds=5))
        )
    for key in (queue.queue_key, queue.leases_key, queue.holders_key, queue.meta_key):
        redis_client.delete(key)  # as if Redis lost everything

    report = queue.reconcile()
    assert report.expired_claims_released == 1 and report.queued == 1
    assert report.leases_restored == 1
    assert queue.queued_ids() == [expired] and queue.leased_ids() == [live]
    assert queue.holder(live) == holder and item_row(app, expired).status == "pending"
    assert queue.claim_next(other).item_id == expired
    assert queue.claim_next(other) is None


def test_stale_ids_are_dropped(app, redis_client):
    db_url = app.config["SQLALCHEMY_DATABASE_URI"]
    (reviewer,) = _reviewers(db_url, 1)
    done, waiting = escalate_in(app, "done"), escalate_in(app, "waiting")
    with session_scope(db_url) as session:  # resolved behind Redis' back
        session.execute(
            update(ReviewItem)
            .where(ReviewItem.id == done)
            .values(status="resolved", resolved_at=utcnow())
        )
    queue = _queue(app)
    redis_client.zadd(queue.queue_key, {"999999": 0})  # an id with no row at all
    assert queue.claim_next(reviewer).item_id == waiting  # skipped the closed and unknown ones
    assert queue.queued_ids() == []
    queue.client.zadd(queue.queue_key, {str(done): 0})
    assert queue.reconcile().stale_removed == 1 and queue.queued_ids() == []


def test_release_gives_the_item_back(app):
    first, second = _reviewers(app.config["SQLALCHEMY_DATABASE_URI"], 2)
    item_id = escalate_in(app)
    queue = _queue(app)
    assert queue.claim_next(first).item_id == item_id
    assert not queue.release(item_id, second)  # not theirs
    assert queue.release(item_id, first)
    assert item_row(app, item_id).status == "pending"
    assert queue.claim_next(second).item_id == item_id


def test_redis_outage_loses_nothing(tmp_path, db_url, own_redis):
    """Acceptance: Redis stops during escalations; rows are recorded; once it is back, the
    reconciler queues every one (the same app and client, no restart)."""
    app = build_app(db_url, own_redis.client(), "tdtest:outage:", tmp_path)
    (reviewer,) = _reviewers(db_url, 1)
    before = [escalate_in(app, f"before {i}") for i in range(10)]
    own_redis.stop()
    during = [escalate_in(app, f"during {i}") for i in range(20)]  # must not raise
    with session_scope(db_url) as session:
        assert (
            session.scalar(select(func.count(ReviewItem.id)).where(ReviewItem.status == "pending"))
            == 30
        )
    queue = _queue(app)
    assert queue.depth() is None
    assert queue.reconcile().redis_ok is False
    # Reviewers keep working from the database while Redis is down.
    fallback = queue.claim_next(reviewer)
    assert fallback is not None and fallback.via == "database"

    own_redis.start()  # restarted empty, on the same port
    report = queue.reconcile()
    assert report.redis_ok and report.leases_restored == 1
    assert sorted(queue.queued_ids() + queue.leased_ids()) == sorted(before + during)


def test_reconciler_thread_restores_the_queue(app, redis_client):
    item_id = escalate_in(app)
    queue = _queue(app)
    redis_client.delete(queue.queue_key)
    reconciler = Reconciler(queue, interval=0.1)
    reconciler.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and queue.queued_ids() != [item_id]:
            time.sleep(0.05)
        assert queue.queued_ids() == [item_id]
        redis_client.delete(queue.queue_key)  # and again, periodically
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and queue.queued_ids() != [item_id]:
            time.sleep(0.05)
        assert queue.queued_ids() == [item_id]
    finally:
        reconciler.stop()
    assert not reconciler.alive


def test_building_the_queue_does_not_touch_redis(db_url):
    class Untouchable:
        def __getattr__(self, name):
            raise AssertionError(f"Redis used at construction: {name}")

    queue = ReviewQueue(Untouchable(), "p:", db_url, lease_seconds=10)  # type: ignore[arg-type]
    assert queue.queue_key == "p:review:queue"


def test_serving_process_starts_the_reconciler_on_its_first_request(
    tmp_path, db_url, redis_client, redis_prefix
):
    from app.review.console import RECONCILER_KEY

    app = build_app(
        db_url, redis_client, redis_prefix, tmp_path, TESTING=False, RECONCILE_INTERVAL_SECONDS=1
    )
    item_id = escalate_in(app)
    queue = _queue(app)
    redis_client.delete(queue.queue_key)
    assert RECONCILER_KEY not in app.extensions  # not at construction (CLI, pre-fork master)
    app.test_client().get("/healthz")
    reconciler = app.extensions[RECONCILER_KEY]
    try:
        assert reconciler.alive
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and queue.queued_ids() != [item_id]:
            time.sleep(0.05)
        assert queue.queued_ids() == [item_id]
        app.test_client().get("/healthz")
        assert app.extensions[RECONCILER_KEY] is reconciler  # one per process
    finally:
        reconciler.stop()
