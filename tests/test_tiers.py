"""Tier derivation (app/nlp/tiers.py): which intents the fast tier may answer alone."""

from __future__ import annotations

import pytest

from app.nlp.tiers import MIN_SUPPORT, derive_tiers, effective_tiers, label_scores


def test_label_scores_are_precision_recall_and_f1_per_intent():
    predicted = ["a", "a", "b", "b", "a"]
    actual = ["a", "b", "b", "b", "c"]
    scores = label_scores(predicted, actual)
    assert set(scores) == {"a", "b", "c"}  # intents that were asked, not only guessed
    assert scores["a"]["precision"] == pytest.approx(1 / 3) and scores["a"]["recall"] == 1.0
    assert scores["a"]["f1"] == pytest.approx(0.5)
    assert scores["b"]["precision"] == 1.0 and scores["b"]["recall"] == pytest.approx(2 / 3)
    assert scores["b"]["support"] == 3
    assert scores["c"] == {"precision": 0.0, "recall": 0.0, "support": 1, "f1": 0.0}


def test_intents_fasttext_confuses_become_complex_at_the_chosen_f1():
    per_label = {
        "clear": {"f1": 0.95, "support": 10},
        "confused": {"f1": 0.6, "support": 10},
    }
    assert derive_tiers(per_label, 0.7) == {"clear": "simple", "confused": "complex"}
    assert derive_tiers(per_label, 0.5) == {"clear": "simple", "confused": "simple"}
    assert derive_tiers(per_label, 0.0) == {"clear": "simple", "confused": "simple"}


def test_intents_with_too_few_held_out_examples_stay_simple():
    per_label = {"rare": {"f1": 0.0, "support": MIN_SUPPORT - 1}}
    # labels never held out are listed too, and cannot be judged either
    assert derive_tiers(per_label, 0.9, ["rare", "unseen"]) == {
        "rare": "simple",
        "unseen": "simple",
    }


def test_declared_tiers_win_over_derived_ones_and_unknown_values_are_ignored():
    derived = {"a": "simple", "b": "complex", "c": "simple"}
    declared = {"a": "complex", "b": "simple", "c": "whatever"}
    assert effective_tiers(derived, declared) == {"a": "complex", "b": "simple", "c": "simple"}
    assert derived == {"a": "simple", "b": "complex", "c": "simple"}  # not changed in place
