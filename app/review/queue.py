"""The human-review work queue: Redis for speed and fairness, the database for the truth.

Design
------
A review item is first committed as a ``review_items`` row; only then is its id put in Redis.
Redis holds nothing that cannot be rebuilt from the rows, so losing it (a restart without
persistence, a ``FLUSHALL``, an outage) costs a reconcile, never an item.

Why a sorted set and not a Stream or a list: Streams and ``BLMOVE`` lists are FIFO, but reviewers
should see complex questions and customers who already asked twice before routine ones, while
nothing waits forever. A sorted set gives both with one number per item::

    score = created_at (epoch seconds) - priority * priority_step_seconds

The lowest score is claimed first, so an item of priority ``p`` counts as if it had waited
``p * priority_step_seconds`` longer; age keeps growing for everyone, so low-priority items still
reach the head. A sorted set also makes "exactly once" structural: a member cannot be present
twice, and re-adding one during reconcile is a no-op.

Keys (all under the configured prefix)::

    {prefix}review:queue    ZSET  item id -> score              items waiting for a reviewer
    {prefix}review:leases   ZSET  item id -> lease expiry       items held by a reviewer
    {prefix}review:holders  HASH  item id -> reviewer id
    {prefix}review:meta     HASH  item id -> JSON {score, intent, route, reason}

Claiming is one Lua script (atomic on the server, so two reviewers can never pop the same id):
it first returns every expired lease to the queue with its original score, then takes the first
queued id matching the optional intent/route/reason filters and moves it to ``leases`` with an
expiry computed from the Redis clock. The database then confirms with a guarded
``UPDATE ... WHERE status = 'pending' (or an expired claim)``; if the row says otherwise (the
item was resolved while Redis still listed it) the id is dropped from Redis and the next one is
tried. When Redis is unreachable, claims fall back to the same guarded update on the database.

The reconciler (``reconcile``) makes Redis match the rows: expired claims become pending again,
every pending row missing from Redis is queued (unless it is currently leased), every live claim
missing from Redis gets its lease back, and ids whose rows are resolved or gone are removed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import redis
from sqlalchemy import or_, select, update

from app import metrics
from app.db import session_scope
from app.models import ReviewItem, utcnow
from app.vocab import OPEN_STATUSES, ReviewStatus

log = logging.getLogger(__name__)

DEFAULT_PRIORITY_STEP_SECONDS = 600
# After a Redis error, escalations and claims skip Redis for this long (the reconciler, which
# always tries, catches up), so an outage costs one connection timeout (with redis-py's retries,
# seconds) per window instead of one per request.
REDIS_RETRY_AFTER_SECONDS = 30.0

_LUA_PRELUDE = """
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

# KEYS: queue, leases, holders, meta.  Returns expired leases to the queue.
_LUA_RELEASE_EXPIRED = """
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(expired) do
  local score = now
  local raw = redis.call('HGET', KEYS[4], id)
  if raw then score = tonumber(cjson.decode(raw)['score']) or now end
  redis.call('ZADD', KEYS[1], score, id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
end
"""

# ARGV: lease seconds, reviewer id, intent, route, reason ('' = any), skip ids (JSON list)
CLAIM_SCRIPT = (
    _LUA_PRELUDE
    + _LUA_RELEASE_EXPIRED
    + """
local want = {intent = ARGV[3], route = ARGV[4], reason = ARGV[5]}
local skip = {}
for _, id in ipairs(cjson.decode(ARGV[6])) do skip[tostring(id)] = true end
local filtered = want.intent ~= '' or want.route ~= '' or want.reason ~= ''
local function matches(id)
  if skip[id] then return false end
  if not filtered then return true end
  local raw = redis.call('HGET', KEYS[4], id)
  if not raw then return false end
  local meta = cjson.decode(raw)
  for key, value in pairs(want) do
    if value ~= '' and tostring(meta[key]) ~= value then return false end
  end
  return true
end
local chosen = nil
local start = 0
while not chosen do
  local ids = redis.call('ZRANGE', KEYS[1], start, start + 199)
  if #ids == 0 then break end
  for _, id in ipairs(ids) do
    if matches(id) then chosen = id break end
  end
  start = start + 200
end
if not chosen then return false end
local expires = now + tonumber(ARGV[1])
redis.call('ZREM', KEYS[1], chosen)
redis.call('ZADD', KEYS[2], expires, chosen)
redis.call('HSET', KEYS[3], chosen, ARGV[2])
return {chosen, tostring(expires)}
"""
)

