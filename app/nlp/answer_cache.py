"""The answer cache: repeated questions answered without running the router again.

Two levels, both keyed by the normalised text and a *tag* naming what the answer depends on
(the models version, the BM25 index version and the KB/model revisions):

- **local**: a small LRU per process (``size`` entries; 0 turns the whole cache off). It holds
  router escalations too (they are deterministic for given models), never answers that depended
  on the moment (spare review capacity, BERT refused by admission control).
- **shared**: Redis, under ``{prefix}answers:{tag}:{hash of the text}``, seen by every worker
  and every host on that Redis. It holds only answers that went out to the customer, never
  escalations (their trace is for a reviewer, and an escalation is worth a fresh look).

Entries live for a time that grows with the answer's calibrated confidence (dynamic TTL):
``ttl_min`` at the review threshold up to ``ttl_max`` at confidence 1, linearly; a local entry
expires with its shared one. A KB import or a model change moves the tag, so no later lookup
finds an old answer; ``purge_other_tags`` then deletes the old tags' keys from Redis (once per
new tag, whichever process gets there first).

When Redis fails, the cache stops asking it for ``REDIS_RETRY_SECONDS`` and serves from the
local level alone: a Redis outage costs throughput, never an answer.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict

import redis

from app.nlp.types import Candidate, Decision

log = logging.getLogger(__name__)

REDIS_RETRY_SECONDS = 5.0
TTL_MIN_SECONDS = 60
TTL_MAX_SECONDS = 3600


def cache_tag(*parts: object) -> str:
    """A short stable name for what an answer depends on."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]


def ttl_seconds(confidence: float, tau_review: float, ttl_min: int, ttl_max: int) -> int:
    """Confident answers live longer: ``ttl_min`` at ``tau_review``, ``ttl_max`` at 1."""
    span = max(1e-9, 1.0 - tau_review)
    share = min(1.0, max(0.0, (confidence - tau_review) / span))
    return int(round(ttl_min + (ttl_max - ttl_min) * share))


def _to_json(decision: Decision) -> str:
    def fallback(obj):
        try:
            return float(obj)
        except (TypeError, ValueError):
            return str(obj)

    return json.dumps(dataclasses.asdict(decision), default=fallback, separators=(",", ":"))


def _from_json(raw: str) -> Decision:
    data = json.loads(raw)
    article = data.get("article")
    data["article"] = Candidate(**article) if article else None
    data["suggestions"] = [Candidate(**c) for c in data.get("suggestions") or []]
    return Decision(**data)


class _LocalLRU:
    def __init__(self, size: int) -> None:
        self.size = size
        self._data: OrderedDict = OrderedDict()  # key -> (expires at, decision)
        self._lock = threading.Lock()

    def get(self, key, now: float):
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return entry[1]

    def put(self, key, value, expires: float) -> None:
        with self._lock:
            self._data[key] = (expires, value)
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


class AnswerCache:
    def __init__(
        self,
        size: int,
        client: redis.Redis | None = None,
        prefix: str = "tierdesk:",
        *,
        shared: bool = True,
        ttl_min: int = TTL_MIN_SECONDS,
        ttl_max: int = TTL_MAX_SECONDS,
    ) -> None:
        if ttl_min < 1 or ttl_max < ttl_min:
            raise ValueError("answer cache TTLs need 1 <= min <= max seconds")
        self.size = size
        self.local = _LocalLRU(size)
        self.client = client if shared and size > 0 else None
        self.prefix = f"{prefix}answers:"
        self.ttl_min, self.ttl_max = ttl_min, ttl_max
        self._down_until = 0.0
        self._purged: str | None = None

    @property
    def enabled(self) -> bool:
        return self.size > 0

    @property
    def shared(self) -> bool:
        return self.client is not None

    def _key(self, text: str, tag: str) -> str:
        return f"{self.prefix}{tag}:{hashlib.sha1(text.encode()).hexdigest()[:24]}"

    def _redis_ok(self) -> bool:
        return self.client is not None and time.monotonic() >= self._down_until

    def _redis_failed(self, what: str) -> None:
        self._down_until = time.monotonic() + REDIS_RETRY_SECONDS
        log.warning(
            "answer cache: Redis %s failed; local cache only for %.0f s", what, REDIS_RETRY_SECONDS
        )

    def get(self, text: str, tag: str) -> tuple[Decision | None, str]:
        """(decision, "hit" | "shared_hit" | "miss") for the normalised ``text``."""
        if not self.enabled:
            return None, "miss"
        now = time.monotonic()
        local = self.local.get((text, tag), now)
        if local is not None:
            return local, "hit"
        if not self._redis_ok():
            return None, "miss"
        key = self._key(text, tag)
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.get(key)
            pipe.ttl(key)
            raw, ttl = pipe.execute()
        except redis.RedisError:
            self._redis_failed("read")
            return None, "miss"
        if raw is None:
            return None, "miss"
        try:
            decision = _from_json(raw)
        except (ValueError, TypeError, KeyError):
            log.warning("answer cache: unreadable entry %s dropped", key)
            return None, "miss"
        if ttl and ttl > 0:
            self.local.put((text, tag), decision, now + ttl)
        return decision, "shared_hit"

    def put(self, text: str, tag: str, decision: Decision, tau_review: float) -> None:
        """Keep ``decision`` (the caller decides whether it may be kept at all)."""
        if not self.enabled:
            return
        ttl = ttl_seconds(decision.confidence, tau_review, self.ttl_min, self.ttl_max)
        self.local.put((text, tag), decision, time.monotonic() + ttl)
        if decision.escalate or not self._redis_ok():
            return
        try:
            self.client.set(self._key(text, tag), _to_json(decision), ex=ttl)
        except redis.RedisError:
            self._redis_failed("write")

    def clear_local(self) -> None:
        self.local.clear()

    def purge_other_tags(self, tags: str | set[str]) -> int:
        """Delete shared entries of every tag but ``tags`` (after a KB or model change: the
        active version's, and a canary's, shadow's or experiment arm's beside it).

        One process per new set of tags does the scan (``SET NX`` on a marker); returns the
        number of keys deleted here."""
        keep = {tags} if isinstance(tags, str) else set(tags)
        name = "+".join(sorted(keep))
        if not self._redis_ok() or self._purged == name:
            return 0
        self._purged = name
        marker = f"{self.prefix}purged:{cache_tag(name)}"
        try:
            if not self.client.set(marker, "1", nx=True, ex=self.ttl_max):
                return 0
        except redis.RedisError:
            self._redis_failed("purge")
            return 0
        kept = tuple(f"{self.prefix}{t}:" for t in keep) + (f"{self.prefix}purged:",)
        return self._delete_matching(lambda key: not key.startswith(kept))

    def clear_all(self) -> int:
        """Drop every answer, here and in Redis (an erasure: keys are questions as typed)."""
        self.clear_local()
        if not self._redis_ok():
            return 0
        return self._delete_matching(lambda key: True)

    def _delete_matching(self, stale_if) -> int:
        deleted = 0
        stale: list[str] = []
        try:
            for key in self.client.scan_iter(match=f"{self.prefix}*", count=1000):
                if stale_if(key):
                    stale.append(key)
                if len(stale) >= 500:
                    deleted += self.client.delete(*stale)
                    stale.clear()
            if stale:
                deleted += self.client.delete(*stale)
        except redis.RedisError:
            self._redis_failed("purge")
        return deleted

    def __len__(self) -> int:
        return len(self.local)
