"""An Amazon Lex V2 bot exported as its console writes it (app/kb/lex_bot.py): a zip of
``manifest.json`` and ``<bot>/BotLocales/<locale>/Intents/<intent>/Intent.json``, imported for
real."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from fixtures_kb import articles, rejected, run_import


def _response(*groups: dict) -> dict:
    return {"messageGroupsList": list(groups), "allowInterrupt": True}


def _text(value: str, *variations: str) -> dict:
    return {
        "message": {"plainTextMessage": {"value": value}},
        "variations": [{"plainTextMessage": {"value": v}} for v in variations] or None,
    }


def _said(*utterances: str) -> list[dict]:
    return [{"utterance": u} for u in utterances]


HOURS = {
    "name": "OpeningHours",
    "identifier": "A1B2C3",
    "description": None,
    "parentIntentSignature": None,
    "sampleUtterances": _said(
        "When are you open?", "opening hours", "When are you  OPEN?", "open on {Day}"
    ),
    "initialResponseSetting": {
        "initialResponse": _response(_text("We answer from 8 to 20.", "8-20 daily.")),
        "codeHook": {"isActive": False},
    },
    "intentClosingSetting": {
        "closingResponse": _response(
            {"message": {"ssmlMessage": {"value": "<speak>Write to us <b>any</b> time &amp; "
                                                  "day.</speak>"}}},
            {"message": {"imageResponseCard": {"title": "Contact"}}},
        ),
        "active": True,
    },
    "slotPriorities": [],
}  # fmt: skip


def bot(folder: Path, hours: dict | None = None, locales: tuple[str, ...] = ("en_US",)) -> Path:
    """An exported bot in ``folder``: an FAQ intent, a fulfilled one with a switched-off closing
    response, the fallback, one asking for a slot, one answered by a Lambda function and one
    showing a card."""
    (folder / "Help").mkdir(parents=True)
    manifest = {"metadata": {"schemaVersion": "1", "fileFormat": "LexJson", "resourceType": "Bot"}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "Help" / "Bot.json").write_text(json.dumps({"name": "Help", "version": "DRAFT"}))
    for locale in locales:
        intents = folder / "Help" / "BotLocales" / locale / "Intents"
        files = {
            "OpeningHours": hours or HOURS,
            "Returns": {
                "name": "Returns",
                "sampleUtterances": _said("How do I return an item?"),
                "fulfillmentCodeHook": {
                    "enabled": False,
                    "postFulfillmentStatusSpecification": {
                        "successResponse": _response(_text("Send it back within 30 days."))
                    },
                },
                "intentClosingSetting": {
                    "closingResponse": _response(_text("Anything else?")),
                    "active": False,
                },
            },
            "FallbackIntent": {
                "name": "FallbackIntent",
                "parentIntentSignature": "AMAZON.FallbackIntent",
                "intentClosingSetting": {"closingResponse": _response(_text("Sorry?"))},
            },
            "BookTable": {
                "name": "BookTable",
                "sampleUtterances": _said("book a table for {Guests}"),
                "slotPriorities": [{"priority": 1, "slotName": "Guests"}],
                "intentClosingSetting": {"closingResponse": _response(_text("Booked."))},
            },
            "OrderStatus": {
                "name": "OrderStatus",
                "sampleUtterances": _said("where is my order"),
                "fulfillmentCodeHook": {"enabled": True},
                "intentClosingSetting": {"closingResponse": _response(_text("Anything else?"))},
            },
            "Photos": {
                "name": "Photos",
                "sampleUtterances": _said("show me the shop"),
                "intentClosingSetting": {
                    "closingResponse": _response(
                        {"message": {"imageResponseCard": {"title": "Our shop"}}}
                    )
                },
            },
        }
        for name, content in files.items():
            (intents / name).mkdir(parents=True)
            (intents / name / "Intent.json").write_text(json.dumps(content), encoding="utf-8")
        (intents.parent / "BotLocale.json").write_text(json.dumps({"identifier": locale}))
    return folder


def _zipped(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.rglob("*"):
            zipped.write(path, path.relative_to(folder))
    return archive


def test_an_exported_bot_gives_an_article_per_intent_that_answers_in_text(db_url, tmp_path):
    folder = bot(tmp_path / "Help_DRAFT_X1_LexJson")
    archive = _zipped(folder, tmp_path / "Help_DRAFT_X1_LexJson.zip")
    report = run_import(db_url, [archive])
    assert (report.created, report.problems) == (2, [])
    intents = f"{archive}/Help/BotLocales/en_US/Intents"
    assert report.notes == [
        f"{archive}/Help/BotLocales/en_US:1: Amazon Lex bot: 1 built-in intent and 1 intent that "
        "asks for slot values left out (built-in intents such as AMAZON.FallbackIntent hand over "
        "to a person here; slot answers depend on what the customer says next)"
    ]
    assert report.warnings == [
        f"{intents}/OrderStatus/Intent.json:1: intent 'OrderStatus' is fulfilled by a Lambda "
        "function, whose reply is the answer: skipped",
        f"{intents}/Photos/Intent.json:1: intent 'Photos' has no text response (cards only): "
        "skipped",
    ]
    stored = articles(db_url)
    hours = stored["openinghours"]
    # each utterance once, those naming a slot left out; the initial response, then the closing
    # one, each group's message (not its variations), SSML without its tags, cards left out
    assert (hours.title, hours.questions, hours.body, hours.source) == (
        "When are you open?",
        ["opening hours"],
        "We answer from 8 to 20.\n\nWrite to us any time & day.",
        f"{intents}/OpeningHours/Intent.json",
    )
    # the fulfilment's success response; a closing response switched off is not said
    assert stored["returns"].body == "Send it back within 30 days."
    # the unpacked folder, and a zip of the folder rather than of its contents, read the same
    assert run_import(db_url, [folder]).unchanged == 2
    outer = tmp_path / "outer.zip"
    with zipfile.ZipFile(outer, "w") as zipped:
        for path in folder.rglob("*"):
            zipped.write(path, Path(folder.name) / path.relative_to(folder))
    assert run_import(db_url, [outer]).unchanged == 2


def test_locales_beside_the_manifest_are_read_too(db_url, tmp_path):
    folder = bot(tmp_path / "Help_DRAFT_en_US_X2_LEX_JSON")
    (folder / "Help" / "BotLocales").rename(folder / "BotLocales")
    shutil.rmtree(folder / "Help")
    report = run_import(db_url, [_zipped(folder, tmp_path / "locale.zip")])
    assert (report.created, report.problems) == (2, [])
    assert articles(db_url)["openinghours"].source.endswith(
        "locale.zip/BotLocales/en_US/Intents/OpeningHours/Intent.json"
    )


def test_one_locale_is_read_and_the_others_named(db_url, tmp_path):
    folder = bot(tmp_path / "bot", locales=("de_DE", "en_GB", "fr_FR"))
    report = run_import(db_url, [folder])
    assert report.created == 2
    assert report.notes[0] == (
        f"{folder}/manifest.json:1: Amazon Lex bot: locale en_GB read; de_DE, fr_FR not read"
    )
    assert articles(db_url)["openinghours"].source.endswith(
        "/en_GB/Intents/OpeningHours/Intent.json"
    )


def test_an_intent_keeps_its_article_when_its_utterances_change(db_url, tmp_path):
    run_import(db_url, [bot(tmp_path / "v1")])
    newer = bot(tmp_path / "v2", {**HOURS, "sampleUtterances": _said("What are your hours?")})
    report = run_import(db_url, [newer])
    assert (report.created, report.updated) == (0, 1)
    assert articles(db_url)["openinghours"].title == "What are your hours?"


def test_a_broken_intent_file_is_named(db_url, tmp_path):
    folder = bot(tmp_path / "bot")
    intents = folder / "Help" / "BotLocales" / "en_US" / "Intents"
    (intents / "OpeningHours" / "Intent.json").write_text('{"name": "OpeningHours",\n')
    (intents / "Returns" / "Intent.json").write_text('{"name": "Returns", "sampleUtterances": 1}')
    assert rejected(db_url, [folder]) == [
        f"{intents}/OpeningHours/Intent.json:2: invalid JSON: Expecting property name enclosed "
        "in double quotes",
        f"{intents}/Returns/Intent.json:1: intent 'Returns': sampleUtterances must be a list",
    ]