# ARGV: triples (id, score, meta JSON).  Queues ids that are not leased; returns how many new.
ENQUEUE_SCRIPT = """
local added = 0
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  redis.call('HSET', KEYS[4], id, ARGV[i + 2])
  if not redis.call('ZSCORE', KEYS[2], id) then
    added = added + redis.call('ZADD', KEYS[1], 'NX', ARGV[i + 1], id)
  end
end
return added
"""

# ARGV: triples (id, lease expiry, reviewer id).  Restores leases missing from both sets.
RESTORE_LEASES_SCRIPT = """
local restored = 0
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  if not redis.call('ZSCORE', KEYS[2], id) and not redis.call('ZSCORE', KEYS[1], id) then
    redis.call('ZADD', KEYS[2], ARGV[i + 1], id)
    redis.call('HSET', KEYS[3], id, ARGV[i + 2])
    restored = restored + 1
  end
end
return restored
"""

# ARGV: id, reviewer id, lease seconds.  Extends a lease the reviewer still holds.
RENEW_SCRIPT = (
    _LUA_PRELUDE
    + """
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return false end
local expires = now + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], expires, ARGV[1])
return tostring(expires)
"""
)

# ARGV: id, reviewer id.  Gives a held item back to the queue with its original score.
RELEASE_SCRIPT = (
    _LUA_PRELUDE
    + """
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
local score = now
local raw = redis.call('HGET', KEYS[4], ARGV[1])
if raw then score = tonumber(cjson.decode(raw)['score']) or now end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[1], score, ARGV[1])
return 1
"""
)

# ARGV: id, reviewer id, lease expiry.  Records a lease the database already granted.
TAKE_SCRIPT = """
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
return 1
"""

# ARGV: id, reviewer id.  Drops a lease Redis granted but the database refused.
DROP_LEASE_SCRIPT = """
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
"""

RELEASE_EXPIRED_SCRIPT = _LUA_PRELUDE + _LUA_RELEASE_EXPIRED + "return #expired"


def to_epoch(moment: datetime) -> float:
    """Seconds since the epoch of a naive-UTC datetime (the model's convention)."""
    return moment.replace(tzinfo=UTC).timestamp()


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)


@dataclass(frozen=True)
class Claim:
    item_id: int
    lease_expires_at: datetime  # naive UTC
    via: str  # "redis" | "database" (Redis unreachable)


@dataclass
class ReconcileReport:
    expired_claims_released: int = 0
    queued: int = 0
    leases_restored: int = 0
    stale_removed: int = 0
    redis_ok: bool = True
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        state = "ok" if self.redis_ok else "redis unavailable"
        return (
            f"{state}: queued {self.queued}, leases restored {self.leases_restored}, "
            f"expired claims released {self.expired_claims_released}, "
            f"stale ids removed {self.stale_removed}"
        )


