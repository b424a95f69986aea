"""One routing rule (app/nlp/rule.py): the router, the tuner's grid search and the replay of
held-out outcomes take the same decision on every held-out query of a real trained model.

The stages of app/nlp/pipeline run on the test content (the demo intents and KB when the
repository has them) up to the tuned thresholds; then every fold's held-out queries (in scope
and out of scope) go through ``Router.route`` with that fold's models, and through
``thresholds.replay`` with the same tier results. The tuner's own figures must be what the
replay of its cross-fitted outcomes gives at the point it chose.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.nlp.rule import answers, keeps_simple, simple_eligible, tier_of


def test_the_rule_gives_the_same_answer_on_numbers_and_arrays():
    p1 = np.array([0.9, 0.9, 0.5, 0.85 - 1e-10, 0.9])
    margin = np.array([0.5, 0.1, 0.4, 0.5, 0.5])
    tier = np.array([True, True, True, True, False])
    vector = simple_eligible(tier, p1, margin, 0.85, 0.3)
    scalar = [
        simple_eligible(bool(t), float(p), float(m), 0.85, 0.3)
        for t, p, m in zip(tier, p1, margin, strict=True)
    ]
    assert vector.tolist() == scalar == [True, False, False, True, False]
    conf = np.array([0.7, 0.6, 0.95])
    grid = np.array([[0.65], [0.96]])  # one row per threshold, as the tuner broadcasts
    kept = keeps_simple(np.array([True, True, False])[None, :], conf[None, :], grid)
    assert kept.tolist() == [[True, False, False], [False, False, False]]
    assert [bool(answers(c, 0.7)) for c in conf] == answers(conf, 0.7).tolist()
    assert tier_of({"a": "complex"}, "a") == "complex"
    assert tier_of({"a": "complex"}, None) == tier_of({}, "b") == "simple"


@pytest.mark.slow
def test_router_tuner_and_replay_agree_on_every_held_out_query(db_url, nlp_content):
    from fixtures_nlp import import_content

    from app.db import session_scope
    from app.nlp.pipeline.calibrate import calibrate, thin_intents
    from app.nlp.pipeline.data import data_from_db
    from app.nlp.pipeline.fit import fit_bert, fit_fasttext
    from app.nlp.pipeline.replay import evaluate_routes, is_right, replay_held_out
    from app.nlp.pipeline.splits import VAL_FRACTION, plan_held_out
    from app.nlp.pipeline.tune import tune
    from app.nlp.router import Router, RouterModels
    from app.nlp.thresholds import OutOfScopeOutcomes, ValidationOutcomes, replay
    from app.nlp.tiers import derive_tiers, effective_tiers

    intents_dir, kb_dir = nlp_content
    import_content(db_url, intents_dir, kb_dir)
    with session_scope(db_url) as session:
        data = data_from_db(session, intents_dir)
    plan = plan_held_out(data, validation=None, val_fraction=VAL_FRACTION, seed=0)
    fasttext = fit_fasttext(data, plan, seed=0, note=lambda _: None, keep_models=True)
    bert = fit_bert(
        data,
        plan,
        bert_path=None,
        quantize=True,
        seed=0,
        fine_tune_epochs=0,
        progress=False,
        step=lambda _: None,
    )
    held = replay_held_out(data, plan, fasttext, bert, progress=False)
    calibrated = calibrate(held, seed=0, thin=thin_intents(data.labels))
    tuned = tune(
        data,
        plan,
        fasttext,
        held,
        calibrated,
        budget=1.0,
        bert_cost=0.02,
        bert_budget=0.5,
        answered_target=0.985,
    )
    th = tuned.thresholds
    tiers = effective_tiers(
        derive_tiers(tuned.per_label, tuned.f1_min, sorted(set(data.labels))),
        data.declared_tiers,
    )

    # the tuner's figures are the replay of its (cross-fitted) outcomes at the chosen point
    off = replay(calibrated.outcomes, tiers, th, escalation=False).figures()
    on = replay(calibrated.outcomes, tiers, th, escalation=True).figures()
    figures = tuned.figures
    assert off["accuracy"] == figures["val_accuracy"]
    assert off["bert_share"] == figures["val_bert_share"]
    assert on["answered_accuracy"] == figures["val_review_answered_accuracy"]
    assert on["coverage"] == figures["val_review_coverage"]
    assert on["bert_share"] == figures["val_review_bert_share"]

    # the router takes the replay's decision on every held-out query, fold by fold
    cal = calibrated.calibration
    checked = routed_simple = escalated = 0
    for number, (ft, tier) in enumerate(zip(fasttext.models, bert.models, strict=True)):
        queries, truth, n_in_scope = plan.queries(number)
        router = Router(RouterModels(ft, _fold_bm25(data, plan, number), tier, cal, th, tiers))
        # the tier results Router.route computes: one query at a time (a batch's matrix
        # products round differently in the last float32 bits), single-query embeddings
        singles = [
            evaluate_routes(
                ft,
                router.m.bm25,
                tier,
                [query],
                [truth[i]],
                n_in_scope=int(i < n_in_scope),
                fasttext_weight=th.fasttext_weight,
                vectors=tier.encoder.encode_one(query)[None, :],
            )
            for i, query in enumerate(queries)
        ]
        simple_rows = [o.simple_rows[0] for o in singles]
        complex_rows = [o.complex_rows[0] for o in singles]
        as_validation = ValidationOutcomes(
            [o.ft_top[0] for o in singles],
            np.array([o.ft_p1[0] for o in singles]),
            np.array([o.ft_margin[0] for o in singles]),
            np.array([o.simple_ok[0] for o in singles]),
            cal.simple.predict_many(simple_rows),
            np.array([o.bert_ok[0] for o in singles]),
            cal.complex.predict_many(complex_rows),
            OutOfScopeOutcomes([], np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0)),
        )
        for escalation in (False, True):
            expected = replay(as_validation, tiers, th, escalation=escalation)
            for i, query in enumerate(queries):
                decision = router.route(query, escalation=escalation)
                where = f"fold {number}, query {query!r}, escalation {escalation}"
                assert (decision.route == "simple") == bool(expected.simple[i]), where
                answer = decision.article.intent if decision.article else None
                assert is_right(answer, truth[i]) == bool(expected.correct[i]), where
                assert decision.confidence == pytest.approx(float(expected.conf[i]), abs=1e-9)
                if escalation:
                    assert decision.escalate == (not expected.answered[i]), where
                    escalated += decision.escalate
                routed_simple += decision.route == "simple"
                checked += 1
    assert checked == 2 * (len(plan.texts) + len(plan.negatives))
    assert routed_simple and escalated  # both routes and both outcomes were exercised


def _fold_bm25(data, plan, number):
    from app.nlp.bm25 import BM25Retriever
    from app.nlp.pipeline.kb import bm25_docs

    return BM25Retriever(bm25_docs(data.articles, plan.held_texts(number)))
