"""A Dialogflow CX agent as a source: the zip its console exports in the JSON package format
(Agent settings > Export, "JSON package"), or the folder unpacked from it, holding
``agent.json`` beside ``intents/`` and ``flows/``.

A CX agent answers an intent by a route: a flow or page lists ``transitionRoutes``, each naming
an intent and what to say when it matches (``triggerFulfillment``), and perhaps a page to go
to, which says its own ``entryFulfillment``. An agent built to answer questions routes each
question's intent to its answer, so each intent routed to a text answer is one article:

- The title is the intent's first training phrase in the agent's default language
  (``intents/NAME/trainingPhrases/LANG.json``, a phrase's parts joined back into its text), the
  other phrases its alternate questions, each once. An intent without phrases is titled by its
  name.
- The body is what the route says in that language, then what its target page says on entry:
  each text message its first variant (the agent picks one at random; the others say the same
  in other words), as paragraphs; of its conditional responses, the case without a condition
  (what it says when none holds) is read. The first route of an intent found is read: the start
  flow's own routes first, then its pages', then the other flows' in order of their names.
- The slug comes from the intent's name, which the agent keeps when phrases change, and the
  source is the intent's file.

Intents that no route answers in text (the negative intent, intents whose route calls a webhook,
whose reply is the answer, or starts a flow asking for parameters) are left out with one note
saying how many. A file that is not valid JSON, or a phrase of the wrong shape, is an error on
its file.
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
_INTENTS = "intents"
_FLOWS = "flows"


def is_agent_folder(folder: Path) -> bool:
    return (
        (folder / AGENT_FILE).is_file()
        and (folder / _INTENTS).is_dir()
        and (folder / _FLOWS).is_dir()
    )


def agent_root(folder: Path) -> Path | None:
    return export_root(folder, is_agent_folder)


def zip_holds_agent(names: frozenset[str]) -> bool:
    """Whether an archive of member ``names`` is an exported CX agent (``agent.json`` at its
    top or one folder down, beside ``flows/``)."""
    return zip_holds(names, AGENT_FILE, _FLOWS)


def agent_rows(
    folder: Path, named: Callable[[Path], str], problems: Problems
) -> Iterator[SourceRow]:
    """The articles of the CX agent in ``folder``; ``named(file)`` is how a file is named in
    messages and sources."""
    root = agent_root(folder) or folder
    agent = json_file(root / AGENT_FILE, named, problems)
    language = agent.get("defaultLanguageCode") if isinstance(agent, dict) else None
    language = language if isinstance(language, str) and language else "en"
    start = agent.get("startFlow") if isinstance(agent, dict) else None
    answers = _route_answers(root, start, language, named, problems)
    unanswered = 0
    for folder_of_intent in sorted(p for p in (root / _INTENTS).iterdir() if p.is_dir()):
        path = folder_of_intent / f"{folder_of_intent.name}.json"
        intent = json_object(path, named, problems, "an intent")
        if intent is None:
            continue
        name = intent.get("displayName")
        name = name if isinstance(name, str) and name else folder_of_intent.name
        body = answers.get(name)
        if not body:
            unanswered += 1
            continue
        phrases = _phrases(
            folder_of_intent / "trainingPhrases" / f"{language}.json", named, problems
        )
        if phrases is not None:
            yield intent_row(named(path), name, phrases, body)
    if unanswered:
        problems.note(
            named(root / AGENT_FILE),
            1,
            f"Dialogflow CX agent: {counted(unanswered, 'intent')} that no route answers in text "
            "left out (the negative intent, intents a webhook answers or that ask for "
            "parameters)",
        )


def _route_answers(
    root: Path,
    start: object,
    language: str,
    named: Callable[[Path], str],
    problems: Problems,
) -> dict[str, str]:
    """What each intent's first route says in text, by intent name, with what its target page
    says on entry."""
    flows = sorted(p for p in (root / _FLOWS).iterdir() if p.is_dir())
    flows.sort(key=lambda p: p.name != start)  # the start flow first
    answers: dict[str, str] = {}
    for flow_folder in flows:
        flow = json_file(flow_folder / f"{flow_folder.name}.json", named, problems)
        pages: dict[str, dict] = {}
        for path in sorted((flow_folder / "pages").glob("*.json")):
            page = json_file(path, named, problems)
            if isinstance(page, dict):
                pages[str(page.get("displayName") or path.stem)] = page
        for owner in [flow, *pages.values()]:
            routes = owner.get("transitionRoutes") if isinstance(owner, dict) else None
            for route in routes if isinstance(routes, list) else ():
                if not isinstance(route, dict) or not isinstance(route.get("intent"), str):
                    continue
                trigger = route.get("triggerFulfillment")
                if isinstance(trigger, dict) and trigger.get("webhook"):
                    continue  # the webhook's reply is the answer
                target = pages.get(str(route.get("targetPage")), {})
                texts = [
                    *_texts(trigger, language),
                    *_texts(target.get("entryFulfillment"), language),
                ]
                if texts and route["intent"] not in answers:
                    answers[route["intent"]] = "\n\n".join(texts)
    return answers


def _texts(fulfillment: object, language: str) -> list[str]:
    """A fulfilment's text messages in ``language``, each its first variant, then those of its
    conditional responses' unconditional case (what answers when no condition holds)."""
    if not isinstance(fulfillment, dict):
        return []
    messages = fulfillment.get("messages")
    texts = [
        text
        for message in (messages if isinstance(messages, list) else ())
        if (text := _message_text(message, language))
    ]
    groups = fulfillment.get("conditionalCases")
    for group in groups if isinstance(groups, list) else ():
        cases = group.get("cases") if isinstance(group, dict) else None
        otherwise = next(
            (
                case
                for case in (cases if isinstance(cases, list) else ())
                if isinstance(case, dict) and not case.get("condition")
            ),
            None,
        )
        contents = otherwise.get("caseContent") if otherwise else None
        for content in contents if isinstance(contents, list) else ():
            if not isinstance(content, dict):
                continue
            if "additionalCases" in content:  # conditions inside the case
                texts += _texts({"conditionalCases": [content["additionalCases"]]}, language)
            elif text := _message_text(content.get("message"), language):
                texts.append(text)
    return texts


def _message_text(message: object, language: str) -> str:
    """A response message's first text variant when it is a text in ``language``, else ""."""
    if not isinstance(message, dict) or message.get("languageCode", language) != language:
        return ""
    text = message.get("text")
    return first_variant(text.get("text")) if isinstance(text, dict) else ""


def _phrases(path: Path, named: Callable[[Path], str], problems: Problems) -> list[str] | None:
    """The training phrases in ``path``, each once (case and spacing aside); [] without the
    file; None after a problem."""
    if not path.exists():
        return []
    said = json_file(path, named, problems)
    if said is None:
        return None
    phrases = said.get("trainingPhrases") if isinstance(said, dict) else None
    if not isinstance(phrases, list):
        problems.add(named(path), 1, "expected an object with a 'trainingPhrases' list")
        return None
    texts = []
    for number, item in enumerate(phrases):
        parts = item.get("parts") if isinstance(item, dict) else None
        if not isinstance(parts, list) or not all(
            isinstance(p, dict) and isinstance(p.get("text"), str) for p in parts
        ):
            problems.add(
                named(path), 1, f"trainingPhrases[{number}]: a phrase is a 'parts' list of texts"
            )
            return None
        texts.append("".join(p["text"] for p in parts))
    return unique_texts(texts)