class ReviewQueue:
    """Review items waiting for reviewers, and the leases of the ones being worked on."""

    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        db_url: str,
        lease_seconds: int,
        priority_step_seconds: int = DEFAULT_PRIORITY_STEP_SECONDS,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.db_url = db_url
        self.lease_seconds = int(lease_seconds)
        self.priority_step_seconds = int(priority_step_seconds)
        self.queue_key = f"{prefix}review:queue"
        self.leases_key = f"{prefix}review:leases"
        self.holders_key = f"{prefix}review:holders"
        self.meta_key = f"{prefix}review:meta"
        self._keys = [self.queue_key, self.leases_key, self.holders_key, self.meta_key]
        self._scripts: dict[str, object] = {}
        self._redis_down_until = 0.0
        self._lock = threading.Lock()

    def _script(self, source: str):
        """A registered Lua script, created on first use (so that building the queue never
        starts a lazily started embedded Redis)."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self.client.register_script(source)
        return script

    def _run(self, source: str, args: Sequence) -> object:
        return self._script(source)(keys=self._keys, args=list(args))

    # -- scoring -----------------------------------------------------------------------------

    def score(self, item: ReviewItem) -> float:
        """Lower is served first: creation time minus a head start per priority level."""
        return to_epoch(item.created_at or utcnow()) - item.priority * self.priority_step_seconds

    def _entry(self, item: ReviewItem) -> list[str]:
        score = self.score(item)
        meta = {
            "score": score,
            "intent": item.intent or "",
            "route": item.route or "",
            "reason": item.reason or "",
        }
        return [str(item.id), repr(score), json.dumps(meta)]

    # -- Redis availability -------------------------------------------------------------------

    def _note_redis_error(self, exc: Exception, action: str) -> None:
        with self._lock:
            self._redis_down_until = time.monotonic() + REDIS_RETRY_AFTER_SECONDS
        log.warning(
            "review queue: Redis unavailable during %s (%s: %s); the database keeps the "
            "item and the reconciler will queue it",
            action,
            exc.__class__.__name__,
            exc,
        )

    def redis_recently_failed(self) -> bool:
        return time.monotonic() < self._redis_down_until

    # -- producing ---------------------------------------------------------------------------

    def enqueue(self, item: ReviewItem) -> bool:
        """Queue a committed item. False when Redis is unavailable (nothing is lost: the row is
        pending and the reconciler will queue it)."""
        return self.enqueue_many([item]) is not None

    def enqueue_many(self, items: Sequence[ReviewItem], *, force: bool = False) -> int | None:
        """Queue items not already queued or leased; the number newly queued, None on error."""
        if not items:
            return 0
        if self.redis_recently_failed() and not force:
            return None
        added = 0
        try:
            for start in range(0, len(items), 500):
                args: list[str] = []
                for item in items[start : start + 500]:
                    args.extend(self._entry(item))
                added += int(self._run(ENQUEUE_SCRIPT, args))
        except redis.RedisError as exc:
            self._note_redis_error(exc, "enqueue")
            return None
        return added

    # -- consuming ---------------------------------------------------------------------------

    def claim_next(
        self,
        reviewer_id: int,
        *,
        intent: str | None = None,
        route: str | None = None,
        reason: str | None = None,
    ) -> Claim | None:
        """Lease the most urgent matching item to ``reviewer_id``; None when nothing waits."""
        if not self.redis_recently_failed():
            try:
                return self._claim_via_redis(reviewer_id, intent, route, reason)
            except redis.RedisError as exc:
                self._note_redis_error(exc, "claim")
        return self._claim_via_database(reviewer_id, intent, route, reason)

    def _claim_via_redis(self, reviewer_id, intent, route, reason) -> Claim | None:
        skipped: list[str] = []
        while True:
            result = self._run(
                CLAIM_SCRIPT,
                [
                    self.lease_seconds,
                    str(reviewer_id),
                    intent or "",
                    route or "",
                    reason or "",
                    json.dumps(skipped),
                ],
            )
            if not result:
                return None
            item_id, expires = int(result[0]), from_epoch(float(result[1]))
            if self._confirm_claim_in_db(item_id, reviewer_id, expires):
                return Claim(item_id, expires, "redis")
            # The row is no longer claimable (resolved, or held by someone per the database).
            status = self._db_status(item_id)
            if status in OPEN_STATUSES:
                self._run(DROP_LEASE_SCRIPT, [str(item_id), str(reviewer_id)])
            else:
                self.complete(item_id)
            skipped.append(str(item_id))

    def _confirm_claim_in_db(self, item_id: int, reviewer_id: int, expires: datetime) -> bool:
        now = utcnow()
        with session_scope(self.db_url) as session:
            result = session.execute(
                update(ReviewItem)
                .where(
                    ReviewItem.id == item_id,
                    or_(
                        ReviewItem.status == ReviewStatus.PENDING,
                        (ReviewItem.status == ReviewStatus.CLAIMED)
                        & (ReviewItem.lease_expires_at < now),
                    ),
                )
                .values(
                    status=ReviewStatus.CLAIMED, claimed_by=reviewer_id, lease_expires_at=expires
                )
                .execution_options(synchronize_session=False)
            )
            return result.rowcount == 1

    def _claim_via_database(self, reviewer_id, intent, route, reason) -> Claim | None:
        """The fallback while Redis is down: the same guarded update, most urgent first."""
        now = utcnow()
        with session_scope(self.db_url) as session:
            query = select(ReviewItem).where(
                or_(
                    ReviewItem.status == ReviewStatus.PENDING,
                    (ReviewItem.status == ReviewStatus.CLAIMED)
                    & (ReviewItem.lease_expires_at < now),
                )
            )
            for column, value in (("intent", intent), ("route", route), ("reason", reason)):
                if value:
                    query = query.where(getattr(ReviewItem, column) == value)
            candidates = session.scalars(query.order_by(ReviewItem.created_at).limit(2000)).all()
            order = sorted(candidates, key=self.score)
        expires = from_epoch(time.time() + self.lease_seconds)
        for item in order:
            if self._confirm_claim_in_db(item.id, reviewer_id, expires):
                return Claim(item.id, expires, "database")
        return None

    def claim_item(self, item_id: int, reviewer_id: int) -> Claim | None:
        """Lease one particular item (picked from the queue page); None if it is not free.

        The database decides (guarded update); Redis then records the lease. A concurrent
        ``claim_next`` that popped the same id is refused by the database and drops only its
        own lease entry.
        """
        expires = from_epoch(time.time() + self.lease_seconds)
        if not self._confirm_claim_in_db(item_id, reviewer_id, expires):
            return None
        try:
            self._run(TAKE_SCRIPT, [str(item_id), str(reviewer_id), repr(to_epoch(expires))])
        except redis.RedisError as exc:
            self._note_redis_error(exc, "claim")
            return Claim(item_id, expires, "database")
        return Claim(item_id, expires, "redis")

    def renew(self, item_id: int, reviewer_id: int) -> datetime | None:
        """Extend the reviewer's lease (any action on the item counts); None if not held."""
        expires: datetime | None = None
        try:
            raw = self._run(RENEW_SCRIPT, [str(item_id), str(reviewer_id), self.lease_seconds])
            if raw:
                expires = from_epoch(float(raw))
        except redis.RedisError as exc:
            self._note_redis_error(exc, "renew")
        fallback = from_epoch(time.time() + self.lease_seconds)
        with session_scope(self.db_url) as session:
            result = session.execute(
                update(ReviewItem)
                .where(
                    ReviewItem.id == item_id,
                    ReviewItem.status == ReviewStatus.CLAIMED,
                    ReviewItem.claimed_by == reviewer_id,
                )
                .values(lease_expires_at=expires or fallback)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:
                return None
        if expires is None:  # Redis lost the lease (flushed, or expired and not yet re-claimed)
            try:
                self._run(TAKE_SCRIPT, [str(item_id), str(reviewer_id), repr(to_epoch(fallback))])
            except redis.RedisError as exc:
                self._note_redis_error(exc, "renew")
        return expires or fallback

    def release(self, item_id: int, reviewer_id: int) -> bool:
        """Give a held item back to the queue (the reviewer chose not to work on it)."""
        with session_scope(self.db_url) as session:
            result = session.execute(
                update(ReviewItem)
                .where(
                    ReviewItem.id == item_id,
                    ReviewItem.status == ReviewStatus.CLAIMED,
                    ReviewItem.claimed_by == reviewer_id,
                )
                .values(status=ReviewStatus.PENDING, claimed_by=None, lease_expires_at=None)
                .execution_options(synchronize_session=False)
            )
            released = result.rowcount == 1
            item = session.get(ReviewItem, item_id) if released else None
        if item is not None:
            try:
                if not self._run(RELEASE_SCRIPT, [str(item_id), str(reviewer_id)]):
                    self.enqueue_many([item], force=True)
            except redis.RedisError as exc:
                self._note_redis_error(exc, "release")
        return released

    def complete(self, item_id: int) -> None:
        """Forget an item in Redis (resolved or discarded). Errors are logged: stale ids are
        dropped by the next claim or reconcile, because the row is no longer open."""
        try:
            self._forget([str(item_id)])
        except redis.RedisError as exc:
            self._note_redis_error(exc, "complete")

    def _forget(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        if not ids:
            return
        pipe = self.client.pipeline()
        pipe.zrem(self.queue_key, *ids)
        pipe.zrem(self.leases_key, *ids)
        pipe.hdel(self.holders_key, *ids)
        pipe.hdel(self.meta_key, *ids)
        pipe.execute()

    def _db_status(self, item_id: int) -> str | None:
        with session_scope(self.db_url) as session:
            return session.scalar(select(ReviewItem.status).where(ReviewItem.id == item_id))

    # -- observing ---------------------------------------------------------------------------

    def depth(self) -> int | None:
        """Items waiting in Redis (None when Redis is unavailable)."""
        try:
            return int(self.client.zcard(self.queue_key))
        except redis.RedisError:
            return None

    def queued_ids(self) -> list[int]:
        return [int(i) for i in self.client.zrange(self.queue_key, 0, -1)]

    def leased_ids(self) -> list[int]:
        return [int(i) for i in self.client.zrange(self.leases_key, 0, -1)]

    def holder(self, item_id: int) -> int | None:
        value = self.client.hget(self.holders_key, str(item_id))
        return int(value) if value else None

    # -- reconciling -------------------------------------------------------------------------

    def reconcile(self) -> ReconcileReport:
        """Make Redis match the database (see the module docstring). Safe to run any time,
        from any number of processes."""
        report = ReconcileReport()
        now = utcnow()
        with session_scope(self.db_url) as session:
            report.expired_claims_released = session.execute(
                update(ReviewItem)
                .where(ReviewItem.status == ReviewStatus.CLAIMED, ReviewItem.lease_expires_at < now)
                .values(status=ReviewStatus.PENDING, claimed_by=None, lease_expires_at=None)
                .execution_options(synchronize_session=False)
            ).rowcount
        with session_scope(self.db_url) as session:
            pending = session.scalars(
                select(ReviewItem).where(ReviewItem.status == ReviewStatus.PENDING)
            ).all()
            claimed = session.scalars(
                select(ReviewItem).where(ReviewItem.status == ReviewStatus.CLAIMED)
            ).all()
        try:
            self._run(RELEASE_EXPIRED_SCRIPT, [])
            queued = self.enqueue_many(pending, force=True)
            if queued is None:
                raise redis.ConnectionError("could not queue the pending items")
            report.queued = queued
            report.leases_restored = self._restore_live_leases(claimed)
            report.stale_removed = self._remove_stale()
            with self._lock:
                self._redis_down_until = 0.0
            metrics.REVIEW_QUEUE_DEPTH.set(self.client.zcard(self.queue_key))
        except redis.RedisError as exc:
            report.redis_ok = False
            report.errors.append(f"{exc.__class__.__name__}: {exc}")
            self._note_redis_error(exc, "reconcile")
        if report.queued or report.leases_restored or report.stale_removed:
            log.info("review queue reconciled: %s", report.summary())
        return report

    def _restore_live_leases(self, claimed: Sequence[ReviewItem]) -> int:
        restored = 0
        for start in range(0, len(claimed), 500):
            args: list[str] = []
            for item in claimed[start : start + 500]:
                if item.lease_expires_at is None or item.claimed_by is None:
                    continue
                self.client.hset(self.meta_key, str(item.id), self._entry(item)[2])
                args.extend(
                    [str(item.id), repr(to_epoch(item.lease_expires_at)), str(item.claimed_by)]
                )
            if args:
                restored += int(self._run(RESTORE_LEASES_SCRIPT, args))
        return restored

    def _remove_stale(self) -> int:
        """Drop ids whose rows are closed or gone, reading their status after the restore so
        that an item resolved meanwhile is not left behind."""
        ids = set(self.client.zrange(self.queue_key, 0, -1))
        ids |= set(self.client.zrange(self.leases_key, 0, -1))
        ids |= set(self.client.hkeys(self.meta_key))
        if not ids:
            return 0
        numeric = [int(i) for i in ids if i.isdigit()]
        open_ids: set[str] = set()
        with session_scope(self.db_url) as session:
            for start in range(0, len(numeric), 900):
                chunk = numeric[start : start + 900]
                open_ids |= {
                    str(i)
                    for i in session.scalars(
                        select(ReviewItem.id).where(
                            ReviewItem.id.in_(chunk), ReviewItem.status.in_(OPEN_STATUSES)
                        )
                    )
                }
        stale = ids - open_ids
        self._forget(stale)
        return len(stale)


class Reconciler:
    """Runs ``ReviewQueue.reconcile`` at start and then every ``interval`` seconds in a daemon
    thread of the serving process."""

    def __init__(self, queue: ReviewQueue, interval: float) -> None:
        self.queue = queue
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="review-reconciler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while True:
            try:
                self.queue.reconcile()
            except Exception:  # noqa: BLE001 - a database hiccup must not end the thread
                log.exception("review queue reconcile failed; retrying in %ss", self.interval)
            if self._stop.wait(self.interval):
                return
