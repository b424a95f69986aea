"""Server-sent event responses over a hub subscription.

A stream sends ``retry``, then an initial ``hello`` event (clients re-read their state on it),
then every event of its channels, with a comment line as a heartbeat every
``LIVE_HEARTBEAT_SECONDS`` so proxies keep the connection open and dead clients are noticed. It
ends after ``LIVE_STREAM_SECONDS`` and the browser's EventSource reconnects by itself, so no
stream holds a worker for ever.

Streams need a worker that serves many connections at once (gevent, gthread, or the threaded
development server). A ``sync`` gunicorn worker would be held by one stream and starve chat
requests, so there the endpoint answers 503 ``live_unavailable`` and clients keep polling.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from flask import Response, current_app, request

from app.live.bus import LiveHub, Subscription

HUB_KEY = "tierdesk.live_hub"


def get_hub() -> LiveHub:
    hub = current_app.extensions.get(HUB_KEY)
    if hub is None:
        from app.services import get_redis

        hub = current_app.extensions.setdefault(
            HUB_KEY, LiveHub(get_redis(), current_app.config["REDIS_PREFIX"])
        )
    return hub


def streams_supported() -> bool:
    """False on a worker that serves one request at a time (a stream would block it)."""
    return bool(current_app.config.get("LIVE_STREAMS", True)) and bool(
        request.environ.get("wsgi.multithread")
    )


def format_event(event: dict) -> str:
    return "data: " + json.dumps(event, separators=(",", ":")) + "\n\n"


def event_stream(channels: list[str], hello: dict | None = None) -> Response:
    config = current_app.config
    heartbeat = float(config.get("LIVE_HEARTBEAT_SECONDS", 15))
    lifetime = float(config.get("LIVE_STREAM_SECONDS", 300))
    subscription = get_hub().subscribe(channels)
    return Response(
        _generate(subscription, hello or {}, heartbeat, lifetime),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _generate(sub: Subscription, hello: dict, heartbeat: float, lifetime: float) -> Iterator[str]:
    try:
        yield "retry: 3000\n" + format_event({"type": "hello", **hello})
        deadline = time.monotonic() + lifetime
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            event = sub.get(timeout=min(heartbeat, left))
            yield ": ping\n\n" if event is None else format_event(event)
    finally:
        sub.close()
