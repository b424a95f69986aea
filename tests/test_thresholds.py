"""Thresholds file: round trip, validation with clear errors, and the tuner's objective."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.nlp import thresholds
from app.nlp.thresholds import (
    DEFAULTS,
    OutOfScopeOutcomes,
    Thresholds,
    ThresholdsError,
    ValidationOutcomes,
    escalated_share,
    tune_thresholds,
)


def test_round_trip(tmp_path):
    path = tmp_path / "models" / "thresholds.json"
    original = Thresholds(
        tau_fast=0.65,
        margin=0.2,
        tau_review=0.55,
        tau_cascade=0.4,
        fasttext_weight=0.15,
        budget=0.12,
        provenance={"objective": "test"},
    )
    original.save(path)
    assert Thresholds.load(path) == original
    assert not list(path.parent.glob(".thresholds-*"))  # no temp file left behind


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"tau_fast": 1.5}', "tau_fast must be between 0 and 1"),
        ('{"tau_cascade": -0.1}', "tau_cascade must be between 0 and 1"),
        ('{"fasttext_weight": "high"}', "fasttext_weight must be a number"),
        ('{"margin": "high"}', "margin must be a number"),
        ('{"tau_review": true}', "tau_review must be a number"),
        ('{"tau_fats": 0.5}', "unknown key(s) tau_fats"),
        ('{"kl_disagree": -1}', "kl_disagree must be a number >= 0"),
    ],
)
def test_invalid_files_name_the_problem(tmp_path, content, message):
    path = tmp_path / "thresholds.json"
    path.write_text(content)
    with pytest.raises(ThresholdsError) as info:
        Thresholds.load(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ThresholdsError, match="no such file"):
        Thresholds.load(tmp_path / "absent.json")


def test_partial_file_takes_defaults(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"tau_review": 0.42}))
    loaded = Thresholds.load(path)
    assert loaded.tau_review == 0.42
    assert loaded.tau_fast == DEFAULTS.tau_fast
    # files written before tau_cascade existed cascade below tau_review, as they did then
    assert loaded.tau_cascade is None and loaded.cascade_below == 0.42
    assert loaded.fasttext_weight == 0.0


def _outcomes(n=400, seed=0):
    """FastText is right when its top-1 exceeds 0.6 (and says so); BERT is right 92% of
    the time and its calibrated confidence separates its errors."""
    rng = np.random.default_rng(seed)
    p1 = rng.uniform(0.2, 1.0, n)
    simple_ok = (p1 > 0.6) & (rng.uniform(size=n) < 0.99)
    bert_ok = rng.uniform(size=n) < 0.92
    return ValidationOutcomes(
        ft_top=["a" if i % 2 else "b" for i in range(n)],
        ft_p1=p1,
        ft_margin=p1 - 0.1,
        simple_correct=simple_ok,
        simple_conf=np.where(p1 > 0.6, 0.97, 0.3),
        bert_correct=bert_ok,
        bert_conf=np.where(bert_ok, 0.9, 0.4),
    )


def test_tuner_respects_budget_and_prefers_fewer_bert_calls():
    outcomes = _outcomes()
    tiers = {0.0: {"a": "simple", "b": "simple"}}
    chosen, f1_min, figures = tune_thresholds(outcomes, tiers, budget=0.10, bert_budget=1.0)
    assert 1.0 - figures["val_coverage"] <= 0.10 + 1e-9
    # FastText is right 99% of the time above 0.6 and BERT only 92%: those stay on the fast
    # route, the rest go to BERT
    # eligible for the fast route, and not cascaded to BERT for a calibrated confidence
    # under tau_review
    fast = (
        (outcomes.ft_p1 >= chosen.tau_fast)
        & (outcomes.ft_margin >= chosen.margin)
        & (outcomes.simple_conf >= chosen.tau_review)
    )
    reliable = outcomes.ft_p1 > 0.6
    assert (fast == reliable).mean() >= 0.97
    assert figures["val_bert_share"] == pytest.approx(1.0 - reliable.mean(), abs=0.03)
    assert chosen.provenance["objective"].startswith("max accuracy - 0.02 x BERT share")
    looser, _, loose_figures = tune_thresholds(outcomes, tiers, budget=0.30, bert_budget=1.0)
    assert loose_figures["val_answered_accuracy"] >= figures["val_answered_accuracy"]


def test_bert_cost_trades_accuracy_for_fewer_bert_calls(monkeypatch):
    """BERT fixes the fast route's errors on low-confidence queries only at a rate of about one
    in five: a cost per call above that keeps those queries on the fast route."""
    rng = np.random.default_rng(1)
    n = 1000
    p1 = rng.uniform(0.3, 1.0, n)
    simple_ok = rng.uniform(size=n) < np.where(p1 > 0.65, 0.99, 0.75)
    bert_ok = rng.uniform(size=n) < 0.95
    outcomes = ValidationOutcomes(
        ft_top=["a"] * n,
        ft_p1=p1,
        ft_margin=p1,
        simple_correct=simple_ok,
        simple_conf=np.full(n, 0.99),
        bert_correct=bert_ok,
        bert_conf=np.full(n, 0.99),
    )
    tiers = {0.0: {"a": "simple"}}
    _, _, cheap = tune_thresholds(outcomes, tiers, budget=0.10, bert_cost=0.01, bert_budget=1.0)
    _, _, dear = tune_thresholds(outcomes, tiers, budget=0.10, bert_cost=0.5, bert_budget=1.0)
    assert cheap["val_bert_share"] > 0.3
    assert dear["val_bert_share"] == 0.0
    assert cheap["val_accuracy"] > dear["val_accuracy"]
    # A BERT budget of 0.2 would cost more than CAPACITY_SLACK of accuracy: it is dropped.
    _, _, dropped = tune_thresholds(outcomes, tiers, budget=0.10, bert_cost=0.01, bert_budget=0.2)
    assert dropped["bert_budget_held"] is False
    assert dropped["val_bert_share"] == cheap["val_bert_share"]
    assert cheap["val_accuracy"] > dear["val_accuracy"] + thresholds.CAPACITY_SLACK
    # With more slack the same budget holds: BERT takes the least sure within its capacity.
    monkeypatch.setattr(thresholds, "CAPACITY_SLACK", 1.0)
    _, _, capped = tune_thresholds(outcomes, tiers, budget=0.10, bert_cost=0.01, bert_budget=0.2)
    assert capped["bert_budget_held"] is True
    assert 0.1 < capped["val_bert_share"] <= 0.2
    assert dear["val_accuracy"] < capped["val_accuracy"] < cheap["val_accuracy"]
    with pytest.raises(ThresholdsError, match="bert_cost"):
        tune_thresholds(outcomes, tiers, bert_cost=1.5)


def test_out_of_scope_queries_must_escalate():
    """Out-of-scope queries the calibrators rate 0.45-0.5: a tau_review above that escalates
    them, and costs the in-scope queries nothing here; the tuner must pick such a point."""
    outcomes = _outcomes()
    tiers = {0.0: {"a": "simple", "b": "simple"}}
    # answered_target 0: no BERT checks of fast answers, tau_review as the main search set it
    blind, _, blind_figures = tune_thresholds(
        outcomes, tiers, budget=0.10, answered_target=0.0, bert_budget=0.25
    )
    assert blind.tau_review <= 0.45
    assert blind_figures["val_oos_escalation_recall"] is None
    n = 100
    rng = np.random.default_rng(2)
    outcomes.oos = OutOfScopeOutcomes(
        ft_top=["a"] * n,
        ft_p1=rng.uniform(0.2, 1.0, n),
        ft_margin=rng.uniform(0.0, 0.9, n),
        simple_conf=np.full(n, 0.5),
        bert_conf=np.full(n, 0.45),
    )
    chosen, _, figures = tune_thresholds(
        outcomes, tiers, budget=0.10, answered_target=0.0, bert_budget=0.25
    )
    assert chosen.tau_review > 0.5
    assert figures["val_oos_escalation_recall"] == 1.0
    assert 1.0 - figures["val_coverage"] <= 0.10 + 1e-9
    assert "out-of-scope escalation >= 0.95" in chosen.provenance["objective"]


def test_the_datas_own_out_of_scope_rows_escalate_even_when_outnumbered():
    """1,000 easy negatives (our development questions, nonsense: confidence 0.1) and 20 of
    the data's own out-of-scope rows, near misses at 0.6-0.8. Pooled, answering every near
    miss still escalates 98% of the negatives; told apart, 95% of the near misses must
    escalate too, with a standard error to spare (they are a sample of the user's traffic):
    19 of 20 (95.0% - 4.9%) is not enough, so tau_review rises above all 20."""
    outcomes = _outcomes()
    tiers = {0.0: {"a": "simple", "b": "simple"}}
    rng = np.random.default_rng(4)
    near = rng.uniform(0.6, 0.8, 20)
    conf = np.concatenate([np.full(1000, 0.1), near])
    own = np.arange(len(conf)) >= 1000

    def with_negatives(labelled):
        outcomes.oos = OutOfScopeOutcomes(
            ft_top=["a"] * len(conf),
            ft_p1=np.full(len(conf), 0.1),  # never eligible for the simple route
            ft_margin=np.zeros(len(conf)),
            simple_conf=conf,
            bert_conf=conf,
            labelled=labelled,
        )
        return tune_thresholds(outcomes, tiers, budget=1.0, answered_target=0.0)

    pooled, _, pooled_figures = with_negatives(None)
    assert pooled.tau_review <= 0.6
    assert pooled_figures["val_oos_escalation_recall"] >= 0.95
    apart, _, figures = with_negatives(own)
    assert apart.tau_review > near.max()
    assert figures["val_oos_escalation_recall"] >= 0.95
    # the share is the lower of the two groups'
    assert escalated_share(conf[None, :], np.array([[0.7]]), own)[0, 0] == pytest.approx(
        (near < 0.7).mean()
    )
    assert escalated_share(conf[None, :], np.array([[0.7]]))[0, 0] == pytest.approx(
        (conf < 0.7).mean()
    )
    share = (near < 0.7).mean()
    assert escalated_share(conf[None, :], np.array([[0.7]]), own, spare_error=True)[
        0, 0
    ] == pytest.approx(share - np.sqrt(share * (1 - share) / 20))
    # our development negatives are not a sample of the user's traffic: held as measured
    assert escalated_share(conf[None, :], np.array([[0.7]]), spare_error=True)[
        0, 0
    ] == pytest.approx((conf < 0.7).mean())


def _confident_mistakes(n=2000, seed=3):
    """FastText's route is right 97% of the time and its calibrated confidence (0.9-0.99)
    cannot tell its mistakes apart; BERT is right 95% of the time and its confidence separates
    right (0.95) from wrong (0.2). Only a BERT look catches the fast route's mistakes."""
    rng = np.random.default_rng(seed)
    simple_ok = rng.uniform(size=n) < 0.97
    bert_ok = rng.uniform(size=n) < 0.95
    return ValidationOutcomes(
        ft_top=["a"] * n,
        ft_p1=np.full(n, 0.95),
        ft_margin=np.full(n, 0.9),
        simple_correct=simple_ok,
        simple_conf=rng.uniform(0.9, 0.99, n),
        bert_correct=bert_ok,
        bert_conf=np.where(bert_ok, 0.95, 0.2),
    )


def test_answered_target_buys_bert_checks_of_fast_answers(monkeypatch):
    outcomes = _confident_mistakes()
    tiers = {0.0: {"a": "simple"}}
    plain, _, plain_figures = tune_thresholds(outcomes, tiers, budget=0.10, answered_target=0.0)
    assert plain.tau_verify == plain.cascade_below  # no promise, no checks
    assert plain_figures["val_review_answered_accuracy"] < 0.98
    checked, _, figures = tune_thresholds(outcomes, tiers, budget=0.10, answered_target=0.985)
    assert figures["answered_target_reached"] is True
    # reached with one standard error of the held-out estimate to spare
    accuracy = figures["val_review_answered_accuracy"]
    answered = figures["val_review_coverage"] * len(outcomes.ft_p1)
    assert accuracy - np.sqrt(accuracy * (1 - accuracy) / answered) >= 0.985 - 2e-4
    # the budget is a ceiling: the target is reached with fewer escalations than it allows
    assert 1.0 - figures["val_review_coverage"] < 0.10
    # the fewest checks that reach the target: one grid step less would not
    assert plain.cascade_below < checked.tau_verify < 1.0
    assert 0.0 < figures["val_review_bert_share"] < 1.0
    # the escalation-off operating point is the same either way
    assert (checked.tau_fast, checked.margin, checked.cascade_below) == (
        plain.tau_fast,
        plain.margin,
        plain.cascade_below,
    )
    # 2% escalation cannot hold back all of BERT's 5% mistakes: 100% is out of reach, and the
    # tuner settles for the best answered accuracy net of BERT's cost
    _, _, tight = tune_thresholds(outcomes, tiers, budget=0.02, answered_target=0.0)
    _, _, far = tune_thresholds(outcomes, tiers, budget=0.02, answered_target=1.0)
    assert far["answered_target_reached"] is False
    assert far["val_review_answered_accuracy"] >= tight["val_review_answered_accuracy"]
    # A BERT budget of 0.2 would cost the target itself here: it gives way.
    _, _, freed = tune_thresholds(
        outcomes, tiers, budget=0.10, answered_target=0.985, bert_budget=0.2
    )
    assert freed["review_bert_budget_held"] is False and freed["answered_target_reached"]
    # With more slack BERT's capacity holds with review on too: checks stop at the BERT
    # budget, and when the target is out of reach within it they take all of it (a grid step
    # of tau_verify moves about 11% of these queries)
    monkeypatch.setattr(thresholds, "CAPACITY_SLACK", 1.0)
    _, _, capped = tune_thresholds(
        outcomes, tiers, budget=0.10, answered_target=0.985, bert_budget=0.2
    )
    assert 0.2 - 0.12 < capped["val_review_bert_share"] <= 0.2
    assert capped["answered_target_reached"] is False
    assert capped["val_review_answered_accuracy"] > plain_figures["val_review_answered_accuracy"]
    with pytest.raises(ThresholdsError, match="answered_target"):
        tune_thresholds(outcomes, tiers, answered_target=1.2)


def test_complex_tier_never_takes_the_simple_route():
    outcomes = _outcomes()
    tiers = {0.0: {"a": "complex", "b": "complex"}}
    _, _, figures = tune_thresholds(outcomes, tiers, budget=0.10)
    assert figures["val_bert_share"] == 1.0
    assert figures["bert_budget_held"] is False  # declared tiers win over BERT's capacity


def test_checks_that_answer_worse_are_not_bought():
    """BERT is right 60% of the time and always 0.95 sure: checking a fast answer swaps a
    likely right answer for a coin flip nobody can spot. An out-of-reach target must not buy
    such checks with the BERT budget."""
    rng = np.random.default_rng(4)
    n = 2000
    outcomes = ValidationOutcomes(
        ft_top=["a"] * n,
        ft_p1=np.full(n, 0.95),
        ft_margin=np.full(n, 0.9),
        simple_correct=rng.uniform(size=n) < 0.97,
        simple_conf=rng.uniform(0.9, 0.99, n),
        bert_correct=rng.uniform(size=n) < 0.6,
        bert_conf=np.full(n, 0.95),
    )
    tiers = {0.0: {"a": "simple"}}
    chosen, _, figures = tune_thresholds(outcomes, tiers, budget=0.10, answered_target=0.999)
    assert figures["answered_target_reached"] is False
    assert chosen.tau_verify == chosen.cascade_below
    assert figures["val_review_bert_share"] == figures["val_bert_share"]


def test_review_spends_the_fewest_escalations_that_reach_the_target():
    """The budget is a ceiling: when the risk-coverage curve reaches the answered target after
    escalating 5% of queries, tau_review escalates about that, not the 30% the budget allows;
    when the target is out of reach under the ceiling, the whole ceiling is spent."""
    rng = np.random.default_rng(3)
    n = 2000
    conf = rng.uniform(0.1, 1.0, n)
    # Wrong answers only among the least confident 5%: above that, everything is right.
    correct = (conf > 0.145) | (rng.uniform(size=n) < 0.5)
    outcomes = ValidationOutcomes(
        ft_top=["a"] * n,
        ft_p1=np.zeros(n),  # nothing takes the simple route
        ft_margin=np.zeros(n),
        simple_correct=np.zeros(n, dtype=bool),
        simple_conf=np.zeros(n),
        bert_correct=correct,
        bert_conf=conf,
    )
    tiers = {0.0: {"a": "simple"}}
    target, _, figures = tune_thresholds(outcomes, tiers, budget=0.30, answered_target=0.985)
    assert figures["answered_target_reached"]
    escalated = 1.0 - figures["val_review_coverage"]
    assert escalated < 0.06  # about the 5% the target needs
    assert figures["val_review_answered_accuracy"] >= 0.985
    assert target.tau_review < 0.16
    # A target that needs more than the ceiling: the ceiling is spent, and the figures say so.
    _, _, capped = tune_thresholds(outcomes, tiers, budget=0.02, answered_target=0.999)
    assert not capped["answered_target_reached"]
    assert 1.0 - capped["val_review_coverage"] == pytest.approx(0.02, abs=0.002)


def _traffic(seed: int, n_reviewed: int, n_unreviewed: int):
    """Reviewed (held-out) questions spread over the confidences, right as often as their
    confidence says, and easy unreviewed ones."""
    rng = np.random.default_rng(seed)
    reviewed = rng.uniform(0.2, 1.0, n_reviewed)
    right = rng.uniform(size=n_reviewed) < reviewed
    unreviewed = rng.uniform(0.95, 1.0, n_unreviewed)
    return reviewed, right, unreviewed


def test_review_on_traffic_counts_unreviewed_answers_at_their_confidence():
    """Traffic mostly answered with high confidence: the estimate over all of it reaches the
    target at a lower threshold than the reviewed (harder) questions alone would allow."""
    from app.nlp.thresholds import review_for_target, review_on_traffic

    reviewed, right, unreviewed = _traffic(0, 600, 2400)
    t, figures = review_on_traffic(reviewed, right, 1.0, unreviewed, None, 0.95)
    alone, reached = review_for_target(
        reviewed[None, :],
        right[None, :],
        None,
        len(reviewed),
        0.95,
        np.asarray(thresholds.TAU_REVIEW_GRID),
    )
    assert t is not None and reached[0]
    assert t < alone[0] - 0.05
    assert figures["estimated_answered_accuracy"] >= 0.95
    # what the estimate promises holds on a fresh draw of the same traffic
    rng = np.random.default_rng(2)
    right2 = rng.uniform(size=len(reviewed)) < reviewed
    drawn = rng.uniform(size=len(unreviewed)) < unreviewed
    live_right = right2[reviewed >= t].sum() + drawn[unreviewed >= t].sum()
    live_answered = (reviewed >= t).sum() + (unreviewed >= t).sum()
    assert live_right / live_answered >= 0.94


def test_review_on_traffic_keeps_out_of_scope_escalated_and_the_budget():
    from app.nlp.thresholds import review_on_traffic

    reviewed, right, unreviewed = _traffic(0, 600, 2400)
    free, _ = review_on_traffic(reviewed, right, 1.0, unreviewed, None, 0.95)
    oos = np.linspace(0.0, 0.97, 100)  # 95% of them under ~0.92
    t, _ = review_on_traffic(reviewed, right, 1.0, unreviewed, oos, 0.95)
    assert t > free and (oos < t).mean() >= 0.95
    # a ceiling on escalations that the target needs more than: no threshold qualifies
    none, figures = review_on_traffic(reviewed, right, 1.0, unreviewed, None, 0.999, budget=0.05)
    assert none is None and figures == {}
