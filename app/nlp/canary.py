"""Per-version live metrics and the canary's automatic rollback.

Every bot message carries the version that answered it (``trace.versions.models``), so the
metrics of a version are read from the messages, feedback and review items themselves:

- ``answers``: bot turns; ``escalation_rate``: the share handed to a person;
- ``thumbs_down_rate``: "not helpful" votes per answered turn;
- ``drafts_changed``: of the reviewed drafts, the share a reviewer edited or discarded;
- latency p50 / p95 of the router (``timings_ms.total``).

The canary and the active version are compared over the same window (since the canary
started). The rule (``rollback_verdict``): once both have ``CANARY_MIN_ANSWERS`` answers, the
canary is rolled back when its thumbs-down rate or its escalation rate exceeds the active
version's by more than ``CANARY_ROLLBACK_MARGIN`` with one-sided confidence
``CANARY_ROLLBACK_CONFIDENCE``: z = (p_canary - p_active - margin) / se, over the normal
quantile of the confidence (rates with half a pseudo-count, so zero counts have a spread).
``check_canary`` applies it (a server does every ``CANARY_CHECK_SECONDS``; ``tierdesk models
check`` does on demand) and retires the canary with the figures as the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from statistics import NormalDist

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import Feedback, Message, ReviewItem
from app.nlp import registry
from app.vocab import ModelStatus

MAX_MESSAGES = 20_000  # per version and window: the newest ones


@dataclass
class VersionMetrics:
    version: str
    answers: int = 0
    escalated: int = 0
    answered: int = 0
    thumbs_down: int = 0
    votes: int = 0
    drafts_reviewed: int = 0
    drafts_changed: int = 0
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None

    @property
    def escalation_rate(self) -> float:
        return self.escalated / self.answers if self.answers else 0.0

    @property
    def thumbs_down_rate(self) -> float:
        return self.thumbs_down / self.answered if self.answered else 0.0

    @property
    def drafts_changed_rate(self) -> float:
        return self.drafts_changed / self.drafts_reviewed if self.drafts_reviewed else 0.0

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "escalation_rate": round(self.escalation_rate, 4),
            "thumbs_down_rate": round(self.thumbs_down_rate, 4),
            "drafts_changed_rate": round(self.drafts_changed_rate, 4),
        }


def version_metrics(
    session: Session, version: str, since: datetime | None = None
) -> VersionMetrics:
    """What ``version``'s bot turns since ``since`` did (the newest MAX_MESSAGES)."""
    answered_by = Message.trace["versions"]["models"].as_string()
    return turn_metrics(session, version, [answered_by == version], since)


def arm_metrics(session: Session, experiment: str, arm: str) -> VersionMetrics:
    """The same figures over the turns of one arm of an experiment (app/nlp/experiments.py)."""
    name = Message.trace["experiment"]["name"].as_string()
    which = Message.trace["experiment"]["arm"].as_string()
    return turn_metrics(session, arm, [name == experiment, which == arm])


def turn_metrics(
    session: Session, label: str, conditions: list, since: datetime | None = None
) -> VersionMetrics:
    """Metrics of the bot turns matching ``conditions``."""
    query = (
        select(Message.id, Message.trace)
        .where(Message.role == "bot", *conditions)
        .order_by(Message.created_at.desc())
        .limit(MAX_MESSAGES)
    )
    if since is not None:
        query = query.where(Message.created_at >= since)
    rows = session.execute(query).all()
    m = VersionMetrics(label)
    if not rows:
        return m
    ids, answered_ids, latencies = [], [], []
    for message_id, trace in rows:
        trace = trace or {}
        ids.append(message_id)
        if trace.get("escalation_reason"):
            m.escalated += 1
        else:
            answered_ids.append(message_id)
        total = (trace.get("timings_ms") or {}).get("total")
        if total is not None and trace.get("cache") != "hit":
            latencies.append(float(total))
    m.answers, m.answered = len(ids), len(answered_ids)
    for chunk in _chunks(answered_ids):
        for (helpful,) in session.execute(
            select(Feedback.helpful).where(Feedback.message_id.in_(chunk))
        ):
            m.votes += 1
            m.thumbs_down += 0 if helpful else 1
    for chunk in _chunks(ids):
        for unchanged, resolution in session.execute(
            select(ReviewItem.draft_unchanged, ReviewItem.resolution).where(
                ReviewItem.draft_message_id.in_(chunk), ReviewItem.resolved_at.is_not(None)
            )
        ):
            m.drafts_reviewed += 1
            m.drafts_changed += 1 if (resolution == "discard" or unchanged is False) else 0
    if latencies:
        m.latency_p50_ms = round(float(np.percentile(latencies, 50)), 3)
        m.latency_p95_ms = round(float(np.percentile(latencies, 95)), 3)
    return m


def _chunks(values: list, size: int = 500):
    for start in range(0, len(values), size):
        yield values[start : start + size]


def excess_z(x_c: int, n_c: int, x_a: int, n_a: int, margin: float) -> float:
    """z of "the canary's rate exceeds the active one's by more than ``margin``"."""
    p_c, p_a = (x_c + 0.5) / (n_c + 1), (x_a + 0.5) / (n_a + 1)
    se = math.sqrt(p_c * (1 - p_c) / (n_c + 1) + p_a * (1 - p_a) / (n_a + 1))
    return (p_c - p_a - margin) / se


@dataclass
class Verdict:
    rollback: bool
    reason: str


def rollback_verdict(
    active: VersionMetrics,
    canary: VersionMetrics,
    *,
    margin: float,
    confidence: float,
    min_answers: int,
) -> Verdict:
    if min(active.answers, canary.answers) < min_answers:
        return Verdict(False, f"waiting for {min_answers} answers each")
    z_needed = NormalDist().inv_cdf(confidence)
    checks = (
        ("thumbs-down", canary.thumbs_down, canary.answered, active.thumbs_down, active.answered),
        ("escalation", canary.escalated, canary.answers, active.escalated, active.answers),
    )
    for name, x_c, n_c, x_a, n_a in checks:
        if n_c == 0 or n_a == 0:
            continue
        z = excess_z(x_c, n_c, x_a, n_a, margin)
        if z > z_needed:
            return Verdict(
                True,
                f"automatic rollback: {name} rate {x_c / n_c:.1%} of {n_c} against the active "
                f"version's {x_a / n_a:.1%} of {n_a}, more than {margin:.0%} higher at "
                f"{confidence:.0%} confidence (z={z:.2f})",
            )
    return Verdict(False, "within the margin")


def check_canary(session: Session, config: Mapping) -> Verdict | None:
    """Apply the rule to the running canary; retires it when it fires. None: no canary."""
    canary = registry.with_status(session, ModelStatus.CANARY)
    active = registry.with_status(session, ModelStatus.ACTIVE)
    if canary is None or active is None:
        return None
    since = canary.status_changed_at
    verdict = rollback_verdict(
        version_metrics(session, active.version, since),
        version_metrics(session, canary.version, since),
        margin=float(config.get("CANARY_ROLLBACK_MARGIN", 0.05)),
        confidence=float(config.get("CANARY_ROLLBACK_CONFIDENCE", 0.95)),
        min_answers=int(config.get("CANARY_MIN_ANSWERS", 50)),
    )
    if verdict.rollback:
        registry.retire(session, canary.version, reason=verdict.reason, actor="auto")
    return verdict
