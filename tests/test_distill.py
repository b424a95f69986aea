"""Distillation: which logged questions get a label (the reviewer's article first, then a
confident BERT answer), and `tierdesk distill` refusing when there is nothing to learn."""

from __future__ import annotations

from app.db import session_scope
from app.models import ReviewItem
from app.nlp.distill import label_logged, logged_questions
from app.nlp.types import Candidate, Decision
from app.services import get_review_queue


class AnsweringRouter:
    """BERT's answers as a table: query -> (intent, calibrated confidence)."""

    def __init__(self, answers: dict[str, tuple[str, float]]) -> None:
        self.answers, self.asked = answers, []

    def route(self, query: str, *, mode: str, escalation: bool) -> Decision:
        assert (mode, escalation) == ("bert", False)
        self.asked.append(query)
        intent, p = self.answers[query]
        return Decision(
            query, "complex", intent, Candidate(intent, intent, p, intent), p, False, None
        )


def test_reviewer_labels_win_then_confident_bert(app, sample_articles, escalate_message, reviewer):
    from app.review.service import reply_with_article

    url = app.config["SQLALCHEMY_DATABASE_URI"]
    item_id = escalate_message("the card I ordered still is not here")
    with app.test_request_context(), session_scope(url) as session:  # as the console does
        item = session.get(ReviewItem, item_id)
        reply_with_article(session, item, reviewer.id, "card-arrival", queue=get_review_queue())
    escalate_message("please let me talk to a human")
    with session_scope(url) as session:
        logged = logged_questions(session)
    assert ("the card I ordered still is not here", "card_arrival") in logged
    assert all("human" not in text for text, _ in logged)  # asked for a person: no label

    router = AnsweringRouter(
        {"how do I freeze my card": ("lost_card", 0.97), "hmm what about fees": ("fees", 0.4)}
    )
    labelled = label_logged(
        router,
        [
            *logged,
            ("how do I freeze my card", None),
            ("hmm what about fees", None),
            ("Where is my new card?", None),  # already a training text
        ],
        known_texts=["where is my new card?"],
        min_confidence=0.9,
    )
    assert list(zip(labelled.texts, labelled.labels, strict=True)) == [
        ("the card I ordered still is not here", "card_arrival"),
        ("how do I freeze my card", "lost_card"),
    ]
    assert labelled.summary() == {
        "added": 2,
        "by_reviewer": 1,
        "by_bert": 1,
        "unlabelled": 1,
        "already_known": 1,
    }
    assert "the card I ordered still is not here" not in router.asked  # the reviewer decided


def test_distill_needs_an_active_version(app):
    from app.cli import main

    result = app.test_cli_runner().invoke(main, ["distill", "--quiet"])
    assert result.exit_code != 0 and "distill needs the active version" in result.output
