"""Spot checks: answered turns drawn at random, judged afterwards, taught with their share and
weighed 1/share in calibration; erased with their conversation. (The console's page is tested in
test_console_spot_checks.py.)"""

from __future__ import annotations

import random

import numpy as np
import pytest
from fixtures_review import answered_turn
from sqlalchemy import select

from app.config import Config
from app.db import session_scope
from app.models import (
    Article,
    Conversation,
    Message,
    Reviewer,
    ReviewItem,
    SpotCheck,
    TrainingExample,
)
from app.nlp.pipeline.calibrate import fit_weights
from app.nlp.pipeline.data import data_from_db
from app.nlp.pipeline.splits import plan_held_out
from app.privacy.erasure import delete_conversations
from app.review import spot_checks
from app.review.service import ReviewError


def _article(session, slug, title, category=None, questions=()):
    session.add(
        Article(
            slug=slug,
            title=title,
            body=f"<p>{title}.</p>",
            body_html=f"<p>{title}.</p>",
            category=category,
            tags=[],
            questions=list(questions),
            published=True,
        )
    )


@pytest.fixture
def kb(db_url):
    with session_scope(db_url) as session:
        _article(session, "card-lost", "I lost my card", "lost_card", ["my card is gone"])
        _article(session, "refund", "How do refunds work", "refunds", ["refund please"])
        _article(session, "opening-hours", "When are you open")  # no category: its own intent
        session.add(Reviewer(email="r@example.com", password_hash="x"))
    return db_url


def test_judging_teaches_with_the_share_and_measures_answered_accuracy(kb):
    with session_scope(kb) as session:
        reviewer = session.scalar(select(Reviewer.id))
        a = answered_turn(session, "where did my card go", "lost_card", "card-lost", 0.05)
        b = answered_turn(session, "money back for my order", "lost_card", "card-lost", 0.05)
        c = answered_turn(session, "are you open sunday", "refunds", "refund", 0.05)
        d = answered_turn(session, "what is the weather", "refunds", "refund", 0.05)
        assert spot_checks.waiting(session) == 4
        assert spot_checks.next_waiting(session).id == a.id
        assert spot_checks.next_waiting(session, after=a.id).id == b.id

        judged = spot_checks.judge(session, a, reviewer, right=True)
        assert (judged.check.verdict, judged.check.correct_intent) == ("right", "lost_card")
        assert (judged.example.origin, judged.example.intent) == ("spot_check", "lost_card")
        assert judged.example.sample_share == 0.05

        with pytest.raises(ReviewError, match="judged this answer already"):
            spot_checks.judge(session, a, reviewer, right=False, intent="refunds")
        with pytest.raises(ReviewError, match="mark the answer right"):
            spot_checks.judge(session, b, reviewer, right=False, intent="lost_card")
        with pytest.raises(ReviewError, match="Unknown intent"):
            spot_checks.judge(session, b, reviewer, right=False, intent="no_such_intent")
        session.refresh(b)
        assert b.verdict is None  # a refused verdict leaves the check waiting

        spot_checks.judge(session, b, reviewer, right=False, intent="refunds")
        # an article without a category is its own intent: its slug can be taught
        spot_checks.judge(session, c, reviewer, right=False, intent="opening-hours")
        nothing = spot_checks.judge(session, d, reviewer, right=False, intent="")
        assert nothing.example is None and nothing.check.verdict == "wrong"
        # ... but the next training holds it out as one of the data's own out-of-scope rows
        data = data_from_db(session)
        assert data.oos_labelled == ["what is the weather"]
        assert "what is the weather" in data.oos_texts
        assert "what is the weather" not in data.texts
        before = data.data_hash()
        data.oos_labelled = []
        assert data.data_hash() != before  # a new verdict is new data to train on

        taught = {
            (e.text, e.intent, e.origin, e.sample_share)
            for e in session.scalars(select(TrainingExample))
        }
        assert taught == {
            ("where did my card go", "lost_card", "spot_check", 0.05),
            ("money back for my order", "refunds", "spot_check", 0.05),
            ("are you open sunday", "opening-hours", "spot_check", 0.05),
        }
        measured = spot_checks.measured_accuracy(session)
        assert (measured.judged, measured.right, measured.waiting) == (4, 1, 0)
        low, high = measured.interval()
        assert low < measured.accuracy == 0.25 < high


def test_spot_checked_examples_weigh_one_over_their_share_in_calibration(kb):
    with session_scope(kb) as session:
        session.add_all(
            [
                TrainingExample(text="card stolen", intent="lost_card", origin="reviewer"),
                TrainingExample(
                    text="where is my card",
                    intent="lost_card",
                    origin="spot_check",
                    sample_share=0.04,
                ),
                TrainingExample(text="refund me", intent="refunds", origin="reviewer"),
                # a spot-checked question that is also the KB's own title: the title, weight 1
                TrainingExample(
                    text="I lost my card",
                    intent="lost_card",
                    origin="spot_check",
                    sample_share=0.04,
                ),
            ]
        )
        session.commit()
        data = data_from_db(session)
        without = data_from_db(session)
        weights = dict(zip(data.texts, data.weight_of(), strict=True))
    assert weights["where is my card"] == pytest.approx(25.0)
    assert weights["card stolen"] == weights["refund me"] == weights["I lost my card"] == 1.0
    assert data.n_examples == 4

    # the held-out plan carries each held-out query's weight, in the order of its queries
    plan = plan_held_out(data, validation=None, val_fraction=0.15, seed=0)
    held = list(zip(plan.held_out_texts(), plan.held_weights(), strict=True))
    assert ("where is my card", pytest.approx(25.0)) in held
    assert all(w == 1.0 for text, w in held if text != "where is my card")

    # in-scope rows get their weights, the out-of-scope negatives 1; all ones: no weights
    rows = fit_weights(plan.held_weights(), len(held), len(held) + 3)
    assert rows.shape == (len(held) + 3,) and rows[len(held) :].tolist() == [1.0, 1.0, 1.0]
    assert fit_weights([1.0] * len(held), len(held), len(held) + 3) is None
    with pytest.raises(ValueError, match="weights for"):
        fit_weights([2.0], len(held), len(held) + 3)

    # the weights are part of what training learns from: the data hash sees them
    without.weights = []
    assert data.data_hash() != without.data_hash()


