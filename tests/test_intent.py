"""The FastText intent tier on a small real training set (a few seconds)."""

from __future__ import annotations

from fixtures_nlp import TINY_INTENTS

from app.nlp.intent import FastTextIntent, fasttext_input, stratified_split

TEXTS = [t for _, (_, title, _, examples) in TINY_INTENTS.items() for t in [title, *examples]]
LABELS = [
    name for name, (_, _, _, examples) in TINY_INTENTS.items() for _ in range(len(examples) + 1)
]


def _model() -> FastTextIntent:
    return FastTextIntent.train(TEXTS, LABELS, epoch=60, lr=0.5, dim=20, bucket=20000)


def test_probabilities_are_a_ranked_distribution():
    model = _model()
    result = model.run("when will my new card come", k=4)
    assert result.tier == "fasttext"
    assert result.intents[0][0] == "card_arrival"
    probs = [p for _, p in result.intents]
    assert probs == sorted(probs, reverse=True)
    assert abs(sum(probs) - 1.0) < 0.02  # softmax: the four intents share the mass
    assert result.confidence == probs[0]
    assert result.ms > 0
    assert result.model_version.startswith("ft-")


def test_typos_still_find_the_intent():
    model = _model()
    assert model.predict("chnage my pni", 1)[0][0] == "change_pin"
    assert model.predict("exchnge rat", 1)[0][0] == "exchange_rate"


def test_input_is_normalised():
    assert fasttext_input("  My CARD?!\n") == "my card ? !"
    model = _model()
    assert model.predict("WHERE IS MY CARD", 1) == model.predict("where is my card", 1)


def test_save_and_load_give_the_same_predictions(tmp_path):
    model = _model()
    model.save(tmp_path / "ft")
    loaded = FastTextIntent.load(tmp_path / "ft")
    query = "i want to dispute a charge"
    assert loaded.predict(query, 3) == model.predict(query, 3)
    assert loaded.version == model.version and loaded.labels == model.labels


def test_training_is_reproducible():
    a, b = _model(), _model()
    assert a.predict("rate for dollars", 4) == b.predict("rate for dollars", 4)


def test_tuned_training_records_the_grid():
    model = FastTextIntent.train_tuned(
        TEXTS,
        LABELS,
        grid=({"epoch": 5, "lr": 0.1, "dim": 10}, {"epoch": 60, "lr": 0.5, "dim": 20}),
    )
    assert len(model.metrics["grid"]) == 2
    assert model.metrics["chosen"] == {"epoch": 60, "lr": 0.5, "dim": 20}


def test_stratified_split_keeps_every_label_in_fit():
    labels = ["a"] * 10 + ["b"] * 3 + ["c"]
    fit, held = stratified_split(labels, 0.3)
    assert sorted(fit + held) == list(range(len(labels)))
    assert {labels[i] for i in fit} == {"a", "b", "c"}
    assert sum(labels[i] == "a" for i in held) == 3
    assert all(labels[i] != "c" for i in held)
