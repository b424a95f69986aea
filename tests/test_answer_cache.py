"""The answer cache (app/nlp/answer_cache.py): shared through real Redis across processes,
dynamic TTL, never an escalation in Redis, invalidation by tag, and the fallback to the
per-process cache when Redis is down."""

from __future__ import annotations

import socket
import time

import pytest
import redis

from app.nlp.answer_cache import AnswerCache, cache_tag, ttl_seconds
from app.nlp.types import Candidate, Decision


def decision(confidence: float = 0.99, escalate: bool = False) -> Decision:
    return Decision(
        query="Where is my card?",
        route="simple",
        intent="card_arrival",
        article=Candidate("card-arrival", "Where is my new card?", 12.5, "card_arrival"),
        confidence=confidence,
        escalate=escalate,
        escalation_reason="below_threshold" if escalate else None,
        suggestions=[Candidate("change-pin", "How do I change my PIN?", 3.0, "change_pin")],
        trace={"route": "simple", "timings_ms": {"total": 0.4}, "stages": {"bm25": {"x": 1.0}}},
    )


def test_confident_answers_live_longer():
    ttls = [ttl_seconds(c, 0.9, 60, 3600) for c in (0.5, 0.9, 0.95, 0.99, 1.0)]
    assert ttls[0] == ttls[1] == 60  # at or under the review threshold: the minimum
    assert ttls[1] < ttls[2] < ttls[3] < ttls[4] == 3600


def test_an_answer_cached_by_one_worker_is_served_by_another(redis_client, redis_prefix):
    tag = cache_tag("v1", "bm25-a", (3, 1))
    first = AnswerCache(64, redis_client, redis_prefix, ttl_min=60, ttl_max=3600)
    second = AnswerCache(64, redis_client, redis_prefix, ttl_min=60, ttl_max=3600)
    assert second.get("where is my card", tag) == (None, "miss")
    first.put("where is my card", tag, decision(0.99), tau_review=0.9)
    served, level = second.get("where is my card", tag)
    assert level == "shared_hit"
    assert served == decision(0.99)  # the same answer, article, suggestions and trace
    again, level = second.get("where is my card", tag)
    assert level == "hit" and again == served  # now in that process's own cache too
    keys = list(redis_client.scan_iter(match=f"{redis_prefix}answers:*"))
    assert len(keys) == 1
    ttl = redis_client.ttl(keys[0])
    assert ttl_seconds(0.99, 0.9, 60, 3600) - 5 <= ttl <= ttl_seconds(0.99, 0.9, 60, 3600)


def test_escalations_never_reach_redis(redis_client, redis_prefix):
    cache = AnswerCache(64, redis_client, redis_prefix)
    tag = cache_tag("v1")
    cache.put("tell me a joke", tag, decision(0.2, escalate=True), tau_review=0.9)
    assert not list(redis_client.scan_iter(match=f"{redis_prefix}answers:*"))
    other = AnswerCache(64, redis_client, redis_prefix)
    assert other.get("tell me a joke", tag) == (None, "miss")
    assert cache.get("tell me a joke", tag)[1] == "hit"  # this process may keep it


def test_a_new_tag_misses_and_purges_the_old_answers(redis_client, redis_prefix):
    old, new = cache_tag("v1", (1, 0)), cache_tag("v1", (2, 0))
    writer = AnswerCache(64, redis_client, redis_prefix)
    for text in ("a", "b", "c"):
        writer.put(text, old, decision(), tau_review=0.9)
    reader = AnswerCache(64, redis_client, redis_prefix)
    assert reader.get("a", new) == (None, "miss")
    assert reader.purge_other_tags(new) == 3
    assert writer.purge_other_tags(new) == 0  # one process per new tag does the scan
    assert reader.get("a", old) == (None, "miss")
    assert not [
        k for k in redis_client.scan_iter(match=f"{redis_prefix}answers:*") if ":purged:" not in k
    ]


def test_local_entries_expire_with_their_ttl(redis_client, redis_prefix):
    cache = AnswerCache(8, None, redis_prefix, ttl_min=1, ttl_max=1)
    cache.put("x", "t", decision(), tau_review=0.9)
    assert cache.get("x", "t")[1] == "hit"
    time.sleep(1.05)
    assert cache.get("x", "t") == (None, "miss")


def test_size_zero_turns_both_levels_off(redis_client, redis_prefix):
    cache = AnswerCache(0, redis_client, redis_prefix)
    cache.put("x", "t", decision(), tau_review=0.9)
    assert cache.get("x", "t") == (None, "miss")
    assert not list(redis_client.scan_iter(match=f"{redis_prefix}answers:*"))


def _dead_redis(tmp_path) -> redis.Redis:
    """The app's own client (app/redis_conn.py) for a port nothing listens on."""
    from app.redis_conn import connect

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return connect(f"redis://127.0.0.1:{port}/0", tmp_path)


def test_redis_down_falls_back_to_the_process_cache_without_waiting(redis_prefix, caplog, tmp_path):
    cache = AnswerCache(64, _dead_redis(tmp_path), redis_prefix)
    tag = cache_tag("v1")
    cache.put("where is my card", tag, decision(), tau_review=0.9)  # Redis write fails quietly
    assert "local cache only" in caplog.text
    t0 = time.perf_counter()
    for _ in range(100):
        served, level = cache.get("where is my card", tag)
        assert level == "hit" and served == decision()
        assert cache.get("something else", tag) == (None, "miss")
    assert time.perf_counter() - t0 < 0.5  # no connection attempt per lookup while it is down
    assert cache.purge_other_tags(cache_tag("v2")) == 0


def test_bad_ttls_are_refused():
    with pytest.raises(ValueError):
        AnswerCache(8, None, ttl_min=100, ttl_max=10)


# -- through the engine: two apps (two workers or hosts) on one Redis ---------------------------


@pytest.mark.slow
def test_two_engines_share_answers_and_a_kb_import_invalidates_them(trained_app, tmp_path):
    from app import create_app
    from app.db import session_scope
    from app.kb.importer import import_paths
    from app.services import ENGINE_KEY

    one = trained_app.extensions[ENGINE_KEY]
    other_app = create_app(dict(trained_app.config))
    other = other_app.extensions[ENGINE_KEY]
    assert one.ready and other.ready
    question = None
    for doc in one.router.m.bm25.docs:
        candidate = one.answer(doc.title)
        if not candidate.escalate:
            question, first = doc.title, candidate
            break
    assert question is not None, "no article title is answered by the bot"
    assert first.trace["cache"] == "miss"
    served = other.answer(question)
    assert served.trace["cache"] == "shared_hit"
    assert (served.article, served.confidence, served.route, served.intent) == (
        first.article,
        first.confidence,
        first.route,
        first.intent,
    )
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "parrot.md").write_text(
        "---\ntitle: Can I bring my parrot to the branch?\nslug: parrot-policy\n---\n"
        "Assistance animals only, sorry.\n"
    )
    with session_scope(trained_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        import_paths(session, [tmp_path / "new"])
    assert one.check_for_updates(wait=True) and other.check_for_updates(wait=True)
    assert other.answer(question).trace["cache"] == "miss"  # a new KB: answered afresh
