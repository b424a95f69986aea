"""app/vocab.py: the shared words: the category names that mean "out of scope", and counts."""

from __future__ import annotations

import pytest

from app.nlp.pipeline.data import split_out_of_scope
from app.vocab import counted, is_out_of_scope_category


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


@pytest.mark.parametrize(
    ("count", "written"),
    [(0, "0 articles"), (1, "1 article"), (2, "2 articles"), (100000, "100,000 articles")],
)
def test_counts_are_written_as_people_read_them(count, written):
    assert counted(count, "article") == written
