"""What the readers of bots' exports share (app.kb.dialogflow_agent, app.kb.dialogflow_cx,
app.kb.lex_bot, app.kb.rasa_project, app.kb.watson_skill): finding an export in a folder or a
zip by the file and folder it keeps at its top, reading its JSON files, and the article an intent
that answers in text becomes."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

from app.kb.archives import ZIP_ERRORS
from app.kb.qna import question_key
from app.kb.records import SourceRow
from app.kb.slugs import slugify
from app.kb.textfiles import Problems


def export_root(folder: Path, is_export: Callable[[Path], bool]) -> Path | None:
    """The export's folder: ``folder`` or its only subfolder that is one (a zip made of the
    folder rather than of its contents)."""
    if is_export(folder):
        return folder
    inner = [p for p in folder.iterdir() if p.is_dir() and is_export(p)]
    return inner[0] if len(inner) == 1 else None


def zip_names(path: Path) -> frozenset[str]:
    """The member names of the archive at ``path``, with ``/`` between folders; none for one
    that cannot be read, whose import says why when it is read as an archive of pages."""
    try:
        with zipfile.ZipFile(path) as archive:
            return frozenset(name.replace("\\", "/") for name in archive.namelist())
    except ZIP_ERRORS:
        return frozenset()


def zip_holds(names: frozenset[str], marker: str, beside: str | re.Pattern[str]) -> bool:
    """Whether an archive of member ``names`` (``zip_names``) holds the file ``marker`` at its
    top or one folder down, with the folder ``beside`` next to it (or a path that ``beside``
    matches from there)."""
    pattern = beside if isinstance(beside, re.Pattern) else re.compile(re.escape(beside + "/"))
    for name in names:
        parts = name.split("/")
        if parts[-1] == marker and len(parts) <= 2:
            folder = "/".join([*parts[:-1], ""]).lstrip("/")
            if any(
                other.startswith(folder) and pattern.match(other, len(folder)) for other in names
            ):
                return True
    return False


def json_file(path: Path, named: Callable[[Path], str], problems: Problems) -> object:
    """The JSON document in the export's file ``path``, or None after saying on its file
    (``named(path)``) why it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        problems.add(named(path), 1, "missing: an exported bot holds it")
    except UnicodeDecodeError:
        problems.add(named(path), 1, "not UTF-8 text")
    except json.JSONDecodeError as exc:
        problems.add(named(path), exc.lineno, f"invalid JSON: {exc.msg}")
    return None


def json_object(
    path: Path, named: Callable[[Path], str], problems: Problems, what: str
) -> dict | None:
    """The JSON object in ``path`` (``what`` it should be: "an intent"), or None after saying
    why it cannot be read or is not an object."""
    document = json_file(path, named, problems)
    if document is not None and not isinstance(document, dict):
        problems.add(named(path), 1, f"expected {what} object, found {type(document).__name__}")
        return None
    return document


def json_member(name: str, head: Callable[[], bytes]) -> bool:
    """What the archive of a bot exported as JSON files unpacks: its JSON files."""
    return name.lower().endswith(".json")


def first_variant(variants: object, key: str | None = None) -> str:
    """The first text of a response's variants (the bot picks one at random; the others say the
    same in other words): of a list, or one value; ``key`` reads it out of each object."""
    for item in variants if isinstance(variants, list) else [variants]:
        text = item.get(key) if key and isinstance(item, dict) else item
        if isinstance(text, str) and text.strip():
            return text.strip()
    return ""


def unique_texts(texts: Iterable[str]) -> list[str]:
    """Each text once (case and spacing aside), its spacing tidied, in order."""
    unique: dict[str, str] = {}
    for text in texts:
        tidy = " ".join(text.split())
        if tidy:
            unique.setdefault(question_key(tidy), tidy)
    return list(unique.values())


def intent_row(display: str, name: str, phrases: list[str], body: str) -> SourceRow:
    """The article of the intent ``name``: its first phrase the title (its name without one),
    the others alternate questions, the slug from its name, ``display`` the source."""
    title, *questions = phrases or [name]
    fields: dict[str, object] = {
        "title": title,
        "body": body,
        "questions": questions,
        "slug": slugify(name.replace("/", " ")),
        "source": display,
    }
    return SourceRow(display, 1, fields, label=f"intent {name!r}")
