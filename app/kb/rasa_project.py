"""A Rasa project as a source: its folder (or a zip of it) holding ``domain.yml`` (or a
``domain/`` folder) and its training data under ``data/``.

A Rasa assistant's FAQ is written as retrieval intents: ``faq/opening_hours`` in the NLU data,
with its examples, answered by the response ``utter_faq/opening_hours``; other intents are
answered, by the usual convention of its rules, by ``utter_<intent>``. Each intent that has such
a response with text is one article:

- the title is its first example and the others are its alternate questions, each once, with
  entity annotations read as their text (``[Berlin](city)``, ``[NYC]{"entity": "city"}``);
- the body is the response's first text variant (Rasa picks one at random), in the responses
  of the domain or of the training data;
- the slug comes from the intent's name (``faq/opening_hours`` gives ``faq-opening-hours``),
  and the source is the file of the intent's examples.

Intents without a response of their own name (``affirm``, ``deny``, answered by stories and
actions) are left out with one note saying how many. YAML that cannot be read is an error on
its line; stories, rules, slots, forms and actions are not read.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from app.kb.archives import ZIP_ERRORS
from app.kb.qna import question_key
from app.kb.records import SourceRow
from app.kb.slugs import slugify
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
    """The project's folder: ``folder`` or its only subfolder that is one (a zip made of the
    folder rather than of its contents)."""
    if is_project_folder(folder):
        return folder
    inner = [p for p in folder.iterdir() if p.is_dir() and is_project_folder(p)]
    return inner[0] if len(inner) == 1 else None


def zip_holds_project(path: Path) -> bool:
    """Whether the archive at ``path`` holds a Rasa project (``domain.yml`` at its top or one
    folder down, beside ``data/``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = {name.replace("\\", "/") for name in archive.namelist()}
    except ZIP_ERRORS:
        return False
    for name in names:
        parts = name.split("/")
        if parts[-1] == _DOMAIN and len(parts) <= 2:
            prefix = "/".join(parts[:-1] + [_DATA, ""]).lstrip("/")
            if any(other.startswith(prefix) for other in names):
                return True
    return False


def wanted_member(name: str, head: Callable[[], bytes]) -> bool:
    """What a Rasa project's archive unpacks: its YAML files."""
    return name.lower().endswith(_YAML_SUFFIXES)


def project_rows(
    folder: Path, named: Callable[[Path], str], problems: Problems
) -> Iterator[SourceRow]:
    """The articles of the Rasa project in ``folder``; ``named(file)`` names a file."""
    root = project_root(folder) or folder
    responses: dict[str, str] = {}
    examples: dict[str, tuple[Path, list[str]]] = {}
    data = sorted(p for p in (root / _DATA).rglob("*") if p.suffix in _YAML_SUFFIXES)
    for path in [*_domain_files(root), *data]:
        document = _yaml(path, named, problems)
        if not isinstance(document, dict):
            continue
        _read_responses(document.get("responses"), responses)
        _read_nlu(document.get("nlu"), path, examples, named, problems)
    unanswered = 0
    for intent, (path, texts) in examples.items():
        body = responses.get(f"utter_{intent}")
        if not body:
            unanswered += 1
            continue
        title, *questions = texts or [intent]
        display = named(path)
        yield SourceRow(
            display,
            1,
            {
                "title": title,
                "body": body,
                "questions": questions,
                "slug": slugify(intent.replace("/", " ")),
                "source": display,
            },
            label=f"intent {intent!r}",
        )
    if unanswered:
        problems.note(
            named(root / _DATA),
            1,
            f"Rasa project: {counted(unanswered, 'intent')} without a response of its name "
            "(utter_<intent>) left out: stories and actions answer them",
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


def _read_nlu(
    section: object,
    path: Path,
    examples: dict[str, tuple[Path, list[str]]],
    named: Callable[[Path], str],
    problems: Problems,
) -> None:
    """The examples of each intent of an ``nlu:`` section (synonyms, regexes and lookups
    aside), each once, in order."""
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
        seen = {question_key(text) for text in texts}
        for example in _ITEM.split(listed or ""):
            text = " ".join(_ANNOTATION.sub(r"\1", example).split())
            if text and question_key(text) not in seen:
                seen.add(question_key(text))
                texts.append(text)
