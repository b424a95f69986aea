"""Spot checks: a random share of the questions the bot answered, judged by a person afterwards.

Escalations teach the models only what they were unsure of. A calibrator fit on those questions
alone understates the answers the bot gives (they are harder than their features say), and the
promised answered accuracy then costs more reviews than it needs. So each answered turn is drawn
for a spot check with a known probability, ``SPOT_CHECK_SHARE`` (``TIERDESK_SPOT_CHECK_SHARE``,
default ``app.config.DEFAULT_SPOT_CHECK_SHARE``; 0 turns spot checks off), in the same
transaction as the turn. The customer already has the answer and the conversation stays with
the bot: a spot check is not an escalation and never enters the review queue. Reviewers judge
spot checks on the console's Spot checks page, oldest first: the answer was right, or it was
wrong and the question is another intent (or none in the knowledge base). The question is
taught with origin "spot_check" and the share, and calibration weighs it 1/share, as it stands
for that many answers nobody reviewed (``app.nlp.pipeline.data.example_weight``). The verdicts
also measure the answered accuracy customers get (``measured_accuracy``), against the promise
the thresholds were tuned for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app import metrics
from app.models import Article, Message, SpotCheck, TrainingExample, utcnow
from app.review import audit as audit_log
from app.review.service import ReviewError, known_intents, teach_intent
from app.vocab import AuditAction, Verdict

RIGHT = Verdict.RIGHT
WRONG = Verdict.WRONG
VERDICTS = (RIGHT, WRONG)


def draw(share: float, rng: random.Random | None = None) -> bool:
    """Whether this answered turn is spot-checked (probability ``share``)."""
    return share > 0.0 and (rng or random).random() < share


def spot_check_of(customer: Message, bot: Message, share: float) -> SpotCheck:
    """The spot-check row of an answered turn, added by the caller in the turn's transaction."""
    return SpotCheck(
        conversation_id=customer.conversation_id,
        message_id=customer.id,
        answer_message_id=bot.id,
        intent=bot.intent,
        article_slug=bot.article_slug,
        route=bot.route,
        confidence=bot.confidence,
        sample_share=share,
        created_at=utcnow(),
    )


def waiting(session: Session) -> int:
    return session.scalar(select(func.count(SpotCheck.id)).where(SpotCheck.verdict.is_(None))) or 0


def next_waiting(session: Session, after: int | None = None) -> SpotCheck | None:
    """The oldest spot check nobody judged (after id ``after``: the one a reviewer skipped)."""
    query = select(SpotCheck).where(SpotCheck.verdict.is_(None)).order_by(SpotCheck.id).limit(1)
    if after is not None:
        query = query.where(SpotCheck.id > after)
    return session.scalar(query)


def spot_check_intents(session: Session) -> list[str]:
    """What a spot-checked question can be taught as: the known intents, and the slug of every
    published article without a category (such an article is its own intent in training)."""
    own = session.scalars(
        select(Article.slug).where(Article.published.is_(True), Article.category.is_(None))
    )
    return sorted({*known_intents(session), *own})


@dataclass(frozen=True)
class Judged:
    check: SpotCheck
    example: TrainingExample | None  # None: the question is in no intent of the KB
    created: bool


def judge(
    session: Session,
    check: SpotCheck,
    reviewer_id: int,
    *,
    right: bool,
    intent: str | None = None,
) -> Judged:
    """Record a reviewer's verdict and teach the question with origin "spot_check".

    ``right``: the bot's answer was right; its intent is taught. Otherwise ``intent`` is the
    question's real intent (taught), or empty when nothing in the knowledge base answers it (a
    wrong answer, nothing taught). A second verdict on the same check is refused."""
    question = session.get(Message, check.message_id)
    if question is None:
        raise ReviewError("This conversation was deleted.")
    intent = (check.intent if right else (intent or "").strip()) or None
    if right and intent is None:
        raise ReviewError("The answer has no intent to confirm; choose the question's intent.")
    if not right and intent is not None and intent == check.intent:
        raise ReviewError(f"{intent!r} is the intent the bot answered: mark the answer right.")
    verdict = RIGHT if right else WRONG
    result = session.execute(
        update(SpotCheck)
        .where(SpotCheck.id == check.id, SpotCheck.verdict.is_(None))
        .values(
            verdict=verdict,
            correct_intent=intent,
            reviewer_id=reviewer_id,
            judged_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:
        session.rollback()
        raise ReviewError("Another reviewer judged this answer already.")
    example, created = None, False
    if intent is not None:
        try:
            example, created = teach_intent(
                session,
                question.text,
                intent,
                sample_share=check.sample_share,
                intents=spot_check_intents(session),
                commit=False,
            )
        except ReviewError:
            session.rollback()  # the verdict goes with the example or not at all
            raise
    audit_log.record(
        session,
        AuditAction.SPOT_CHECK,
        reviewer_id=reviewer_id,
        target=f"spot_check:{check.id}",
        detail={"verdict": verdict, "conversation_id": check.conversation_id},
    )
    session.commit()
    session.refresh(check)
    metrics.SPOT_CHECKS.labels(verdict).inc()
    return Judged(check, example, created)


@dataclass(frozen=True)
class MeasuredAccuracy:
    """Judged spot checks since a moment: how many answers were right, and the 95% Wilson interval
    of the answered accuracy customers got."""

    judged: int
    right: int
    waiting: int

    @property
    def accuracy(self) -> float | None:
        return self.right / self.judged if self.judged else None

    def interval(self, z: float = 1.96) -> tuple[float, float] | None:
        if not self.judged:
            return None
        n, p = self.judged, self.right / self.judged
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)


def measured_accuracy(session: Session, since: datetime | None = None) -> MeasuredAccuracy:
    query = select(SpotCheck.verdict, func.count(SpotCheck.id)).group_by(SpotCheck.verdict)
    if since is not None:
        query = query.where(SpotCheck.created_at >= since)
    counts = {verdict: n for verdict, n in session.execute(query)}
    return MeasuredAccuracy(
        judged=counts.get(RIGHT, 0) + counts.get(WRONG, 0),
        right=counts.get(RIGHT, 0),
        waiting=counts.get(None, 0),
    )
