"""Prometheus metrics: request counts and latencies per endpoint, plus the routing metrics
that the NLP engine and the review queue record (``ROUTE_DECISIONS`` and friends).

Exposed at ``/metrics`` in the Prometheus text format. Under gunicorn with several workers, set
``PROMETHEUS_MULTIPROC_DIR`` (ops/gunicorn.conf.py does) and every worker's figures are merged.
"""

from __future__ import annotations

import os
import resource
import time

from flask import Flask, Response, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

REGISTRY = CollectorRegistry(auto_describe=True)

HTTP_REQUESTS = Counter(
    "tierdesk_http_requests_total",
    "HTTP requests by endpoint and status.",
    ["endpoint", "method", "status"],
    registry=REGISTRY,
)
HTTP_LATENCY = Histogram(
    "tierdesk_http_request_seconds",
    "HTTP request latency by endpoint.",
    ["endpoint"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
    registry=REGISTRY,
)
ROUTE_DECISIONS = Counter(
    "tierdesk_route_decisions_total",
    "Router decisions by route and outcome.",
    ["route", "outcome"],
    registry=REGISTRY,
)
ESCALATIONS = Counter(
    "tierdesk_escalations_total",
    "Messages sent to human review, by reason.",
    ["reason"],
    registry=REGISTRY,
)
SPOT_CHECKS = Counter(
    "tierdesk_spot_checks_total",
    "Answered turns drawn for a spot check (event drawn), and the verdicts (right, wrong).",
    ["event"],
    registry=REGISTRY,
)
STAGE_LATENCY = Histogram(
    "tierdesk_stage_seconds",
    "Latency of each NLP stage.",
    ["stage"],
    buckets=(0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1),
    registry=REGISTRY,
)
SHADOW_EVENTS = Counter(
    "tierdesk_shadow_total",
    "Questions offered to the shadow version: queued, dropped (queue full), compared, failed.",
    ["event"],
    registry=REGISTRY,
)
CACHE_EVENTS = Counter(
    "tierdesk_answer_cache_total",
    "Answer cache lookups: hit (this process's cache), shared_hit (Redis), miss.",
    ["result"],
    registry=REGISTRY,
)
BERT_ADMISSION = Counter(
    "tierdesk_bert_admission_total",
    "Asks for a BERT slot: admitted, or refused with the reason (budget, shed, busy).",
    ["outcome", "reason"],
    registry=REGISTRY,
)
DEGRADED = Counter(
    "tierdesk_degraded_total",
    "Decisions made without BERT although the router wanted it, by why (budget, shed, busy, "
    "unavailable) and what the router did (fast_answer, escalated).",
    ["reason", "result"],
    registry=REGISTRY,
)
BUSY_SHARE = Gauge(
    "tierdesk_worker_busy_share",
    "Share of the last seconds this worker spent serving requests (admission pressure).",
    registry=REGISTRY,
    multiprocess_mode="liveall",
)
QUEUE_WAIT = Gauge(
    "tierdesk_queue_wait_seconds",
    "Estimated wait of a new request in the accept queue in front of the workers.",
    registry=REGISTRY,
    multiprocess_mode="max",
)
WORKER_RSS = Gauge(
    "tierdesk_worker_resident_bytes",
    "Resident memory of each worker process.",
    registry=REGISTRY,
    multiprocess_mode="liveall",
)
WORKER_CPU = Gauge(
    "tierdesk_worker_cpu_seconds",
    "CPU seconds (user + system) used by each worker process so far.",
    registry=REGISTRY,
    multiprocess_mode="liveall",
)
REVIEW_QUEUE_DEPTH = Gauge(
    "tierdesk_review_queue_depth",
    "Review items waiting in Redis.",
    registry=REGISTRY,
    multiprocess_mode="mostrecent",
)
REVIEW_OLDEST_WAIT = Gauge(
    "tierdesk_review_oldest_wait_seconds",
    "Age of the oldest review item a reviewer could take now (0 when none waits).",
    registry=REGISTRY,
    multiprocess_mode="mostrecent",
)
FEEDBACK = Counter(
    "tierdesk_feedback_total",
    "Customers' votes on bot answers.",
    ["helpful"],
    registry=REGISTRY,
)
CONFIDENCE = Histogram(
    "tierdesk_answer_confidence",
    "Calibrated confidence of the router's decisions (cache hits not counted again).",
    ["route"],
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0),
    registry=REGISTRY,
)
REVIEW_THRESHOLD = Gauge(
    "tierdesk_review_threshold",
    "Calibrated confidence under which answers go to review: tuned (tau_review) and in effect "
    "(higher while spare review capacity is used).",
    ["kind"],
    registry=REGISTRY,
    multiprocess_mode="mostrecent",
)
MODEL_INFO = Gauge(
    "tierdesk_model_info",
    "Loaded model versions (value is always 1).",
    ["tier", "version"],
    registry=REGISTRY,
    multiprocess_mode="max",
)


_PAGE = os.sysconf("SC_PAGE_SIZE")


def _start_timer() -> None:
    g._metrics_start = time.perf_counter()


# Label values come from fixed sets only (route names, known methods, vocabulary), never from
# what a client sent: no customer text (and no unbounded cardinality) in /metrics.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


_next_sample = 0.0


def _sample_process() -> None:
    """This worker's memory and CPU, at most once a second (read from /proc and getrusage)."""
    global _next_sample
    now = time.monotonic()
    if now < _next_sample:
        return
    _next_sample = now + 1.0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    WORKER_CPU.set(usage.ru_utime + usage.ru_stime)
    try:
        with open("/proc/self/statm") as f:
            WORKER_RSS.set(int(f.read().split()[1]) * _PAGE)
    except OSError:
        WORKER_RSS.set(usage.ru_maxrss * 1024)


def _record(response: Response) -> Response:
    _sample_process()
    start = g.pop("_metrics_start", None)
    endpoint = request.endpoint or "unmatched"
    method = request.method if request.method in _METHODS else "other"
    if start is not None:
        HTTP_LATENCY.labels(endpoint).observe(time.perf_counter() - start)
    HTTP_REQUESTS.labels(endpoint, method, str(response.status_code)).inc()
    return response


def _refresh_review_gauges() -> None:
    """The review backlog and its oldest wait, read at scrape time (one query, one ZCARD)."""
    from app.db import get_session
    from app.review.stats import queue_counts
    from app.services import get_review_queue

    try:
        counts = queue_counts(get_session(), get_review_queue())
    except Exception:  # noqa: BLE001 - a scrape must answer even when the database is away
        return
    if counts["queued_in_redis"] is not None:
        REVIEW_QUEUE_DEPTH.set(counts["queued_in_redis"])
    REVIEW_OLDEST_WAIT.set(counts["oldest_pending_age_s"] or 0.0)


def metrics_view() -> Response:
    _refresh_review_gauges()
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)


def init_app(app: Flask) -> None:
    app.before_request(_start_timer)
    app.after_request(_record)
    app.add_url_rule("/metrics", "metrics", metrics_view)
