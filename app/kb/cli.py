"""CLI commands of this area, added to the `tierdesk` group by app.cli.

``tierdesk kb import|export`` and ``tierdesk intents import|load|list``. Invalid input exits
with status 1 after printing every problem to stderr as ``file:line: reason``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from app.db import schema_missing, session_scope
from app.kb.exporter import export_articles, write_articles
from app.kb.importer import ImportRejected, import_paths
from app.kb.intents import (
    IntentImportRejected,
    import_intent_csv,
    list_intents,
    load_intent_definitions,
)

_PATH = click.Path(path_type=Path)


def _database_url() -> str:
    return current_app.config["SQLALCHEMY_DATABASE_URI"]


def _notes(notes: list[str], warnings: tuple[str, ...] | list[str] = ()) -> None:
    for note in notes:
        click.echo(f"note: {note}", err=True)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _fail(problems: list[str], summary: str) -> None:
    for problem in problems:
        click.echo(problem, err=True)
    click.echo(summary, err=True)
    sys.exit(1)


def _database_error(exc: SQLAlchemyError) -> None:
    if isinstance(exc, IntegrityError):
        reason = "another import probably changed the same rows at the same time"
    else:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
    if schema_missing(reason):
        click.echo(
            f"database error: {reason}; nothing was changed: the database has no tierdesk "
            "schema or an old one, run `tierdesk db upgrade` (or `tierdesk init`) first",
            err=True,
        )
    else:
        click.echo(
            f"database error: {reason}; nothing was changed, run the command again", err=True
        )
    sys.exit(1)


@click.group("kb", cls=AppGroup)
def kb_group() -> None:
    """Knowledge base: import and export articles."""


@kb_group.command("import")
@click.argument("paths", nargs=-1, required=True, type=_PATH)
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
@click.option(
    "--replace",
    is_flag=True,
    help="Unpublish imported articles absent from PATHS (not those reviewers wrote).",
)
def kb_import(paths: tuple[Path, ...], dry_run: bool, replace: bool) -> None:
    """Import articles from CSV, TSV and XLSX (QnA), JSON (also Zendesk, Freshdesk, QnA Maker
    and question answering exports), JSONL, Bot Framework .qna, Markdown, HTML, Word (.docx),
    PDF and plain text files, or folders (or .zip archives) of Markdown, HTML, Word and PDF
    files, or a bot's export: a Dialogflow ES or CX agent's or an Amazon Lex V2 bot's .zip, a
    Rasa project's folder, a Watson Assistant skill's or Botpress Q&A .json.

    Upserts by slug, all or nothing: any invalid record exits 1 and changes nothing. Warnings
    (a slug given a suffix, a question under two answers) are printed but do not stop it.
    """
    try:
        with session_scope(_database_url()) as session:
            report = import_paths(
                session, list(paths), dry_run=dry_run, replace=replace, progress=True
            )
    except ImportRejected as exc:
        _notes(exc.report.notes, exc.report.warnings)
        _fail(exc.report.problems, exc.report.summary())
    except SQLAlchemyError as exc:
        _database_error(exc)
    _notes(report.notes, report.warnings)
    if dry_run:
        for action, slug in report.changes:
            click.echo(f"would {action:<9} {slug}")
    click.echo(report.summary())


@kb_group.command("export")
@click.argument("path", type=_PATH)
def kb_export(path: Path) -> None:
    """Write every article to PATH as JSONL ('-' for stdout); `kb import` reads it back."""
    with session_scope(_database_url()) as session:
        if str(path) == "-":
            write_articles(session, click.get_text_stream("stdout"))
            return
        count = export_articles(session, path)
    click.echo(f"exported {count} articles to {path}")


@click.group("intents", cls=AppGroup)
def intents_group() -> None:
    """Intents and their training examples."""


@intents_group.command("import")
@click.argument("path", type=_PATH)
@click.option(
    "--origin",
    type=click.Choice(["import", "seed", "reviewer"]),
    default="import",
    show_default=True,
    help="Recorded as the examples' origin.",
)
@click.option("--dry-run", is_flag=True, help="Show the counts; write nothing.")
def intents_import(path: Path, origin: str, dry_run: bool) -> None:
    """Add training examples from a `text,category` CSV (the BANKING77 format)."""
    try:
        with session_scope(_database_url()) as session:
            report = import_intent_csv(session, path, origin=origin, dry_run=dry_run)
    except IntentImportRejected as exc:
        _notes(exc.report.notes)
        _fail(exc.report.problems, exc.report.summary())
    except SQLAlchemyError as exc:
        _database_error(exc)
    _notes(report.notes)
    click.echo(report.summary())


@intents_group.command("load")
@click.argument("folder", required=False, type=_PATH)
@click.option("--dry-run", is_flag=True, help="Show the counts; write nothing.")
def intents_load(folder: Path | None, dry_run: bool) -> None:
    """Load intent definitions (tiers, descriptions, seed examples) from FOLDER/*.yaml.

    FOLDER defaults to the configured intents folder (TIERDESK_INTENTS_DIR).
    """
    folder = folder or current_app.config["INTENTS_DIR"]
    try:
        with session_scope(_database_url()) as session:
            report = load_intent_definitions(session, folder, dry_run=dry_run)
    except IntentImportRejected as exc:
        _fail(exc.report.problems, exc.report.summary())
    except SQLAlchemyError as exc:
        _database_error(exc)
    click.echo(report.summary())


@intents_group.command("list")
def intents_list() -> None:
    """Print one intent per line: name, tier and number of training examples."""
    with session_scope(_database_url()) as session:
        rows = list_intents(session)
    if not rows:
        click.echo("no intents yet: run `tierdesk init` or `tierdesk intents load`", err=True)
        return
    width = max(len(name) for name, _, _ in rows)
    for name, tier, count in rows:
        click.echo(f"{name:<{width}}  {tier:<7}  {count}")


commands = [kb_group, intents_group]
