"""Shadow mode: the comparison of two decisions, the bounded queue that never makes the
customer wait, and (real models) a shadow version answering live questions in the background
with its disagreements on the console's models page."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.models import ShadowComparison
from app.nlp import registry
from app.nlp.shadow import ShadowRunner, compare, intent_distribution, kl_divergence
from app.nlp.types import Candidate, Decision
from app.services import ENGINE_KEY
from app.vocab import ModelStatus


def decision(intent, slug, p, *, route="complex", escalate=False, version="v1") -> Decision:
    return Decision(
        query="where is my card",
        route=route,
        intent=intent,
        article=Candidate(slug, slug, 0.8, intent) if slug else None,
        confidence=p,
        escalate=escalate,
        escalation_reason="below_threshold" if escalate else None,
        trace={
            "versions": {"models": version},
            "escalation_reason": "below_threshold" if escalate else None,
            "stages": {"bert": {"intents": [[intent, p], ["other_intent", 1 - p - 0.05]]}},
        },
    )


def test_kl_is_zero_for_equal_distributions_and_grows_with_the_difference():
    same = {"a": 0.7, "b": 0.3}
    assert kl_divergence(same, dict(same)) == pytest.approx(0.0, abs=1e-9)
    near = kl_divergence(same, {"a": 0.6, "b": 0.4})
    far = kl_divergence(same, {"a": 0.1, "b": 0.9})
    assert 0 < near < far
    assert kl_divergence({}, same) is None


def test_compare_records_what_differs():
    active = decision("card_arrival", "card-arrival", 0.9)
    agreeing = compare(active, decision("card_arrival", "card-arrival", 0.88, version="v2"))
    assert not agreeing["disagrees"] and agreeing["version"] == "v2"
    assert agreeing["active_version"] == "v1" and agreeing["kl"] < 0.01
    other = compare(active, decision("lost_card", "lost-card", 0.5, escalate=True, version="v2"))
    assert other["disagrees"] and other["shadow_escalated"] and not other["active_escalated"]
    assert (other["active_slug"], other["shadow_slug"]) == ("card-arrival", "lost-card")
    assert other["kl"] > 1.0
    assert set(intent_distribution(active)) == {"card_arrival", "other_intent", "\0other"}


class SlowRouter:
    """Routes like a shadow version that takes ``hold`` to answer (released by the test)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()  # a worker is inside route()
        self.seen: list[str] = []

    def route(self, query: str) -> Decision:
        self.entered.set()
        self.release.wait(10)
        self.seen.append(query)
        return decision("lost_card", "lost-card", 0.4, version="v2")


def test_a_busy_shadow_drops_questions_instead_of_waiting(db_url):
    runner = ShadowRunner(db_url, queue_size=2)
    router = SlowRouter()
    try:
        queued = [runner.offer(router, decision("card_arrival", "card-arrival", 0.9), 1.0, None)]
        assert router.entered.wait(10)  # the worker took the first one and blocks in route()
        started = time.perf_counter()
        queued += [
            runner.offer(router, decision("card_arrival", "card-arrival", 0.9), 1.0, None)
            for _ in range(10)
        ]
        offering = time.perf_counter() - started
        assert queued.count(True) == 3 and runner.dropped == 8  # one busy + a queue of two
        assert offering < 1.0  # no offer waited for the blocked worker
        assert not runner.offer(router, decision("x", None, 0.1), 0.0, None)  # not sampled
        router.release.set()
        assert runner.drain(10)
        with session_scope(db_url) as session:
            rows = session.scalars(select(ShadowComparison)).all()
        assert len(rows) == 3 and all(r.disagrees and r.version == "v2" for r in rows)
    finally:
        router.release.set()
        runner.close()


@pytest.mark.slow
def test_shadow_answers_in_the_background_and_the_console_shows_disagreements(
    lifecycle_app, make_reviewer
):
    from fixtures_review import login

    app, (v1, v2) = lifecycle_app, lifecycle_app.versions
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    engine = app.extensions[ENGINE_KEY]
    with session_scope(url) as session:
        registry.promote(session, v2, to=ModelStatus.SHADOW, share=1.0)
    assert engine.check_for_updates(wait=True)
    assert engine.status()["shadow"] == {"version": v2, "share": 1.0}
    client = app.test_client()
    questions = ["how do I reset my password", "when do you open on saturday", "asdf qwerty"]
    for question in questions:
        reply = client.post("/api/v1/chat", json={"message": question}).get_json()
        assert reply["status"] in ("answered", "pending_review")
    assert engine._shadow.drain(30)
    with session_scope(url) as session:
        rows = session.scalars(select(ShadowComparison)).all()
        assert sorted(r.query for r in rows) == sorted(questions)
        assert {r.version for r in rows} == {v2} and {r.active_version for r in rows} == {v1}
        assert all(r.conversation_id for r in rows)
        # the shadow escalates under 0.9999: it disagrees wherever the active version answered
        answered = [r for r in rows if not r.active_escalated]
        assert answered and all(r.disagrees and r.shadow_escalated for r in answered)

    account = make_reviewer()
    browser = app.test_client()
    assert login(browser, account.email, account.password).status_code == 302
    page = browser.get("/console/models").get_data(as_text=True)
    assert f"Shadow <code>{v2}</code>" in page
    assert 'id="disagreement-rate"' in page and "compared questions" in page
    assert questions[0] in page or questions[1] in page
