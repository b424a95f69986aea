"""Queue figures for ``tierdesk review stats`` and the console's stats page, read from the
``review_items`` rows (the truth) plus the Redis queue depth; the stats page also shows the
answered accuracy measured by spot checks (``app.review.spot_checks``)."""

from __future__ import annotations

import json
import logging
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Integer, and_, cast, func, or_, select
from sqlalchemy.orm import Session

from app.models import (
    TAUGHT_ORIGINS,
    Article,
    Message,
    ReviewItem,
    TrainingExample,
    utcnow,
)
from app.review.spot_checks import MeasuredAccuracy, measured_accuracy
from app.vocab import CLOSED_STATUSES, ReviewStatus

log = logging.getLogger(__name__)

SERIES_POINTS = 48


def _waiting_clause(now: datetime):
    """Rows a reviewer could take now: pending, or claimed with a lease that ran out."""
    return or_(
        ReviewItem.status == ReviewStatus.PENDING,
        and_(ReviewItem.status == ReviewStatus.CLAIMED, ReviewItem.lease_expires_at < now),
    )


def queue_counts(session: Session, queue) -> dict[str, Any]:
    """The queue's keys of ``tierdesk review stats --json`` (the CLI adds ``spot_checks``).

    ``pending`` counts expired-lease claims (they are back in the queue); ``resolved`` counts
    every closed item (replied or discarded); ``queued_in_redis`` is None when Redis is down;
    ``oldest_pending_age_s`` is None when nothing waits.
    """
    now = utcnow()
    waiting = _waiting_clause(now)
    pending, oldest = session.execute(
        select(func.count(ReviewItem.id), func.min(ReviewItem.created_at)).where(waiting)
    ).one()
    claimed = session.scalar(
        select(func.count(ReviewItem.id)).where(ReviewItem.status == ReviewStatus.CLAIMED, ~waiting)
    )
    resolved = session.scalar(
        select(func.count(ReviewItem.id)).where(ReviewItem.status.in_(CLOSED_STATUSES))
    )
    return {
        "pending": int(pending or 0),
        "claimed": int(claimed or 0),
        "resolved": int(resolved or 0),
        "queued_in_redis": queue.depth() if queue is not None else None,
        "oldest_pending_age_s": round((now - oldest).total_seconds(), 1) if oldest else None,
    }


@dataclass
class Dashboard:
    counts: dict[str, Any]
    window_start: datetime
    depth_series: list[tuple[str, float]]
    median_resolve_s: float | None
    resolved_in_window: int
    by_route: list[tuple[str, int, int]]  # route, escalations, routed messages
    by_intent: list[tuple[str, int, int]]
    by_reason: list[tuple[str, int]]
    drafts_judged: int
    drafts_unchanged: int
    model_trained_at: datetime | None
    taught_examples_pending: int
    articles_changed_pending: int
    notes: list[str] = field(default_factory=list)
    # Spot checks of answered turns created in the window (app/review/spot_checks.py), and the
    # answered accuracy the active thresholds were tuned to promise (None: not known).
    spot_checks: MeasuredAccuracy = field(default_factory=lambda: MeasuredAccuracy(0, 0, 0))
    answered_target: float | None = None

    @property
    def unchanged_share(self) -> float | None:
        return self.drafts_unchanged / self.drafts_judged if self.drafts_judged else None


def depth_over_time(
    spans: list[tuple[datetime, datetime | None]],
    start: datetime,
    end: datetime,
    points: int = SERIES_POINTS,
) -> list[tuple[datetime, int]]:
    """How many items were open at each of ``points`` instants between start and end, from
    their (created_at, resolved_at) spans: a sweep over sorted open/close events."""
    events = sorted(
        [(created, 1) for created, _ in spans]
        + [(resolved, -1) for _, resolved in spans if resolved is not None]
    )
    step = (end - start) / max(points - 1, 1)
    series, open_now, index = [], 0, 0
    for i in range(points):
        instant = start + step * i
        while index < len(events) and events[index][0] <= instant:
            open_now += events[index][1]
            index += 1
        series.append((instant, open_now))
    return series


