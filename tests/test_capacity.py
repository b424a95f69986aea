"""Spare review capacity (app/nlp/capacity.py): alone on synthetic confidence streams, then
inside the router on hand-made tiers."""

from __future__ import annotations

import numpy as np
import pytest
from test_router import bert, ft, router

from app.nlp.capacity import SpareReview


def _serve(spare: SpareReview, confidences, tau_review: float) -> tuple[np.ndarray, np.ndarray]:
    """Answer a stream as the router does; returns (escalated, spare-only) per answer."""
    escalated, spared = [], []
    for conf in confidences:
        threshold = spare.threshold(tau_review)
        up = conf < threshold
        only_spare = up and conf >= tau_review
        spare.record(conf, up, only_spare)
        escalated.append(up)
        spared.append(only_spare)
    return np.asarray(escalated), np.asarray(spared)


def _stream(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).beta(8, 1.2, size=n)  # most answers confident


def test_spare_capacity_is_spent_up_to_the_budget_and_never_beyond():
    confidences = _stream(20_000)
    tau_review = float(np.quantile(confidences, 0.10))  # tuned: 10% escalate
    spare = SpareReview(0.15)
    escalated, spared = _serve(spare, confidences, tau_review)
    rate = escalated.mean()
    # The allowance is a ceiling: at most the budget plus the burst, over the whole stream.
    assert escalated.sum() <= 0.15 * len(confidences) + spare.burst
    assert rate > 0.145  # and nearly all the spare capacity was used
    assert spared.sum() == spare.spare_escalations > 0.03 * len(confidences)
    # Spare reviews take the least confident of the answers tau_review would let out.
    answered = confidences[~escalated]
    assert confidences[spared].max() <= np.quantile(confidences, 0.20)
    assert confidences[spared].mean() < answered.mean()
    # Nothing under the tuned threshold was ever answered.
    assert escalated[confidences < tau_review].all()


def test_no_spare_reviews_when_the_tuned_threshold_fills_the_budget():
    confidences = _stream(5_000, seed=1)
    tau_review = float(np.quantile(confidences, 0.20))  # harder traffic: 20% escalate
    spare = SpareReview(0.15)
    escalated, spared = _serve(spare, confidences, tau_review)
    assert not spared.any()
    assert escalated.sum() == (confidences < tau_review).sum()  # exactly the tuned decisions


def test_nothing_changes_before_enough_traffic_was_seen():
    spare = SpareReview(0.5, min_seen=50, refresh=1)
    for conf in np.linspace(0.9, 0.99, 49):
        spare.record(conf, False)
    assert spare.threshold(0.6) == 0.6
    spare.record(0.95, False)  # the 50th answer: the window's median now exceeds 0.6
    assert spare.threshold(0.6) == pytest.approx(np.median([*np.linspace(0.9, 0.99, 49), 0.95]))


def test_the_threshold_never_drops_below_tau_review():
    spare = SpareReview(0.15, min_seen=10, refresh=1)
    for _ in range(100):
        spare.record(0.2, False)
    assert spare.snapshot()["quantile"] == pytest.approx(0.2)
    assert spare.threshold(0.6) == 0.6


@pytest.mark.parametrize(
    "kwargs", [{"budget": 1.5}, {"budget": -0.1}, {"budget": 0.1, "min_seen": 0}]
)
def test_bad_settings_are_refused(kwargs):
    budget = kwargs.pop("budget")
    with pytest.raises(ValueError):
        SpareReview(budget, **kwargs)


def _primed(budget: float, confidence: float, n: int = 40) -> SpareReview:
    """A SpareReview that has seen ``n`` answers at ``confidence`` without escalating them."""
    spare = SpareReview(budget, min_seen=n, refresh=1, window=n)
    for _ in range(n):
        spare.record(confidence, False)
    return spare


def test_router_sends_a_confident_answer_to_review_while_capacity_is_spare():
    # BERT route, calibrated confidence 0.9 (tau_review 0.6): answered without spare capacity.
    r = router(ft(("dispute", 0.5), ("card_arrival", 0.4)), bert("dispute", 0.9), complex_conf=0.9)
    assert not r.route("I want to dispute a payment").escalate
    r.spare = _primed(0.5, 0.95)  # live answers ran more confident: the median is 0.95
    decision = r.route("I want to dispute a payment")
    assert decision.escalate and decision.escalation_reason == "spare_capacity"
    assert decision.article.slug == "dispute"  # the reviewer still sees the proposed answer
    assert decision.trace["tau_review_effective"] == pytest.approx(0.95)
    assert r.spare.spare_escalations == 1
    # Evaluation modes and escalation off neither use nor feed it.
    seen = r.spare.seen
    assert not r.route("I want to dispute a payment", escalation=False).escalate
    assert not r.route("I want to dispute a payment", mode="bert").escalate
    assert r.spare.seen == seen


def test_router_answers_again_once_the_spare_capacity_is_used():
    r = router(ft(("dispute", 0.5), ("card_arrival", 0.4)), bert("dispute", 0.9), complex_conf=0.9)
    r.spare = _primed(0.05, 0.95)  # 40 answers x 5% = 2 reviews of allowance
    reasons = [r.route("I want to dispute a payment").escalation_reason for _ in range(4)]
    assert reasons[:2] == ["spare_capacity", "spare_capacity"]
    assert reasons[2:] == [None, None]


def test_router_escalation_under_tau_review_keeps_its_own_reason():
    r = router(ft(("dispute", 0.5), ("card_arrival", 0.4)), bert("dispute", 0.9), complex_conf=0.3)
    r.spare = _primed(0.5, 0.95)
    decision = r.route("I want to dispute a payment")
    assert decision.escalate and decision.escalation_reason != "spare_capacity"
