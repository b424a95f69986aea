"""The router's decisions on hand-made cases.

The tiers here are fixed-answer stand-ins (each returns the TierResult it was given), so every
branch of the routing logic is exercised on known inputs; the real models are exercised in
test_training.py and test_eval.py. BM25 is the real retriever over a two-article KB.
"""

from __future__ import annotations

import pytest

from app.nlp.bm25 import BM25Doc, BM25Retriever
from app.nlp.calibration import COMPLEX_FEATURES, SIMPLE_FEATURES, CalibrationSet, Calibrator
from app.nlp.router import Router, RouterModels
from app.nlp.thresholds import Thresholds
from app.nlp.types import ESCALATION_REASONS, Candidate, TierResult


class FixedTier:
    """Returns the same TierResult for every query (or raises the given error)."""

    def __init__(
        self,
        result: TierResult | None = None,
        error: Exception | None = None,
        head_weight: float | None = None,
    ) -> None:
        self.result, self.error, self.head_weight = result, error, head_weight
        self.version = "fixed"
        self.calls = 0

    def run(self, query: str, k: int = 5) -> TierResult:
        self.calls += 1
        if self.error:
            raise self.error
        return self.result


KB = BM25Retriever(
    [
        BM25Doc(
            "card-arrival",
            "Where is my card?",
            ["my card has not arrived"],
            "Cards arrive.",
            "card_arrival",
        ),
        BM25Doc(
            "dispute",
            "Disputing a payment",
            ["I want to dispute a payment"],
            "Report it.",
            "dispute",
        ),
    ]
)


def ft(*intents: tuple[str, float]) -> FixedTier:
    return FixedTier(TierResult("fasttext", intents=list(intents), confidence=intents[0][1]))


def bert(intent: str, p1: float, p2: float = 0.0, similarity: float = 0.8) -> FixedTier:
    slug = "card-arrival" if intent == "card_arrival" else "dispute"
    other = "dispute" if intent == "card_arrival" else "card_arrival"
    return FixedTier(
        TierResult(
            "bert",
            intents=[(intent, p1), (other, p2)],
            candidates=[
                Candidate(slug, slug, similarity, intent),
                Candidate("x", "x", similarity - 0.3, other),
            ],
            confidence=similarity,
        )
    )


def calibration(simple: float, complex_: float) -> CalibrationSet:
    return CalibrationSet(
        Calibrator(SIMPLE_FEATURES, base_rate=simple),
        Calibrator(COMPLEX_FEATURES, base_rate=complex_),
    )


def router(
    fasttext, bert_tier, *, simple_conf=0.95, complex_conf=0.9, tiers=None, **thresholds
) -> Router:
    th = Thresholds(
        **{
            "tau_fast": 0.7,
            "margin": 0.3,
            "tau_review": 0.6,
            "oos_similarity": 0.4,
            "kl_disagree": 1.0,
            **thresholds,
        }
    )
    return Router(
        RouterModels(
            fasttext=fasttext,
            bm25=KB,
            bert=bert_tier,
            calibration=calibration(simple_conf, complex_conf),
            thresholds=th,
            tiers=tiers or {"card_arrival": "simple", "dispute": "complex"},
            version="test",
        )
    )


def test_confident_simple_intent_takes_the_simple_route():
    b = bert("card_arrival", 0.9)
    decision = router(ft(("card_arrival", 0.92), ("dispute", 0.05)), b).route(
        "my card has not arrived"
    )
    assert decision.route == "simple"
    assert decision.article.slug == "card-arrival"
    assert not decision.escalate
    assert b.calls == 0  # BERT never ran
    assert decision.trace["route"] == "simple"
    assert set(decision.trace["stages"]) == {"fasttext", "bm25"}
    assert decision.trace["thresholds"]["tau_fast"] == 0.7
    assert decision.trace["versions"]["models"] == "test"
    assert "fasttext" in decision.trace["timings_ms"]


