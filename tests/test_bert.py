"""The BERT tier: offline encoder, embeddings, intent head, KB matching, persistence."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest
import torch

from app.nlp.bert import (
    PASSAGE_WEIGHT,
    BertTier,
    Encoder,
    KbEntry,
    default_bert_path,
    group_max,
    kb_similarity,
)
from app.nlp.topk import top_indices

TRAIN = {
    "card_arrival": [
        "my new card still has not arrived",
        "when will the card you posted reach me",
        "the card I ordered never showed up",
        "how long does delivery of a card take",
        "still waiting for my bank card in the mail",
        "card has not been delivered yet",
        "where is the card you sent me",
        "I ordered a card two weeks ago and have nothing",
    ],
    "lost_or_stolen_card": [
        "someone stole my card",
        "I lost my card on the train",
        "my wallet with the card was stolen",
        "I cannot find my card anywhere",
        "please block my card it is missing",
        "my card got pickpocketed",
        "I misplaced my debit card",
        "a thief took my bank card",
    ],
    "exchange_rate": [
        "what exchange rate do you use",
        "how much is a dollar in euros with you",
        "which currency conversion rate applies",
        "is your exchange rate fair",
        "what rate will I get converting pounds",
        "do you use the interbank rate for currencies",
        "how are foreign exchange rates calculated",
        "tell me today's rate for yen",
    ],
    "change_pin": [
        "how do I change my PIN",
        "I want a new PIN number",
        "can I reset the PIN on my card",
        "where do I update my card PIN",
        "change the pin code please",
        "I would like to pick a different PIN",
        "how to set a new PIN",
        "my PIN needs changing",
    ],
}
HELD_OUT = {
    "card_arrival": "the card in the post hasn't come yet",
    "lost_or_stolen_card": "my card was stolen yesterday",
    "exchange_rate": "what conversion rate do you apply to euros",
    "change_pin": "I need to change my card's PIN",
}


def _entries() -> list[KbEntry]:
    return [
        KbEntry(
            slug=intent.replace("_", "-"),
            title=intent.replace("_", " "),
            intent=intent,
            texts=examples[:3],
        )
        for intent, examples in TRAIN.items()
    ]


@pytest.fixture(scope="module")
def tier() -> BertTier:
    texts = [t for examples in TRAIN.values() for t in examples]
    labels = [intent for intent, examples in TRAIN.items() for _ in examples]
    return BertTier.train(texts, labels, _entries(), quantize=False, progress=False)


def test_default_bert_path_is_a_local_checkpoint():
    folder = default_bert_path()
    assert (folder / "config.json").is_file()
    assert any(folder.glob("*.safetensors"))


@pytest.mark.slow
def test_embeddings_are_normalised_and_semantic(tier: BertTier):
    vectors = tier.embed(
        ["I lost my credit card", "my bank card has gone missing", "the weather is sunny"]
    )
    assert vectors.shape == (3, tier.encoder.dim)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similar = float(vectors[0] @ vectors[1])
    unrelated = float(vectors[0] @ vectors[2])
    assert similar > unrelated + 0.2


@pytest.mark.slow
def test_predicts_held_out_paraphrases(tier: BertTier):
    for intent, query in HELD_OUT.items():
        result = tier.run(query, k=3)
        assert result.tier == "bert"
        assert result.intents[0][0] == intent, (query, result.intents)
        assert result.candidates[0].intent == intent, (query, result.candidates)
        assert result.confidence == result.candidates[0].score
        assert result.model_version == tier.version
        probs = [p for _, p in result.intents]
        assert probs == sorted(probs, reverse=True)
    validation = tier.metadata["validation"]  # one example per intent was held out
    assert validation["n"] == len(TRAIN)
    assert 0.0 <= validation["intent_accuracy"] <= 1.0


@pytest.mark.slow
def test_run_batch_matches_run(tier: BertTier):
    queries = list(HELD_OUT.values())
    batch = tier.run_batch(queries, k=2)
    for query, result in zip(queries, batch, strict=True):
        single = tier.run(query, k=2)
        assert [c.slug for c in result.candidates] == [c.slug for c in single.candidates]
        assert result.confidence == pytest.approx(single.confidence, abs=1e-4)


@pytest.mark.slow
def test_save_load_round_trip(tier: BertTier, tmp_path):
    tier.save(tmp_path / "bert")
    loaded = BertTier.load(tmp_path / "bert", quantize=False)
    assert loaded.version == tier.version
    assert loaded.labels == tier.labels
    loaded.set_kb(_entries())
    for query in HELD_OUT.values():
        a, b = tier.run(query), loaded.run(query)
        assert [c.slug for c in a.candidates] == [c.slug for c in b.candidates]
        assert a.confidence == pytest.approx(b.confidence, abs=1e-5)
        assert a.intents[0][0] == b.intents[0][0]


@pytest.mark.slow
def test_saved_kb_vectors_spare_the_encoder_at_load_only_for_the_same_encoder(
    tier: BertTier, tmp_path
):
    tier.save(tmp_path / "bert")
    same = BertTier.load(tmp_path / "bert", quantize=tier.encoder.quantized)
    assert set(same._text_cache) == set(tier._text_cache)

    def no_encoding(texts, **kwargs):
        raise AssertionError(f"encoded {len(texts)} texts again")

    same.encoder.encode = no_encoding
    same.set_kb(_entries())  # every KB text comes from the saved vectors
    query = HELD_OUT["change_pin"]  # queries are encoded one at a time (encode_one)
    assert same.run(query).candidates[0].slug == tier.run(query).candidates[0].slug
    other = BertTier.load(tmp_path / "bert", quantize=not tier.encoder.quantized)
    assert other._text_cache == {}  # vectors of another encoder are never reused


@pytest.mark.slow
def test_articles_of_one_title_and_one_passage_score_as_their_two_texts(tier: BertTier):
    """Such articles are indexed as one blended vector (set_kb); their scores are still the
    kb_similarity of the title's and the passage's own cosines, beside articles of other
    shapes, and a KB made only of them (one product) scores as well."""
    mixed = [
        KbEntry("plain", "How do I reset my PIN?", "plain", [], ["Open Cards, then Reset PIN."]),
        KbEntry("alts", "Card delivery", "alts", ["when does my card come"], ["In 5 days."]),
        KbEntry("long", "Fees", "long", [], ["No monthly fee.", "Cash costs 2% abroad."]),
        KbEntry("bare", "Close my account", "bare", []),
        KbEntry("plain-2", "Is there an app?", "plain-2", [], ["Yes, for iOS and Android."]),
    ]
    queries = ["i forgot my pin", "how long is card shipping", "is there a fee abroad"]
    vectors = tier.embed(queries)
    saved = tier._kb, tier.entries, tier._text_cache
    try:
        for entries in (mixed, [mixed[0], mixed[4]]):
            tier.set_kb(entries)
            probs, scores, _ = tier.score(vectors)
            cached = tier.kb_vectors
            best = np.full((len(queries), len(entries)), -1.0)
            for kind in ("questions", "passages"):
                sims = np.full((len(queries), len(entries)), -1.0)
                for i, entry in enumerate(entries):
                    texts = (
                        entry.indexed_texts(passages=False)
                        if kind == "questions"
                        else entry.passages
                    )
                    for text in texts:
                        sims[:, i] = np.maximum(sims[:, i], vectors @ cached[text])
                best = sims if kind == "questions" else kb_similarity(best, sims)
            known = np.array([tier.label_index.get(e.intent, -1) for e in entries])
            head = np.where(known >= 0, probs[:, np.maximum(known, 0)], 0.0)
            expected = tier.head_weight * head + (1 - tier.head_weight) * best
            assert np.allclose(scores, expected, atol=1e-5), entries
    finally:
        tier._kb, tier.entries, tier._text_cache = saved


@pytest.mark.slow
def test_article_without_known_intent_is_reachable_and_set_kb_picks_it_up(tier: BertTier):
    query = "can I open a savings account for my child"
    before = tier.run(query)
    assert all(c.slug != "junior-savings" for c in before.candidates)
    new_article = KbEntry(
        slug="junior-savings",
        title="Savings accounts for children",
        intent="junior-savings",  # an article without a category is its own intent
        texts=["Can my kid have a savings account?", "open an account for my son or daughter"],
    )
    cached = len(tier._text_cache)
    tier.set_kb([*_entries(), new_article])
    try:
        assert len(tier._text_cache) == cached + 3  # only the new texts were encoded
        after = tier.run(query)
        assert after.candidates[0].slug == "junior-savings"
        assert "junior-savings" not in dict(after.intents)  # the head never saw it
    finally:
        tier.set_kb(_entries())


def test_top_indices_is_a_stable_argsort_of_the_best_k():
    rng = np.random.default_rng(0)
    for n in (0, 1, 7, 300):
        for _ in range(50):
            scores = rng.integers(0, 4, n).astype(np.float32)  # many ties
            if n and rng.random() < 0.2:
                scores[rng.integers(n)] = np.nan
            for k in (0, 1, 5, 40):
                expected = np.argsort(-scores, kind="stable")[:k]
                assert top_indices(scores, k).tolist() == expected.tolist(), (scores, k)
    assert top_indices(np.array([0.2, 0.9, 0.9, 0.1]), 2).tolist() == [1, 2]


def test_kb_similarity_of_one_text_per_article_equals_the_grouped_max():
    rng = np.random.default_rng(1)
    sims = rng.uniform(-0.9, 1.0, (4, 6)).astype(np.float32)
    one_each = group_max(sims, np.arange(6), 6)
    assert one_each is sims  # one column per article: nothing to reduce
    # the same columns grouped the general way: article 6 gets a second column, 7 none
    grouped = group_max(np.c_[sims, sims[:, :1] + 0.5], np.r_[np.arange(6), 6], 8)
    assert np.array_equal(grouped[:, :6], sims)
    assert np.allclose(grouped[:, 6], sims[:, 0] + 0.5) and (grouped[:, 7] == -1).all()
    titles = np.array([[0.8, -1.0, 0.5]], dtype=np.float32)  # article 1 has no title
    passages = np.array([[0.2, 0.6, -1.0]], dtype=np.float32)  # article 2 has no passage
    both = (0.8 + PASSAGE_WEIGHT * 0.2) / (1 + PASSAGE_WEIGHT)
    assert np.allclose(kb_similarity(titles, passages), [[both, 0.6, 0.5]])


def test_train_rejects_mismatched_or_empty_input():
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        BertTier.train(["a", "b"], ["x"], [], progress=False)
    with pytest.raises(ValueError, match="no training examples"):
        BertTier.train([], [], [], progress=False)


def test_load_and_bert_path_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no BERT tier saved"):
        BertTier.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a local checkpoint"):
        BertTier.train(["a"], ["x"], [], bert_path=tmp_path, progress=False)


@pytest.mark.slow
def test_int8_load_keeps_predictions(tier: BertTier, tmp_path):
    tier.save(tmp_path / "bert")
    int8 = BertTier.load(tmp_path / "bert", quantize=True)
    assert int8.encoder.quantized and not tier.encoder.quantized
    int8.set_kb(_entries())
    for intent, query in HELD_OUT.items():
        assert int8.run(query).candidates[0].intent == intent


@pytest.mark.slow
def test_concurrent_queries_give_the_same_answers(tier: BertTier):
    from concurrent.futures import ThreadPoolExecutor

    queries = list(HELD_OUT.values()) * 3
    expected = [tier.run(q).candidates[0].slug for q in queries]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda q: tier.run(q).candidates[0].slug, queries))
    assert got == expected


@pytest.mark.slow
@pytest.mark.parametrize("quantize", [False, True], ids=["fp32", "int8"])
def test_traced_single_query_path_equals_the_eager_encoder(quantize, monkeypatch):
    from app.nlp.bert import MAX_TOKENS

    traced = Encoder(default_bert_path(), quantize=quantize)
    assert traced.traced
    eager = traced.eager_copy()
    assert not eager.traced
    # lengths from one word to past the truncation limit; emoji and another script too
    texts = [
        "hi",
        "how do I activate my new card",
        "ça coûte combien pour un virement à l'étranger 😀",
        "why was I charged twice for one cash withdrawal " * 12,
    ]
    lengths = {
        len(traced.tokenizer(t, truncation=True, max_length=MAX_TOKENS).input_ids) for t in texts
    }
    assert min(lengths) <= 3 and max(lengths) == MAX_TOKENS
    for text in texts:
        np.testing.assert_allclose(traced.encode_one(text), eager.encode_one(text), atol=1e-5)
    # TIERDESK_BERT_TRACE=0 turns tracing off
    monkeypatch.setenv("TIERDESK_BERT_TRACE", "0")
    assert not Encoder(default_bert_path(), quantize=False).traced


@pytest.mark.slow
@pytest.mark.parametrize("quantize", [False, True], ids=["fp32", "int8"])
def test_held_out_queries_are_embedded_as_live_ones(quantize):
    """The held-out replay embeds its queries with ``encode_queries``: each must get the vector
    a live query gets (``encode_one``), whatever it is batched with. An int8 model quantizes
    activations with one scale per batch, so a plain batch would give the calibrator other
    features than serving does."""

    encoder = Encoder(default_bert_path(), quantize=quantize)
    texts = [
        "hi",
        "card not working",
        "I was charged twice for the same cash withdrawal at an ATM abroad last weekend",
        "how long does a transfer from another bank take to arrive in my account " * 3,
    ]
    live = np.stack([encoder.encode_one(t) for t in texts])
    np.testing.assert_allclose(encoder.encode_queries(texts), live, atol=1e-5)
    np.testing.assert_allclose(encoder.encode_queries(texts[::-1])[::-1], live, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("quantize", [False, True], ids=["fp32", "int8"])
def test_batches_embedded_side_by_side_give_the_vectors_of_one_at_a_time(quantize):
    """With two torch threads ``encode`` embeds two batches at once, one thread each; the
    batches are those of one at a time, so each text gets the same vector, and the process's
    thread count is what it was."""
    encoder = Encoder(default_bert_path(), quantize=quantize)
    words = "card transfer refund exchange rate pin top up cash machine fee account".split()
    texts = [" ".join(words[: 1 + i % len(words)]) + f" {i}" for i in range(37)]
    pool, ran_on = encoder.pool, []

    def recording_pool(batch):  # which thread, at how many torch threads
        ran_on.append((threading.current_thread().name, torch.get_num_threads()))
        return pool(batch)

    encoder.pool = recording_pool
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one_at_a_time = encoder.encode(texts, batch_size=8)  # 5 batches, one by one
        assert {name for name, _ in ran_on} == {threading.current_thread().name}
        ran_on.clear()
        torch.set_num_threads(2)
        side_by_side = encoder.encode(texts, batch_size=8)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert len(ran_on) == 5 and all(name.startswith("encode") for name, _ in ran_on)
    assert {n for _, n in ran_on} == {1}  # each batch on one torch thread
    np.testing.assert_allclose(side_by_side, one_at_a_time, atol=1e-6)
    assert np.allclose(np.linalg.norm(side_by_side, axis=1), 1.0, atol=1e-5)
    assert len({row.tobytes() for row in side_by_side}) == len(texts)  # each text its own row


def _encode_in_child(encoder: Encoder, texts: list[str], conn) -> None:
    torch.set_num_threads(2)
    conn.send(encoder.encode(texts, batch_size=4))


@pytest.mark.slow
def test_a_forked_child_embeds_side_by_side_with_threads_of_its_own():
    """The encode threads are kept for the process; a child forked after they started has none
    of them (a server preloading its models, then forking workers) and must make its own."""
    encoder = Encoder(default_bert_path(), quantize=True)
    texts = [f"how do I freeze card number {i}" for i in range(12)]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        parent = encoder.encode(texts, batch_size=4)  # starts this process's encode threads
    finally:
        torch.set_num_threads(threads)
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_encode_in_child, args=(encoder, texts, send))
    child.start()
    try:
        assert receive.poll(120), "the forked child did not finish embedding"
        np.testing.assert_allclose(receive.recv(), parent, atol=1e-6)
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def test_tracing_the_encoder_logs_nothing(capfd):
    """The tracer reads every attribute of the model, and transformers warns about the training
    loss when ``loss_function`` is read: a serving process must not print that on start-up."""
    import logging

    from transformers.utils import logging as hf_logging

    logging.Logger.warning_once.cache_clear()  # transformers warns once per process
    verbosity = hf_logging.get_verbosity()
    capfd.readouterr()
    assert Encoder(default_bert_path()).traced
    err = capfd.readouterr().err
    assert "loss_type" not in err and "ForCausalLMLoss" not in err
    assert hf_logging.get_verbosity() == verbosity  # restored for everyone else


@pytest.mark.slow
def test_prior_blend_moves_the_intent_distribution_towards_the_prior(tier: BertTier):
    query = "what conversion rate do you apply to euros"
    plain = tier.run(query, k=4)
    assert plain.intents[0][0] == "exchange_rate"
    # another model sure of a different intent, listing only its top two
    prior = [("change_pin", 0.97), ("exchange_rate", 0.01)]
    row = tier.prior_vector(prior)
    assert row.sum() == pytest.approx(1.0, abs=1e-3)  # the leftover mass spread over the rest
    assert row[tier.label_index["card_arrival"]] == pytest.approx(0.01, abs=1e-6)
    unchanged = tier.run(query, k=4, prior=prior, prior_weight=0.0)
    assert unchanged.intents == plain.intents
    light = dict(tier.run(query, k=4, prior=prior, prior_weight=0.1).intents)
    heavy = tier.run(query, k=4, prior=prior, prior_weight=0.9)
    assert light["change_pin"] > dict(plain.intents)["change_pin"]
    assert heavy.intents[0][0] == "change_pin"
    assert heavy.candidates[0].intent == "change_pin"  # article scores follow the blend
    assert sum(p for _, p in heavy.intents) == pytest.approx(1.0, abs=1e-4)


def test_fine_tune_only_with_enough_examples():
    from app.nlp.finetune import MIN_EXAMPLES, MIN_MEDIAN_PER_INTENT, should_fine_tune

    many = [f"intent{i % 10}" for i in range(max(MIN_EXAMPLES, 10 * MIN_MEDIAN_PER_INTENT))]
    assert should_fine_tune(many, epochs=3)
    assert not should_fine_tune(many, epochs=0)
    assert not should_fine_tune(many[: MIN_EXAMPLES - 1], epochs=3)
    # an FAQ where every article is its own intent with a few questions: frozen encoder
    faq = [f"article{i // 3}" for i in range(3 * MIN_EXAMPLES)]
    assert not should_fine_tune(faq, epochs=3)


def test_fine_tune_batches_hold_every_text_once_with_texts_of_about_one_length():
    from app.nlp.finetune import BUCKET_BATCHES, length_bucketed_batches

    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 200, size=3 * 32 * BUCKET_BATCHES + 7)
    batches = length_bucketed_batches(lengths, 32, np.random.default_rng(1))
    seen = np.concatenate(batches)
    assert sorted(seen) == list(range(len(lengths)))  # every text once
    assert len(batches) == -(-len(lengths) // 32)  # as many steps as plain batches of 32
    assert sum(len(b) < 32 for b in batches) == 1  # only the last pool's last batch is short
    # a batch pads to its longest text: bucketing wastes far less than random batches
    padded = np.mean([lengths[b].max() - lengths[b].mean() for b in batches])
    order = np.random.default_rng(1).permutation(len(lengths))
    random_padded = np.mean(
        [lengths[order[i : i + 32]].max() - lengths[order[i : i + 32]].mean()
         for i in range(0, len(order), 32)]
    )  # fmt: skip
    assert padded < random_padded / 5
    # the pools are drawn at random: another epoch batches the texts differently
    again = length_bucketed_batches(lengths, 32, np.random.default_rng(2))
    assert {tuple(sorted(b)) for b in again} != {tuple(sorted(b)) for b in batches}
    # and the batch order is not sorted by length (long and short batches are interleaved)
    means = [lengths[b].mean() for b in batches]
    assert means != sorted(means) and means != sorted(means, reverse=True)


@pytest.mark.slow
def test_fine_tuned_encoder_learns_the_intents_and_survives_save_and_load(tmp_path, monkeypatch):
    """Fine-tuning lowers its training loss and moves the encoder; the saved tier reloads the
    fine-tuned weights, not the base checkpoint."""
    import app.nlp.finetune as finetune
    from app.nlp.bert import ENCODER_FILE

    monkeypatch.setattr(finetune, "MIN_EXAMPLES", 10)
    monkeypatch.setattr(finetune, "MIN_MEDIAN_PER_INTENT", 5)
    texts = [t for examples in TRAIN.values() for t in examples]
    labels = [label for label, examples in TRAIN.items() for _ in examples]

    base = Encoder(default_bert_path())
    tuned = BertTier.train(
        texts, labels, _entries(), quantize=False, progress=False, fine_tune_epochs=4
    )
    report = tuned.metadata["fine_tune"]
    assert report["epochs"] == 4 and report["steps"] == 4 and report["seconds"] > 0
    losses = report["epoch_losses"]
    assert len(losses) == 4 and losses[-1] < losses[0]
    moved = np.sum(tuned.embed(texts) * base.encode(texts), axis=1)  # cosines, base vs tuned
    assert moved.max() < 0.999 and moved.min() > 0.5  # changed, but not destroyed
    tuned.save(tmp_path / "bert")
    assert (tmp_path / "bert" / ENCODER_FILE).is_file()
    loaded = BertTier.load(tmp_path / "bert", quantize=False)
    assert loaded.encoder.fine_tuned == report
    np.testing.assert_allclose(loaded.embed(texts), tuned.embed(texts), atol=1e-5)
    # saving a loaded tier again copies the weights file
    loaded.save(tmp_path / "again")
    assert (tmp_path / "again" / ENCODER_FILE).read_bytes() == (
        tmp_path / "bert" / ENCODER_FILE
    ).read_bytes()
    # retraining the head on the same fine-tuned encoder keeps it (no second fine-tune)
    refit = BertTier.train(
        texts, labels, [], quantize=False, progress=False, encoder=tuned.training_encoder
    )
    assert refit.metadata["fine_tune"] == report
    np.testing.assert_allclose(refit.embed(texts[:3]), tuned.embed(texts[:3]), atol=1e-5)
    # a frozen tier saves no encoder
    frozen = BertTier.train(texts, labels, [], quantize=False, progress=False)
    frozen.save(tmp_path / "frozen")
    assert frozen.metadata["fine_tune"] is None
    assert not (tmp_path / "frozen" / ENCODER_FILE).exists()


def test_fine_tuned_weights_that_do_not_fit_the_checkpoint_are_a_clear_error(tmp_path):
    import torch
    from safetensors.torch import save_file as save_tensors

    bogus = tmp_path / "encoder.safetensors"
    save_tensors({"embeddings.word_embeddings.weight": torch.zeros(3, 4)}, str(bogus))
    with pytest.raises(ValueError, match="do not fit the checkpoint") as info:
        Encoder(default_bert_path(), weights=bogus)
    assert str(bogus) in str(info.value)


def test_the_int8_copy_is_made_once_per_weights():
    fp32 = Encoder(default_bert_path(), quantize=False)
    copy = fp32.quantized_copy()
    assert copy.quantized and fp32.quantized_copy() is copy  # every fold's tier shares it
    text = ["how do i reset my password"]
    int8 = Encoder(default_bert_path(), quantize=True)  # the checkpoint quantized on loading
    np.testing.assert_allclose(copy.encode(text), int8.encode(text), atol=1e-6)
    fp32.weights_changed()  # what the fine-tune calls before changing the weights
    assert fp32.quantized_copy() is not copy
