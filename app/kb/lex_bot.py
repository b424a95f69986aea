"""An Amazon Lex V2 bot as a source: the zip its console exports (Bots > Actions > Export, in
the Lex JSON format), or the folder unpacked from it, holding ``manifest.json`` beside
``<bot>/BotLocales/<locale>/Intents/<intent>/Intent.json`` (an exported bot locale holds one
locale; ``BotLocales/`` is also found right beside the manifest).

A bot built to answer questions is an FAQ with alternate questions: each intent that answers in
text is one article.

- The locale read is ``en_US``, else the first English one, else the first by name; others are
  named in a note.
- The title is the intent's first sample utterance and the others are its alternate questions,
  each once. An intent without utterances is titled by its name.
- The body is what the intent says in text, in the order Lex says it: its initial response,
  the response after fulfilment succeeds, its closing response (unless switched off). Each
  message group is a paragraph, its message the one read (its variations say the same in other
  words); SSML messages are read without their tags.
- The slug comes from the intent's name, which the bot keeps when utterances change, and the
  source is the intent's file.

Left out, with one note saying how many: built-in intents (``AMAZON.FallbackIntent``, Lex's "I
didn't get that", which tierdesk hands to a person; ``AMAZON.QnAIntent`` and other generated
answers) and intents that ask for slot values (their answers depend on what the customer says
next). An intent fulfilled by a Lambda function (whose reply is the answer, the intent's own
texts only framing it) or with no text to say (cards only) is left out with a warning naming
it. A file that is not valid JSON, or an intent of the wrong shape, is an error
on its file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from app.kb.bot_exports import export_root, intent_row, json_object, unique_texts, zip_holds
from app.kb.records import SourceRow
from app.kb.textfiles import Problems
from app.vocab import counted

MANIFEST = "manifest.json"
_LOCALES = "BotLocales"
# What an exported bot keeps beside its manifest: BotName/BotLocales/..., or BotLocales/...
# without the bot's folder.
_BESIDE_MANIFEST = re.compile(rf"(?:[^/]+/)?{_LOCALES}/[^/]+/")
_SLOT_REFERENCE = re.compile(r"\{[A-Za-z][\w-]*\}")
_TAG = re.compile(r"<[^>]*>")


def _locale_folders(root: Path) -> list[Path]:
    found = [*root.glob(f"{_LOCALES}/*"), *root.glob(f"*/{_LOCALES}/*")]
    return sorted(p for p in found if p.is_dir())


def is_bot_folder(folder: Path) -> bool:
    return (folder / MANIFEST).is_file() and bool(_locale_folders(folder))


def bot_root(folder: Path) -> Path | None:
    return export_root(folder, is_bot_folder)


def zip_holds_bot(names: frozenset[str]) -> bool:
    """Whether an archive of member ``names`` is an exported Lex bot (``manifest.json`` at its
    top or one folder down, beside a bot's ``BotLocales/``)."""
    return zip_holds(names, MANIFEST, _BESIDE_MANIFEST)


def _chosen_locale(folders: list[Path]) -> Path:
    by_name = {p.name: p for p in folders}
    english = [p for p in folders if p.name.lower().startswith("en")]
    return by_name.get("en_US") or (english or folders)[0]


def bot_rows(folder: Path, named: Callable[[Path], str], problems: Problems) -> Iterator[SourceRow]:
    """The articles of the Lex bot in ``folder``; ``named(file)`` names a file in messages and
    sources."""
    root = bot_root(folder) or folder
    folders = _locale_folders(root)
    if not folders:
        problems.add(named(root / MANIFEST), 1, f"no {_LOCALES} folder: an exported bot holds one")
        return
    locale = _chosen_locale(folders)
    others = sorted({p.name for p in folders} - {locale.name})
    if others:
        problems.note(
            named(root / MANIFEST),
            1,
            f"Amazon Lex bot: locale {locale.name} read; {', '.join(others)} not read",
        )
    skipped = {"built-in intent": 0, "intent that asks for slot values": 0}
    for path in sorted(locale.glob("Intents/*/Intent.json")):
        intent = json_object(path, named, problems, "an intent")
        if intent is None:
            continue
        display = named(path)
        name = intent.get("name") if isinstance(intent.get("name"), str) else path.parent.name
        if intent.get("parentIntentSignature"):
            skipped["built-in intent"] += 1
            continue
        if intent.get("slotPriorities") or any(path.parent.glob("Slots/*/Slot.json")):
            skipped["intent that asks for slot values"] += 1
            continue
        utterances = intent.get("sampleUtterances") or []
        if not isinstance(utterances, list):
            problems.add(display, 1, f"intent {name!r}: sampleUtterances must be a list")
            continue
        texts = [
            item["utterance"]
            for item in utterances
            if isinstance(item, dict)
            and isinstance(item.get("utterance"), str)
            and not _SLOT_REFERENCE.search(item["utterance"])
        ]
        if _object(intent.get("fulfillmentCodeHook")).get("enabled") is True:
            problems.warn(
                display,
                1,
                f"intent {name!r} is fulfilled by a Lambda function, whose reply is the answer: "
                "skipped",
            )
            continue
        body = _said(intent)
        if not body:
            problems.warn(display, 1, f"intent {name!r} has no text response (cards only): skipped")
            continue
        yield intent_row(display, name, unique_texts(texts), body)
    left_out = [counted(n, kind) for kind, n in skipped.items() if n]
    if left_out:
        problems.note(
            named(locale),
            1,
            f"Amazon Lex bot: {' and '.join(left_out)} left out (built-in intents such as "
            "AMAZON.FallbackIntent hand over to a person here; slot answers depend on what the "
            "customer says next)",
        )


def _said(intent: dict) -> str:
    """What ``intent`` says in text, in the order Lex says it, each message group a
    paragraph."""
    fulfilment = _object(intent.get("fulfillmentCodeHook"))
    closing = _object(intent.get("intentClosingSetting"))
    responses = [
        _object(_object(intent.get("initialResponseSetting")).get("initialResponse")),
        _object(
            _object(fulfilment.get("postFulfillmentStatusSpecification")).get("successResponse")
        ),
        _object(closing.get("closingResponse")) if closing.get("active") is not False else {},
    ]
    texts = [_group_text(group) for response in responses for group in _groups(response)]
    return "\n\n".join(text for text in texts if text)


def _object(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _groups(response: dict) -> list:
    """A response's message groups: ``messageGroupsList`` as the export writes it, or
    ``messageGroups`` as the API returns it."""
    groups = response.get("messageGroupsList", response.get("messageGroups"))
    return groups if isinstance(groups, list) else []


def _group_text(group: object) -> str:
    message = _object(_object(group).get("message"))
    plain = _object(message.get("plainTextMessage")).get("value")
    if isinstance(plain, str) and plain.strip():
        return plain.strip()
    ssml = _object(message.get("ssmlMessage")).get("value")
    if isinstance(ssml, str):
        return " ".join(html.unescape(_TAG.sub(" ", ssml)).split())
    return ""