def _parse_moment(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
    if isinstance(value, str):
        try:
            return _parse_moment(datetime.fromisoformat(value.replace("Z", "+00:00")))
        except ValueError:
            return None
    return None


def model_trained_at(engine: Any, models_dir: Path | None) -> datetime | None:
    """When the active model was trained: the engine's ``trained_at`` when it exposes one,
    else the newest ``trained_at`` in the JSON metadata under ``models_dir``."""
    moment = _parse_moment(getattr(engine, "trained_at", None))
    if moment is not None or models_dir is None:
        return moment
    current = _current_manifest_time(Path(models_dir))
    if current is not None:
        return current
    found: list[datetime] = []
    try:
        for path in Path(models_dir).rglob("*.json"):
            if path.stat().st_size > 1_000_000:
                continue
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                parsed = _parse_moment(data.get("trained_at"))
                if parsed is not None:
                    found.append(parsed)
    except OSError:
        return None
    return max(found) if found else None


def _current_manifest_time(models_dir: Path) -> datetime | None:
    """``trained_at`` of the version that ``models/current`` points at (the routing area's
    layout: ``current`` = {"version": V}, ``versions/V/manifest.json``)."""
    try:
        version = json.loads((models_dir / "current").read_text()).get("version")
        manifest = json.loads(
            (models_dir / "versions" / str(version) / "manifest.json").read_text()
        )
    except (OSError, ValueError, AttributeError):
        return None
    return _parse_moment(manifest.get("trained_at")) if isinstance(manifest, dict) else None


def promised_answered_target(engine: Any) -> float | None:
    """The answered accuracy the active thresholds promise: ``answered_target`` in the
    provenance of the thresholds the engine routes with (None without a loaded model, or when
    the thresholds were not tuned for a target)."""
    thresholds = getattr(getattr(getattr(engine, "router", None), "m", None), "thresholds", None)
    provenance = getattr(thresholds, "provenance", None)
    value = provenance.get("answered_target") if isinstance(provenance, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and 0.0 < value <= 1.0:
        return float(value)
    return None


def _route_label(route: str | None) -> str:
    return route or "none"


def dashboard(
    session: Session,
    queue,
    *,
    engine: Any = None,
    models_dir: Path | None = None,
    window_days: int = 14,
) -> Dashboard:
    now = utcnow()
    window_start = now - timedelta(days=window_days)
    spans_rows = session.execute(
        select(ReviewItem.created_at, ReviewItem.resolved_at).where(
            or_(ReviewItem.resolved_at.is_(None), ReviewItem.resolved_at >= window_start)
        )
    ).all()
    spans = [(c, r) for c, r in spans_rows]
    first = min((c for c, _ in spans), default=now)
    start = max(first, window_start)
    if now - start < timedelta(hours=1):
        start = now - timedelta(hours=1)
    series = [
        (moment.strftime("%m-%d %H:%M"), float(depth))
        for moment, depth in depth_over_time(spans, start, now)
    ]

    durations = [
        (r - c).total_seconds()
        for c, r in session.execute(
            select(ReviewItem.created_at, ReviewItem.resolved_at).where(
                ReviewItem.resolved_at >= window_start,
                ReviewItem.status.in_(CLOSED_STATUSES),
            )
        )
    ]
    escalated = session.execute(
        select(ReviewItem.route, ReviewItem.intent, ReviewItem.reason).where(
            ReviewItem.created_at >= window_start
        )
    ).all()
    routed = session.execute(
        select(Message.route, Message.intent, func.count(Message.id))
        .where(Message.role == "customer", Message.created_at >= window_start)
        .group_by(Message.route, Message.intent)
    ).all()
    route_totals: Counter[str] = Counter()
    intent_totals: Counter[str] = Counter()
    for route, intent, count in routed:
        route_totals[_route_label(route)] += count
        if intent:
            intent_totals[intent] += count
    route_escalations = Counter(_route_label(r) for r, _, _ in escalated)
    intent_escalations = Counter(i for _, i, _ in escalated if i)
    by_route = sorted(
        (
            (name, route_escalations[name], max(route_totals[name], route_escalations[name]))
            for name in set(route_totals) | set(route_escalations)
        ),
        key=lambda row: -row[1],
    )
    by_intent = sorted(
        ((name, n, max(intent_totals[name], n)) for name, n in intent_escalations.items()),
        key=lambda row: -row[1],
    )[:15]
    by_reason = Counter(reason for _, _, reason in escalated).most_common()

    judged, unchanged = session.execute(
        select(
            func.count(ReviewItem.id), func.sum(cast(ReviewItem.draft_unchanged, Integer))
        ).where(ReviewItem.draft_unchanged.is_not(None), ReviewItem.resolved_at >= window_start)
    ).one()

    trained_at = model_trained_at(engine, models_dir)
    notes = []
    examples = select(func.count(TrainingExample.id)).where(
        TrainingExample.origin.in_(TAUGHT_ORIGINS)
    )
    articles = select(func.count(Article.id))
    if trained_at is not None:
        examples = examples.where(TrainingExample.created_at > trained_at)
        articles = articles.where(Article.updated_at > trained_at)
    else:
        notes.append("No trained model found: every taught example is waiting for training.")
    return Dashboard(
        counts=queue_counts(session, queue),
        window_start=start,
        depth_series=series,
        median_resolve_s=statistics.median(durations) if durations else None,
        resolved_in_window=len(durations),
        by_route=by_route,
        by_intent=by_intent,
        by_reason=by_reason,
        drafts_judged=int(judged or 0),
        drafts_unchanged=int(unchanged or 0),
        model_trained_at=trained_at,
        taught_examples_pending=int(session.scalar(examples) or 0),
        articles_changed_pending=int(session.scalar(articles) or 0) if trained_at else 0,
        notes=notes,
        spot_checks=measured_accuracy(session, since=window_start),
        answered_target=promised_answered_target(engine),
    )
