"""The Redis-backed review queue (interface only for now; the review issue fills it in)."""

from __future__ import annotations

import redis


class ReviewQueue:
    def __init__(self, client: redis.Redis, prefix: str, db_url: str, lease_seconds: int) -> None:
        self.client = client
        self.prefix = prefix
        self.db_url = db_url
        self.lease_seconds = lease_seconds
