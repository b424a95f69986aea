"""The training stages (app/nlp/pipeline/) on a knowledge base without intent data: plain FAQs,
one-example intents, long articles, and the held-out plan that makes it possible."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from app.cli import main
from app.db import session_scope
from app.models import TrainingExample
from app.nlp.passages import PASSAGE_WORDS, _split, plain_text, split_passages
from app.nlp.pipeline.data import (
    GENERATED_NEGATIVES,
    KbArticle,
    TrainingData,
    with_examples_as_questions,
)
from app.nlp.pipeline.kb import bm25_docs, kb_entries
from app.nlp.pipeline.splits import (
    FOLD_TEXTS_MAX,
    FOLDS,
    HELD_OUT_MAX,
    REPEAT_TEXTS_MAX,
    REPEATS,
    claimed_negatives,
    held_out_folds,
    plan_held_out,
)
from app.nlp.training import fit_models

PLAIN_FAQ = (
    "title,body\n"
    '"How do I reset my password?","Open Settings, choose Security and tap Reset password. '
    'We e-mail you a link that works for 24 hours."\n'
    '"How do I cancel my subscription?","Go to Billing and choose Cancel plan. Your workspace '
    'stays active until the end of the period you paid for."\n'
    '"Can I export my data?","Yes. Admins export every project as CSV or JSON from Settings, '
    'Data export."\n'
)


def test_folds_hold_every_text_out_once_per_draw_even_single_example_intents():
    labels = ["a", "b", "c", "c", "d"]
    mode, folds = held_out_folds(labels, val_fraction=0.15, seed=0)
    assert mode == "folds"
    assert len(folds) == REPEATS * len(labels)  # a fold per text (under FOLDS), per draw
    per_draw = len(folds) // REPEATS
    draws = [folds[i * per_draw : (i + 1) * per_draw] for i in range(REPEATS)]
    for draw in draws:  # every text once, one-example intents included
        assert sorted(i for _, h in draw for i in h) == list(range(len(labels)))
    for fit, h in folds:
        assert not set(fit) & set(h) and sorted([*fit, *h]) == list(range(len(labels)))


def test_folds_are_drawn_once_beyond_a_small_set():
    labels = [f"intent-{i % 50}" for i in range(REPEAT_TEXTS_MAX + 1)]
    mode, folds = held_out_folds(labels, val_fraction=0.15, seed=0)
    assert mode == "folds" and len(folds) == FOLDS
    assert sorted(i for _, h in folds for i in h) == list(range(len(labels)))
    _, small = held_out_folds(labels[:REPEAT_TEXTS_MAX], val_fraction=0.15, seed=0)
    assert len(small) == REPEATS * FOLDS
    assert [h for _, h in small[:FOLDS]] != [h for _, h in small[FOLDS : 2 * FOLDS]]


def test_a_negative_the_kb_lists_as_its_own_question_is_not_held_out_as_one():
    """A chit-chat KB answers "Are you a robot?": the default negative of the same words (case
    and punctuation aside) must not count as a question the bot has to escalate."""
    articles = [
        KbArticle("robot", "Are you a robot", ["Are you human?"], "I am a bot.", "robot"),
        KbArticle("hello", "Hi!", ["Hello there"], "Hello!", "hello"),
    ]
    texts = ["Are you a robot", "Are you human?", "Hi!", "Hello there"]
    labels = ["robot", "robot", "hello", "hello"]
    negatives = ["are you a ROBOT?", "hi", "Are you a robot arm?", "recipe for banana bread"]
    data = TrainingData(texts, labels, articles, oos_texts=negatives)
    plan = plan_held_out(data, validation=None, val_fraction=0.15, seed=0)
    assert plan.negatives_labelled == 2
    assert "are you a ROBOT?" not in plan.negatives and "hi" not in plan.negatives
    assert {"Are you a robot arm?", "recipe for banana bread"} <= set(plan.negatives)
    # every fold's held-out queries carry the remaining negatives only
    queries = [q for i in range(len(plan.folds)) for q in plan.queries(i)[0]]
    assert "hi" not in queries and "recipe for banana bread" in queries


def _unit(*rows: list[float]) -> np.ndarray:
    x = np.asarray(rows, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_a_negative_as_close_to_an_intent_as_its_own_texts_are_is_claimed():
    # intent 0: three texts around the first axis, each one's nearest other text at 0.976-0.980
    # (median 0.980); intent 1 has two texts only: no spread, it claims nothing
    memory = _unit([1, 0.1, 0], [1, -0.1, 0], [1, 0, 0.2], [0, 0, 1], [0, 0.1, 1])
    labels = np.array([0, 0, 0, 1, 1])
    negatives = _unit(
        [1, 0, 0],  # 0.995 from one of intent 0's texts, closer than they are: claimed
        [1, 1, 0],  # its topic (0.77 to the nearest) but not one of its questions: kept
        [0, 0.05, 1],  # a paraphrase of intent 1, which has too few texts to tell
    )
    assert claimed_negatives(negatives, memory, labels).tolist() == [True, False, False]
    assert not claimed_negatives(negatives, memory[:0], labels[:0]).any()


@pytest.mark.slow
def test_negatives_the_data_answers_are_not_held_out_unless_the_data_says_so(tmp_path):
    """A general assistant answers the weather: the default negative "Will it rain this
    weekend?" is one of its questions, not an out-of-scope query the tuner must escalate. A
    near miss stays a negative, and so does a row the data itself labels out of scope."""
    from app.nlp.training import train_from_csv

    weather = [
        "will it rain tomorrow",
        "what's the weather like today",
        "is it going to rain this afternoon",
        "weather forecast for the weekend",
        "will it be sunny on saturday",
        "do i need a coat today",
    ]
    music = [
        "play some music",
        "put on my workout playlist",
        "play the latest album by adele",
        "shuffle my liked songs",
        "play something relaxing",
        "next song please",
    ]
    rows = [*((t, "weather") for t in weather), *((t, "play_music") for t in music)]
    # this assistant forecasts: its owner labels past weather out of scope
    rows.append(("what was the weather like yesterday", "oos"))
    csv_path = tmp_path / "train.csv"
    csv_path.write_text(
        "text,category\n" + "".join(f"{t},{c}\n" for t, c in rows), encoding="utf-8"
    )
    dev = ["Will it rain this weekend?", "How do I cancel my Netflix subscription?"]
    trained, _ = train_from_csv(csv_path, oos_dev=dev, progress=False)
    claimed = trained.metrics["oos_negatives_claimed"]
    assert claimed == ["Will it rain this weekend?"]
    review = trained.metrics["tiers_active"]["review"]["reason"]
    assert "not counted as out of scope: 1 of the development out-of-scope questions" in review
    held_out = len(dev) + 1 + GENERATED_NEGATIVES - 1  # the generated nonsense is never claimed
    assert trained.metrics["n_oos_negatives"] == held_out


def test_a_large_kb_of_one_text_intents_still_gets_held_out_queries():
    labels = [f"article-{i}" for i in range(FOLD_TEXTS_MAX + 500)]
    mode, [(fit, held)] = held_out_folds(labels, val_fraction=0.15, seed=0)
    assert mode == "split"
    assert 0 < len(held) <= HELD_OUT_MAX and len(fit) + len(held) == len(labels)


def test_held_out_titles_and_questions_leave_both_indexes():
    article = KbArticle("reset", "Reset a password", ["Forgot my password"], "Tap Reset.", "reset")
    [doc] = bm25_docs([article], {"Reset a password"})
    assert doc.title == "" and doc.questions == ["Forgot my password"]
    [entry] = kb_entries([article], {"Forgot my password", "Reset a password"})
    assert entry.indexed_texts(passages=False) == []  # only the body can find it now
    assert entry.passages == ["Tap Reset."]


def test_a_large_kb_embeds_fewer_passages_then_shorter_ones(monkeypatch):
    from app.nlp.pipeline import kb

    body = "\n\n".join(" ".join(f"p{p}w{i}" for i in range(PASSAGE_WORDS)) + "." for p in range(3))
    articles = [KbArticle(f"a{n}", f"Title {n}", [], body, f"a{n}") for n in range(10)]
    assert kb.passage_window(articles) == kb.PassageWindow(kb.BERT_PASSAGES, PASSAGE_WORDS)
    [entry, *_] = kb_entries(articles)
    assert len(entry.passages) == 3 and len(entry.passages[0].split()) == PASSAGE_WORDS
    assert kb.PassageWindow().describe() == "body passages"

    # 30 passages of 60 words against a budget of 1,200 words: two per article fit
    monkeypatch.setattr(kb, "BERT_PASSAGE_WORDS", 1200)
    assert kb.passage_window(articles) == kb.PassageWindow(2, PASSAGE_WORDS)
    assert len(kb_entries(articles)[0].passages) == 2

    # 10 first passages of 60 words against 360 words: cut to 32 words, a step of
    # PASSAGE_CUT_STEP, the longest that fits (40 words would be 400)
    monkeypatch.setattr(kb, "BERT_PASSAGE_WORDS", 360)
    window = kb.passage_window(articles)
    assert window == kb.PassageWindow(1, 32)
    [entry, *_] = kb_entries(articles)
    assert entry.passages == [" ".join(f"p0w{i}" for i in range(32))]
    assert "the first body passage of each article, its first 32 words" in window.describe()

    monkeypatch.setattr(kb, "BERT_PASSAGE_WORDS", 1)  # never below MIN_PASSAGE_WORDS
    assert kb.passage_window(articles) == kb.PassageWindow(1, kb.MIN_PASSAGE_WORDS)


def test_taught_examples_become_questions_of_the_intents_only_article():
    articles = [
        KbArticle("a1", "Card arrival", [], "", "card_arrival"),
        KbArticle("b1", "Fees one", [], "", "fees"),
        KbArticle("b2", "Fees two", [], "", "fees"),
    ]
    out = with_examples_as_questions(
        articles, ["where is my card", "why a fee"], ["card_arrival", "fees"]
    )
    assert out[0].questions == ["where is my card"]
    assert out[1].questions == [] and out[2].questions == []  # two articles: not attributable


def test_long_bodies_become_passages_and_markup_is_dropped():
    paragraphs = [" ".join(f"word{p}x{i}" for i in range(30)) + "." for p in range(5)]
    body = "# Heading\n\n" + "\n\n".join(paragraphs)
    passages = split_passages(body, max_words=40)
    assert len(passages) >= 4
    assert all(len(p.split()) <= 40 for p in passages)
    assert "word4x7" in passages[-1] and "#" not in " ".join(passages)
    passages.append("changed by the caller")  # each call gets its own list of the kept split
    assert split_passages(body, max_words=40) == passages[:-1]
    assert plain_text("<p>Hi <b>there</b></p><script>x()</script>").split() == ["Hi", "there"]


def test_bm25_finds_an_answer_in_the_fifth_paragraph():
    from app.nlp.bm25 import BM25Retriever

    filler = "\n\n".join(
        "General information about accounts, statements and the mobile app, " * 3 for _ in range(4)
    )
    long_article = KbArticle(
        "account-guide",
        "Your account guide",
        [],
        filler + "\n\nTo close a dormant savings pot, tap the pot and choose Close.",
        "account-guide",
    )
    other = KbArticle(
        "savings", "Savings pots", [], "Savings pots earn interest monthly on the balance.", "s"
    )
    bm25 = BM25Retriever(bm25_docs([long_article, other]))
    top = bm25.run("how do I close a dormant pot", k=2).candidates[0]
    assert top.slug == "account-guide"


@pytest.mark.slow
def test_bert_finds_an_answer_in_the_fifth_paragraph():
    from app.nlp.bert import BertTier

    filler = "\n\n".join(
        "General information about accounts, statements and the mobile app. " * 3 for _ in range(4)
    )
    articles = [
        KbArticle(
            "account-guide",
            "Your account guide",
            [],
            filler + "\n\nYou can lock a lost debit card instantly in the app under Card settings.",
            "account-guide",
        ),
        KbArticle("rates", "Interest rates", [], "Savings earn 2% a year.", "rates"),
        KbArticle("fees", "Monthly fees", [], "The standard account is free.", "fees"),
    ]
    bert = BertTier.train(
        [a.title for a in articles], [a.slug for a in articles], kb_entries(articles),
        progress=False,
    )  # fmt: skip
    assert not bert.has_head  # one example per intent: KB matching alone
    result = bert.run("I lost my card, how do I lock it?", k=3)
    assert result.candidates[0].slug == "account-guide"
    assert result.intents[0][0] == "account-guide"  # intents come from the candidates


def test_a_kb_of_one_text_says_what_to_add_and_publishes_nothing(make_app, tmp_path):
    faq = tmp_path / "faq.csv"
    faq.write_text("title,body\nHow do I reset my password?,Use the sign-in page.\n")
    app = make_app(INTENTS_DIR=tmp_path / "no-intents")
    runner = app.test_cli_runner()
    assert runner.invoke(main, ["kb", "import", str(faq)]).exit_code == 0
    result = runner.invoke(main, ["train", "--quiet"])
    assert result.exit_code == 1
    assert "too few texts to hold any out for tuning: 1 (titles, alternate questions" in (
        result.output
    )
    assert "import at least one more article, or add an alternate question" in result.output
    assert not (tmp_path / "models" / "versions").exists() or not any(
        (tmp_path / "models" / "versions").iterdir()
    )


@pytest.mark.slow
def test_a_plain_faq_of_three_articles_trains_and_answers(make_app, tmp_path):
    faq = tmp_path / "faq.csv"
    faq.write_text(PLAIN_FAQ, encoding="utf-8")
    app = make_app(INTENTS_DIR=tmp_path / "no-intents")
    runner = app.test_cli_runner()
    result = runner.invoke(main, ["kb", "import", str(faq)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["train", "--quiet"])
    assert result.exit_code == 0, result.output
    assert _split.cache_info().currsize == 0  # training let go of the bodies' passages
    assert "tiers:" in result.output and "bert: on" in result.output
    # three titles to learn from, none of them an intent example anyone imported or taught
    assert "3 labelled texts (0 intent examples, the rest the KB's titles" in result.output
    # one title per intent: held out, FastText could never be right, so none is trained
    assert "fasttext: off - 3 intents of one text each" in result.output
    # the held-out figures as a person reads them: percentages, and the tier that was not trained
    assert "held out: accuracy fasttext not trained, bert " in result.output
    assert re.search(r"answered \d+\.\d\d% right at \d+\.\d\d% coverage", result.output)
    assert "None" not in result.output
    first = next((tmp_path / "models" / "versions").iterdir())
    assert not (first / "fasttext").exists()
    manifest_path = first / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["tiers_active"]["bert"]["active"] is True
    assert manifest["metrics"]["held_out"]["mode"] == "folds"
    assert manifest["metrics"]["held_out"]["queries"] == 3 * REPEATS  # each title, per draw
    assert manifest["metrics"]["held_out"]["repeats"] == REPEATS
    assert manifest["metrics"]["n_oos_negatives_in_kb"] == 0  # none of these titles is one
    # a new bot: nobody has asked it anything, so the held-out threshold stands
    assert manifest["metrics"]["router"]["traffic"]["used"] is False
    assert manifest["metrics"]["router"]["traffic"]["questions"] == 0

    # a retrain timer: nothing taught since this version, so nothing is trained
    versions = tmp_path / "models" / "versions"
    result = runner.invoke(main, ["train", "--quiet", "--min-new-examples", "1"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("skipped: 0 intent example(s) added since version")
    assert len(list(versions.iterdir())) == 1
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        # the article's intent is its slug (no categories); a reviewer's example of it
        session.add(
            TrainingExample(
                text="i forgot my password", intent="how-do-i-reset-my-password", origin="reviewer"
            )
        )
    result = runner.invoke(main, ["train", "--quiet", "--min-new-examples", "2"])
    assert result.output.startswith("skipped: 1 intent example(s)") and "2 needed" in result.output
    result = runner.invoke(main, ["train", "--quiet", "--min-new-examples", "1"])
    assert result.exit_code == 0, result.output
    assert "(1 intent example," in result.output and len(list(versions.iterdir())) == 2
    # the taught example gives its intent a second text: FastText trains from now on
    assert "intents of one text each" not in result.output
    second = next(v for v in versions.iterdir() if v != first)
    assert (second / "fasttext").exists()

    served = make_app(INTENTS_DIR=tmp_path / "no-intents", LOAD_MODELS=True)
    client = served.test_client()
    body = client.post("/api/v1/chat", json={"message": "How do I reset my password?"}).get_json()
    assert body["status"] == "answered", body
    assert body["answer"]["article"]["slug"] == "how-do-i-reset-my-password"
    nonsense = client.post("/api/v1/chat", json={"message": "qwpoeiru zxmcnv"}).get_json()
    assert nonsense["status"] != "answered"


@pytest.mark.slow
def test_single_example_intents_train_beside_rich_ones():
    rich = [f"how do i top up my account with {w}" for w in ("cash", "card", "apple pay", "bank")]
    texts = [*rich, "Lost or stolen card", "Exchange rates abroad"]
    labels = ["top_up"] * 4 + ["lost_card", "exchange_rate"]
    articles = [
        KbArticle("top-up", "Topping up", [], "Top up from a card or a bank transfer.", "top_up"),
        KbArticle("lost", "Lost or stolen card", [], "Freeze the card in the app.", "lost_card"),
        KbArticle("fx", "Exchange rates abroad", [], "We use the daily rate.", "exchange_rate"),
    ]
    trained = fit_models(TrainingData(texts, labels, articles), progress=False)
    assert trained.metrics["held_out"]["queries"] == REPEATS * len(texts)
    assert set(trained.tiers["effective"]) == set(labels)
    assert trained.thresholds.provenance["held_out"] == "folds"


@pytest.mark.slow
def test_a_version_without_an_intent_tier_is_saved_loaded_and_served(
    make_app, tmp_path, monkeypatch
):
    """Beyond FASTTEXT_MAX_LABELS intents no FastText is trained: the version has no fasttext
    folder, says why, and the server answers from BERT's KB matching alone."""
    from app.nlp.pipeline import fit

    monkeypatch.setattr(fit, "FASTTEXT_MAX_LABELS", 2)
    faq = tmp_path / "faq.csv"
    faq.write_text(PLAIN_FAQ, encoding="utf-8")
    app = make_app(INTENTS_DIR=tmp_path / "no-intents")
    runner = app.test_cli_runner()
    assert runner.invoke(main, ["kb", "import", str(faq)]).exit_code == 0
    result = runner.invoke(main, ["train", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "fasttext: off - 3 intents (more than 2)" in result.output
    version = next((tmp_path / "models" / "versions").iterdir())
    assert not (version / "fasttext").exists()
    served = make_app(INTENTS_DIR=tmp_path / "no-intents", LOAD_MODELS=True)
    body = (
        served.test_client()
        .post("/api/v1/chat", json={"message": "How do I cancel my subscription?"})
        .get_json()
    )
    assert body["status"] == "answered", body
    assert body["route"] == "complex"
    assert body["answer"]["article"]["slug"] == "how-do-i-cancel-my-subscription"


def test_a_question_under_two_answers_is_right_with_either():
    from app.nlp.pipeline.replay import is_right
    from app.nlp.pipeline.splits import held_out_truth

    truth = held_out_truth(
        ["Good morning", "Good morning", "Thanks"], ["greeting", "good-morning", "thanks"]
    )
    assert truth[0] == truth[1] == frozenset({"greeting", "good-morning"})
    assert truth[2] == "thanks"
    assert is_right("good-morning", truth[0]) and is_right("greeting", truth[1])
    assert not is_right("thanks", truth[0]) and not is_right("greeting", None)


def test_risk_coverage_area_rewards_ranking_wrong_answers_last():
    from app.nlp.pipeline.replay import risk_coverage_area

    right = [True, True, False]
    # answering the surest first: error rates 0/1, 0/2, 1/3
    assert risk_coverage_area([0.9, 0.8, 0.7], right) == pytest.approx(1 / 9)
    # the wrong answer surest: 1/1, 1/2, 1/3
    assert risk_coverage_area([0.7, 0.8, 0.9], right) == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    assert risk_coverage_area([], []) == 0.0


def test_intents_of_a_title_and_a_few_questions_count_as_thin():
    from app.nlp.pipeline.calibrate import INTENT_SIGNALS_MIN_EXAMPLES, thin_intents

    faq = [f"article-{i}" for i in range(40) for _ in range(6)]  # a title and 5 alternates
    assert thin_intents(faq)
    rich = [f"intent-{i}" for i in range(40) for _ in range(INTENT_SIGNALS_MIN_EXAMPLES)]
    assert not thin_intents(rich)
    assert not thin_intents([])


def test_fold_fasttext_models_answer_their_held_out_queries_and_are_let_go():
    from app.nlp.pipeline.fit import fit_fasttext, intent_results

    texts = [f"how do i {verb} my {thing}" for verb in ("reset", "change") for thing in "abcdef"]
    labels = [f"{verb}-{i % 3}" for verb in ("reset", "change") for i in range(6)]
    articles = [KbArticle(name, name, [], "Body.", name) for name in sorted(set(labels))]
    data = TrainingData(texts, labels, articles)
    plan = plan_held_out(data, validation=None, val_fraction=0.15, seed=0)
    assert plan.refit and len(plan.folds) > 1

    fitted = fit_fasttext(data, plan, seed=0, note=lambda _: None)
    assert fitted.active and fitted.models == [None] * len(plan.folds)  # none kept: none serves
    kept = fit_fasttext(data, plan, seed=0, note=lambda _: None, keep_models=True)
    for number, model in enumerate(kept.models):
        queries = plan.queries(number)[0]
        assert len(fitted.results[number]) == len(queries)
        # the answers kept are the ones the fold's model gives (training is seeded)
        assert [r.intents for r in fitted.results[number]] == [
            r.intents for r in intent_results(model, queries)
        ]
    # with a given validation set nothing is refit: the one fold's model is the one served
    given = plan_held_out(data, validation=(texts[:4], labels[:4]), val_fraction=0.15, seed=0)
    served = fit_fasttext(data, given, seed=0, note=lambda _: None)
    assert not given.refit and served.models[0] is not None
