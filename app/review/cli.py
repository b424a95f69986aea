"""``tierdesk reviewer ...`` (console accounts) and ``tierdesk review ...`` (the queue)."""

from __future__ import annotations

import json
import sys

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy import select

from app.db import session_scope
from app.models import Reviewer
from app.review.auth import AccountError, add_reviewer


@click.group("reviewer", cls=AppGroup)
def reviewer_group() -> None:
    """Reviewer accounts of the console."""


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        line = sys.stdin.readline()
        return line.rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt="Repeat the password")


@reviewer_group.command("add")
@click.argument("email")
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password from the first line of standard input (for scripts).",
)
@click.option("--reset", is_flag=True, help="Set a new password for an existing reviewer.")
@click.option(
    "--role",
    type=click.Choice(["admin", "reviewer"]),
    default=None,
    help="admin: manages reviewers, retention, erasure and models; reviewer (default for a "
    "new account): works the queue.",
)
def reviewer_add(email: str, password_stdin: bool, reset: bool, role: str | None) -> None:
    """Create a reviewer account; the password is prompted twice (or read from stdin)."""
    from app.review import audit
    from app.vocab import AuditAction

    password = _read_password(password_stdin)
    try:
        with session_scope(current_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
            reviewer = add_reviewer(session, email, password, reset=reset, role=role)
            email = reviewer.email
            audit.record(
                session,
                AuditAction.REVIEWER_UPDATE if reset else AuditAction.REVIEWER_ADD,
                actor="cli",
                target=f"reviewer:{email}",
                detail={"role": reviewer.role},
            )
    except AccountError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"reviewer {email} {'updated' if reset else 'added'}")


@reviewer_group.command("list")
def reviewer_list() -> None:
    """Print every reviewer: e-mail, state, created, last login."""
    with session_scope(current_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        reviewers = session.scalars(select(Reviewer).order_by(Reviewer.email)).all()
        if not reviewers:
            click.echo("no reviewers yet: add one with `tierdesk reviewer add EMAIL`")
        for r in reviewers:
            last = r.last_login_at.strftime("%Y-%m-%d %H:%M") if r.last_login_at else "never"
            state = "active" if r.active else "disabled"
            click.echo(
                f"{r.email}\t{state}\t{r.role}\tcreated {r.created_at:%Y-%m-%d}\tlast login {last}"
            )


@click.group("review", cls=AppGroup)
def review_group() -> None:
    """The human-review queue."""


@review_group.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (for scripts).")
@click.option(
    "--days",
    type=click.IntRange(1, 365),
    default=14,
    show_default=True,
    help="The window of the spot-check accuracy.",
)
def review_stats(as_json: bool, days: int) -> None:
    """Pending, claimed and resolved items, the Redis queue depth, the oldest wait, and the
    answered accuracy measured by spot checks over the last DAYS days."""
    from datetime import timedelta

    from app.models import utcnow
    from app.review.spot_checks import measured_accuracy
    from app.review.stats import queue_counts
    from app.services import get_review_queue

    with session_scope(current_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        counts = queue_counts(session, get_review_queue())
        measured = measured_accuracy(session, since=utcnow() - timedelta(days=days))
    interval = measured.interval()
    spot = {
        "days": days,
        "waiting": measured.waiting,
        "judged": measured.judged,
        "right": measured.right,
        "accuracy": round(measured.accuracy, 4) if measured.judged else None,
        "interval_95": [round(interval[0], 4), round(interval[1], 4)] if interval else None,
    }
    if as_json:
        click.echo(json.dumps({**counts, "spot_checks": spot}))
        return
    for key, value in counts.items():
        click.echo(
            f"{key}: {'unavailable' if value is None and key == 'queued_in_redis' else value}"
        )
    if measured.judged:
        low, high = interval
        measured_text = (
            f"{measured.right}/{measured.judged} right ({measured.accuracy:.1%}, "
            f"95% interval {low:.1%}-{high:.1%})"
        )
    else:
        measured_text = "none judged"
    click.echo(f"spot_checks (last {days} days): {measured_text}, {measured.waiting} waiting")


@review_group.command("reconcile")
def review_reconcile() -> None:
    """Queue every pending item missing from Redis (after a flush, restart or outage)."""
    from app.services import get_review_queue

    report = get_review_queue().reconcile()
    click.echo(report.summary())
    if not report.redis_ok:
        raise click.ClickException("Redis is unavailable: " + "; ".join(report.errors))


commands = [reviewer_group, review_group]
