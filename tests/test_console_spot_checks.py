"""The console's Spot checks page: judging answered turns drawn at random, and the answered
accuracy they measure on the stats page. (The service is tested in test_spot_checks.py.)"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from fixtures_review import answered_turn
from sqlalchemy import select

from app.db import session_scope
from app.models import (
    Article,
    SpotCheck,
    TrainingExample,
    utcnow,
)
from app.nlp.thresholds import Thresholds
from app.review.spot_checks import MeasuredAccuracy

PAGE = "/console/spot-checks"
SHARE = 0.05


def _db(app):
    return session_scope(app.config["SQLALCHEMY_DATABASE_URI"])


@pytest.fixture
def kb(app, console_kb):
    """Two intents, an article of the first one (``fixtures_review.console_kb``), and an
    article that is its own intent."""
    with _db(app) as session:
        session.add(
            Article(
                slug="opening-hours",
                title="When are you open?",
                category=None,
                body="Always.",
                body_html="<p>Always.</p>",
                questions=[],
                tags=[],
            )
        )


def answered(
    app,
    question: str,
    *,
    answer: str = "Cards arrive within 5 working days.",
    intent: str | None = "card_arrival",
    slug: str | None = "card-arrival",
    route: str = "simple",
    confidence: float = 0.934,
    share: float = SHARE,
    age: timedelta | None = None,
) -> int:
    """An answered turn (question and bot answer in a new conversation) drawn for a spot check,
    as the chat service stores it; returns the spot check's id."""
    with _db(app) as session:
        check = answered_turn(
            session,
            question,
            intent,
            slug,
            share,
            answer=answer,
            route=route,
            confidence=confidence,
        )
        if age is not None:
            check.created_at = utcnow() - age
        return check.id


def check_row(app, check_id: int) -> SpotCheck:
    with _db(app) as session:
        return session.get(SpotCheck, check_id)


def taught(app) -> list[tuple[str, str, str, float | None]]:
    with _db(app) as session:
        return [
            (e.text, e.intent, e.origin, e.sample_share)
            for e in session.scalars(select(TrainingExample).order_by(TrainingExample.id))
        ]


def follow(console, response) -> str:
    assert response.status_code == 302, response.status_code
    return console.get(response.headers["Location"]).get_data(as_text=True)


# -- the page -----------------------------------------------------------------------------------


def test_page_shows_the_oldest_waiting_check(console, app, kb):
    first = answered(app, "where is my card??", confidence=0.934)
    answered(app, "refund my order", answer="Refunds take 3 days.", intent="request_refund")
    response = console.get(PAGE)
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    assert 'id="spot-question">where is my card??<' in html
    assert 'id="spot-answer">Cards arrive within 5 working days.<' in html
    assert "Where is my new card?" in html  # the answer's article, by title
    assert "refund my order" not in html and "Refunds take 3 days." not in html
    assert f"spot check #{first}" in html
    assert "<strong>card_arrival</strong>" in html and "<strong>simple</strong>" in html
    assert "0.934" in html  # calibrated confidence
    assert 'id="spot-waiting">2<' in html
    assert f'action="/console/spot-checks/{first}/right"' in html
    assert f'action="/console/spot-checks/{first}/wrong"' in html
    # "Wrong" offers the other intents, an article that is its own intent, and "nothing".
    assert '<option value="request_refund">' in html
    assert '<option value="opening-hours">' in html
    assert '<option value="card_arrival">' not in html  # the bot's own: that is "right"
    assert '<option value="">Nothing in the knowledge base answers it</option>' in html
    assert f'href="/console/spot-checks?after={first}"' in html  # skip
    assert 'href="/console/spot-checks">Spot checks</a>' in html  # the nav link


def test_an_answer_whose_article_is_gone_still_shows(console, app, kb):
    answered(app, "what about my card", slug="deleted-article")
    html = console.get(PAGE).get_data(as_text=True)
    assert "what about my card" in html
    assert "deleted-article (no longer in the knowledge base)" in html


