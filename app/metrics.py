"""Prometheus metrics: request counts and latencies per endpoint, plus the routing metrics
that the NLP engine and the review queue record (``ROUTE_DECISIONS`` and friends).

Exposed at ``/metrics`` in the Prometheus text format. Under gunicorn with several workers, set
``PROMETHEUS_MULTIPROC_DIR`` (ops/gunicorn.conf.py does) and every worker's figures are merged.
"""

from __future__ import annotations

import os
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
    "Answer cache hits and misses.",
    ["result"],
    registry=REGISTRY,
)
REVIEW_QUEUE_DEPTH = Gauge(
    "tierdesk_review_queue_depth",
    "Review items waiting in Redis.",
    registry=REGISTRY,
    multiprocess_mode="mostrecent",
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


def _start_timer() -> None:
    g._metrics_start = time.perf_counter()


# Label values come from fixed sets only (route names, known methods, vocabulary), never from
# what a client sent: no customer text (and no unbounded cardinality) in /metrics.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _record(response: Response) -> Response:
    start = g.pop("_metrics_start", None)
    endpoint = request.endpoint or "unmatched"
    method = request.method if request.method in _METHODS else "other"
    if start is not None:
        HTTP_LATENCY.labels(endpoint).observe(time.perf_counter() - start)
    HTTP_REQUESTS.labels(endpoint, method, str(response.status_code)).inc()
    return response


def metrics_view() -> Response:
    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)


def init_app(app: Flask) -> None:
    app.before_request(_start_timer)
    app.after_request(_record)
    app.add_url_rule("/metrics", "metrics", metrics_view)
