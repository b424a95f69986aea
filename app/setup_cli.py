"""``tierdesk init``: everything a fresh checkout needs before it can serve the demo."""

from __future__ import annotations

import click
from flask import current_app
from sqlalchemy import func, select

from app.db import session_scope
from app.models import Article, Intent


@click.command("init")
@click.option("--no-train", is_flag=True, help="Skip training the models when they are missing.")
def init_command(no_train: bool) -> None:
    """Migrate the database, load the demo content into an empty database, train missing models.

    Safe to run again: content is loaded only when the database has none, and models are
    trained only when none are on disk.
    """
    from app import migrate

    config = current_app.config
    url = config["SQLALCHEMY_DATABASE_URI"]
    migrate.upgrade(url)
    click.echo(f"database at revision {migrate.current(url)}")

    from app.kb.importer import import_paths
    from app.kb.intents import load_intent_definitions

    with session_scope(url) as session:
        if session.scalar(select(func.count()).select_from(Intent)) == 0:
            report = load_intent_definitions(session, config["INTENTS_DIR"])
            click.echo(f"intents: {report.summary()}")
        else:
            click.echo("intents: already loaded")
    with session_scope(url) as session:
        if session.scalar(select(func.count()).select_from(Article)) == 0:
            report = import_paths(session, [config["KB_DIR"]])
            click.echo(f"knowledge base: {report.summary()}")
        else:
            click.echo("knowledge base: already loaded")

    from app.nlp.registry import serving_plan
    from app.nlp.store import models_present
    from app.nlp.training import train_models

    with session_scope(url) as session:
        plan = serving_plan(session)
    if plan is not None:
        click.echo(f"models: {plan.active} active in the registry (fetched when served)")
    elif models_present(config["MODELS_DIR"]):
        click.echo(f"models: present in {config['MODELS_DIR']}")
    elif no_train:
        click.echo("models: missing (skipped; run `tierdesk train`)")
    else:
        click.echo("models: none found, training the defaults")
        report = train_models(config)
        click.echo(f"models: {report.summary()}")


commands = [init_command]
