"""app/vocab.py: the shared words, here the category names that mean "out of scope"."""

from __future__ import annotations

import pytest

from app.nlp.pipeline.data import split_out_of_scope
from app.vocab import is_out_of_scope_category


@pytest.mark.parametrize(
    "name", ["oos", "OOS", "out_of_scope", "Out-of-scope", "out of scope", "ood", "out_of_domain"]
)
def test_out_of_scope_spellings(name):
    assert is_out_of_scope_category(name)


@pytest.mark.parametrize("name", ["balance", "scope", "oos_card", "out_of_stock", "food"])
def test_intents_that_are_not_out_of_scope(name):
    assert not is_out_of_scope_category(name)


def test_split_out_of_scope_keeps_order_and_pairs():
    texts = ["a", "b", "c", "d"]
    labels = ["x", "oos", "y", "OOS"]
    assert split_out_of_scope(texts, labels) == (["a", "c"], ["x", "y"], ["b", "d"])
