"""The ``tierdesk`` command: set-up, database, knowledge base, models, review and serving.

Commands run inside an app context; they do not load the NLP models unless they need them
(``serve`` does, ``kb import`` does not).
"""

from __future__ import annotations

import os
import signal

import click
from flask import current_app
from flask.cli import FlaskGroup, with_appcontext

from app import create_app


def _cli_app():
    # CLI commands other than ``serve`` have no use for the models; loading them costs seconds.
    # Their output is the command's own; library chatter (Alembic's INFO lines) stays out.
    overrides: dict = {"LOAD_MODELS": False}
    if not os.environ.get("TIERDESK_LOG_LEVEL"):
        overrides["LOG_LEVEL"] = "WARNING"
    return create_app(overrides)


class TierdeskGroup(FlaskGroup):
    """FlaskGroup that turns "the schema is not there" into one clear line instead of a trace."""

    def invoke(self, ctx: click.Context):
        from sqlalchemy.exc import OperationalError, ProgrammingError

        from app.privacy import PatternError
        from app.security import UnsafeSettings

        try:
            return super().invoke(ctx)
        except (UnsafeSettings, PatternError) as exc:
            raise click.ClickException(str(exc)) from exc
        except (OperationalError, ProgrammingError) as exc:
            from app.db import schema_missing

            first_line = str(exc.orig or exc).splitlines()[0]
            if schema_missing(first_line):
                raise click.ClickException(
                    f"the database has no tierdesk schema or an old one ({first_line}); "
                    "run `tierdesk db upgrade` (or `tierdesk init`) first"
                ) from exc
            raise


@click.group(
    cls=TierdeskGroup,
    create_app=_cli_app,
    add_default_commands=False,
    add_version_option=False,
    load_dotenv=False,
)
def main() -> None:
    """tierdesk: customer-service chatbot with tiered NLP routing."""


@main.group()
def db() -> None:
    """Database schema (Alembic migrations)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Apply migrations up to REVISION (default: head)."""
    from app import migrate  # Alembic takes most of a second to import

    url = current_app.config["SQLALCHEMY_DATABASE_URI"]
    migrate.upgrade(url, revision)
    click.echo(f"database at revision {migrate.current(url)}")


@db.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION ('base' removes every table)."""
    from app import migrate  # Alembic takes most of a second to import

    url = current_app.config["SQLALCHEMY_DATABASE_URI"]
    migrate.downgrade(url, revision)
    click.echo(f"database at revision {migrate.current(url)}")


@db.command("current")
def db_current() -> None:
    """Print the database's revision and the latest one."""
    from app import migrate  # Alembic takes most of a second to import

    url = current_app.config["SQLALCHEMY_DATABASE_URI"]
    click.echo(f"current: {migrate.current(url)}  head: {migrate.head_revision(url)}")


@main.command()
@click.option(
    "--host", default=lambda: os.environ.get("TIERDESK_HOST", "127.0.0.1"), show_default="127.0.0.1"
)
@click.option(
    "--port",
    default=lambda: int(os.environ.get("TIERDESK_PORT", "8000")),
    type=int,
    show_default="8000",
)
def serve(host: str, port: int) -> None:
    """Serve the demo, the chat API, the reviewer console and /metrics (models warmed first)."""
    from werkzeug.serving import make_server

    from app import migrate

    url = current_app.config["SQLALCHEMY_DATABASE_URI"]
    have, need = migrate.current(url), migrate.head_revision(url)
    if have != need:  # every request would fail on it: say so once, before serving
        state = "has no tierdesk schema" if have is None else f"is at schema revision {have}"
        raise click.ClickException(
            f"the database {state}, this tierdesk needs {need}; "
            "run `tierdesk db upgrade` (or `tierdesk init`) first"
        )
    app = create_app()
    base = f"http://{host}:{port}"
    click.echo(f"tierdesk is serving on {base}")
    click.echo(f"  demo page        {base}/")
    click.echo(f"  reviewer console {base}/console/")
    click.echo(f"  metrics          {base}/metrics")
    click.echo(f"  readiness        {base}/readyz")
    server = make_server(host, port, app, threaded=True)
    # SIGTERM (systemd, a supervisor, `kill`) stops the server as Ctrl-C does, so that the
    # interpreter exits normally and its exit hooks run: the embedded Redis server is saved
    # and shut down with it (app.redis_conn.stop_embedded) instead of outliving it. SIGINT is
    # set too: a shell starts a background job (`tierdesk serve &`, a script's `cmd &`) with
    # SIGINT ignored, and Python then leaves it ignored, so `kill -INT` did nothing.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped")
    finally:
        server.server_close()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _register_area_commands() -> None:
    from app.kb.cli import commands as kb_commands
    from app.nlp.cli import commands as nlp_commands
    from app.privacy.cli import commands as privacy_commands
    from app.review.cli import commands as review_commands
    from app.setup_cli import commands as setup_commands

    for command in (
        *setup_commands,
        *kb_commands,
        *nlp_commands,
        *review_commands,
        *privacy_commands,
    ):
        if not isinstance(command, click.Group) and command.callback is not None:
            # FlaskGroup pushes an app context only for app.cli commands, not its own.
            command.callback = with_appcontext(command.callback)
        main.add_command(command)


_register_area_commands()
