"""An IBM Watson Assistant dialog skill as a source: the JSON its tool downloads (Skills >
Download, a workspace with ``intents`` and ``dialog_nodes``).

An assistant that answers questions keeps each answer in the dialog node that its intent
triggers (condition ``#intent``). Each intent with such a node answering in text is one article:

- the title is the intent's first example and the others its alternate questions, each once;
- the body is the node's first text response, each text's first variant (``sequential`` and
  ``random`` policies alike pick among texts that say the same), as paragraphs;
- the slug comes from the intent's name, the source is the file.

Intents without a node of their own condition, or whose node does not answer in text (it
asks for slots, jumps to another node or calls an action), are left out with one note saying
how many; so are the system's ``anything_else`` and ``welcome`` nodes, which have no intent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from app.kb.bot_exports import first_variant, intent_row, unique_texts
from app.kb.records import SourceRow
from app.kb.textfiles import Problems
from app.vocab import counted

_CONDITION = re.compile(r"\s*#([\w.-]+)\s*")


def is_skill(document: object) -> bool:
    return (
        isinstance(document, dict)
        and isinstance(document.get("intents"), list)
        and isinstance(document.get("dialog_nodes"), list)
    )


def skill_rows(document: dict, display: str, problems: Problems) -> Iterator[SourceRow]:
    """The articles of the skill ``document`` read from ``display``."""
    answers: dict[str, str] = {}
    for node in document["dialog_nodes"]:
        if not isinstance(node, dict) or not isinstance(node.get("conditions"), str):
            continue
        found = _CONDITION.fullmatch(node["conditions"])
        if found and found.group(1) not in answers:
            text = _node_text(node.get("output"))
            if text:
                answers[found.group(1)] = text
    unanswered = 0
    for number, intent in enumerate(document["intents"]):
        label = f"intents[{number}]"
        name = intent.get("intent") if isinstance(intent, dict) else None
        if not isinstance(name, str) or not name:
            problems.add(display, 1, f"{label}: an intent needs a name ('intent')")
            continue
        body = answers.get(name)
        if not body:
            unanswered += 1
            continue
        examples = intent.get("examples")
        texts = [
            example["text"]
            for example in (examples if isinstance(examples, list) else ())
            if isinstance(example, dict) and isinstance(example.get("text"), str)
        ]
        yield intent_row(display, name, unique_texts(texts), body)
    if unanswered:
        problems.note(
            display,
            1,
            f"Watson Assistant skill: {counted(unanswered, 'intent')} without a dialog node "
            "answering it in text left out",
        )


def _node_text(output: object) -> str:
    """A node's text responses, each its first variant, as paragraphs: ``output.generic``'s
    ``text`` responses, or the older ``output.text``."""
    if not isinstance(output, dict):
        return ""
    texts: list[str] = []
    generic = output.get("generic")
    if isinstance(generic, list):
        for response in generic:
            if isinstance(response, dict) and response.get("response_type") == "text":
                texts.append(first_variant(response.get("values"), key="text"))
    elif output.get("text") is not None:
        older = output["text"]
        texts.append(first_variant(older.get("values") if isinstance(older, dict) else older))
    return "\n\n".join(text for text in texts if text)
