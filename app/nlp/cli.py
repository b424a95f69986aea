"""CLI commands of this area, added to the `tierdesk` group by app.cli:

- ``tierdesk train``: train every tier from the database into a new model version;
- ``tierdesk tune --train X.csv --val Y.csv``: choose thresholds on a validation set;
- ``tierdesk eval --train TRAIN.csv --test TEST.csv``: the evaluation harness;
- ``tierdesk models list`` / ``tierdesk models activate VERSION``: versions and rollback.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup

from app.nlp.finetune import EPOCHS as FINE_TUNE_EPOCHS
from app.nlp.thresholds import (
    ANSWERED_TARGET,
    BERT_BUDGET,
    BERT_CALL_COST,
    DEFAULTS,
    THRESHOLDS_FILE,
    ThresholdsError,
)
from app.nlp.training import TrainingError


def _fail(message: str) -> None:
    raise click.ClickException(message)


def _share_option(name: str, default: float, help_text: str):
    """A tuner product setting: a number between 0 and 1, shown with its default."""
    return click.option(
        name, default=default, show_default=True, type=click.FloatRange(0.0, 1.0), help=help_text
    )


@click.command("train")
@click.option("--quiet", is_flag=True, help="No progress bars.")
def train_command(quiet: bool) -> None:
    """Train FastText, BERT, calibrators and thresholds from the database; activate the result.

    Uses every intent, training example (seed, import, reviewer) and published article; running
    servers switch to the new models without a restart.
    """
    from app.nlp.training import train_models

    config = current_app.config
    if (Path(config["MODELS_DIR"]) / THRESHOLDS_FILE).is_file():
        click.echo(
            f"note: {Path(config['MODELS_DIR']) / THRESHOLDS_FILE} overrides the tuned "
            "thresholds of the new version (delete it to use them)"
        )
    try:
        report = train_models(config, progress=not quiet)
    except TrainingError as exc:
        _fail(str(exc))
    click.echo(report.summary())


@click.command("tune")
@click.option(
    "--train",
    "train_csv",
    required=True,
    type=click.Path(dir_okay=False),
    help="CSV text,category to train on.",
)
@click.option(
    "--val",
    "val_csv",
    required=True,
    type=click.Path(dir_okay=False),
    help="CSV text,category to choose thresholds on.",
)
@_share_option(
    "--budget",
    DEFAULTS.budget,
    "Ceiling on the share of queries escalated (1: none; the answered target decides).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where to write the thresholds [default: MODELS_DIR/thresholds.json].",
)
@_share_option(
    "--bert-cost",
    BERT_CALL_COST,
    "What one BERT call costs, in correct answers (0.02: worth it if 1 in 50 is fixed).",
)
@_share_option(
    "--bert-budget", BERT_BUDGET, "Largest share of queries the BERT tier may take (its capacity)."
)
@_share_option(
    "--answered-target",
    ANSWERED_TARGET,
    "Accuracy unreviewed answers must reach (with a standard error to spare): tau_review and "
    "the BERT checks of fast answers spend the fewest escalations that reach it.",
)
@click.option("--quiet", is_flag=True)
def tune_command(
    train_csv: str,
    val_csv: str,
    budget: float,
    bert_cost: float,
    bert_budget: float,
    answered_target: float,
    out: str | None,
    quiet: bool,
) -> None:
    """Grid-search tau_fast, margin, tau_cascade (step 0.05), tau_verify (0.01), tau_review (0.001).

    Objective (app.nlp.thresholds.tune_thresholds): tau_review is the fewest escalations whose
    held-out answered accuracy reaches ANSWERED_TARGET with one standard error to spare, with
    95% of out-of-scope queries escalated; the escalation budget is a ceiling (1: none). The
    routing: within the BERT budget, the highest accuracy minus BERT_COST per query sent to
    BERT, then the highest answered accuracy. Then, for the router with escalation on, the
    BERT checks of fast answers (tau_verify) that reach the target with the fewest escalations,
    then the fewest checks. The BERT budget gives way when holding it costs more than a point of
    accuracy or of coverage at the target. The file is read by the server at start-up and on
    every reload.
    """
    from app.nlp.pipeline.data import read_labelled_csv
    from app.nlp.training import train_from_csv

    try:
        validation = read_labelled_csv(val_csv)
        trained, _ = train_from_csv(
            train_csv,
            budget=budget,
            bert_cost=bert_cost,
            bert_budget=bert_budget,
            answered_target=answered_target,
            progress=not quiet,
            validation=validation,
            bert_path=current_app.config.get("BERT_PATH"),
            fine_tune_epochs=current_app.config.get("BERT_FINETUNE_EPOCHS", FINE_TUNE_EPOCHS),
        )
    except TrainingError as exc:
        _fail(str(exc))
    path = Path(out) if out else Path(current_app.config["MODELS_DIR"]) / THRESHOLDS_FILE
    try:
        trained.thresholds.save(path)
    except (ThresholdsError, OSError) as exc:
        _fail(f"{path}: {exc}")
    if out is None:  # the app's own file: running servers reload it
        from app.db import session_scope
        from app.state import MODEL_REVISION, bump_revision

        with session_scope(current_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
            bump_revision(session, MODEL_REVISION)
    t = trained.thresholds
    click.echo(
        f"wrote {path}: tau_fast={t.tau_fast} margin={t.margin} "
        f"tau_cascade={t.cascade_below} tau_verify={t.verify_below} tau_review={t.tau_review} "
        f"(budget {t.budget})"
    )
    click.echo(json.dumps({k: v for k, v in t.provenance.items() if k != "objective"}))


@click.command("eval")
@click.option("--train", "train_csv", required=True, type=click.Path(dir_okay=False))
@click.option("--test", "test_csv", required=True, type=click.Path(dir_okay=False))
@click.option(
    "--oos",
    "oos_csv",
    type=click.Path(dir_okay=False),
    default=None,
    help="Out-of-scope queries to measure escalation on (never fitted).",
)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None)
@click.option("--plot", "plot_out", type=click.Path(dir_okay=False), default=None)
@click.option(
    "--limit-categories",
    type=click.IntRange(min=2),
    default=None,
    help="Evaluate on a random subset of N categories (quick runs).",
)
@click.option(
    "--questions-per-article",
    type=click.IntRange(min=1),
    default=None,
    help="Alternate questions per KB article [default: all training texts].",
)
@_share_option(
    "--budget",
    DEFAULTS.budget,
    "Ceiling on the share of queries escalated (1: none; the answered target decides).",
)
@click.option(
    "--spare-review",
    is_flag=True,
    help="hybrid_review with spare review capacity under a --budget ceiling (opt-in).",
)
@click.option("--quiet", is_flag=True)
def eval_command(
    train_csv,
    test_csv,
    oos_csv,
    json_out,
    plot_out,
    limit_categories,
    questions_per_article,
    budget,
    spare_review,
    quiet,
) -> None:
    """Train on TRAIN only in a temporary workspace and answer TEST with four strategies."""
    from app.nlp.evaluation import format_table, run_eval

    try:
        report = run_eval(
            train_csv,
            test_csv,
            oos_csv,
            json_out=json_out,
            plot_out=plot_out,
            limit_categories=limit_categories,
            questions_per_article=questions_per_article,
            budget=budget,
            bert_path=current_app.config.get("BERT_PATH"),
            progress=not quiet,
            fine_tune_epochs=current_app.config.get("BERT_FINETUNE_EPOCHS", FINE_TUNE_EPOCHS),
            spare_review=spare_review and budget < 1.0,
        )
    except TrainingError as exc:
        _fail(str(exc))
    click.echo(format_table(report))


@click.group("models", cls=AppGroup)
def models_group() -> None:
    """Trained model versions (list, roll back)."""


@models_group.command("list")
def models_list() -> None:
    """Saved versions, newest first; * marks the current one."""
    from app.nlp.training import current_version, list_versions

    models_dir = current_app.config["MODELS_DIR"]
    current = current_version(models_dir)
    versions = list_versions(models_dir)
    if not versions:
        click.echo(f"no model versions in {models_dir}; run `tierdesk train`")
    for manifest in versions:
        router = manifest.get("metrics", {}).get("router", {})
        mark = "*" if manifest["version"] == current else " "
        click.echo(
            f"{mark} {manifest['version']}  trained {manifest.get('trained_at')}  "
            f"data {manifest.get('data_hash', '')[:12]}  "
            f"held-out accuracy {router.get('val_accuracy')}"
        )


@models_group.command("activate")
@click.argument("version")
def models_activate(version: str) -> None:
    """Make VERSION current (rollback); running servers reload it."""
    from app.nlp.training import activate

    try:
        activate(
            current_app.config["MODELS_DIR"], version, current_app.config["SQLALCHEMY_DATABASE_URI"]
        )
    except TrainingError as exc:
        _fail(str(exc))
    click.echo(f"activated {version}")


commands: list = [train_command, tune_command, eval_command, models_group]
