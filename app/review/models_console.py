"""The console's models page (/console/models): the registry's versions with their live
metrics, the canary against the active version with the automatic rollback rule's verdict,
the shadow's disagreements with the reviewer's final answer where there is one, and the
experiments' arms with the significance of their differences.

Routes are added to the console blueprint by ``register(bp)``, so they share its login guard
and error pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from flask import Blueprint, current_app, render_template, request
from sqlalchemy import Integer, cast, func, select

from app.db import get_session
from app.models import Message, ModelVersion, ReviewItem, ShadowComparison
from app.nlp import experiments, registry
from app.nlp.canary import (
    Verdict,
    VersionMetrics,
    arm_metrics,
    rollback_verdict,
    version_metrics,
)
from app.vocab import ModelStatus

EXAMPLES = 25


@dataclass
class ShadowView:
    version: str
    sample: float
    compared: int = 0
    disagreements: int = 0
    mean_kl: float | None = None
    by_kind: dict[str, int] = field(default_factory=dict)
    examples: list[dict] = field(default_factory=list)

    @property
    def rate(self) -> float | None:
        return self.disagreements / self.compared if self.compared else None


def _shadow_view(db, row: ModelVersion) -> ShadowView:
    view = ShadowView(row.version, row.traffic_share)
    mine = ShadowComparison.version == row.version
    view.compared, view.disagreements, view.mean_kl = db.execute(
        select(
            func.count(ShadowComparison.id),
            func.coalesce(func.sum(cast(ShadowComparison.disagrees, Integer)), 0),
            func.avg(ShadowComparison.kl),
        ).where(mine)
    ).one()
    kinds = {
        "article": ShadowComparison.active_slug != ShadowComparison.shadow_slug,
        "intent": ShadowComparison.active_intent != ShadowComparison.shadow_intent,
        "route": ShadowComparison.active_route != ShadowComparison.shadow_route,
        "escalation": ShadowComparison.active_escalated != ShadowComparison.shadow_escalated,
    }
    for name, differs in kinds.items():
        view.by_kind[name] = db.scalar(select(func.count(ShadowComparison.id)).where(mine, differs))
    rows = db.scalars(
        select(ShadowComparison)
        .where(mine, ShadowComparison.disagrees.is_(True))
        .order_by(ShadowComparison.id.desc())
        .limit(EXAMPLES)
    ).all()
    view.examples = [{"row": r, "final": _final_answer(db, r)} for r in rows]
    return view


def _final_answer(db, row: ShadowComparison) -> str | None:
    """What the reviewer sent for this question of the conversation, if it went to review."""
    if not row.conversation_id:
        return None
    reply_id = db.scalar(
        select(ReviewItem.reply_message_id)
        .join(Message, Message.id == ReviewItem.message_id)
        .where(
            ReviewItem.conversation_id == row.conversation_id,
            Message.text == row.query,
            ReviewItem.reply_message_id.is_not(None),
        )
        .order_by(ReviewItem.id.desc())
        .limit(1)
    )
    if reply_id is None:
        return None
    reply = db.get(Message, reply_id)
    return reply.text if reply is not None else None


@dataclass
class CanaryView:
    version: str
    share: float
    canary: VersionMetrics
    active: VersionMetrics
    verdict: Verdict


def models_page():
    db = get_session()
    config = current_app.config
    rows = registry.all_versions(db)
    since = {r.version: r.status_changed_at for r in rows}
    live = {
        r.version: version_metrics(db, r.version, since[r.version])
        for r in rows
        if r.status in (ModelStatus.ACTIVE, ModelStatus.CANARY)
    }
    active = next((r for r in rows if r.status == ModelStatus.ACTIVE), None)
    canary = next((r for r in rows if r.status == ModelStatus.CANARY), None)
    shadow = next((r for r in rows if r.status == ModelStatus.SHADOW), None)
    canary_view = None
    if canary is not None and active is not None:
        window = canary.status_changed_at
        a, c = version_metrics(db, active.version, window), live[canary.version]
        canary_view = CanaryView(
            canary.version,
            canary.traffic_share,
            c,
            a,
            rollback_verdict(
                a,
                c,
                margin=float(config.get("CANARY_ROLLBACK_MARGIN", 0.05)),
                confidence=float(config.get("CANARY_ROLLBACK_CONFIDENCE", 0.95)),
                min_answers=int(config.get("CANARY_MIN_ANSWERS", 50)),
            ),
        )
    shadow_name = request.args.get("shadow")
    shadow_row = db.get(ModelVersion, shadow_name) if shadow_name else shadow
    return render_template(
        "console/models.html",
        experiments=_experiment_views(db),
        rows=rows,
        live=live,
        canary=canary_view,
        shadow=_shadow_view(db, shadow_row) if shadow_row is not None else None,
        history=registry.history(db, limit=30),
    )


def _experiment_views(db, past: int = 3) -> list[dict]:
    """The running experiment and the last few stopped ones, with per-arm metrics."""
    running = experiments.current(db)
    shown = ([running] if running else []) + experiments.history(db)[::-1][:past]
    views = []
    for experiment in shown:
        arms = {arm: arm_metrics(db, experiment.name, arm) for arm in ("a", "b")}
        views.append(
            {
                "experiment": experiment,
                "arms": arms,
                "tests": experiments.significance(arms["a"], arms["b"]),
            }
        )
    return views


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/models", "models", models_page, methods=["GET"])