def test_after_skips_past_a_check(console, app, kb):
    first = answered(app, "first question")
    second = answered(app, "second question")
    html = console.get(f"{PAGE}?after={first}").get_data(as_text=True)
    assert "second question" in html and "first question" not in html
    assert 'id="spot-waiting">2<' in html  # skipping does not judge
    html = console.get(f"{PAGE}?after={second}").get_data(as_text=True)
    assert "first question" not in html and "second question" not in html
    assert "You skipped the rest: 2 spot checks still waiting" in html
    assert 'href="/console/spot-checks">Start again from the oldest' in html
    assert check_row(app, first).verdict is None and check_row(app, second).verdict is None


def test_nothing_waiting_says_so_and_what_spot_checks_are_for(console, app, kb):
    html = console.get(PAGE).get_data(as_text=True)
    assert "No spot checks are waiting." in html
    assert "Spot checks are a random share of the questions the bot answered" in html
    assert 'id="spot-waiting">0<' in html


def test_the_page_needs_a_login(client, app, kb):
    answered(app, "where is my card")
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/console/login")


# -- verdicts -----------------------------------------------------------------------------------


def test_right_teaches_the_bots_intent_with_the_share(console, app, kb, reviewer):
    check_id = answered(app, "where is my card??", share=0.04)
    following = answered(app, "next question")
    response = console.post(f"{PAGE}/{check_id}/right")
    assert response.status_code == 302
    assert response.headers["Location"] == f"{PAGE}?after={check_id}"
    html = follow(console, response)
    assert "Marked right; taught as an example of card_arrival." in html
    assert "next question" in html and f"spot check #{following}" in html  # the next one
    assert 'id="spot-waiting">1<' in html
    row = check_row(app, check_id)
    assert row.verdict == "right" and row.correct_intent == "card_arrival"
    assert row.reviewer_id == reviewer.id and row.judged_at is not None
    assert taught(app) == [("where is my card??", "card_arrival", "spot_check", 0.04)]


def test_wrong_with_an_intent_teaches_that_intent(console, app, kb):
    check_id = answered(app, "I want my money back")
    response = console.post(f"{PAGE}/{check_id}/wrong", data={"intent": "request_refund"})
    html = follow(console, response)
    assert "Marked wrong; taught as an example of request_refund." in html
    assert "No spot checks are waiting." in html  # it was the last one
    row = check_row(app, check_id)
    assert row.verdict == "wrong" and row.correct_intent == "request_refund"
    assert taught(app) == [("I want my money back", "request_refund", "spot_check", SHARE)]


def test_wrong_with_an_article_that_is_its_own_intent(console, app, kb):
    check_id = answered(app, "are you open on sunday")
    console.post(f"{PAGE}/{check_id}/wrong", data={"intent": "opening-hours"})
    assert check_row(app, check_id).correct_intent == "opening-hours"
    assert taught(app) == [("are you open on sunday", "opening-hours", "spot_check", SHARE)]


def test_wrong_with_nothing_in_the_kb_teaches_nothing(console, app, kb):
    check_id = answered(app, "what is the meaning of life")
    response = console.post(f"{PAGE}/{check_id}/wrong", data={"intent": ""})
    html = follow(console, response)
    assert "Marked wrong; nothing in the knowledge base answers it, so nothing was taught." in html
    row = check_row(app, check_id)
    assert row.verdict == "wrong" and row.correct_intent is None
    assert taught(app) == []


def test_wrong_without_a_choice_is_refused(console, app, kb):
    check_id = answered(app, "where is my card")
    response = console.post(f"{PAGE}/{check_id}/wrong")
    html = follow(console, response)
    assert "Choose what the question is" in html
    assert 'id="spot-question">where is my card<' in html  # back on the same check
    assert check_row(app, check_id).verdict is None and taught(app) == []


def test_a_second_verdict_is_refused_and_the_first_stays(console, app, kb):
    check_id = answered(app, "where is my card")
    console.post(f"{PAGE}/{check_id}/right")
    for url, data in (
        (f"{PAGE}/{check_id}/wrong", {"intent": "request_refund"}),
        (f"{PAGE}/{check_id}/wrong", {"intent": ""}),
        (f"{PAGE}/{check_id}/right", {}),
    ):
        response = console.post(url, data=data)
        assert response.status_code == 302
        html = follow(console, response)
        assert "This answer was judged already: right. Nothing changed." in html
    row = check_row(app, check_id)
    assert row.verdict == "right" and row.correct_intent == "card_arrival"
    assert taught(app) == [("where is my card", "card_arrival", "spot_check", SHARE)]


