"""Text normalisation (FastText input, cache keys) and BM25 tokenisation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.nlp.normalize import STOPWORDS, normalize, stem, tokenize, tokenize_many


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Where IS my   Card?\n", "where is my card?"),
        ("tab\tand\r\nnewlines", "tab and newlines"),
        ("null\x00byte and bell\x07", "nullbyte and bell"),
        ("zero\u200bwidth and bidi\u202emark", "zerowidth and bidimark"),
        ("ＦＵＬＬＷＩＤＴＨ １２３", "fullwidth 123"),  # NFKC
        ("ﬁnance", "finance"),  # ligature, NFKC
        ("Straße", "strasse"),  # full case folding
        ("\ufeffBOM first", "bom first"),
        ("\u00a0non\u2003breaking\u3000spaces ", "non breaking spaces"),
        ("", ""),
        (" \t\n ", ""),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


def test_normalize_keeps_every_script_and_emoji() -> None:
    text = "Ça va? Привет! 你好 مرحبا नमस्ते 💳"
    assert normalize(text) == "ça va? привет! 你好 مرحبا नमस्ते 💳"
    # Emoji sequences joined by ZWJ and flag tag characters survive intact.
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    england = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    assert normalize(f"{family} {england}") == f"{family} {england}"
    # Persian zero-width non-joiner is part of the word.
    assert normalize("می\u200cخواهم") == "می\u200cخواهم"


def test_normalize_is_idempotent() -> None:
    for text in ["ＡＢＣ  ﬁ\x00\u200b Straße 💳 ", "Where is MY card?", "İstanbul"]:
        once = normalize(text)
        assert normalize(once) == once


def test_normalize_drops_lone_surrogates() -> None:
    # Such strings come from badly decoded JSON; the cache key must still encode as UTF-8.
    assert normalize("card\ud800 please").encode() == b"card please"


def test_tokenize_words_without_punctuation_or_emoji() -> None:
    assert tokenize("Card payment DECLINED!!! 😡", drop_stopwords=False, stem_words=False) == [
        "card",
        "payment",
        "declined",
    ]


def test_tokenize_joins_apostrophes_and_splits_hyphens() -> None:
    words = tokenize("I can't top-up, it’s broken", drop_stopwords=False, stem_words=False)
    assert words == ["i", "cant", "top", "up", "its", "broken"]


def test_tokenize_non_latin_scripts() -> None:
    assert tokenize("карта не пришла") == ["карта", "не", "пришла"]
    # Combining vowel signs stay inside Devanagari words.
    assert tokenize("मेरा कार्ड") == ["मेरा", "कार्ड"]
    # Ideographs and kana have no spaces: one term per character.
    assert tokenize("我的卡 card") == ["我", "的", "卡", "card"]


def test_tokenize_stop_words_are_optional() -> None:
    query = "where is the card"
    assert tokenize(query, drop_stopwords=False, stem_words=False) == ["where", "is", "the", "card"]
    assert tokenize(query, drop_stopwords=True, stem_words=False) == ["where", "card"]
    # Negations and question words carry meaning and are never dropped.
    assert {"not", "no", "why", "how", "where", "when"}.isdisjoint(STOPWORDS)


@pytest.mark.parametrize(
    ("forms", "shared"),
    [
        (["charge", "charges", "charged", "charging"], "charg"),
        (["transfer", "transfers", "transferred", "transferring"], "transfer"),
        (["stop", "stopped", "stopping"], "stop"),
        (["policy", "policies"], "policy"),
        (["declined", "decline", "declines"], "declin"),
    ],
)
def test_stem_conflates_inflections(forms: list[str], shared: str) -> None:
    assert {stem(f) for f in forms} == {shared}


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("bus", "bus"),
        ("atm", "atm"),
        ("fees", "fees"),
        ("status", "status"),
        ("address", "address"),
        ("analysis", "analysis"),
        ("business", "business"),
    ],
)
def test_stem_leaves_short_and_non_plural_words(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_stem_ignores_other_scripts_and_digits() -> None:
    for word in ["карточки", "cards2", "schöne"]:
        assert stem(word) == word


def test_tokenize_empty_and_symbol_only() -> None:
    assert tokenize("") == []
    assert tokenize("   \n") == []
    assert tokenize("?!… 💳💳") == []


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=60))
def test_ascii_shortcut_matches_unicode_path(text: str) -> None:
    # A trailing no-break space forces the general path without adding a term.
    assert tokenize(text) == tokenize(text + "\u00a0")
    assert tokenize(text, drop_stopwords=False, stem_words=False) == tokenize(
        text + "\u00a0", drop_stopwords=False, stem_words=False
    )


@settings(max_examples=500)
@given(st.text(max_size=60))
def test_tokenize_is_stable_under_normalize(text: str) -> None:
    assert tokenize(normalize(text)) == tokenize(text)
    assert normalize(normalize(text)) == normalize(text)


@settings(max_examples=200)
@given(st.lists(st.text(max_size=30) | st.text(alphabet="ab \x1e\n'-.C", max_size=12), max_size=8))
def test_tokenize_many_equals_tokenize(texts: list[str]) -> None:
    for options in ({}, {"stem_words": False, "drop_stopwords": False}):
        assert tokenize_many(texts, **options) == [tokenize(t, **options) for t in texts]
