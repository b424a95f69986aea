"""Per-client rate limiting in Redis (fixed window).

A limit such as ``30/minute`` allows 30 requests per client in each aligned minute. One Lua
script increments the window's counter and sets its expiry atomically, so every gunicorn
worker and every host sharing the Redis server enforces the same budget. A fixed window can
let through up to twice the limit around a window boundary; that is the accepted price for one
round trip per request.

When Redis cannot be reached the request is allowed (fail open): a support chat that refuses
customers because its rate limiter is down would do more harm than a short burst of traffic.
The failure is logged, at most once a minute per process, and Redis is left alone for a few
seconds before the next try.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from dataclasses import dataclass

import redis
from flask import Request

log = logging.getLogger(__name__)

_PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
_LIMIT_RE = re.compile(r"^\s*(\d+)\s*(?:/|per)\s*(\d*)\s*(second|minute|hour|day)s?\s*$", re.I)
_DISABLED = {"off", "none", "0", "false", "disabled", ""}

# KEYS[1]: counter key; ARGV[1]: window length in seconds. Returns {count, ttl_seconds}.
_INCR_SCRIPT = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
"""


@dataclass(frozen=True)
class Limit:
    """``requests`` allowed per ``seconds``."""

    requests: int
    seconds: int


def parse_limit(spec: str | None) -> Limit | None:
    """``"30/minute"``, ``"5 per second"``, ``"100/10minutes"``; None when disabled (``off``)."""
    if spec is None or spec.strip().lower() in _DISABLED:
        return None
    match = _LIMIT_RE.match(spec)
    if not match:
        raise ValueError(
            f"invalid rate limit {spec!r}: expected N/second|minute|hour|day, or 'off'"
        )
    count, multiplier, period = match.groups()
    seconds = _PERIODS[period.lower()] * (int(multiplier) if multiplier else 1)
    if int(count) <= 0 or seconds <= 0:
        return None
    return Limit(int(count), seconds)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    remaining: int
    retry_after: int  # seconds until the window resets (0 when allowed)


def client_address(request: Request, trusted_proxies: int) -> str:
    """The client's address: the peer, or the X-Forwarded-For entry that the trusted proxies
    vouch for (the ``trusted_proxies``-th from the right; anything further left is spoofable)."""
    if trusted_proxies > 0:
        hops = [h.strip() for h in request.headers.get("X-Forwarded-For", "").split(",")]
        hops = [h for h in hops if h]
        if len(hops) >= trusted_proxies:
            return hops[-trusted_proxies]
    return request.remote_addr or "unknown"


def client_key(address: str, secret: str) -> str:
    """A stable pseudonym for a client address (no raw IP addresses in Redis or the DB)."""
    return hashlib.sha256(f"{secret}:{address}".encode()).hexdigest()[:32]


class RateLimiter:
    """Counts requests per client and bucket in Redis; see the module docstring."""

    _LOG_EVERY_S = 60.0
    # After a Redis error, requests are allowed without asking Redis for this long, so that a
    # Redis outage (with the client's connect timeouts and retries) does not slow every request.
    _SKIP_AFTER_FAILURE_S = 5.0

    def __init__(self, client: redis.Redis, prefix: str, limit: Limit | None) -> None:
        self.client = client
        self.prefix = prefix
        self.limit = limit
        self._script = client.register_script(_INCR_SCRIPT)
        self._last_failure_log = 0.0
        self._skip_until = 0.0

    def hit(self, bucket: str, key: str, scale: int = 1) -> Verdict:
        """Count one request of ``key`` in ``bucket``; ``scale`` multiplies the budget."""
        if self.limit is None:
            return Verdict(True, -1, 0)
        if time.monotonic() < self._skip_until:
            return Verdict(True, -1, 0)  # Redis failed moments ago: do not wait on it again
        budget = self.limit.requests * scale
        window = int(time.time() // self.limit.seconds)
        redis_key = f"{self.prefix}ratelimit:{bucket}:{key}:{window}"
        try:
            count, ttl = self._script(keys=[redis_key], args=[self.limit.seconds])
        except redis.RedisError as exc:
            self._log_failure(exc)
            return Verdict(True, -1, 0)
        count, ttl = int(count), int(ttl)
        if count > budget:
            return Verdict(False, 0, max(1, math.ceil(ttl)))
        return Verdict(True, budget - count, 0)

    def _log_failure(self, exc: Exception) -> None:
        now = time.monotonic()
        self._skip_until = now + self._SKIP_AFTER_FAILURE_S
        if now - self._last_failure_log >= self._LOG_EVERY_S:
            self._last_failure_log = now
            log.warning("rate limiter cannot reach Redis, allowing requests: %s", exc)
