"""Rate limiting (app/ratelimit.py): the limit syntax, the limiter failing open when Redis is
down, and the chat API's budgets per client (429 with Retry-After, trusted proxies, polling)."""

from __future__ import annotations

import pytest
import redis
from fixtures_chat import api_error, chat, rows
from redis.backoff import NoBackoff
from redis.retry import Retry

from app.models import Message, ReviewItem
from app.ratelimit import Limit, RateLimiter, parse_limit


@pytest.mark.parametrize(
    ("spec", "limit"),
    [
        ("30/minute", Limit(30, 60)),
        ("5 per second", Limit(5, 1)),
        ("100/10minutes", Limit(100, 600)),
        ("2/hours", Limit(2, 3600)),
        ("1/day", Limit(1, 86400)),
        ("off", None),
        ("OFF", None),
        ("0/minute", None),
        (None, None),
    ],
)
def test_parse_limit(spec, limit):
    assert parse_limit(spec) == limit


@pytest.mark.parametrize("spec", ["fast", "30", "30/fortnight", "-1/minute", "x/minute"])
def test_parse_limit_rejects_nonsense_clearly(spec):
    with pytest.raises(ValueError, match="invalid rate limit"):
        parse_limit(spec)


def test_rate_limiter_fails_open_and_leaves_a_failing_redis_alone_for_a_moment():
    dead = redis.Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    limiter = RateLimiter(dead, "tdtest:", Limit(1, 60))
    calls = []
    real_script = limiter._script

    def counting_script(**kwargs):
        calls.append(kwargs)
        return real_script(**kwargs)

    limiter._script = counting_script
    assert [limiter.hit("write", "client").allowed for _ in range(3)] == [True, True, True]
    assert len(calls) == 1  # the two later requests did not wait on Redis again


def test_rate_limit_answers_429_with_retry_after(make_app, db_url):
    client = make_app(RATE_LIMIT="3/hour").test_client()
    assert [chat(client, f"q{i}").status_code for i in range(3)] == [200, 200, 200]
    resp = chat(client, "one too many")
    api_error(resp, 429, "rate_limited")
    assert 1 <= int(resp.headers["Retry-After"]) <= 3600
    assert len(rows(db_url, Message, role="customer")) == 3
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
    cid = chat(client, "hi").get_json()["conversation_id"]
    assert chat(client, "again", conversation_id=cid).status_code == 429
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
    bodies = [chat(client, f"question {i}") for i in range(3)]  # limit fails open
    assert [r.status_code for r in bodies] == [200, 200, 200]
    assert len(rows(db_url, ReviewItem)) == 3  # recorded in the DB, queued by the reconciler
