"""``tierdesk privacy export|erase|purge``: a customer's data out, a customer's data gone,
and the retention job by hand."""

from __future__ import annotations

import json

import click
from flask import current_app
from flask.cli import AppGroup

from app.db import session_scope
from app.privacy import erasure


@click.group("privacy", cls=AppGroup)
def privacy_group() -> None:
    """Export or erase a customer's data; purge expired conversations."""


def _selector(func):
    func = click.option("--email", help="The customer's e-mail address.")(func)
    return click.option("--conversation", "conversation_id", help="A conversation id.")(func)


def _find(session, conversation_id: str | None, email: str | None) -> list[str]:
    if (conversation_id is None) == (email is None):
        raise click.UsageError("give exactly one of --conversation ID and --email ADDRESS")
    ids = erasure.find_conversations(
        session,
        current_app.config["SECRET_KEY"],
        conversation_id=conversation_id,
        email=email,
    )
    if not ids:
        what = f"conversation {conversation_id}" if conversation_id else f"e-mail {email}"
        raise click.ClickException(f"nothing is stored for {what}")
    return ids


@privacy_group.command("export")
@_selector
@click.option(
    "--out", "out_path", default="-", show_default=True, help="JSON file to write ('-': stdout)."
)
def export_command(conversation_id: str | None, email: str | None, out_path: str) -> None:
    """Write everything stored about a customer as JSON."""
    from app.files import write_json_atomic
    from app.review import audit
    from app.vocab import AuditAction

    with session_scope() as session:
        ids = _find(session, conversation_id, email)
        document = erasure.export(session, ids)
        audit.record(session, AuditAction.EXPORT, actor="cli", detail={"conversations": len(ids)})
    if out_path == "-":
        click.echo(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        write_json_atomic(out_path, document)
        click.echo(f"exported {len(ids)} conversation(s) to {out_path}", err=True)


@privacy_group.command("erase")
@_selector
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def erase_command(conversation_id: str | None, email: str | None, yes: bool) -> None:
    """Delete everything stored about a customer (rows, review items, Redis, cached answers)."""
    from app.services import get_engine, get_review_queue

    with session_scope() as session:
        ids = _find(session, conversation_id, email)
        if not yes:
            click.confirm(f"erase {len(ids)} conversation(s) for good?", abort=True)
        report = erasure.erase(
            session, ids, queue=get_review_queue(), engine=get_engine(), actor="cli"
        )
    click.echo(f"erased {report.summary()}")


@privacy_group.command("purge")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted, delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def purge_command(dry_run: bool, as_json: bool) -> None:
    """Delete conversations older than TIERDESK_RETENTION_DAYS and taught examples older than
    TIERDESK_TRAINING_RETENTION_DAYS, in batches."""
    from app.privacy.retention import purge
    from app.services import get_review_queue

    report = purge(current_app.config, queue=get_review_queue(), dry_run=dry_run, actor="cli")
    click.echo(json.dumps(report.as_dict()) if as_json else report.summary())


commands = [privacy_group]
