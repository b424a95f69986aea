"""``tierdesk eval`` end to end on a few intents (real models, a temporary workspace)."""

from __future__ import annotations

import csv
import json

import pytest
from fixtures_nlp import TINY_INTENTS

from app.cli import main
from app.nlp.evaluation import risk_coverage

STRATEGY_KEYS = {
    "accuracy",
    "coverage",
    "answered_accuracy",
    "bert_share",
    "latency_ms",
    "escalations",
    "coverage_at_target",
}


def _write(path, rows):
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "category"])
        writer.writerows(rows)
    return path


# Rows of an out-of-scope category inside the train and test files, as CLINC150 ships them.
TRAIN_OOS = [("what is the capital of peru", "oos"), ("book me a table for two", "OOS")]
TEST_OOS = [("how tall is the eiffel tower", "oos"), ("play some jazz", "out-of-scope")]
# ... and a separate --oos file
OOS_ROWS = [
    ("what's the weather in lisbon", "out_of_scope"),
    ("sing me a song", "out_of_scope"),
    ("zxqv blorp", "out_of_scope"),
]


def _data(tmp_path):
    train, test = list(TRAIN_OOS), list(TEST_OOS)
    for name, (_, title, _, examples) in TINY_INTENTS.items():
        train += [(t, name) for t in [title, *examples[:7]]]
        test += [(t, name) for t in examples[7:]]
    return (
        _write(tmp_path / "train.csv", train),
        _write(tmp_path / "test.csv", test),
        _write(tmp_path / "oos.csv", OOS_ROWS),
    )


@pytest.mark.slow
def test_eval_cli_writes_the_report(app, tmp_path):
    train, test, oos = _data(tmp_path)
    out, plot = tmp_path / "out" / "eval.json", tmp_path / "out" / "eval.png"
    result = app.test_cli_runner().invoke(
        main,
        [
            "eval",
            "--train",
            str(train),
            "--test",
            str(test),
            "--oos",
            str(oos),
            "--json",
            str(out),
            "--plot",
            str(plot),
            "--limit-categories",
            "3",
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report) == {"n_test", "train_seconds", "strategies", "oos"}
    assert report["n_test"] == 9  # three categories of four, three test queries each
    assert set(report["strategies"]) == {"fast", "bert", "hybrid", "hybrid_review"}
    for name, figures in report["strategies"].items():
        assert set(figures) == STRATEGY_KEYS, name
        assert set(figures["latency_ms"]) == {"mean", "p50", "p99"}
        assert 0 <= figures["accuracy"] <= figures["coverage"] <= 1
    assert report["strategies"]["fast"]["bert_share"] == 0
    assert report["strategies"]["bert"]["bert_share"] == 1
    for name in ("fast", "bert", "hybrid"):
        assert report["strategies"][name]["coverage"] == 1  # only hybrid_review escalates
    assert report["strategies"]["bert"]["accuracy"] >= 0.6  # real models, easy queries
    # the --oos file's 3 queries and the test file's 2 out-of-scope rows
    assert report["oos"]["n"] == 3 + len(TEST_OOS)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    details = json.loads(out.with_suffix(".details.json").read_text())
    # Spare review capacity is opt-in (and needs a ceiling): the tuned operating point is the
    # one reported.
    assert details["spare_review"] is None
    assert details["spare_escalations"] == 0
    # out-of-scope rows are never an intent: the train file's are negatives of the tuning
    assert details["n_categories"] == 3
    assert "oos" not in details["tiers"]["complex"]
    # the out-of-scope queries answered, each with what it was taken for, surest first
    answered = details["oos_answered"]
    assert len(answered) == round((1 - report["oos"]["escalation_recall"]) * report["oos"]["n"])
    assert {a["query"] for a in answered} <= {t for t, _ in [*TEST_OOS, *OOS_ROWS]}
    assert [a["confidence"] for a in answered] == sorted(
        (a["confidence"] for a in answered), reverse=True
    )
    plain = app.test_cli_runner().invoke(
        main, ["eval", "--train", str(train), "--test", str(test), "--json", str(out), "--quiet",
               "--limit-categories", "3"]
    )  # fmt: skip
    assert plain.exit_code == 0, plain.output
    assert json.loads(out.read_text())["oos"]["n"] == len(TEST_OOS)  # no --oos file
    review = report["strategies"]["hybrid_review"]
    assert details["hybrid_review_tuned"] == {
        k: review[k] for k in ("coverage", "answered_accuracy")
    }
    assert "| hybrid_review |" in result.output
    assert not (app.config["MODELS_DIR"]).exists()  # the app's models were never touched


def test_eval_rejects_test_categories_missing_from_train(app, tmp_path):
    train = _write(tmp_path / "train.csv", [("hello", "a"), ("hi", "b")])
    test = _write(tmp_path / "test.csv", [("yo", "c")])
    result = app.test_cli_runner().invoke(
        main, ["eval", "--train", str(train), "--test", str(test), "--quiet"]
    )
    assert result.exit_code != 0
    assert "categories absent from the training set: c" in result.output


def test_eval_rejects_a_file_of_out_of_scope_rows_only(app, tmp_path):
    oos = _write(tmp_path / "oos.csv", TRAIN_OOS)
    test = _write(tmp_path / "test.csv", [("hello", "a")])
    result = app.test_cli_runner().invoke(
        main, ["eval", "--train", str(oos), "--test", str(test), "--quiet"]
    )
    assert result.exit_code != 0
    assert "oos.csv: every row is out of scope; no intent to train" in result.output


def test_eval_reports_bad_csv_with_its_line(app, tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,category\nfine,a\n,b\n")
    result = app.test_cli_runner().invoke(
        main, ["eval", "--train", str(train), "--test", str(train), "--quiet"]
    )
    assert result.exit_code != 0
    assert "train.csv:3: empty text or category" in result.output


def test_risk_coverage_answers_the_most_confident_first():
    curve = risk_coverage([0.9, 0.2, 0.8, 0.1], [True, False, True, True])
    assert [round(c, 2) for c, _ in curve] == [0.25, 0.5, 0.75, 1.0]
    assert curve[1][1] == 0.0  # the two most confident are right
    assert curve[2][1] == pytest.approx(1 / 3)


def test_coverage_at_target_and_fast_against_bert():
    from app.nlp.evaluation import coverage_at, fast_against_bert

    conf = [0.9, 0.8, 0.7, 0.6]
    assert coverage_at(conf, [True, True, False, True], 0.985) == 0.5
    assert coverage_at(conf, [False, True, True, True], 0.985) == 0.0
    rows = fast_against_bert(
        {"conf": conf, "ok": [True, True, False, False]},
        {"conf": [0.0] * 4, "ok": [True, False, True, True]},
        shares=(0.5, 1.0),
    )
    assert rows == [
        {"share": 0.5, "fast_accuracy": 1.0, "bert_accuracy": 0.5},
        {"share": 1.0, "fast_accuracy": 0.5, "bert_accuracy": 0.75},
    ]
