"""A Dialogflow ES agent as a source: the zip its console exports (Settings > Export and Import
> Export as ZIP), or the folder unpacked from it, holding ``agent.json`` and ``intents/``.

An agent built to answer questions is an FAQ with alternate questions: each intent that answers
in text is one article.

- The title is the intent's first training phrase (``intents/NAME_usersays_LANG.json``, in the
  agent's default language; a phrase's annotated parts are joined back into its text), and
  the other phrases are its alternate questions. An intent without phrases (one started by an
  event) is titled by its name.
- The body is the intent's text responses in that language, each message its first variant
  (Dialogflow picks one at random; the others say the same in other words).
- The slug comes from the intent's name, which the agent keeps when phrases change.
- The source is the intent's file.

Left out, with one note saying how many: fallback intents (the agent's "I didn't get that";
tierdesk hands such questions to a person) and follow-up intents (answers to "yes" or "no"
after another intent, which mean nothing on their own). An intent with no text response (a
webhook's, or rich responses only) is left out with a warning naming it. A file that is not
valid JSON, or an intent or phrase of the wrong shape, is an error on its file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from app.kb.bot_exports import (
    export_root,
    first_variant,
    intent_row,
    json_file,
    json_object,
    unique_texts,
    zip_holds,
)
from app.kb.records import SourceRow
from app.kb.textfiles import Problems
from app.vocab import counted

AGENT_FILE = "agent.json"
INTENTS = "intents"
_TEXT_TYPES = (0, "0")  # a message's type: 0 is a text response


def is_agent_folder(folder: Path) -> bool:
    return (folder / AGENT_FILE).is_file() and (folder / INTENTS).is_dir()


def agent_root(folder: Path) -> Path | None:
    return export_root(folder, is_agent_folder)


def zip_holds_agent(names: frozenset[str]) -> bool:
    """Whether an archive of member ``names`` is an exported agent (``agent.json`` at its top
    or one folder down, beside ``intents/``)."""
    return zip_holds(names, AGENT_FILE, INTENTS)


def agent_rows(
    folder: Path, named: Callable[[Path], str], problems: Problems
) -> Iterator[SourceRow]:
    """The articles of the agent in ``folder``; ``named(file)`` is how a file is named in
    messages and sources."""
    root = agent_root(folder) or folder
    agent = json_file(root / AGENT_FILE, named, problems)
    language = agent.get("language") if isinstance(agent, dict) else None
    language = language if isinstance(language, str) and language else "en"
    skipped = {"fallback": 0, "follow-up": 0}
    intents = sorted(p for p in (root / INTENTS).glob("*.json") if "_usersays_" not in p.name)
    for path in intents:
        intent = json_object(path, named, problems, "an intent")
        if intent is None:
            continue
        display = named(path)
        if intent.get("fallbackIntent") is True:
            skipped["fallback"] += 1
            continue
        if intent.get("parentId"):
            skipped["follow-up"] += 1
            continue
        name = intent.get("name") if isinstance(intent.get("name"), str) else path.stem
        body = _text_responses(intent, language)
        if body is None:
            problems.add(display, 1, f"intent {name!r}: responses must be a list of objects")
            continue
        if not body:
            problems.warn(
                display,
                1,
                f"intent {name!r} has no text response (a webhook's or rich ones only): skipped",
            )
            continue
        phrases = _phrases(
            root / INTENTS / f"{path.stem}_usersays_{language}.json", named, problems
        )
        if phrases is None:
            continue
        yield intent_row(display, name, phrases, body)
    left_out = [counted(n, f"{kind} intent") for kind, n in skipped.items() if n]
    if left_out:
        problems.note(
            named(root / AGENT_FILE),
            1,
            f"Dialogflow agent: {' and '.join(left_out)} left out (fallback intents hand over to "
            "a person here; follow-up intents answer only after another)",
        )


def _text_responses(intent: dict, language: str) -> str | None:
    """The intent's text responses in ``language``, each message's first variant, as
    paragraphs; None when they are not the shape Dialogflow writes."""
    responses = intent.get("responses") or []
    if not isinstance(responses, list) or not all(isinstance(r, dict) for r in responses):
        return None
    texts: list[str] = []
    for response in responses:
        messages = response.get("messages") or []
        if not isinstance(messages, list):
            return None
        for message in messages:
            if not isinstance(message, dict) or message.get("type") not in _TEXT_TYPES:
                continue
            if message.get("lang", language) != language:
                continue
            texts.append(first_variant(message.get("speech")))
    return "\n\n".join(text for text in texts if text)


def _phrases(path: Path, named: Callable[[Path], str], problems: Problems) -> list[str] | None:
    """The training phrases in ``path``, each once (case and spacing aside); [] without the
    file (an intent started by an event has none); None after a problem."""
    if not path.exists():
        return []
    said = json_file(path, named, problems)
    if said is None:
        return None
    if not isinstance(said, list):
        problems.add(named(path), 1, "expected a list of training phrases")
        return None
    texts = []
    for number, item in enumerate(said):
        parts = item.get("data") if isinstance(item, dict) else None
        if not isinstance(parts, list) or not all(
            isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts
        ):
            problems.add(named(path), 1, f"[{number}]: a phrase is a 'data' list of texts")
            return None
        texts.append("".join(p["text"] for p in parts))
    return unique_texts(texts)
