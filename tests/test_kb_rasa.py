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
        "(utter_<intent>), a rule or a story of one turn answering it in text left out: stories "
        "of several turns and actions answer them"
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


RULES = """version: "3.1"
rules:
- rule: Say 'I am a bot' anytime the user challenges
  steps:
  - intent: bot_challenge
  - action: utter_iamabot
  - action: utter_how_can_i_help
- rule: only once a form has run
  condition:
  - active_loop: null
  steps:
  - intent: affirm
  - action: utter_iamabot
- rule: a custom action answers
  steps:
  - intent: deny
  - action: utter_how_can_i_help
  - action: action_log_complaint
- rule: only when a conversation starts
  conversation_start: true
  steps:
  - intent: greet
  - action: utter_iamabot
- rule: only for one entity
  steps:
  - intent: greet
    entities:
    - city: Berlin
  - action: utter_iamabot
- rule: a later rule for the same intent
  steps:
  - intent: bot_challenge
  - action: utter_how_can_i_help
stories:
- story: a question and its answer
  steps:
  - intent: affirm
  - action: utter_how_can_i_help
- story: a rule answers this intent, not a story
  steps:
  - intent: bot_challenge
  - action: utter_iamabot
- story: several turns
  steps:
  - intent: deny
  - action: utter_how_can_i_help
  - intent: affirm
    entities:
    - city: Berlin
  - action: utter_iamabot
"""
BOT_RESPONSES = """version: "3.1"
nlu:
- intent: bot_challenge
  examples: |
    - are you a bot?
    - am I talking to a human?
- intent: deny
  examples: |
    - no
responses:
  utter_iamabot:
  - text: I am a bot, powered by Rasa.
  utter_how_can_i_help:
  - text: How can I help you?
"""


def test_a_rule_that_always_applies_answers_its_intent(db_url, tmp_path):
    """As ``rasa init`` writes it: ``bot_challenge`` answered by ``utter_iamabot`` in a rule.
    Rules that depend on a condition or an entity, or end in a custom action, answer nothing;
    a story of one turn answers its intent, one of several does not, and a rule comes first."""
    folder = project(tmp_path / "bot")
    (folder / "data" / "rules.yml").write_text(RULES, encoding="utf-8")
    (folder / "data" / "bot.yml").write_text(BOT_RESPONSES, encoding="utf-8")
    report = run_import(db_url, [folder])
    assert report.problems == []
    assert report.notes == [
        f"{folder}/data:1: Rasa project: 1 intent without a response of its name "
        "(utter_<intent>), a rule or a story of one turn answering it in text left out: stories "
        "of several turns and actions answer them"
    ]
    stored = {slug: (a.title, a.questions, a.body) for slug, a in articles(db_url).items()}
    # each response the rule gives is a paragraph; deny stays out
    assert stored["bot-challenge"] == (
        "are you a bot?",
        ["am I talking to a human?"],
        "I am a bot, powered by Rasa.\n\nHow can I help you?",
    )
    assert articles(db_url)["bot-challenge"].body_html.count("<p>") == 2
    assert sorted(stored) == [
        "affirm",
        "bot-challenge",
        "faq-lost-card",
        "faq-opening-hours",
        "greet",
    ]
    assert stored["affirm"][2] == "How can I help you?"  # its story of one turn
    # neither its rule for a conversation's start nor its rule for an entity is its answer
    assert stored["greet"][2] == "Hello! How can I help?"
