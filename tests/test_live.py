"""Live push (app/live): events fanned out through real Redis pub/sub between hubs (as between
workers and hosts), and server-sent event streams from a really served app."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

import pytest
from fixtures_chat import serve_app
from fixtures_review import csrf_from, login

from app.live.bus import SUBSCRIPTION_BUFFER, LiveHub, conversation_channel


def _wait_for(sub, predicate, seconds: float = 5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        event = sub.get(timeout=0.2)
        if event is not None and predicate(event):
            return event
    return None


def test_events_reach_the_streams_of_another_process(redis_url, redis_prefix):
    import redis

    worker_a = LiveHub(redis.Redis.from_url(redis_url, decode_responses=True), redis_prefix)
    worker_b = LiveHub(redis.Redis.from_url(redis_url, decode_responses=True), redis_prefix)
    mine = worker_a.subscribe([conversation_channel(redis_prefix, "c1")])
    other = worker_a.subscribe([conversation_channel(redis_prefix, "c2")])
    also_mine = worker_a.subscribe([conversation_channel(redis_prefix, "c1")])
    assert worker_a.open_streams() == 3
    assert worker_b.to_conversation("c1", {"type": "typing", "agent": "Ana"})
    for sub in (mine, also_mine):
        assert _wait_for(sub, lambda e: True) == {"type": "typing", "agent": "Ana"}
    assert other.get(timeout=0.3) is None  # another conversation's stream hears nothing
    mine.close()
    also_mine.close()
    other.close()
    assert worker_a.open_streams() == 0
    worker_a.stop()


def test_a_stuck_stream_loses_its_backlog_and_is_told_to_resync(redis_client, redis_prefix):
    hub = LiveHub(redis_client, redis_prefix)
    sub = hub.subscribe(["x"])
    for i in range(SUBSCRIPTION_BUFFER + 10):
        sub.deliver({"n": i})
    events = []
    while (event := sub.get(timeout=0.05)) is not None:
        events.append(event)
    # The backlog made way for one resync; the events after it are kept.
    assert events[0] == {"type": "resync"}
    assert [e["n"] for e in events[1:]] == list(
        range(SUBSCRIPTION_BUFFER, SUBSCRIPTION_BUFFER + 10)
    )
    sub.close()
    hub.stop()


def test_the_hub_reconnects_after_redis_restarts_and_asks_for_a_resync(own_redis, redis_prefix):
    hub = LiveHub(own_redis.client(), redis_prefix)
    sub = hub.subscribe([conversation_channel(redis_prefix, "c1")])
    own_redis.stop()
    time.sleep(1.5)
    own_redis.start()
    assert _wait_for(sub, lambda e: e.get("type") == "resync", seconds=10) is not None
    deadline = time.monotonic() + 5
    while not hub.to_conversation("c1", {"type": "typing"}) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _wait_for(sub, lambda e: e.get("type") == "typing") is not None
    sub.close()
    hub.stop()


class Stream:
    """An SSE client over http.client: ``events()`` yields parsed data lines and comments."""

    def __init__(self, base: str, path: str, headers: dict | None = None) -> None:
        parts = urlsplit(base)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream", **(headers or {})})
        self.response = self.conn.getresponse()

    def next(self) -> dict | str | None:
        """The next event (a dict), comment (a str) or None at the end of the stream."""
        while True:
            line = self.response.fp.readline()
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line.startswith("data: "):
                return json.loads(line[6:])
            if line.startswith(":"):
                return line

    def until(self, predicate, limit: int = 50):
        for _ in range(limit):
            item = self.next()
            if item is None or predicate(item):
                return item
        return None

    def close(self) -> None:
        self.conn.close()


def test_the_widget_stream_carries_typing_reply_and_state(app, reviewer):
    client = app.test_client()
    cid = client.post("/api/v1/chat", json={"message": "card missing"}).get_json()[
        "conversation_id"
    ]
    console = app.test_client()
    login(console, reviewer.email, reviewer.password)
    token = csrf_from(console.get("/console/").get_data(as_text=True))
    with serve_app(app) as url:
        stream = Stream(url, f"/api/v1/conversations/{cid}/events")
        assert stream.response.status == 200
        assert stream.response.getheader("Content-Type").startswith("text/event-stream")
        assert stream.next() == {"type": "hello", "conversation_id": cid}
        console.post("/console/claim", data={"csrf_token": token})
        state = stream.until(lambda e: isinstance(e, dict) and e["type"] == "state")
        assert state == {"type": "state", "state": "with_person", "agent": "Ana"}
        console.post("/console/items/1/typing", headers={"X-CSRF-Token": token})
        assert stream.until(lambda e: isinstance(e, dict)) == {"type": "typing", "agent": "Ana"}
        console.post(
            "/console/items/1/reply",
            data={"csrf_token": token, "text": "Found it!", "then": "with_person"},
        )
        message = stream.until(lambda e: isinstance(e, dict) and e["type"] == "message")
        assert message["message"]["role"] == "agent"
        assert message["message"]["text"] == "Found it!"
        console.post("/console/items/1/handback", data={"csrf_token": token})
        state = stream.until(lambda e: isinstance(e, dict) and e["type"] == "state")
        assert state["state"] == "bot"
        stream.close()


def test_the_console_stream_announces_escalations_and_held_messages(app, reviewer):
    console = app.test_client()
    login(console, reviewer.email, reviewer.password)
    token = csrf_from(console.get("/console/").get_data(as_text=True))
    cookie = console.get_cookie("session")
    with serve_app(app) as url:
        stream = Stream(url, "/console/events", {"Cookie": f"session={cookie.value}"})
        assert stream.response.status == 200
        assert stream.next()["type"] == "hello"
        chat = app.test_client()
        cid = chat.post("/api/v1/chat", json={"message": "refund please"}).get_json()[
            "conversation_id"
        ]
        escalated = stream.until(lambda e: isinstance(e, dict) and e["type"] == "escalated")
        assert escalated["conversation_id"] == cid and escalated["item_id"] == 1
        console.post("/console/claim", data={"csrf_token": token})
        chat.post("/api/v1/chat", json={"message": "still there?", "conversation_id": cid})
        held = stream.until(lambda e: isinstance(e, dict) and e["type"] == "message")
        assert held["item_id"] == 1 and held["message"]["text"] == "still there?"
        stream.close()
        # Without a session the stream is not served.
        anonymous = Stream(url, "/console/events")
        assert anonymous.response.status == 302
        anonymous.close()


def test_heartbeats_and_a_bounded_lifetime(make_app):
    app = make_app(LIVE_HEARTBEAT_SECONDS=1, LIVE_STREAM_SECONDS=2)
    cid = (
        app.test_client().post("/api/v1/chat", json={"message": "hi"}).get_json()["conversation_id"]
    )
    with serve_app(app) as url:
        stream = Stream(url, f"/api/v1/conversations/{cid}/events")
        started = time.monotonic()
        items = []
        while (item := stream.next()) is not None:
            items.append(item)
        assert ": ping" in items
        assert 1.5 < time.monotonic() - started < 6  # ended by itself; EventSource reconnects
        stream.close()


def test_a_worker_that_serves_one_request_at_a_time_refuses_streams(client):
    """The Flask test client, like a gunicorn sync worker, is not multithreaded: a stream would
    hold it, so the widget is told to poll."""
    cid = client.post("/api/v1/chat", json={"message": "hi"}).get_json()["conversation_id"]
    response = client.get(f"/api/v1/conversations/{cid}/events")
    assert response.status_code == 503
    assert response.get_json()["error"]["code"] == "live_unavailable"
    assert client.get(f"/api/v1/conversations/{'0' * 32}/events").status_code == 404


@pytest.mark.parametrize("path", ["not-an-id", "0" * 32])
def test_streams_of_unknown_conversations_are_404(app, path):
    with serve_app(app) as url:
        stream = Stream(url, f"/api/v1/conversations/{path}/events")
        assert stream.response.status == 404
        stream.close()
