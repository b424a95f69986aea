"""Distillation from live traffic: the fast tier learns what BERT and the reviewers answered.

``tierdesk distill`` trains a candidate version on the training data plus logged customer
questions with a label:

1. a reviewer's answer wins: a question whose review item was resolved with an article (or a
   reply from an agent who sent an article) takes that article's intent;
2. otherwise the active version's BERT route answers it again (``mode="bert"``): a calibrated
   confidence of at least ``min_confidence`` (default: the version's ``tau_review``, the bar
   its unreviewed answers already meet) labels it with BERT's intent;
3. the rest stay unlabelled. Questions already in the training data, and "talk to a person"
   turns, are left out.

Everything is trained by the one pipeline (``fit_models``) and the result is registered as a
``candidate`` whose manifest says what was added (``distilled``): it goes through shadow and
canary like any other version. ``bench/bench_distill.py`` measures the effect on BANKING77
(the BERT share of ``hybrid`` at equal accuracy, before and after).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select

from app.nlp.normalize import normalize

log = logging.getLogger(__name__)

MAX_LOGGED = 50_000  # newest customer questions read from the log


@dataclass
class Labelled:
    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    by_reviewer: int = 0
    by_bert: int = 0
    unlabelled: int = 0
    known: int = 0  # already in the training data

    def summary(self) -> dict:
        return {
            "added": len(self.texts),
            "by_reviewer": self.by_reviewer,
            "by_bert": self.by_bert,
            "unlabelled": self.unlabelled,
            "already_known": self.known,
        }


def bert_labels(
    router, texts: Sequence[str], min_confidence: float
) -> list[tuple[str | None, float]]:
    """(intent, calibrated confidence) of the BERT route for each text; intent None when the
    answer is under ``min_confidence`` or has no intent."""
    out = []
    for text in texts:
        decision = router.route(text, mode="bert", escalation=False)
        sure = decision.intent is not None and decision.confidence >= min_confidence
        out.append((decision.intent if sure else None, float(decision.confidence)))
    return out


def logged_questions(session, limit: int = MAX_LOGGED) -> list[tuple[str, str | None]]:
    """(customer question, the intent a reviewer answered it with or None), newest first."""
    from app.models import Article, Message, ReviewItem
    from app.nlp.person_request import asks_for_human

    rows = session.execute(
        select(Message.id, Message.text)
        .where(Message.role == "customer")
        .order_by(Message.created_at.desc())
        .limit(limit)
    ).all()
    reviewed: dict[str, str] = {}
    intent_of = {
        a.slug: a.category or a.slug
        for a in session.scalars(select(Article).where(Article.published.is_(True)))
    }
    ids = [r.id for r in rows]
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for message_id, slug in session.execute(
            select(ReviewItem.message_id, Message.article_slug)
            .join(Message, Message.id == ReviewItem.reply_message_id)
            .where(ReviewItem.message_id.in_(chunk), Message.article_slug.is_not(None))
        ):
            if slug in intent_of:
                reviewed[message_id] = intent_of[slug]
    return [
        (text, reviewed.get(message_id))
        for message_id, text in rows
        if text and text.strip() and not asks_for_human(text)
    ]


def label_logged(
    router,
    logged: Sequence[tuple[str, str | None]],
    known_texts: Sequence[str],
    min_confidence: float,
) -> Labelled:
    """Labels for logged questions: the reviewer's, else a confident BERT decision's."""
    seen = {normalize(t) for t in known_texts}
    out = Labelled()
    pending: list[str] = []
    for text, reviewer_intent in logged:
        key = normalize(text)
        if key in seen:
            out.known += 1
            continue
        seen.add(key)
        if reviewer_intent:
            out.texts.append(text)
            out.labels.append(reviewer_intent)
            out.by_reviewer += 1
        else:
            pending.append(text)
    for text, (intent, _) in zip(
        pending, bert_labels(router, pending, min_confidence), strict=True
    ):
        if intent is None:
            out.unlabelled += 1
            continue
        out.texts.append(text)
        out.labels.append(intent)
        out.by_bert += 1
    return out


def distill(config: Mapping, *, min_confidence: float | None = None, progress: bool = True):
    """Train a candidate on the training data plus the labelled log; returns its TrainReport."""
    from app.db import session_scope
    from app.nlp.engine import Engine
    from app.nlp.finetune import EPOCHS
    from app.nlp.store import save_version
    from app.nlp.training import (
        TrainingData,
        TrainingError,
        TrainReport,
        data_from_db,
        fit_models,
        publish_version,
    )

    url = config["SQLALCHEMY_DATABASE_URI"]
    engine = Engine({**config, "TESTING": True, "ANSWER_CACHE_SIZE": 0})
    engine.load()
    if not engine.ready:
        raise TrainingError(f"distill needs the active version: {engine.not_ready_reason}")
    router = engine.router
    threshold = router.m.thresholds.tau_review if min_confidence is None else min_confidence
    with session_scope(url) as session:
        data = data_from_db(session, config.get("INTENTS_DIR"))
        logged = logged_questions(session)
    labelled = label_logged(router, logged, data.texts, threshold)
    engine.close()
    if not labelled.texts:
        raise TrainingError(
            f"nothing to distill: {len(logged)} logged questions, none new with a reviewer's "
            f"answer or a BERT confidence of {threshold:.3f}"
        )
    known_intents = set(data.labels)
    keep = [i for i, lab in enumerate(labelled.labels) if lab in known_intents]
    extended = TrainingData(
        [*data.texts, *(labelled.texts[i] for i in keep)],
        [*data.labels, *(labelled.labels[i] for i in keep)],
        data.articles,
        data.declared_tiers,
        data.oos_texts,
        # No recent traffic: the logged questions are now examples labelled by the teacher, and
        # their held-out outcomes would grade the student against the teacher, not a person.
        n_examples=data.n_examples + len(keep),
        oos_labelled=data.oos_labelled,
    )
    trained = fit_models(
        extended,
        bert_path=config.get("BERT_PATH"),
        quantize=config.get("BERT_QUANTIZE", True),
        progress=progress,
        fine_tune_epochs=config.get("BERT_FINETUNE_EPOCHS", EPOCHS),
    )
    sources = {
        **labelled.summary(),
        "min_confidence": round(threshold, 4),
        "teacher": router.m.version,
    }
    version = save_version(config["MODELS_DIR"], trained, extended, extra={"distilled": sources})
    publish_version(config, version, candidate=True)
    report = TrainReport(
        version,
        trained.train_seconds,
        trained.metrics,
        trained.thresholds,
        len(extended.texts),
        len(set(extended.labels)),
        len(extended.articles),
        extended.n_examples,
    )
    return report, sources
