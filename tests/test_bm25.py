"""Fielded BM25 retriever: ranking, intent handling, persistence, and backend equivalence."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from app.nlp.bm25 import BACKENDS, BM25Doc, BM25Retriever
from app.nlp.normalize import tokenize

KB = [
    BM25Doc(
        slug="card-arrival",
        title="Where is my new card?",
        questions=[
            "My card has not come in the post yet",
            "How long does card delivery take?",
            "I ordered a card last week and still have nothing",
        ],
        body="Cards are posted within two working days and usually arrive within a week.",
        intent="card_arrival",
    ),
    BM25Doc(
        slug="change-pin",
        title="How do I change my PIN?",
        questions=["I want a new PIN", "Can I pick my own PIN number?", "forgot my pin"],
        body="You can change your PIN at any cash machine or in the app under Card settings.",
        intent="change_pin",
    ),
    BM25Doc(
        slug="top-up-failed",
        title="My top-up did not work",
        questions=["Why was my top up declined?", "top-up failed", "money not added to account"],
        body="A top-up can fail when your bank blocks the payment. Try another card.",
        intent="top_up_failed",
    ),
    BM25Doc(
        slug="exchange-rate",
        title="Which exchange rate do you use?",
        questions=["What rate do you convert currencies at?", "Is the exchange rate fair?"],
        body="We convert at the interbank exchange rate with no hidden markup on weekdays.",
        intent="exchange_rate",
    ),
    BM25Doc(
        slug="lost-card",
        title="I lost my card",
        questions=["My card was stolen", "I cannot find my card anywhere", "freeze lost card"],
        body="Freeze the card in the app at once, then order a replacement card.",
        intent="lost_or_stolen_card",
    ),
    BM25Doc(
        slug="virtual-card-arrival",
        title="When can I use my virtual card?",
        questions=["Is a virtual card delivered?", "virtual card not showing"],
        body="A virtual card is ready in the app right away; nothing is posted.",
        intent="card_arrival",
    ),
]

RIGHT_ANSWERS = [
    ("my card still hasn't arrived in the post", "card-arrival"),
    ("I forgot my PIN", "change-pin"),
    ("why did my top up fail", "top-up-failed"),
    ("what exchange rate do you give", "exchange-rate"),
    ("someone stole my card", "lost-card"),
    ("virtual card is not showing in the app", "virtual-card-arrival"),
]


@pytest.fixture(scope="module", params=BACKENDS)
def retriever(request) -> BM25Retriever:
    return BM25Retriever(KB, backend=request.param)


def slugs(result) -> list[str]:
    return [c.slug for c in result.candidates]


@pytest.mark.parametrize(("query", "expected"), RIGHT_ANSWERS)
def test_right_article_first(retriever: BM25Retriever, query: str, expected: str) -> None:
    result = retriever.run(query)
    assert result.tier == "bm25"
    assert slugs(result)[0] == expected
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert 0 < result.confidence <= 1
    assert result.model_version == retriever.version
    assert result.ms >= 0


def test_k_limits_candidates(retriever: BM25Retriever) -> None:
    assert len(retriever.run("card", k=2).candidates) == 2
    # Only articles with a positive score: the exchange-rate article never mentions cards.
    assert set(slugs(retriever.run("card", k=10))) == {d.slug for d in KB} - {"exchange-rate"}
    assert retriever.run("card", k=0).candidates == []


@pytest.mark.parametrize("query", ["", "   \n\t ", "?!", "💳", "the of and"])
def test_empty_query_gives_nothing(retriever: BM25Retriever, query: str) -> None:
    result = retriever.run(query)
    assert result.candidates == [] and result.confidence == 0.0


def test_unknown_words_give_nothing(retriever: BM25Retriever) -> None:
    result = retriever.run("zyxwv quantum gazpacho")
    assert result.candidates == [] and result.confidence == 0.0


def test_intent_restricts_candidates(retriever: BM25Retriever) -> None:
    result = retriever.run("my card", intent="card_arrival")
    assert set(slugs(result)) == {"card-arrival", "virtual-card-arrival"}
    # Without the restriction the lost-card article competes.
    assert "lost-card" in slugs(retriever.run("my card"))


def test_restricted_answer_is_compared_with_the_whole_kb(retriever: BM25Retriever) -> None:
    """A wrong intent from FastText shows: the restricted answer is not the best article."""
    agreeing = retriever.run("someone stole my card", intent="lost_or_stolen_card")
    assert agreeing.signals == {"unrestricted_agrees": 1.0, "share_of_best": 1.0}
    wrong = retriever.run("someone stole my card", intent="card_arrival")
    assert slugs(wrong)[0] in {"card-arrival", "virtual-card-arrival"}
    assert wrong.signals["unrestricted_agrees"] == 0.0
    best = retriever.run("someone stole my card").candidates[0].score
    assert wrong.signals["share_of_best"] == pytest.approx(wrong.candidates[0].score / best)
    assert 0.0 < wrong.signals["share_of_best"] < 1.0
    assert retriever.run("someone stole my card").signals == {}  # no restriction, no signals


def test_unknown_intent_falls_back_to_all_articles(retriever: BM25Retriever) -> None:
    assert slugs(retriever.run("stolen card", intent="no_such_intent")) == slugs(
        retriever.run("stolen card")
    )


def test_intent_probabilities_boost(retriever: BM25Retriever) -> None:
    query = "card not arrived"  # "not" also matches the top-up article: a close call
    plain = {c.slug: c.score for c in retriever.run(query, k=10).candidates}
    assert max(plain, key=plain.get) != "card-arrival"
    boosted = retriever.run(query, k=10, intent_probs=[("card_arrival", 0.5), ("x", 0.5)])
    assert boosted.candidates[0].slug == "card-arrival"
    for candidate in boosted.candidates:  # score * (1 + intent_boost * P(intent))
        factor = 1.5 if candidate.intent == "card_arrival" else 1.0
        assert candidate.score == pytest.approx(plain[candidate.slug] * factor)
    # A probability of zero changes nothing.
    unchanged = retriever.run(query, k=10, intent_probs=[("card_arrival", 0.0)])
    assert {c.slug: c.score for c in unchanged.candidates} == plain


def test_confidence_tracks_match_quality(retriever: BM25Retriever) -> None:
    exact = retriever.run("How long does card delivery take?").confidence
    partial = retriever.run("how long does delivery of a parcel to spain take").confidence
    assert 1 >= exact > partial > 0
    # Words the knowledge base never uses lower the confidence.
    focused = retriever.run("card delivery").confidence
    diluted = retriever.run("card delivery weather forecast").confidence
    assert focused > diluted > 0
    # So does a close second article.
    clear = retriever.run("my card has not come").confidence
    close = retriever.run("card not arrived").confidence
    assert clear > close


def test_backends_agree_on_rankings_scores_and_confidence() -> None:
    sparse_index = BM25Retriever(KB, backend="sparse")
    rank_index = BM25Retriever(KB, backend="rank_bm25")
    assert sparse_index.version == rank_index.version
    queries = [q for q, _ in RIGHT_ANSWERS] + ["card", "card card card", "app", "pin card rate"]
    for query in queries:
        a, b = sparse_index.run(query, k=10), rank_index.run(query, k=10)
        assert slugs(a) == slugs(b), query
        np.testing.assert_allclose([c.score for c in a.candidates], [c.score for c in b.candidates])
        assert a.confidence == pytest.approx(b.confidence)


def test_okapi_idf_needs_terms_in_less_than_half_the_rows() -> None:
    """BM25Okapi semantics kept on purpose: with two title-only articles nothing can match."""
    docs = [BM25Doc("a", "Card delivery times"), BM25Doc("b", "Exchange rates")]
    for backend in BACKENDS:
        assert BM25Retriever(docs, backend=backend).run("card delivery").candidates == []


def test_single_field_scores_equal_rank_bm25_okapi() -> None:
    """The sparse backend reproduces BM25Okapi exactly, including its idf floor."""
    # "card" is in more than half of the titles: its raw idf is negative and gets floored.
    titles = ["lost card", "card delivery", "card pin", "exchange rate", "card card limits"]
    docs = [BM25Doc(slug=f"d{i}", title=t) for i, t in enumerate(titles)]
    okapi = BM25Okapi([tokenize(t) for t in titles])
    assert okapi.idf["card"] > 0 and okapi.idf["card"] < okapi.idf["pin"]
    index = BM25Retriever(docs, field_weights={"title": 1.0})
    for query in ["card", "card pin", "lost card card", "rate limits"]:
        expected = okapi.get_scores(tokenize(query))
        scored = {c.slug: c.score for c in index.run(query, k=len(docs)).candidates}
        got = np.array([scored.get(d.slug, 0.0) for d in docs])
        np.testing.assert_allclose(got, np.where(expected > 0, expected, 0.0), rtol=1e-12)


def test_questions_field_takes_best_question() -> None:
    docs = [
        BM25Doc(slug="a", title="", questions=["refund policy", "one", "two", "three", "four"]),
        BM25Doc(slug="b", title="", questions=["refund policy"]),
    ]
    index = BM25Retriever(docs, field_weights={"questions": 1.0})
    a, b = index.run("refund policy").candidates
    assert a.score == pytest.approx(b.score)  # extra questions do not dilute the best one


words = st.sampled_from("card pin top up rate fee lost stolen app bank transfer cash".split())
texts = st.lists(words, max_size=6).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(
    corpus=st.lists(st.tuples(texts, st.lists(texts, max_size=4), texts), min_size=1, max_size=8),
    query=texts,
)
def test_backends_agree_on_random_corpora(corpus, query) -> None:
    docs = [BM25Doc(f"s{i}", t, q, body, f"i{i % 3}") for i, (t, q, body) in enumerate(corpus)]
    sparse_index = BM25Retriever(docs, backend="sparse")
    rank_index = BM25Retriever(docs, backend="rank_bm25")
    a, b = sparse_index.run(query, k=8), rank_index.run(query, k=8)
    np.testing.assert_allclose(
        sorted(c.score for c in a.candidates), sorted(c.score for c in b.candidates), atol=1e-9
    )
    assert a.confidence == pytest.approx(b.confidence, abs=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_load_round_trip(tmp_path, backend: str) -> None:
    original = BM25Retriever(KB, backend=backend, k1=1.2, b=0.6, intent_boost=2.0)
    path = tmp_path / "index" / "bm25.npz"
    original.save(path)
    loaded = BM25Retriever.load(path)
    assert loaded.backend == backend
    assert loaded.version == original.version
    assert loaded.settings == original.settings
    for query, _ in RIGHT_ANSWERS:
        a = original.run(query, intent_probs=[("change_pin", 0.4)])
        b = loaded.run(query, intent_probs=[("change_pin", 0.4)])
        assert a.candidates == b.candidates and a.confidence == b.confidence
    assert (
        loaded.run("my card", intent="card_arrival").candidates
        == original.run("my card", intent="card_arrival").candidates
    )
    assert not list(path.parent.glob("*.partial"))


def test_load_rejects_other_formats(tmp_path) -> None:
    path = tmp_path / "bm25.npz"
    BM25Retriever(KB).save(path)
    with np.load(path) as archive:
        arrays = {name: archive[name] for name in archive.files}
    meta = json.loads(arrays["meta"].tobytes())
    meta["tokenizer"] = "0"
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="rebuild"):
        BM25Retriever.load(path)


def test_version_is_a_hash_of_content_and_settings() -> None:
    base = BM25Retriever(KB).version
    assert BM25Retriever(list(KB)).version == base
    edited = [*KB[:-1], BM25Doc(**{**vars(KB[-1]), "body": "Different text."})]
    assert BM25Retriever(edited).version != base
    assert BM25Retriever(KB, k1=1.2).version != base
    assert BM25Retriever(KB, backend="rank_bm25").version == base  # same scores


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_knowledge_base_is_allowed(tmp_path, backend: str) -> None:
    index = BM25Retriever([], backend=backend)
    assert len(index) == 0
    result = index.run("where is my card")
    assert result.candidates == [] and result.confidence == 0.0
    index.save(tmp_path / "empty.npz")
    assert BM25Retriever.load(tmp_path / "empty.npz").run("card").candidates == []


def test_articles_without_questions_or_body() -> None:
    docs = [
        BM25Doc("a", "Card delivery times"),
        BM25Doc("b", "Exchange rates"),
        BM25Doc("c", "Fees"),
    ]
    for backend in BACKENDS:
        result = BM25Retriever(docs, backend=backend).run("card delivery")
        assert slugs(result) == ["a"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k1": -0.1}, "k1"),
        ({"k1": float("nan")}, "k1"),
        ({"b": 1.5}, "b must"),
        ({"b": -0.1}, "b must"),
        ({"backend": "elastic"}, "unknown BM25 backend"),
        ({"field_weights": {"tags": 1.0}}, "unknown BM25 fields"),
        ({"field_weights": {"title": -1.0}}, "field weights"),
        ({"field_weights": {"title": 0.0, "body": 0.0}}, "at least one"),
        ({"intent_boost": -1.0}, "intent_boost"),
    ],
)
def test_bad_parameters_raise(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BM25Retriever(KB, **kwargs)


def test_bad_articles_raise() -> None:
    with pytest.raises(ValueError, match="duplicate article slug 'x'"):
        BM25Retriever([BM25Doc("x", "One"), BM25Doc("x", "Two")])
    with pytest.raises(ValueError, match="without a slug"):
        BM25Retriever([BM25Doc("", "Nameless")])


def test_load_errors_are_clear(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        BM25Retriever.load(tmp_path / "missing.npz")
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not an index at all")
    with pytest.raises(ValueError, match="not a usable BM25 index"):
        BM25Retriever.load(garbage)
    np.savez(tmp_path / "other.npz", meta=np.zeros(3, dtype=np.uint8))
    with pytest.raises(ValueError, match="not a usable BM25 index"):
        BM25Retriever.load(tmp_path / "other.npz")


@settings(max_examples=30, deadline=None)
@given(
    corpus=st.lists(
        st.tuples(texts, st.lists(texts, max_size=12), st.lists(texts, max_size=12)),
        min_size=1,
        max_size=10,
    ),
    query=texts,
)
def test_every_article_scores_its_best_row_however_many_rows_it_has(corpus, query) -> None:
    """Articles of up to 12 questions and 12 body passages: both backends give every article
    the same score, and the best row per article from a score for every row equals a plain
    per-article maximum (0 for an article whose rows all score below 0)."""
    filler = " ".join(["padding"] * 40)  # a paragraph longer than half a passage stays alone
    docs = [
        BM25Doc(f"s{i}", t, q, "\n\n".join(f"{p} {filler}." for p in ps))
        for i, (t, q, ps) in enumerate(corpus)
    ]
    sparse_index = BM25Retriever(docs, backend="sparse")
    rank_index = BM25Retriever(docs, backend="rank_bm25")
    tokens = sparse_index.settings.tokens(query)
    np.testing.assert_allclose(
        sparse_index._raw_scores(tokens), rank_index._raw_scores(tokens), atol=1e-9
    )
    rng = np.random.default_rng(len(query))
    for field in sparse_index.fields.values():
        if field.per_article:
            continue
        row_scores = rng.normal(size=field.n_rows)
        expected = np.zeros(field.n_articles)
        for row, article in enumerate(field.row_article):
            expected[article] = max(expected[article], row_scores[row])
        np.testing.assert_array_equal(field._max_per_article(row_scores), expected)
