"""A Rasa project as a source: its folder (or a zip of it) holding ``domain.yml`` (or a
``domain/`` folder) and its training data under ``data/``.

A Rasa assistant's FAQ is written as retrieval intents: ``faq/opening_hours`` in the NLU data,
with its examples, answered by the response ``utter_faq/opening_hours``. Other intents are
answered by what a rule answers them with, when the rule always applies (no ``condition``, not
only at a conversation's start) and its steps are the intent, with no entities, then responses
only (``utter_`` actions: ``bot_challenge`` answered by ``utter_iamabot``); else by what a story
of one such turn answers them with (a story of one question and its answer is an FAQ's, its
answer the same whatever came before); else, by the usual convention, by ``utter_<intent>``.
Each intent so answered in text is one article:

- the title is its first example and the others are its alternate questions, each once, with
  entity annotations read as their text (``[Berlin](city)``, ``[NYC]{"entity": "city"}``);
- the body is the response's first text variant (Rasa picks one at random), in the responses
  of the domain or of the training data, a paragraph for each response a rule or story gives;
- the slug comes from the intent's name (``faq/opening_hours`` gives ``faq-opening-hours``),
  and the source is the file of the intent's examples.

Intents answered none of these ways (``affirm``, ``deny``, answered in stories of several
turns, by rules that depend on the conversation, by custom actions) are left out with one note
saying how many. YAML that cannot be read is an error on its line; slots, forms and actions are
not read, nor are rules and stories other than those above.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from app.kb.bot_exports import export_root, intent_row, unique_texts, zip_holds
from app.kb.records import SourceRow
from app.kb.textfiles import Problems, yaml_error
from app.vocab import counted

_DOMAIN = "domain.yml"
_DATA = "data"
_YAML_SUFFIXES = (".yml", ".yaml")
# An entity annotation in an example: "[Berlin](city)", "[NYC]{"entity": "city", ...}",
# "[Berlin](city:capital)".
_ANNOTATION = re.compile(r"\[([^\]\n]+)\](?:\([^)\n]*\)|\{[^}\n]*\})")
_ITEM = re.compile(r"^\s*-\s+", re.M)


def _domain_files(root: Path) -> list[Path]:
    if (root / _DOMAIN).is_file():
        return [root / _DOMAIN]
    folder = root / "domain"
    return (
        sorted(p for p in folder.rglob("*") if p.suffix in _YAML_SUFFIXES)
        if folder.is_dir()
        else []
    )


def is_project_folder(folder: Path) -> bool:
    return bool(_domain_files(folder)) and (folder / _DATA).is_dir()


def project_root(folder: Path) -> Path | None:
    return export_root(folder, is_project_folder)


def zip_holds_project(names: frozenset[str]) -> bool:
    """Whether an archive of member ``names`` holds a Rasa project (``domain.yml`` at its top
    or one folder down, beside ``data/``)."""
    return zip_holds(names, _DOMAIN, _DATA)


def wanted_member(name: str, head: Callable[[], bytes]) -> bool:
    """What a Rasa project's archive unpacks: its YAML files."""
    return name.lower().endswith(_YAML_SUFFIXES)


def project_rows(
    folder: Path, named: Callable[[Path], str], problems: Problems
) -> Iterator[SourceRow]:
    """The articles of the Rasa project in ``folder``; ``named(file)`` names a file."""
    root = project_root(folder) or folder
    responses: dict[str, str] = {}
    ruled: dict[str, list[str]] = {}  # intent -> the responses a rule answers it with
    told: dict[str, list[str]] = {}  # ... and a story of one turn
    examples: dict[str, tuple[Path, list[str]]] = {}
    data = sorted(p for p in (root / _DATA).rglob("*") if p.suffix in _YAML_SUFFIXES)
    for path in [*_domain_files(root), *data]:
        document = _yaml(path, named, problems)
        if not isinstance(document, dict):
            continue
        _read_responses(document.get("responses"), responses)
        _read_turns(document.get("rules"), ruled)
        _read_turns(document.get("stories"), told)
        _read_nlu(document.get("nlu"), path, examples, named, problems)
    answers = {**told, **ruled}
    unanswered = 0
    for intent, (path, texts) in examples.items():
        names = answers.get(intent) or [f"utter_{intent}"]
        body = "\n\n".join(responses[name] for name in names if name in responses)
        if not body:
            unanswered += 1
            continue
        yield intent_row(named(path), intent, unique_texts(texts), body)
    if unanswered:
        problems.note(
            named(root / _DATA),
            1,
            f"Rasa project: {counted(unanswered, 'intent')} without a response of its name "
            "(utter_<intent>), a rule or a story of one turn answering it in text left out: "
            "stories of several turns and actions answer them",
        )


def _yaml(path: Path, named: Callable[[Path], str], problems: Problems) -> object:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        problems.add(named(path), 1, "not UTF-8 text")
    except yaml.YAMLError as exc:
        line, reason = yaml_error(exc)
        problems.add(named(path), line, f"invalid YAML: {reason}")
    return None


def _read_responses(section: object, responses: dict[str, str]) -> None:
    """Each response's first text variant, by name."""
    if not isinstance(section, dict):
        return
    for name, variants in section.items():
        if not isinstance(name, str) or not isinstance(variants, list):
            continue
        for variant in variants:
            text = variant.get("text") if isinstance(variant, dict) else None
            if isinstance(text, str) and text.strip():
                responses.setdefault(name, text.strip())
                break


def _read_turns(section: object, answers: dict[str, list[str]]) -> None:
    """The responses each intent is answered with by a rule or a story (``section``: the
    ``rules`` or ``stories`` list) of one turn that always applies: no ``condition``, not
    ``conversation_start``, its steps an intent without entities and then ``utter_`` actions
    only. The first such rule or story of an intent counts."""
    if not isinstance(section, list):
        return
    for rule in section:
        if not isinstance(rule, dict) or rule.get("condition") or rule.get("conversation_start"):
            continue
        steps = rule.get("steps")
        if not isinstance(steps, list) or len(steps) < 2:
            continue
        first, *rest = steps
        intent = first.get("intent") if isinstance(first, dict) and len(first) == 1 else None
        actions = [step.get("action") for step in rest if isinstance(step, dict) and len(step) == 1]
        if (
            isinstance(intent, str)
            and len(actions) == len(rest)
            and all(isinstance(a, str) and a.startswith("utter_") for a in actions)
        ):
            answers.setdefault(intent, actions)


def _read_nlu(
    section: object,
    path: Path,
    examples: dict[str, tuple[Path, list[str]]],
    named: Callable[[Path], str],
    problems: Problems,
) -> None:
    """The examples of each intent of an ``nlu:`` section (synonyms, regexes and lookups
    aside), in order, their entity annotations read as their words."""
    if section is None:
        return
    if not isinstance(section, list):
        problems.add(named(path), 1, "nlu: must be a list of intents")
        return
    for item in section:
        if not isinstance(item, dict) or "intent" not in item:
            continue
        intent, listed = item.get("intent"), item.get("examples")
        if not isinstance(intent, str) or not isinstance(listed, str | None):
            problems.add(named(path), 1, f"nlu: intent {intent!r}: examples must be a '- ' list")
            continue
        _, texts = examples.setdefault(intent, (path, []))
        texts.extend(_ANNOTATION.sub(r"\1", example) for example in _ITEM.split(listed or ""))
