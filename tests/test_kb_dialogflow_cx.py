"""A Dialogflow CX agent exported as a JSON package (app/kb/dialogflow_cx.py): a zip of
``agent.json``, ``intents/`` and ``flows/``, imported for real."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from fixtures_kb import articles, rejected, run_import


def _messages(*texts: str | list[str], language: str | None = "en") -> dict:
    messages = []
    for text in texts:
        message: dict = {"text": {"text": text if isinstance(text, list) else [text]}}
        if language:
            message["languageCode"] = language
        messages.append(message)
    return {"messages": messages}


def _phrases(*texts: str | list[str]) -> dict:
    return {
        "trainingPhrases": [
            {
                "id": str(n),
                "parts": [{"text": t} for t in (text if isinstance(text, list) else [text])],
                "repeatCount": 1,
                "languageCode": "en",
            }
            for n, text in enumerate(texts)
        ]
    }


def _write(path: Path, content: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content), encoding="utf-8")


def agent(folder: Path, hours_phrases: tuple = ()) -> Path:
    """An exported agent in ``folder``: the start flow routes the opening-hours question to a
    text and a page that says more, returns to a webhook, and another flow routes the welcome
    intent; the negative intent has no route."""
    _write(folder / "agent.json", {"displayName": "Help", "defaultLanguageCode": "en",
                                   "startFlow": "Default Start Flow"})  # fmt: skip
    intents = {
        "faq.hours": _phrases(
            *(hours_phrases or ("When are you open?", ["opening hours on ", "Saturday"],
                                "when are you  OPEN?"))
        ),
        "returns": _phrases("How do I return an item?"),
        "Default Welcome Intent": _phrases("hi", "hello"),
        "Default Negative Intent": None,
    }  # fmt: skip
    for name, phrases in intents.items():
        _write(folder / "intents" / name / f"{name}.json", {"name": "x", "displayName": name})
        if phrases:
            _write(folder / "intents" / name / "trainingPhrases" / "en.json", phrases)
    _write(folder / "intents" / "faq.hours" / "trainingPhrases" / "de.json",
           _phrases("Wann habt ihr offen?"))  # fmt: skip
    start = folder / "flows" / "Default Start Flow"
    _write(
        start / "Default Start Flow.json",
        {
            "displayName": "Default Start Flow",
            "transitionRoutes": [
                {
                    "intent": "faq.hours",
                    "triggerFulfillment": {
                        "messages": [
                            *_messages(["We answer from 8 to 20.", "8-20 daily."])["messages"],
                            *_messages("Wir sind von 8 bis 20 Uhr da.", language="de")["messages"],
                            {"payload": {"richContent": []}},
                        ]
                    },
                    "targetPage": "Hours details",
                },
                {
                    "intent": "returns",
                    "triggerFulfillment": {"webhook": "orders", **_messages("One moment...")},
                },
            ],
            "eventHandlers": [
                {"event": "sys.no-match-default", "triggerFulfillment": _messages("Sorry?")}
            ],
        },
    )
    _write(
        start / "pages" / "Hours details.json",
        {
            "displayName": "Hours details",
            "entryFulfillment": _messages("Write to us any time.", language=None),
        },
    )
    _write(
        folder / "flows" / "Common questions" / "Common questions.json",
        {
            "displayName": "Common questions",
            "transitionRoutes": [
                {
                    "intent": "Default Welcome Intent",
                    "triggerFulfillment": _messages("Hi! Ask away."),
                },
                {"intent": "faq.hours", "triggerFulfillment": _messages("Not this one.")},
            ],
        },
    )
    return folder


def test_an_exported_agent_gives_an_article_per_intent_routed_to_a_text_answer(db_url, tmp_path):
    folder = agent(tmp_path / "Help")
    archive = tmp_path / "exported_agent_Help.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.rglob("*"):
            zipped.write(path, path.relative_to(folder))
    report = run_import(db_url, [archive])
    assert (report.created, report.problems, report.warnings) == (2, [], [])
    assert report.notes == [
        f"{archive}/agent.json:1: Dialogflow CX agent: 2 intents that no route answers in text "
        "left out (the negative intent, intents a webhook answers or that ask for parameters)"
    ]
    stored = articles(db_url)
    hours = stored["faq-hours"]
    # the default language's phrases, parts joined, each once; the start flow's route first,
    # each message's first variant in that language, then what its target page says
    assert (hours.title, hours.questions, hours.body, hours.source) == (
        "When are you open?",
        ["opening hours on Saturday"],
        "We answer from 8 to 20.\n\nWrite to us any time.",
        f"{archive}/intents/faq.hours/faq.hours.json",
    )
    welcome = stored["default-welcome-intent"]
    assert (welcome.title, welcome.questions, welcome.body) == ("hi", ["hello"], "Hi! Ask away.")
    # the unpacked folder reads the same, and is not read as a Dialogflow ES agent
    assert run_import(db_url, [folder]).unchanged == 2


def test_an_intent_keeps_its_article_when_its_phrases_change(db_url, tmp_path):
    run_import(db_url, [agent(tmp_path / "v1")])
    report = run_import(db_url, [agent(tmp_path / "v2", ("What are your opening hours?",))])
    assert (report.created, report.updated) == (0, 1)
    assert articles(db_url)["faq-hours"].title == "What are your opening hours?"


def test_a_broken_file_is_named(db_url, tmp_path):
    folder = agent(tmp_path / "agent")
    hours = folder / "intents" / "faq.hours"
    (hours / "faq.hours.json").write_text('{"displayName": "faq.hours",\n')
    (folder / "intents" / "Default Welcome Intent" / "trainingPhrases" / "en.json").write_text(
        '{"trainingPhrases": [{"parts": "hi"}]}'
    )
    assert rejected(db_url, [folder]) == [
        f"{folder}/intents/Default Welcome Intent/trainingPhrases/en.json:1: trainingPhrases[0]: "
        "a phrase is a 'parts' list of texts",
        f"{hours}/faq.hours.json:2: invalid JSON: Expecting property name enclosed in double "
        "quotes",
    ]


def test_conditional_responses_give_the_case_without_a_condition(db_url, tmp_path):
    """A route whose answer depends on a parameter answers, when no condition holds, with its
    case that has none: that is the article's text, nested conditions read the same way."""

    def case(*texts: str, condition: str | None = None, more: dict | None = None) -> dict:
        content = [{"message": m} for m in _messages(*texts)["messages"]]
        if more is not None:
            content.append({"additionalCases": more})
        return (
            {"condition": condition, "caseContent": content}
            if condition
            else {"caseContent": content}
        )

    folder = agent(tmp_path / "Help")
    _write(
        folder / "intents" / "faq.delivery" / "faq.delivery.json", {"displayName": "faq.delivery"}
    )
    _write(
        folder / "intents" / "faq.delivery" / "trainingPhrases" / "en.json",
        _phrases("How long does delivery take?"),
    )
    express = {
        "cases": [
            case("Express takes a day.", condition="$session.params.express = true"),
            case("Ask for express at checkout."),
        ]
    }
    fulfillment = {
        **_messages("Delivery times:"),
        "conditionalCases": [
            {
                "cases": [
                    case("Two days in Germany.", condition='$session.params.country = "DE"'),
                    case("Five working days.", more=express),
                ]
            }
        ],
    }
    _write(
        folder / "flows" / "Delivery" / "Delivery.json",
        {
            "displayName": "Delivery",
            "transitionRoutes": [{"intent": "faq.delivery", "triggerFulfillment": fulfillment}],
        },
    )
    report = run_import(db_url, [folder])
    assert (report.created, report.problems) == (3, [])
    assert articles(db_url)["faq-delivery"].body == (
        "Delivery times:\n\nFive working days.\n\nAsk for express at checkout."
    )