def test_an_unknown_intent_is_refused(console, app, kb):
    check_id = answered(app, "where is my card")
    response = console.post(f"{PAGE}/{check_id}/wrong", data={"intent": "no_such_intent"})
    assert response.status_code == 302
    html = follow(console, response)
    assert "Unknown intent" in html and "no_such_intent" in html
    assert 'id="spot-question">where is my card<' in html  # the check is still there to judge
    assert check_row(app, check_id).verdict is None and taught(app) == []


def test_wrong_with_the_bots_own_intent_is_refused(console, app, kb):
    check_id = answered(app, "where is my card")
    html = follow(
        console, console.post(f"{PAGE}/{check_id}/wrong", data={"intent": "card_arrival"})
    )
    assert "mark the answer right" in html
    assert check_row(app, check_id).verdict is None and taught(app) == []


def test_right_without_an_intent_is_refused(console, app, kb):
    check_id = answered(app, "hello?", intent=None, slug="opening-hours")
    html = follow(console, console.post(f"{PAGE}/{check_id}/right"))
    assert "no intent to confirm" in html
    assert check_row(app, check_id).verdict is None and taught(app) == []


def test_an_unknown_check_is_404(console, app, kb):
    assert console.post(f"{PAGE}/999/right").status_code == 404
    assert console.post(f"{PAGE}/999/wrong", data={"intent": ""}).status_code == 404
    assert console.post(f"{PAGE}/999/wrong").status_code == 404


def test_verdicts_need_the_csrf_token(console, app, kb):
    check_id = answered(app, "where is my card")
    response = console.client.post(f"{PAGE}/{check_id}/right")
    assert response.status_code == 400
    assert check_row(app, check_id).verdict is None


# -- stats --------------------------------------------------------------------------------------


def _interval_text(judged: int, right: int) -> str:
    low, high = MeasuredAccuracy(judged, right, 0).interval()
    return f"95% interval {low * 100:.1f}%–{high * 100:.1f}%"


def test_stats_page_shows_the_measured_accuracy(console, app, kb):
    ids = [answered(app, f"question {i}") for i in range(4)]
    old = answered(app, "an old question", age=timedelta(days=30))  # outside the window
    html = console.get("/console/stats").get_data(as_text=True)
    assert "No spot checks judged in this window (4 waiting)." in html
    console.post(f"{PAGE}/{ids[0]}/right")
    console.post(f"{PAGE}/{ids[1]}/right")
    console.post(f"{PAGE}/{ids[2]}/wrong", data={"intent": "request_refund"})
    console.post(f"{PAGE}/{old}/wrong", data={"intent": ""})
    html = console.get("/console/stats").get_data(as_text=True)
    assert (
        "Answered accuracy measured by spot checks: <strong>2 of 3 right</strong> "
        f"(66.7%, {_interval_text(3, 2)}), 1 waiting" in html
    )
    assert "promised" not in html  # no model loaded: no target to show
    # A window that reaches the old check counts its verdict too.
    html = console.get("/console/stats?days=60").get_data(as_text=True)
    assert f"2 of 4 right</strong> (50.0%, {_interval_text(4, 2)}), 1 waiting" in html


def test_stats_page_shows_the_promised_answered_target(console, app, kb, monkeypatch):
    import app.review.console as console_module

    thresholds = Thresholds(provenance={"answered_target": 0.985})
    engine = SimpleNamespace(router=SimpleNamespace(m=SimpleNamespace(thresholds=thresholds)))
    monkeypatch.setattr(console_module, "get_engine", lambda: engine)
    check_id = answered(app, "where is my card")
    console.post(f"{PAGE}/{check_id}/right")
    html = console.get("/console/stats").get_data(as_text=True)
    assert f"1 of 1 right</strong> (100.0%, {_interval_text(1, 1)}), 0 waiting" in html
    assert "· promised 98.5%" in html