def test_a_weighted_fit_follows_the_answered_traffic():
    """The reason for the weights: a calibrator fit mostly on escalated (harder) questions
    understates answered ones; weighing the few spot-checked answers 1/share raises it."""
    from app.nlp.calibration import Calibrator

    rng = np.random.default_rng(0)
    # escalated: low similarity, half right; spot-checked answers: high similarity, right
    escalated = [{"bert_similarity": float(x)} for x in rng.uniform(0.3, 0.7, 400)]
    esc_ok = rng.random(400) < 0.5
    checked = [{"bert_similarity": float(x)} for x in rng.uniform(0.6, 0.9, 20)]
    checked_ok = rng.random(20) < 0.95
    rows, ok = [*escalated, *checked], np.concatenate([esc_ok, checked_ok])
    weights = np.concatenate([np.ones(400), np.full(20, 1 / 0.05)])
    plain = Calibrator(("bert_similarity",)).fit(rows, ok)
    weighted = Calibrator(("bert_similarity",)).fit(rows, ok, weights)
    answer = {"bert_similarity": 0.8}
    assert weighted.predict(answer) > plain.predict(answer)


def test_draw_follows_the_share():
    rng = random.Random(1)
    drawn = sum(spot_checks.draw(0.1, rng) for _ in range(20000))
    assert 1800 < drawn < 2200
    assert not any(spot_checks.draw(0.0, rng) for _ in range(1000))
    assert all(spot_checks.draw(1.0, rng) for _ in range(1000))


def test_the_share_setting_is_checked(monkeypatch):
    monkeypatch.setenv("TIERDESK_SPOT_CHECK_SHARE", "0.02")
    assert Config().SPOT_CHECK_SHARE == 0.02
    monkeypatch.setenv("TIERDESK_SPOT_CHECK_SHARE", "1.5")
    with pytest.raises(ValueError, match="TIERDESK_SPOT_CHECK_SHARE must be between 0 and 1"):
        Config()


def test_erasure_takes_spot_checks_with_their_conversation(any_db_url):
    with session_scope(any_db_url) as session:
        _article(session, "card-lost", "I lost my card", "lost_card")
        session.commit()
        check = answered_turn(session, "my card is lost", "lost_card", "card-lost", 0.05)
        other = answered_turn(session, "lost card again", "lost_card", "card-lost", 0.05)
        report, _items = delete_conversations(session, [check.conversation_id])
        session.commit()
        assert report.spot_checks == 1 and report.as_dict()["spot_checks"] == 1
        assert session.scalars(select(SpotCheck.id)).all() == [other.id]


@pytest.mark.slow
def test_answered_chat_turns_are_drawn_without_handing_the_conversation_over(trained_app):
    from app.services import ENGINE_KEY

    client = trained_app.test_client()
    db_url = trained_app.config["SQLALCHEMY_DATABASE_URI"]
    engine = trained_app.extensions[ENGINE_KEY]
    with session_scope(db_url) as session:
        questions = [
            q for a in session.scalars(select(Article).order_by(Article.slug)) for q in a.questions
        ][:40]
    # questions the router answers (not every KB question clears the threshold)
    answerable = [q for q in questions if not engine.answer(q).escalate][:4]
    assert len(answerable) >= 2

    trained_app.config["SPOT_CHECK_SHARE"] = 1.0
    first = client.post("/api/v1/chat", json={"message": answerable[0]}).get_json()
    assert first["status"] == "answered"
    trained_app.config["SPOT_CHECK_SHARE"] = 0.0
    second = client.post("/api/v1/chat", json={"message": answerable[1]}).get_json()
    assert second["status"] == "answered"

    with session_scope(db_url) as session:
        checks = session.scalars(select(SpotCheck)).all()
        assert len(checks) == 1
        check = checks[0]
        bot = session.get(Message, first["message_id"])
        assert (check.answer_message_id, check.message_id) == (bot.id, bot.in_reply_to)
        assert (check.intent, check.article_slug, check.route) == (
            bot.intent,
            bot.article_slug,
            bot.route,
        )
        assert check.confidence == pytest.approx(first["confidence"])
        assert check.sample_share == 1.0 and check.verdict is None
        # not an escalation: no review item, and the bot keeps the conversation
        assert session.scalar(select(ReviewItem.id)) is None
        assert session.get(Conversation, first["conversation_id"]).status == "bot"
    follow_up = client.post(
        "/api/v1/chat",
        json={
            "message": answerable[2 % len(answerable)],
            "conversation_id": first["conversation_id"],
        },
    ).get_json()
    assert follow_up["status"] == "answered"
