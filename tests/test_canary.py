"""The canary: sticky per conversation, per-version metrics from the stored turns, and the
automatic rollback rule; with real models, a promote reaching the engine without a restart."""

from __future__ import annotations

import random
import uuid

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.models import Article, Conversation, Feedback, Message, new_id
from app.nlp import registry
from app.nlp.canary import VersionMetrics, check_canary, rollback_verdict, version_metrics
from app.nlp.registry import conversation_bucket
from app.services import ENGINE_KEY
from app.vocab import ModelStatus


def test_buckets_are_fixed_and_uniform():
    # ids shaped as new_id() makes them (random UUID4s), drawn from a seeded stream so the
    # share below is the same on every run
    draw = random.Random(0)
    ids = [uuid.UUID(int=draw.getrandbits(128), version=4).hex for _ in range(4000)]
    assert len(ids[0]) == len(new_id())
    buckets = [conversation_bucket(i) for i in ids]
    assert buckets == [conversation_bucket(i) for i in ids]
    share = sum(b < 0.1 for b in buckets) / len(buckets)
    assert 0.08 < share < 0.12
    assert all(0.0 <= b < 1.0 for b in buckets)


def metrics(answers, escalated, answered=None, thumbs_down=0) -> VersionMetrics:
    answered = answers - escalated if answered is None else answered
    return VersionMetrics(
        "v", answers=answers, escalated=escalated, answered=answered, thumbs_down=thumbs_down
    )


RULE = {"margin": 0.05, "confidence": 0.95, "min_answers": 50}


def test_rollback_rule_needs_enough_answers_and_a_clear_excess():
    active = metrics(400, 40, thumbs_down=8)  # 10% escalated, 2.2% thumbs-down
    assert not rollback_verdict(active, metrics(20, 15), **RULE).rollback  # too few yet
    assert not rollback_verdict(active, metrics(100, 14), **RULE).rollback  # +4 pt: in margin
    assert not rollback_verdict(active, metrics(100, 20), **RULE).rollback  # +10 pt, not sure
    verdict = rollback_verdict(active, metrics(300, 75), **RULE)  # +15 pt on 300
    assert verdict.rollback and verdict.reason.startswith("automatic rollback: escalation rate")
    unhappy = rollback_verdict(active, metrics(200, 20, thumbs_down=40), **RULE)
    assert unhappy.rollback and "thumbs-down rate 22.2% of 180" in unhappy.reason


def add_turn(url, version, *, escalated=False, helpful=None, ms=2.0) -> None:
    with session_scope(url) as session:
        conversation = Conversation(id=new_id())
        session.add(conversation)
        session.flush()
        trace = {
            "versions": {"models": version},
            "escalation_reason": "below_threshold" if escalated else None,
            "timings_ms": {"total": ms},
        }
        bot = Message(conversation_id=conversation.id, seq=1, role="bot", text="a", trace=trace)
        session.add(bot)
        session.flush()
        if helpful is not None:
            session.add(Feedback(message_id=bot.id, helpful=helpful))


def test_version_metrics_and_check_canary_on_stored_turns(any_db_url, tmp_path):
    from test_registry import register

    url = any_db_url
    register(url, tmp_path, "v1", "2026-01-01T00:00:00Z", ModelStatus.ACTIVE)
    register(url, tmp_path, "v2", "2026-02-01T00:00:00Z")
    with session_scope(url) as session:
        registry.promote(session, "v2", to=ModelStatus.CANARY, share=0.1)
    for i in range(60):
        add_turn(url, "v1", escalated=i % 10 == 0, helpful=i % 20 != 1, ms=1.0 + i % 3)
    for i in range(60):
        add_turn(url, "v2", escalated=i % 10 < 4, ms=5.0)
    with session_scope(url) as session:
        m1, m2 = version_metrics(session, "v1"), version_metrics(session, "v2")
    assert (m1.answers, m1.escalated, m1.answered, m1.votes, m1.thumbs_down) == (60, 6, 54, 54, 3)
    assert (m1.latency_p50_ms, m2.latency_p50_ms) == (2.0, 5.0)
    assert (m2.answers, m2.escalated) == (60, 24)

    config = {"CANARY_MIN_ANSWERS": 50, "CANARY_ROLLBACK_MARGIN": 0.05}
    with session_scope(url) as session:
        verdict = check_canary(session, config)
    assert verdict.rollback, verdict.reason
    with session_scope(url) as session:
        row = registry.get(session, "v2")
        assert row.status == ModelStatus.RETIRED
        event = registry.history(session, "v2")[0]
        assert (event.actor, event.reason) == ("auto", verdict.reason)
        assert registry.serving_plan(session) == registry.ServingPlan(active="v1")
        assert check_canary(session, config) is None  # nothing left to check


@pytest.mark.slow
def test_canary_answers_its_share_of_conversations_sticky_then_rolls_back(lifecycle_app):
    app, (v1, v2) = lifecycle_app, lifecycle_app.versions
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    engine = app.extensions[ENGINE_KEY]
    with session_scope(url) as session:
        questions = [(a.questions or [a.title])[0] for a in session.scalars(select(Article)).all()][
            :6
        ]
        registry.promote(session, v2, to=ModelStatus.CANARY, share=0.5)
    assert engine.check_for_updates(wait=True)  # what every worker's poll does within 2 s
    assert engine.status()["canary"] == {"version": v2, "share": 0.5}

    client = app.test_client()
    served: dict[str, set[str]] = {}
    for question in questions * 4:
        first = client.post("/api/v1/chat", json={"message": question}).get_json()
        cid = first["conversation_id"]
        again = client.post(
            "/api/v1/chat", json={"message": questions[0], "conversation_id": cid}
        ).get_json()
        assert first["status"] in ("answered", "pending_review")  # no failed answer
        assert again["status"] in ("answered", "pending_review")
        with session_scope(url) as session:
            versions = {
                m.trace["versions"]["models"]
                for m in session.scalars(
                    select(Message).where(Message.conversation_id == cid, Message.role == "bot")
                )
            }
        expected = v2 if conversation_bucket(cid) < 0.5 else v1
        assert versions == {expected}  # both turns of a conversation: one version
        served.setdefault(expected, set()).add(cid)
    assert set(served) == {v1, v2}

    with session_scope(url) as session:
        strict, normal = version_metrics(session, v2), version_metrics(session, v1)
    assert strict.escalation_rate > normal.escalation_rate  # tau_review 0.9999 escalates more
    app.config.update(CANARY_MIN_ANSWERS=5, CANARY_ROLLBACK_MARGIN=0.0)
    verdict = engine.check_canary()
    assert verdict is not None and verdict.rollback, verdict
    assert engine.check_for_updates(wait=True)
    assert engine.status()["canary"] is None
    reply = client.post("/api/v1/chat", json={"message": questions[0]}).get_json()
    with session_scope(url) as session:
        bot = session.get(Message, reply["message_id"])
        assert bot.trace["versions"]["models"] == v1
