"""A Dialogflow ES agent exported as its console writes it (app/kb/dialogflow_agent.py): a zip
of ``agent.json`` and ``intents/``, imported for real."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from fixtures_kb import articles, rejected, run_import

HOURS = {
    "id": "2",
    "name": "faq.opening_hours",
    "auto": True,
    "contexts": [],
    "responses": [
        {
            "action": "",
            "messages": [
                {"type": "0", "lang": "en", "speech": ["We answer from 8 to 20.", "8-20 daily."]},
                {"type": "0", "lang": "de", "speech": "Wir sind von 8 bis 20 Uhr da."},
                {"type": "4", "lang": "en", "payload": {"richContent": []}},
                {"type": 0, "lang": "en", "speech": "Write to us any time."},
            ],
        }
    ],
    "fallbackIntent": False,
}


def _said(*phrases: list[dict]) -> list[dict]:
    return [{"id": str(n), "data": parts, "isTemplate": False, "count": 0} for n, parts in
            enumerate(phrases)]  # fmt: skip


def agent(folder: Path, hours_phrases: list[list[dict]] | None = None) -> Path:
    """An exported agent in ``folder``: an FAQ intent with phrases in two languages, a
    fallback, a follow-up, a webhook-only intent and a welcome intent started by an event."""
    intents = folder / "intents"
    intents.mkdir(parents=True)
    (folder / "agent.json").write_text(json.dumps({"language": "en", "description": "Help"}))
    files = {
        "faq.opening_hours.json": HOURS,
        "faq.opening_hours_usersays_en.json": _said(
            *(
                hours_phrases
                or [
                    [{"text": "When are you open?", "userDefined": False}],
                    [{"text": "opening hours on "}, {"text": "Saturday", "alias": "date",
                                                     "meta": "@sys.date"}],
                    [{"text": "when are you  OPEN?"}],
                ]
            )
        ),
        "faq.opening_hours_usersays_de.json": _said([{"text": "Wann habt ihr offen?"}]),
        "Default Fallback Intent.json": {
            "name": "Default Fallback Intent",
            "fallbackIntent": True,
            "responses": [{"messages": [{"type": 0, "speech": ["I didn't get that."]}]}],
        },
        "faq.opening_hours - yes.json": {
            "name": "faq.opening_hours - yes",
            "parentId": "2",
            "responses": [{"messages": [{"type": 0, "speech": "Great!"}]}],
        },
        "order.status.json": {
            "name": "order.status",
            "webhookUsed": True,
            "responses": [{"messages": [{"type": 4, "payload": {}}]}],
        },
        "Default Welcome Intent.json": {
            "name": "Default Welcome Intent",
            "events": [{"name": "WELCOME"}],
            "responses": [{"messages": [{"type": 0, "lang": "en", "speech": ["Hi! Ask away."]}]}],
        },
    }  # fmt: skip
    for name, content in files.items():
        (intents / name).write_text(json.dumps(content), encoding="utf-8")
    return folder


def test_an_exported_agent_gives_an_article_per_intent_that_answers_in_text(db_url, tmp_path):
    folder = agent(tmp_path / "Northwind")
    archive = tmp_path / "Northwind.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.rglob("*"):
            zipped.write(path, path.relative_to(folder))
    report = run_import(db_url, [archive])
    assert (report.created, report.problems) == (2, [])
    assert report.notes == [
        f"{archive}/agent.json:1: Dialogflow agent: 1 fallback intent and 1 follow-up intent left "
        "out (fallback intents hand over to a person here; follow-up intents answer only after "
        "another)"
    ]
    assert report.warnings == [
        f"{archive}/intents/order.status.json:1: intent 'order.status' has no text response (a "
        "webhook's or rich ones only): skipped"
    ]
    stored = articles(db_url)
    hours = stored["faq-opening-hours"]
    # the agent's language; each text message's first variant; annotated parts joined; each
    # phrase once
    assert (hours.title, hours.questions, hours.body, hours.source) == (
        "When are you open?",
        ["opening hours on Saturday"],
        "We answer from 8 to 20.\n\nWrite to us any time.",
        f"{archive}/intents/faq.opening_hours.json",
    )
    welcome = stored["default-welcome-intent"]
    assert (welcome.title, welcome.body) == ("Default Welcome Intent", "Hi! Ask away.")
    # the unpacked folder reads the same
    assert run_import(db_url, [folder]).unchanged == 2


def test_an_intent_keeps_its_article_when_its_phrases_change(db_url, tmp_path):
    run_import(db_url, [agent(tmp_path / "v1")])
    newer = agent(tmp_path / "v2", [[{"text": "What are your opening hours?"}]])
    report = run_import(db_url, [newer])
    assert (report.created, report.updated) == (0, 1)
    assert articles(db_url)["faq-opening-hours"].title == "What are your opening hours?"


def test_a_broken_intent_file_is_named(db_url, tmp_path):
    folder = agent(tmp_path / "agent")
    (folder / "intents" / "faq.opening_hours.json").write_text('{"name": "faq.opening_hours",\n')
    (folder / "intents" / "Default Welcome Intent_usersays_en.json").write_text('{"data": 1}')
    assert rejected(db_url, [folder]) == [
        f"{folder}/intents/Default Welcome Intent_usersays_en.json:1: expected a list of "
        "training phrases",
        f"{folder}/intents/faq.opening_hours.json:2: invalid JSON: Expecting property name "
        "enclosed in double quotes",
    ]
