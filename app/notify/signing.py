"""HMAC-SHA256 signatures of webhook bodies, and their verification (for receivers).

Every webhook request carries::

    Tierdesk-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>

A receiver recomputes the HMAC over the timestamp, a dot and the raw request body exactly as
received (before any JSON parsing), compares in constant time, and rejects timestamps more
than a few minutes old (replays). ``verify`` does all three.
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "Tierdesk-Signature"
DEFAULT_TOLERANCE_SECONDS = 300


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(
    secret: str,
    body: bytes,
    header: str | None,
    *,
    now: float | None = None,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """True when ``header`` is a valid, fresh signature of ``body`` under ``secret``."""
    if not header:
        return False
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return False
    now = time.time() if now is None else now
    if abs(now - timestamp) > tolerance:
        return False
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    return hmac.compare_digest(expected, parts.get("v1", ""))
