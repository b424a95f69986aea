"""Intents and their training examples: ``intents/*.yaml`` definitions and ``text,category`` CSVs.

Both loaders are all or nothing like the article import: everything is validated first, any
problem raises ``IntentImportRejected`` with every ``file:line: reason`` and writes nothing.
Examples already present (same text and intent) are skipped and counted, so loading the same
file twice adds nothing the second time.

Categories in a CSV that no YAML declares become intents with tier ``simple`` and tier source
``derived``: no person chose their tier, so the routing layer may re-derive it from validation
data, and a later ``intents load`` of a YAML declaration overrides it (``declared``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from app.kb.store import chunked
from app.kb.textfiles import Problems, csv_rows, display_name, read_text, yaml_error
from app.models import EXAMPLE_ORIGINS, TIERS, Intent, TrainingExample, utcnow
from app.vocab import LABEL_ALIASES, is_out_of_scope_category

MAX_INTENT_NAME = Intent.__table__.c.name.type.length
MAX_EXAMPLE = TrainingExample.__table__.c.text.type.length
DEFAULT_TIER = "simple"
WRITE_CHUNK = 1000


@dataclass
class IntentReport:
    intents_created: int = 0
    intents_updated: int = 0
    intents_unchanged: int = 0
    examples_added: int = 0
    duplicates_skipped: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dry_run: bool = False

    def summary(self) -> str:
        total = self.intents_created + self.intents_updated + self.intents_unchanged
        text = (
            f"{total} intents ({self.intents_created} created, {self.intents_updated} updated, "
            f"{self.intents_unchanged} unchanged), {self.examples_added} examples added, "
            f"{self.duplicates_skipped} duplicates skipped"
        )
        if self.problems:
            return f"{text}; rejected, nothing was changed"
        return f"{text} (dry run: nothing was written)" if self.dry_run else text


class IntentImportRejected(Exception):
    def __init__(self, report: IntentReport):
        super().__init__(f"{len(report.problems)} problem(s); nothing was imported")
        self.report = report


@dataclass
class IntentDefinition:
    name: str
    tier: str
    description: str
    examples: list[str]
    tier_source: str = "declared"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ----------------------------------------------------------------------------- YAML


class _Lines(list):
    """A YAML sequence that remembers the line of each item."""

    lines: list[int]


class _LineLoader(yaml.SafeLoader):
    pass


def _mapping_with_line(loader: _LineLoader, node: yaml.MappingNode) -> dict:
    mapping = loader.construct_mapping(node, deep=True)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


def _sequence_with_lines(loader: _LineLoader, node: yaml.SequenceNode) -> _Lines:
    items = _Lines(loader.construct_sequence(node, deep=True))
    items.lines = [child.start_mark.line + 1 for child in node.value]
    return items


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_with_line)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence_with_lines)


def _check_name(name: object, display: str, line: int, problems: Problems) -> str | None:
    if not isinstance(name, str) or not name.strip():
        problems.add(display, line, "intent needs a non-empty text 'name'")
        return None
    name = name.strip()
    if len(name) > MAX_INTENT_NAME or any(c in name for c in "\n\r\x00"):
        problems.add(display, line, f"intent name {name[:40]!r} is too long or has line breaks")
        return None
    return name


def _definitions_in_file(path: Path, problems: Problems) -> list[IntentDefinition]:
    display = display_name(path)
    text = read_text(path, display, problems)
    if text is None:
        return []
    try:
        doc = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        line, reason = yaml_error(exc)
        problems.add(display, line, f"invalid YAML: {reason}")
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get("intents"), list):
        problems.add(display, 1, "expected a top-level 'intents:' list")
        return []
    items: _Lines = doc["intents"]
    definitions = []
    for item, line in zip(items, items.lines, strict=True):
        if not isinstance(item, dict):
            problems.add(display, line, "each intent must be a mapping with name, tier, examples")
            continue
        definition = _definition(item, display, item["__line__"], problems)
        if definition is not None:
            definitions.append(definition)
    return definitions


def _definition(item: dict, display: str, line: int, problems: Problems):
    known = len(problems.messages)
    name = _check_name(item.get("name"), display, line, problems)
    tier = item.get("tier")
    if tier not in TIERS:
        problems.add(display, line, f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
    description = item.get("description") or ""
    if not isinstance(description, str):
        problems.add(display, line, "description must be text")
    examples = item.get("examples") or _Lines()
    if not isinstance(examples, list):
        problems.add(display, line, "examples must be a list of utterances")
        examples = _Lines()
    lines = getattr(examples, "lines", [line] * len(examples))
    texts = []
    for example, example_line in zip(examples, lines, strict=True):
        text = _one_line(example) if isinstance(example, str) else ""
        if not text:
            problems.add(display, example_line, "an example must be non-empty text")
        elif len(text) > MAX_EXAMPLE or "\x00" in text:
            problems.add(display, example_line, f"example is too long (limit {MAX_EXAMPLE})")
        else:
            texts.append(text)
    if len(problems.messages) > known:
        return None
    return IntentDefinition(name, tier, _one_line(description), texts)


def load_intent_definitions(session: Session, intents_dir: Path, *, dry_run: bool = False):
    """Upsert the intents declared in ``intents_dir/*.yaml`` and add their seed examples."""
    intents_dir = Path(intents_dir)
    problems = Problems()
    files = sorted([*intents_dir.glob("*.yaml"), *intents_dir.glob("*.yml")])
    if not intents_dir.is_dir():
        problems.add(str(intents_dir), 1, "no such folder")
    elif not files:
        problems.add(str(intents_dir), 1, "folder has no intent definitions (*.yaml)")
    definitions: dict[str, IntentDefinition] = {}
    first_seen: dict[str, str] = {}
    for path in files:
        for definition in _definitions_in_file(path, problems):
            if definition.name in definitions:
                problems.add(
                    str(path), 1, f"intent {definition.name!r} is already defined in "
                    f"{first_seen[definition.name]}"
                )  # fmt: skip
                continue
            definitions[definition.name] = definition
            first_seen[definition.name] = str(path)
    report = IntentReport(dry_run=dry_run)
    if problems:
        report.problems = problems.messages
        raise IntentImportRejected(report)
    _upsert_intents(session, definitions.values(), report, overwrite=True, dry_run=dry_run)
    examples = [(text, d.name) for d in definitions.values() for text in d.examples]
    _add_examples(session, examples, "seed", report, dry_run=dry_run)
    return report


# ----------------------------------------------------------------------------- CSV

SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".xls", ".ods", ".numbers")


def import_intent_csv(
    session: Session, path: Path, origin: str = "import", *, dry_run: bool = False
) -> IntentReport:
    """Add the ``text,category`` rows of a CSV (the BANKING77 format) as training examples."""
    if origin not in EXAMPLE_ORIGINS:
        raise ValueError(f"origin must be one of {EXAMPLE_ORIGINS}")
    path = Path(path)
    display = display_name(path)
    problems = Problems()
    examples: list[tuple[str, str]] = []
    if path.is_dir():
        problems.add(display, 1, "is a folder; give the CSV file (columns text,category)")
    elif not path.is_file():
        problems.add(display, 1, "no such file")
    elif path.suffix.lower() in SPREADSHEET_SUFFIXES:
        problems.add(display, 1, "is a spreadsheet; save it as CSV (columns text,category)")
    else:
        rows = csv_rows(
            path,
            display,
            problems,
            aliases=LABEL_ALIASES,
            required=("text", "category"),
            known=("text", "category"),
        )
        out_of_scope: dict[str, int] = {}
        for row in rows:
            example = _example(row.values, display, row.line, problems)
            if example is not None:
                examples.append(example)
                if is_out_of_scope_category(example[1]):
                    out_of_scope[example[1]] = out_of_scope.get(example[1], 0) + 1
        for category, count in out_of_scope.items():
            problems.note(
                display,
                1,
                f"{count} row(s) of category {category!r} are out-of-scope queries, not an "
                f"intent: training holds them out as questions the bot must escalate",
            )
        if len(examples) > 1 and all(category.isdigit() for _, category in examples):
            problems.note(
                display,
                1,
                "every category is a number (a data set exported with label ids?): each "
                "becomes an intent named by its number, none is taken as out of scope; "
                "write the label names instead",
            )
    report = IntentReport(dry_run=dry_run, notes=problems.notes)
    if problems:
        report.problems = problems.messages
        raise IntentImportRejected(report)
    names = dict.fromkeys(name for _, name in examples if not is_out_of_scope_category(name))
    derived = [IntentDefinition(n, DEFAULT_TIER, "", [], tier_source="derived") for n in names]
    _upsert_intents(session, derived, report, overwrite=False, dry_run=dry_run)
    _add_examples(session, examples, origin, report, dry_run=dry_run)
    return report


def _example(values: dict[str, str], display: str, line: int, problems: Problems):
    text, category = _one_line(values.get("text") or ""), _one_line(values.get("category") or "")
    reasons = []
    if not text:
        reasons.append("text is empty")
    elif len(text) > MAX_EXAMPLE:
        reasons.append(f"text is {len(text)} characters; the limit is {MAX_EXAMPLE}")
    if not category:
        reasons.append("category is empty")
    elif len(category) > MAX_INTENT_NAME:
        reasons.append(f"category is {len(category)} characters; the limit is {MAX_INTENT_NAME}")
    if "\x00" in text + category:
        reasons.append("contains a NUL (\\x00) character")
    for reason in reasons:
        problems.add(display, line, reason)
    return None if reasons else (text, category)


# ----------------------------------------------------------------------------- writing


def _upsert_intents(
    session: Session,
    definitions: Iterable[IntentDefinition],
    report: IntentReport,
    *,
    overwrite: bool,
    dry_run: bool,
) -> None:
    """Create missing intents; with ``overwrite`` (YAML declarations) also update existing."""
    definitions = list(definitions)
    existing: dict[str, Intent] = {}
    for chunk in chunked([d.name for d in definitions], 500):
        existing.update(
            (i.name, i) for i in session.scalars(select(Intent).where(Intent.name.in_(chunk)))
        )
    for definition in definitions:
        intent = existing.get(definition.name)
        if intent is None:
            report.intents_created += 1
            if not dry_run:
                session.add(
                    Intent(
                        name=definition.name,
                        tier=definition.tier,
                        tier_source=definition.tier_source,
                        description=definition.description,
                    )
                )
            continue
        wanted = (definition.tier, definition.tier_source, definition.description)
        if not overwrite or (intent.tier, intent.tier_source, intent.description) == wanted:
            report.intents_unchanged += 1
            continue
        report.intents_updated += 1
        if not dry_run:
            intent.tier, intent.tier_source, intent.description = wanted
    if not dry_run:
        session.flush()


def _add_examples(
    session: Session,
    examples: Sequence[tuple[str, str]],
    origin: str,
    report: IntentReport,
    *,
    dry_run: bool,
) -> None:
    names = sorted({name for _, name in examples})
    present: set[tuple[str, str]] = set()
    for chunk in chunked(names, 500):
        query = select(TrainingExample.text, TrainingExample.intent).where(
            TrainingExample.intent.in_(chunk)
        )
        present.update((text, intent) for text, intent in session.execute(query))
    now = utcnow()
    new_rows = []
    for text, name in examples:
        if (text, name) in present:
            report.duplicates_skipped += 1
            continue
        present.add((text, name))
        new_rows.append({"text": text, "intent": name, "origin": origin, "created_at": now})
    report.examples_added = len(new_rows)
    if dry_run:
        return
    for chunk in chunked(new_rows, WRITE_CHUNK):
        session.execute(insert(TrainingExample), list(chunk))


def list_intents(session: Session) -> list[tuple[str, str, int]]:
    """(name, tier, example count) for every intent, and for example labels with no intent
    row (tier ``-``, or ``out-of-scope`` for a data set's out-of-scope queries), sorted by
    name."""
    counts = dict(
        session.execute(
            select(TrainingExample.intent, func.count()).group_by(TrainingExample.intent)
        ).all()
    )
    tiers = dict(session.execute(select(Intent.name, Intent.tier)).all())
    names = sorted(set(tiers) | set(counts), key=str.lower)
    return [(name, tiers.get(name, _no_tier(name)), counts.get(name, 0)) for name in names]


def _no_tier(label: str) -> str:
    return "out-of-scope" if is_out_of_scope_category(label) else "-"
