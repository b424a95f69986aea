"""Intent definitions (intents/*.yaml) and training CSVs: loading, idempotence, bad input,
and the ``tierdesk intents`` commands."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sqlalchemy import select

from app.cli import main
from app.config import PROJECT_ROOT
from app.db import session_scope
from app.kb.intents import (
    IntentImportRejected,
    import_intent_csv,
    list_intents,
    load_intent_definitions,
)
from app.models import Intent, TrainingExample
from app.nlp.pipeline.data import data_from_db

CARDS_YAML = """\
intents:
  - name: card_arrival
    tier: simple
    description: Customer waits for a card.
    examples:
      - Where is my card?
      - my card still hasn't arrived
      - Where is my card?
  - name: card_dispute
    tier: complex
    examples:
      - I do not recognise this card payment
"""


def write(folder: Path, name: str, text: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def state(url: str) -> tuple[dict, list]:
    with session_scope(url) as session:
        intents = {
            i.name: (i.tier, i.tier_source, i.description) for i in session.scalars(select(Intent))
        }
        examples = sorted(
            session.execute(
                select(TrainingExample.text, TrainingExample.intent, TrainingExample.origin)
            ).all()
        )
    return intents, [tuple(e) for e in examples]


def test_definitions_load_with_tiers_and_seed_examples_and_are_idempotent(any_db_url, tmp_path):
    write(tmp_path / "intents", "cards.yaml", CARDS_YAML)
    with session_scope(any_db_url) as session:
        report = load_intent_definitions(session, tmp_path / "intents")
    assert (report.intents_created, report.examples_added, report.duplicates_skipped) == (2, 3, 1)
    intents, examples = state(any_db_url)
    assert intents == {
        "card_arrival": ("simple", "declared", "Customer waits for a card."),
        "card_dispute": ("complex", "declared", ""),
    }
    assert examples == [
        ("I do not recognise this card payment", "card_dispute", "seed"),
        ("Where is my card?", "card_arrival", "seed"),
        ("my card still hasn't arrived", "card_arrival", "seed"),
    ]
    with session_scope(any_db_url) as session:
        again = load_intent_definitions(session, tmp_path / "intents")
    assert (again.intents_unchanged, again.examples_added, again.duplicates_skipped) == (2, 0, 4)
    assert state(any_db_url) == (intents, examples)


def test_a_changed_declaration_updates_the_tier(db_url, tmp_path):
    folder = tmp_path / "intents"
    write(folder, "cards.yaml", CARDS_YAML)
    with session_scope(db_url) as session:
        load_intent_definitions(session, folder)
    write(folder, "cards.yaml", CARDS_YAML.replace("tier: simple", "tier: complex"))
    with session_scope(db_url) as session:
        report = load_intent_definitions(session, folder)
    assert (report.intents_updated, report.intents_unchanged) == (1, 1)
    assert state(db_url)[0]["card_arrival"][0] == "complex"


def test_invalid_definitions_are_reported_with_lines_and_change_nothing(db_url, tmp_path):
    folder = tmp_path / "intents"
    cards = write(folder, "cards.yaml", CARDS_YAML)
    bad = write(
        folder,
        "transfers.yaml",
        "intents:\n"
        "  - name: transfer_fee\n"
        "    tier: medium\n"
        "    examples: [why a fee]\n"
        "  - tier: simple\n"
        "  - name: card_arrival\n"
        "    tier: simple\n"
        "    examples:\n"
        "      - fine\n"
        "      - 42\n",
    )
    with session_scope(db_url) as session, pytest.raises(IntentImportRejected) as info:
        load_intent_definitions(session, folder)
    assert info.value.report.problems == [
        f"{bad}:2: tier must be one of simple, complex, not 'medium'",
        f"{bad}:5: intent needs a non-empty text 'name'",
        f"{bad}:10: an example must be non-empty text",
    ]
    assert state(db_url) == ({}, [])
    write(folder, "transfers.yaml", "intents:\n  - name: card_arrival\n    tier: simple\n")
    with session_scope(db_url) as session, pytest.raises(IntentImportRejected) as info:
        load_intent_definitions(session, folder)
    assert info.value.report.problems == [
        f"{folder / 'transfers.yaml'}:1: intent 'card_arrival' is already defined in {cards}"
    ]


def test_broken_yaml_names_the_line(db_url, tmp_path):
    folder = tmp_path / "intents"
    path = write(folder, "x.yaml", "intents:\n  - name: a\n    tier: [simple\n")
    with session_scope(db_url) as session, pytest.raises(IntentImportRejected) as info:
        load_intent_definitions(session, folder)
    (problem,) = info.value.report.problems
    assert problem.startswith(f"{path}:4: invalid YAML")


def test_csv_import_adds_examples_creates_derived_intents_and_skips_duplicates(
    any_db_url, tmp_path
):
    write(tmp_path / "intents", "cards.yaml", CARDS_YAML)
    with session_scope(any_db_url) as session:
        load_intent_definitions(session, tmp_path / "intents")
    path = write(
        tmp_path,
        "train.csv",
        "\ufefftext,category\r\n"
        "Where is my card?,card_arrival\r\n"
        '"how do I, in the app, top up",top_up_by_card\r\n'
        "how do I top up,top_up_by_card\r\n"
        "how do I top up,top_up_by_card\r\n",
    )
    with session_scope(any_db_url) as session:
        report = import_intent_csv(session, path)
    assert (report.intents_created, report.examples_added, report.duplicates_skipped) == (1, 2, 2)
    intents, examples = state(any_db_url)
    assert intents["top_up_by_card"] == ("simple", "derived", "")
    assert intents["card_arrival"] == ("simple", "declared", "Customer waits for a card.")
    assert ("how do I, in the app, top up", "top_up_by_card", "import") in examples
    with session_scope(any_db_url) as session:
        again = import_intent_csv(session, path)
    assert (again.intents_created, again.examples_added, again.duplicates_skipped) == (0, 0, 4)


def test_intents_import_command_rejects_bad_rows_with_lines(runner, db_url, tmp_path):
    path = write(
        tmp_path,
        "train.csv",
        b'text,category\nfine,a\n,b\n"multi\nline",\nok,\xff\xfe\n',
    )
    result = runner.invoke(main, ["intents", "import", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{path}:3: text is empty",
        f"{path}:4: category is empty",
        f"{path}:6: not valid UTF-8 (byte 0xFF at column 4); save the file as UTF-8",
        "0 intents (0 created, 0 updated, 0 unchanged), 0 examples added, 0 duplicates skipped; "
        "rejected, nothing was changed",
    ]
    assert state(db_url) == ({}, [])


def test_intents_import_requires_the_header(runner, db_url, tmp_path):
    path = write(tmp_path, "train.csv", "sentence,label\nhi,greeting\n")
    result = runner.invoke(main, ["intents", "import", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        f"{path}:1: missing required column(s) text; found sentence, label"
    )


def test_intents_list_prints_name_tier_and_count(runner, db_url, tmp_path):
    write(tmp_path / "intents", "cards.yaml", CARDS_YAML)
    loaded = runner.invoke(main, ["intents", "load", str(tmp_path / "intents")])
    assert loaded.exit_code == 0
    assert loaded.stdout.strip() == (
        "2 intents (2 created, 0 updated, 0 unchanged), 3 examples added, 1 duplicates skipped"
    )
    result = runner.invoke(main, ["intents", "list"])
    assert result.exit_code == 0
    assert [line.split() for line in result.stdout.splitlines()] == [
        ["card_arrival", "simple", "2"],
        ["card_dispute", "complex", "1"],
    ]
    with session_scope(db_url) as session:
        assert list_intents(session) == [
            ("card_arrival", "simple", 2),
            ("card_dispute", "complex", 1),
        ]


def test_banking77_training_csv_imports(runner, db_url):
    path = PROJECT_ROOT.parent / "shared" / "data" / "banking77" / "train.csv"
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    result = runner.invoke(main, ["intents", "import", str(path)])
    assert result.exit_code == 0, result.stderr
    listed = runner.invoke(main, ["intents", "list"]).stdout.splitlines()
    assert len(listed) == 77
    with path.open(encoding="utf-8", newline="") as fh:
        rows = sum(1 for row in csv.reader(fh) if row) - 1
    assert result.stdout.strip().endswith(
        f"{rows - _duplicates(path)} examples added, {_duplicates(path)} duplicates skipped"
    )


def _duplicates(path: Path) -> int:
    with path.open(encoding="utf-8", newline="") as fh:
        pairs = [(" ".join(r["text"].split()), r["category"]) for r in csv.DictReader(fh)]
    return len(pairs) - len(set(pairs))


def test_out_of_scope_rows_are_kept_as_the_data_s_own_negatives_not_an_intent(
    runner, db_url, tmp_path
):
    path = write(
        tmp_path,
        "clinc.csv",
        "text,category\nwhat's my balance,balance\nwho won the cup final,oos\n"
        "tell me a joke,Out_Of_Scope\nnext train to leeds,oos\n",
    )
    result = runner.invoke(main, ["intents", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{path}:1: 2 row(s) of category 'oos' are out-of-scope queries" in result.output
    assert "1 row(s) of category 'Out_Of_Scope' are out-of-scope queries" in result.output
    intents, _ = state(db_url)
    assert set(intents) == {"balance"}
    listed = runner.invoke(main, ["intents", "list"]).output
    assert "oos" in listed and "out-of-scope" in listed
    with session_scope(db_url) as session:
        data = data_from_db(session)
    # training reads them as the data's own out-of-scope queries, in file order, never an intent
    assert (data.texts, data.labels) == (["what's my balance"], ["balance"])
    assert data.oos_labelled == ["who won the cup final", "tell me a joke", "next train to leeds"]
    assert set(data.oos_labelled) <= set(data.oos_texts)


def test_training_intent_examples_without_articles_says_what_to_do(runner, db_url, tmp_path):
    path = write(
        tmp_path,
        "train.csv",
        "text,category\nwhere is my card,card_arrival\nhas my card shipped,card_arrival\n"
        "what is my balance,balance\n",
    )
    assert runner.invoke(main, ["intents", "import", str(path)]).exit_code == 0
    result = runner.invoke(main, ["train", "--quiet"])
    assert result.exit_code == 1
    assert "the knowledge base has no published articles" in result.output
    assert "The 3 examples of 2 intents need articles to answer with" in result.output
    assert "tierdesk eval --train TRAIN.csv --test TEST.csv" in result.output
    versions = Path(runner.app.config["MODELS_DIR"]) / "versions"
    assert not versions.exists() or not any(versions.iterdir())
