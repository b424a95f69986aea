"""Shadow mode: a ``shadow`` version answers a sample of live questions in the background.

The customer's request only pays for a coin flip and a ``put_nowait`` on a small queue: when
the queue is full the question is dropped (counted), never waited for. One daemon thread per
process, at the lowest CPU priority the kernel gives a thread (``nice`` 19 on Linux), takes
questions off the queue, routes them through the shadow router, compares the two decisions
and writes one ``shadow_comparisons`` row each:

- intent, article, route, calibrated confidence and escalation of both;
- ``kl``: KL(active || shadow) between their intent distributions (the BERT stage's when it
  ran, else FastText's; the top five intents plus the remaining mass, smoothed);
- ``disagrees``: a different article, intent, route or escalation outcome.

The console's models page (``app/review/models_console.py``) shows the disagreement rate and
examples, with the reviewer's reply to that conversation where there is one.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import random
import threading
import time

from app.metrics import SHADOW_EVENTS
from app.nlp.types import Decision

log = logging.getLogger(__name__)

QUEUE_SIZE = 64
SMOOTHING = 1e-4
OTHER = "\0other"


class ShadowRunner:
    """A bounded queue and one background worker writing comparisons to the database."""

    def __init__(
        self, db_url: str, *, queue_size: int = QUEUE_SIZE, rng: random.Random | None = None
    ):
        self.db_url = db_url
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, queue_size))
        self._rng = rng or random.Random()
        self.offered = self.dropped = self.done = self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="tierdesk-shadow", daemon=True)
        self._thread.start()

    def offer(self, router, decision: Decision, sample: float, conversation_id: str | None) -> bool:
        """Queue ``decision``'s question for ``router`` with probability ``sample``; returns
        whether it was queued. Never blocks."""
        if sample <= 0.0 or self._rng.random() >= sample:
            return False
        self.offered += 1
        try:
            self._queue.put_nowait((router, decision, conversation_id))
        except queue.Full:
            self.dropped += 1
            SHADOW_EVENTS.labels("dropped").inc()
            return False
        SHADOW_EVENTS.labels("queued").inc()
        return True

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every queued question is compared (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._queue.unfinished_tasks

    def close(self, timeout: float = 2.0) -> None:
        """Stop the worker after the comparison in hand (queued ones are dropped)."""
        self._stop.set()
        while True:  # make room for the wake-up item
            try:
                self._queue.put_nowait(None)
                break
            except queue.Full:
                try:
                    self._queue.get_nowait()
                    self._queue.task_done()
                except queue.Empty:
                    pass
        self._thread.join(timeout)

    def _work(self) -> None:
        _lower_priority()
        while not self._stop.is_set():
            item = self._queue.get()
            try:
                if item is None:
                    return
                router, decision, conversation_id = item
                shadow = router.route(decision.query)
                self._record(compare(decision, shadow), conversation_id)
                self.done += 1
                SHADOW_EVENTS.labels("compared").inc()
            except Exception:  # noqa: BLE001 - the shadow must never take the worker down
                self.failed += 1
                SHADOW_EVENTS.labels("failed").inc()
                log.exception("shadow comparison failed")
            finally:
                self._queue.task_done()

    def _record(self, values: dict, conversation_id: str | None) -> None:
        from app.db import session_scope
        from app.models import ShadowComparison

        with session_scope(self.db_url) as session:
            session.add(ShadowComparison(conversation_id=conversation_id, **values))


def _lower_priority() -> None:
    try:  # Linux schedules threads one by one: this thread yields the CPU to requests
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def intent_distribution(decision: Decision) -> dict[str, float]:
    """The decision's intent probabilities: the BERT stage's when it ran, else FastText's."""
    stages = decision.trace.get("stages", {})
    for name in ("bert", "fasttext"):
        intents = (stages.get(name) or {}).get("intents")
        if intents:
            dist = {str(n): float(p) for n, p in intents}
            dist[OTHER] = max(0.0, 1.0 - sum(dist.values()))
            return dist
    return {}


def kl_divergence(p: dict[str, float], q: dict[str, float]) -> float | None:
    """KL(p || q) over the union of their intents, both smoothed and renormalised."""
    if not p or not q:
        return None
    keys = set(p) | set(q)

    def norm(d):
        raw = {k: d.get(k, 0.0) + SMOOTHING for k in keys}
        total = sum(raw.values())
        return {k: v / total for k, v in raw.items()}

    p, q = norm(p), norm(q)
    return float(sum(p[k] * math.log(p[k] / q[k]) for k in keys))


def compare(active: Decision, shadow: Decision) -> dict:
    """The ``ShadowComparison`` columns of one question answered by both versions."""
    a_slug = active.article.slug if active.article else None
    s_slug = shadow.article.slug if shadow.article else None
    a_escalated = bool(active.trace.get("escalation_reason") or active.escalate)
    s_escalated = bool(shadow.trace.get("escalation_reason") or shadow.escalate)
    return {
        "version": shadow.trace.get("versions", {}).get("models") or "",
        "active_version": active.trace.get("versions", {}).get("models"),
        "query": active.query,
        "active_intent": active.intent,
        "shadow_intent": shadow.intent,
        "active_slug": a_slug,
        "shadow_slug": s_slug,
        "active_route": active.route,
        "shadow_route": shadow.route,
        "active_confidence": float(active.confidence),
        "shadow_confidence": float(shadow.confidence),
        "active_escalated": a_escalated,
        "shadow_escalated": s_escalated,
        "kl": kl_divergence(intent_distribution(active), intent_distribution(shadow)),
        "disagrees": (
            a_slug != s_slug
            or active.intent != shadow.intent
            or active.route != shadow.route
            or a_escalated != s_escalated
        ),
    }