def test_complex_tier_goes_to_bert_even_when_confident():
    b = bert("dispute", 0.95)
    decision = router(ft(("dispute", 0.97), ("card_arrival", 0.01)), b).route("dispute this")
    assert decision.route == "complex"
    assert b.calls == 1
    assert decision.article.slug == "dispute"
    assert decision.trace["tier"] == "complex"


def test_small_margin_goes_to_bert():
    b = bert("card_arrival", 0.9)
    decision = router(ft(("card_arrival", 0.72), ("dispute", 0.5)), b).route("card?")
    assert decision.route == "complex"
    assert b.calls == 1


def test_low_top1_goes_to_bert():
    b = bert("card_arrival", 0.9)
    decision = router(ft(("card_arrival", 0.55), ("dispute", 0.1)), b).route("card?")
    assert decision.route == "complex"


def test_unsure_simple_answer_cascades_to_bert():
    b = bert("card_arrival", 0.9)
    decision = router(ft(("card_arrival", 0.95), ("dispute", 0.01)), b, simple_conf=0.3).route(
        "my card has not arrived"
    )
    assert decision.route == "complex"
    assert decision.trace["cascaded"] is True
    assert not decision.escalate


def test_fast_answer_between_cascade_and_review_goes_to_a_person_without_bert():
    """tau_cascade 0.5 < simple confidence 0.55 < tau_review 0.6: not unsure enough to pay for
    BERT, too unsure to answer alone."""
    b = bert("card_arrival", 0.9)
    r = router(ft(("card_arrival", 0.95), ("dispute", 0.01)), b, simple_conf=0.55, tau_cascade=0.5)
    decision = r.route("my card has not arrived")
    assert decision.route == "simple" and b.calls == 0
    assert decision.escalate and decision.escalation_reason == "below_threshold"
    assert decision.article.slug == "card-arrival"  # the draft for the reviewer
    answered = r.route("my card has not arrived", escalation=False)
    assert not answered.escalate and answered.trace["would_escalate"] == "below_threshold"
    cascaded = router(
        ft(("card_arrival", 0.95), ("dispute", 0.01)), b, simple_conf=0.45, tau_cascade=0.5
    ).route("my card has not arrived")
    assert cascaded.route == "complex" and b.calls == 1


def test_with_review_on_bert_checks_fast_answers_under_tau_verify():
    """Simple confidence 0.8: above tau_cascade (0.5) and tau_review (0.6), under tau_verify
    (0.9). With escalation on BERT looks first, and its (lower) confidence sends the query to
    a person; with escalation off the fast answer goes out and BERT never runs."""
    b = bert("card_arrival", 0.9)
    r = router(
        ft(("card_arrival", 0.95), ("dispute", 0.01)),
        b,
        simple_conf=0.8,
        complex_conf=0.3,
        tau_cascade=0.5,
        tau_verify=0.9,
    )
    checked = r.route("my card has not arrived")
    assert b.calls == 1 and checked.route == "complex"
    assert checked.trace["verified"] is True and checked.trace["cascaded"] is True
    assert checked.escalate and checked.confidence == pytest.approx(0.3)
    unreviewed = r.route("my card has not arrived", escalation=False)
    assert b.calls == 1 and unreviewed.route == "simple" and not unreviewed.escalate
    assert unreviewed.trace["verified"] is False
    sure = router(
        ft(("card_arrival", 0.95), ("dispute", 0.01)),
        b,
        simple_conf=0.95,
        tau_cascade=0.5,
        tau_verify=0.9,
    ).route("my card has not arrived")
    assert b.calls == 1 and sure.route == "simple" and not sure.escalate


def test_tau_verify_below_tau_cascade_never_skips_the_cascade():
    th = Thresholds(tau_review=0.6, tau_cascade=0.5, tau_verify=0.2)
    assert th.verify_below == 0.5
    assert Thresholds(tau_review=0.6).verify_below == 0.6  # files without either


