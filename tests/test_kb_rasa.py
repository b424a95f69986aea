"""A Rasa project as its developers keep it (app/kb/rasa_project.py): ``domain.yml`` and
``data/``, with an FAQ as retrieval intents, imported for real from its folder and a zip."""

from __future__ import annotations

import zipfile
from pathlib import Path

from fixtures_kb import articles, rejected, run_import

DOMAIN = """version: "3.1"
intents:
  - greet
  - affirm
  - faq
responses:
  utter_greet:
  - text: "Hello! How can I help?"
  utter_faq/opening_hours:
  - text: We are open from 8 to 20, Monday to Saturday.
  - text: "8 to 20, six days a week."
"""
NLU = """version: "3.1"
nlu:
- intent: greet
  examples: |
    - hi
    - hello there
- intent: affirm
  examples: |
    - yes
    - sure
- intent: faq/opening_hours
  examples: |
    - When are you open?
    - opening hours in [Berlin](city)
    - When are you   OPEN?
- intent: faq/lost_card
  examples: |
    - I lost my card
    - my card was [stolen]{"entity": "event", "value": "theft"}
- synonym: theft
  examples: |
    - robbed
"""
# responses kept in the training data, beside rules that are not read
RESPONSES = """version: "3.1"
responses:
  utter_faq/lost_card:
  - image: https://help.example/card.png
  - text: Freeze it in the app at once.
rules:
- rule: answer the FAQ
  steps:
  - intent: faq
  - action: utter_faq
"""


def project(folder: Path) -> Path:
    (folder / "data").mkdir(parents=True)
    (folder / "domain.yml").write_text(DOMAIN, encoding="utf-8")
    (folder / "data" / "nlu.yml").write_text(NLU, encoding="utf-8")
    (folder / "data" / "faq_responses.yml").write_text(RESPONSES, encoding="utf-8")
    return folder


def test_a_rasa_project_gives_an_article_per_intent_with_a_response(db_url, tmp_path):
    folder = project(tmp_path / "bot")
    archive = tmp_path / "bot.zip"
    with zipfile.ZipFile(archive, "w") as zipped:  # the folder zipped, itself at the top
        for path in folder.rglob("*"):
            zipped.write(path, path.relative_to(tmp_path))
    report = run_import(db_url, [archive])
    assert (report.created, report.problems, report.warnings) == (3, [], [])
    assert report.notes == [
        f"{archive}/bot/data:1: Rasa project: 1 intent without a response of its name "
        "(utter_<intent>) left out: stories and actions answer them"
    ]
    stored = {slug: (a.title, a.questions, a.body) for slug, a in articles(db_url).items()}
    assert stored == {
        # the first text variant; annotations read as their words; each example once
        "faq-opening-hours": (
            "When are you open?",
            ["opening hours in Berlin"],
            "We are open from 8 to 20, Monday to Saturday.",
        ),
        # a response in the training data, its image variant passed over
        "faq-lost-card": (
            "I lost my card",
            ["my card was stolen"],
            "Freeze it in the app at once.",
        ),
        "greet": ("hi", ["hello there"], "Hello! How can I help?"),
    }
    assert articles(db_url)["greet"].source == f"{archive}/bot/data/nlu.yml"
    # the folder reads the same
    assert run_import(db_url, [folder]).unchanged == 3


def test_yaml_that_cannot_be_read_is_named_on_its_line(db_url, tmp_path):
    folder = project(tmp_path / "bot")
    (folder / "data" / "nlu.yml").write_text(
        "nlu:\n- intent: greet\n  examples: |\n    - hi\n- intent: [unclosed\n", encoding="utf-8"
    )
    assert rejected(db_url, [folder]) == [
        f"{folder}/data/nlu.yml:6: invalid YAML: expected ',' or ']', but got '<stream end>' "
        "(column 1)"
    ]
