"""The traffic stage (app/nlp/pipeline/traffic.py): the recent questions training reads from
the database, and ``tau_review`` chosen on them once enough of them were reviewed."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from fixtures_nlp import TINY_INTENTS

from app.db import session_scope
from app.models import Conversation, Message, new_id
from app.nlp.pipeline import traffic
from app.nlp.pipeline.data import KbArticle, TrainingData, recent_traffic
from app.nlp.training import fit_models


def _turn(session, text: str, at: datetime, *, route: str | None = "complex", bot: bool = True):
    conversation = Conversation(id=new_id(), client_key="test")
    customer = Message(
        id=new_id(),
        conversation_id=conversation.id,
        seq=0,
        role="customer",
        text=text,
        created_at=at,
    )
    rows = [conversation, customer]
    if bot:
        rows.append(
            Message(
                id=new_id(),
                conversation_id=conversation.id,
                seq=1,
                role="bot",
                text="",
                in_reply_to=customer.id,
                route=route,
                status="answered",
                created_at=at,
            )
        )
    session.add_all(rows)


def test_recent_traffic_is_what_the_bot_was_asked_newest_first(app):
    start = datetime(2026, 11, 1, 12, 0)
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        _turn(session, "where is my card", start)
        _turn(session, "  how do I change my pin  ", start + timedelta(minutes=1))
        _turn(session, "I want a person", start + timedelta(minutes=2), route=None)
        _turn(session, "thanks, still there?", start + timedelta(minutes=3), bot=False)
        _turn(session, "which exchange rate", start + timedelta(minutes=4))
        session.commit()
        assert recent_traffic(session) == [
            "which exchange rate",
            "how do I change my pin",
            "where is my card",
        ]
        assert recent_traffic(session, limit=2) == ["which exchange rate", "how do I change my pin"]


def _tiny_data(traffic_texts: list[str]) -> TrainingData:
    texts, labels, articles = [], [], []
    for intent, (_tier, title, body, examples) in TINY_INTENTS.items():
        articles.append(KbArticle(intent, title, [], body, intent))
        for text in [title, *examples]:
            texts.append(text)
            labels.append(intent)
    n_examples = sum(len(examples) for *_, examples in TINY_INTENTS.values())
    return TrainingData(texts, labels, articles, traffic=traffic_texts, n_examples=n_examples)


@pytest.mark.slow
def test_reviewed_traffic_decides_tau_review_and_the_manifest_says_so(monkeypatch):
    """Every taught example was a live question (reviewed, so held out once); unseen questions
    are the rest of the traffic. With enough reviewed ones, tau_review is the traffic rule's
    threshold; the figures record the counts, the held-out threshold and the estimate."""
    monkeypatch.setattr(traffic, "TRAFFIC_MIN_LABELLED", 20)
    examples = [t for _, _, _, ex in TINY_INTENTS.values() for t in ex]
    unseen = [
        "my new card still has not come",
        "how can i set another pin",
        "what rate do you convert currencies at",
        "a payment on my card that i never made",
    ] * 5
    trained = fit_models(_tiny_data([*unseen, *examples]), progress=False, answered_target=0.9)
    figures = trained.metrics["router"]["traffic"]
    assert figures["used"] is True, figures
    assert figures["reviewed"] == figures["reviewed_held_out"] == len(examples)
    assert figures["unreviewed"] == len(unseen)
    assert trained.thresholds.tau_review == figures["tau_review"]
    assert figures["estimated_answered_accuracy"] >= 0.9
    assert "recent questions" in trained.metrics["tiers_active"]["review"]["reason"]
    assert trained.thresholds.provenance["traffic"] == figures


@pytest.mark.slow
def test_without_enough_reviewed_traffic_the_held_out_threshold_stands(monkeypatch):
    monkeypatch.setattr(traffic, "TRAFFIC_MIN_LABELLED", 1000)
    examples = [t for _, _, _, ex in TINY_INTENTS.values() for t in ex]
    trained = fit_models(_tiny_data(examples[:10]), progress=False, answered_target=0.9)
    figures = trained.metrics["router"]["traffic"]
    assert figures["used"] is False
    assert "10 of the recent questions were reviewed (1000 needed" in figures["reason"], figures
    assert trained.thresholds.tau_review == figures["held_out_tau_review"]


@pytest.mark.slow
def test_calibrators_that_know_only_the_kb_do_not_judge_traffic(monkeypatch):
    """Reviewed questions aplenty, but most labelled texts are the KB's own titles and
    questions: the calibrators have not learnt from people's questions, the held-out rule
    stands."""
    monkeypatch.setattr(traffic, "TRAFFIC_MIN_LABELLED", 20)
    examples = [t for _, _, _, ex in TINY_INTENTS.values() for t in ex]
    data = _tiny_data(examples)
    data.n_examples = len(data.texts) // 3
    trained = fit_models(data, progress=False, answered_target=0.9)
    figures = trained.metrics["router"]["traffic"]
    assert figures["used"] is False
    assert "intent examples" in figures["reason"], figures
    assert trained.thresholds.tau_review == figures["held_out_tau_review"]


@pytest.mark.slow
def test_train_reads_chat_traffic_and_what_reviewers_taught_of_it(trained_app, monkeypatch):
    """Questions through the chat API, some handed to a person and taught by a reviewer through
    the console's teaching path: the next ``tierdesk train`` reads all of them as recent
    traffic, the taught ones as reviewed (held-out) questions, and judges tau_review on them."""
    from fixtures_nlp import current_manifest

    from app.cli import main
    from app.review.service import known_intents, teach_intent

    monkeypatch.setattr(traffic, "TRAFFIC_MIN_LABELLED", 5)
    client = trained_app.test_client()
    handed = [
        "my card still has not arrived after two weeks",
        "the new card I ordered never showed up",
        "how long until my replacement card is delivered",
        "is my card lost in the post",
        "card delivery is taking forever",
        "nobody has sent me my card yet",
        "when does the card I ordered get here",
        "i am still waiting for the card to arrive",
    ]
    asked = ["how do I change my PIN", "which exchange rate applies", "what is a top up", "hello"]
    ids = []
    for text in handed:
        body = client.post("/api/v1/chat", json={"message": text, "handoff": True}).get_json()
        assert body["status"] != "answered", body
        ids.append(body["message_id"])
    for text in asked:
        assert client.post("/api/v1/chat", json={"message": text}).status_code == 200
    url = trained_app.config["SQLALCHEMY_DATABASE_URI"]
    with session_scope(url) as session:
        intent = known_intents(session)[0]
        for message_id in ids:  # the bot's turn; the reviewer teaches the question it answers
            question = session.get(Message, session.get(Message, message_id).in_reply_to)
            teach_intent(session, question.text, intent)

    result = trained_app.test_cli_runner().invoke(main, ["train", "--quiet"])
    assert result.exit_code == 0, result.output
    figures = current_manifest(trained_app.config["MODELS_DIR"])["metrics"]["router"]["traffic"]
    assert figures["questions"] == len(handed) + len(asked)
    assert figures["reviewed"] == figures["reviewed_held_out"] == len(handed)
    assert figures["unreviewed"] == len(asked)
    assert "needed" not in figures["reason"], figures  # enough reviews: traffic was judged