@pytest.mark.parametrize(
    ("fasttext", "bert_tier", "reason"),
    [
        # far from every KB text
        (
            ft(("card_arrival", 0.4), ("dispute", 0.3)),
            bert("card_arrival", 0.5, 0.3, 0.2),
            "out_of_scope",
        ),
        # FastText sure of one intent, BERT of the other
        (
            ft(("dispute", 0.9), ("card_arrival", 0.05)),
            bert("card_arrival", 0.9, 0.05),
            "tiers_disagree",
        ),
        # both agree but BERT splits its vote
        (
            ft(("card_arrival", 0.5), ("dispute", 0.45)),
            bert("card_arrival", 0.5, 0.45),
            "ambiguous",
        ),
        # clear, agreeing, similar, but the calibrated confidence is still low
        (
            ft(("card_arrival", 0.5), ("dispute", 0.1)),
            bert("card_arrival", 0.9, 0.05),
            "below_threshold",
        ),
    ],
)
def test_low_confidence_escalates_with_the_reason(fasttext, bert_tier, reason):
    decision = router(fasttext, bert_tier, complex_conf=0.2).route("something")
    assert decision.escalate
    assert decision.escalation_reason == reason
    assert reason in ESCALATION_REASONS
    assert decision.trace["escalation_reason"] == reason
    assert decision.article is not None  # the draft is kept for the reviewer


def test_escalation_off_answers_but_records_why():
    decision = router(
        ft(("card_arrival", 0.5), ("dispute", 0.1)), bert("card_arrival", 0.9), complex_conf=0.2
    ).route("x", escalation=False)
    assert not decision.escalate and decision.escalation_reason is None
    assert decision.trace["would_escalate"] == "below_threshold"


def test_bert_error_degrades_to_the_fast_tier():
    broken = FixedTier(error=RuntimeError("CUDA? no, just broken"))
    unsure = router(ft(("card_arrival", 0.5), ("dispute", 0.3)), broken).route("card")
    assert unsure.escalate and unsure.escalation_reason == "degraded"
    assert unsure.article is not None and unsure.article.slug == "card-arrival"
    assert "RuntimeError" in unsure.trace["stages"]["bert"]["error"]
    # a confident simple answer never needed BERT and is still served
    sure = router(ft(("card_arrival", 0.95), ("dispute", 0.01)), broken).route(
        "my card has not arrived"
    )
    assert not sure.escalate and sure.route == "simple"


def test_bert_missing_degrades():
    r = router(ft(("dispute", 0.9), ("card_arrival", 0.05)), None)
    decision = r.route("dispute a payment")
    assert decision.escalate and decision.escalation_reason == "degraded"
    assert decision.route == "simple"


def test_fast_and_bert_modes_use_one_tier_each():
    f = ft(("dispute", 0.4), ("card_arrival", 0.3))
    b = bert("card_arrival", 0.2, 0.1, 0.1)
    r = router(f, b, complex_conf=0.05)
    fast = r.route("q", mode="fast")
    assert fast.route == "simple" and b.calls == 0 and not fast.escalate
    only_bert = r.route("q", mode="bert")
    assert only_bert.route == "complex" and f.calls == 1 and not only_bert.escalate


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="unknown mode"):
        router(ft(("a", 1.0)), None).route("q", mode="turbo")


def test_without_an_intent_tier_bert_matches_the_kb_and_a_bert_failure_escalates():
    """A KB too thin for FastText (a version trained without one): every query goes to BERT;
    when BERT fails too, nothing can answer and the question escalates as degraded."""
    b = bert("card_arrival", 0.9)
    decision = router(None, b).route("my card has not arrived")
    assert decision.route == "complex" and decision.article.slug == "card-arrival"
    assert not decision.escalate
    assert set(decision.trace["stages"]) == {"bert"}
    assert decision.trace["versions"]["fasttext"] is None
    fast_only = router(None, b).route("my card has not arrived", mode="fast")
    assert fast_only.escalation_reason is None and fast_only.article is None  # eval mode
    broken = router(None, FixedTier(error=RuntimeError("boom"))).route("my card has not arrived")
    assert broken.escalate and broken.escalation_reason == "degraded"
