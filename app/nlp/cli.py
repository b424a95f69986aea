"""CLI commands of this area, added to the `tierdesk` group by app.cli:

- ``tierdesk train``: train every tier from the database into a new model version;
- ``tierdesk tune --train X.csv --val Y.csv``: choose thresholds on a validation set;
- ``tierdesk eval --train TRAIN.csv --test TEST.csv``: the evaluation harness;
- ``tierdesk ask QUESTIONS``: the trained bot asked a list of questions (app/nlp/ask.py);
- ``tierdesk models list|show|diff|promote|rollback|retire|check|activate``: the registry
  (app/nlp/registry.py).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup

from app.nlp.finetune import EPOCHS as FINE_TUNE_EPOCHS
from app.nlp.store import StoreError
from app.nlp.thresholds import (
    ANSWERED_TARGET,
    BERT_BUDGET,
    BERT_CALL_COST,
    DEFAULTS,
    THRESHOLDS_FILE,
    ThresholdsError,
)
from app.nlp.training import TrainingError

# Spins of an idle thread of torch's OpenMP pool (GNU libgomp) before it sleeps, in `tierdesk
# train`. libgomp's default (300,000) keeps the pool's threads spinning between operations, and
# a training that shares the cores with a busy process (a serving worker) spent most of its time
# waiting: on 2 cores beside a process encoding queries on one thread, the Tasklane FAQ with
# alternates trained in 218 s by default, 55 s at 10,000 (31 and 34 s alone). Sleeping at once
# (OMP_WAIT_POLICY=PASSIVE) was quicker beside it (36 s) and slower alone (40 s): docs/load.md.
TRAIN_SPIN_COUNT = 10_000


def _spin_less_while_idle() -> None:
    """Shorten the OpenMP spin of this process's threads (``TRAIN_SPIN_COUNT``) unless the
    operator set ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``; read when torch loads, so it must
    run before. libgomp reads it; another OpenMP runtime ignores it."""
    if "torch" in sys.modules:
        return
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = str(TRAIN_SPIN_COUNT)


def _fail(message: str) -> None:
    raise click.ClickException(message)


def _share_option(name: str, default: float, help_text: str):
    """A tuner product setting: a number between 0 and 1, shown with its default."""
    return click.option(
        name, default=default, show_default=True, type=click.FloatRange(0.0, 1.0), help=help_text
    )


@click.command("train")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option(
    "--candidate",
    is_flag=True,
    help="Register the new version as a candidate instead of activating it "
    "(then `tierdesk models promote`).",
)
@click.option(
    "--min-new-examples",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Train only when at least N intent examples were taught or imported since the newest "
    "version (run it from a timer: the bot retrains as reviews accumulate).",
)
def train_command(quiet: bool, candidate: bool, min_new_examples: int) -> None:
    """Train FastText, BERT, calibrators and thresholds from the database; activate the result.

    Uses every intent, training example (seed, import, reviewer) and published article; running
    servers switch to the new models without a restart.
    """
    _spin_less_while_idle()
    from app.db import session_scope
    from app.nlp.training import examples_since_last_version, train_models

    config = current_app.config
    if min_new_examples:
        with session_scope(config["SQLALCHEMY_DATABASE_URI"]) as session:
            new, latest, registered = examples_since_last_version(session)
        if latest is not None and new < min_new_examples:
            click.echo(
                f"skipped: {new} intent example(s) added since version {latest} "
                f"(registered {registered:%Y-%m-%d %H:%M} UTC), {min_new_examples} needed"
            )
            return
    if (Path(config["MODELS_DIR"]) / THRESHOLDS_FILE).is_file():
        click.echo(
            f"note: {Path(config['MODELS_DIR']) / THRESHOLDS_FILE} overrides the tuned "
            "thresholds of the new version (delete it to use them)"
        )
    try:
        report = train_models(config, progress=not quiet, candidate=candidate)
    except (TrainingError, StoreError) as exc:
        _fail(str(exc))
    click.echo(report.summary())
    if candidate:
        click.echo(
            f"registered {report.version} as a candidate: tierdesk models promote {report.version}"
        )


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
    from app.nlp.pipeline.data import read_labelled_csv, read_oos_dev, split_out_of_scope
    from app.nlp.training import train_from_csv

    try:
        # Validation rows of an out-of-scope category join the out-of-scope negatives.
        val_texts, val_labels, val_oos = split_out_of_scope(*read_labelled_csv(val_csv))
        if not val_texts:
            raise TrainingError(f"{val_csv}: every row is out of scope; nothing to tune on")
        trained, _ = train_from_csv(
            train_csv,
            oos_dev=read_oos_dev(current_app.config.get("INTENTS_DIR")),
            oos_labelled=val_oos,
            budget=budget,
            bert_cost=bert_cost,
            bert_budget=bert_budget,
            answered_target=answered_target,
            progress=not quiet,
            validation=(val_texts, val_labels),
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
@_share_option(
    "--bert-budget", BERT_BUDGET, "Largest share of queries the BERT tier may take (its capacity)."
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
    bert_budget,
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
            bert_budget=bert_budget,
            bert_path=current_app.config.get("BERT_PATH"),
            progress=not quiet,
            fine_tune_epochs=current_app.config.get("BERT_FINETUNE_EPOCHS", FINE_TUNE_EPOCHS),
            spare_review=spare_review and budget < 1.0,
        )
    except TrainingError as exc:
        _fail(str(exc))
    click.echo(format_table(report))


@click.command("ask")
@click.argument("questions", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write one CSV row per question: the bot's answer or escalation, and whether it is right.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def ask_command(questions: str, out: str | None, quiet: bool) -> None:
    """Ask the trained bot QUESTIONS (a CSV with text and optionally expected, or one question
    per line) as the chat API would, storing nothing; report what it answers, what it hands to
    a person and, with expected answers, its answered accuracy and automation."""
    from app.db import session_scope
    from app.nlp.ask import (
        AskError,
        ask,
        engine_config,
        format_report,
        read_questions,
        resolve_expected,
        write_outcomes,
    )
    from app.nlp.engine import Engine
    from app.nlp.pipeline.data import data_from_db

    try:
        asked = read_questions(questions)
        with session_scope(current_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
            articles = data_from_db(session).articles
        resolve_expected(asked, articles)
    except AskError as exc:
        _fail(str(exc))
    engine = Engine(engine_config(current_app.config))
    try:
        engine.load()
        if not engine.ready:
            _fail(f"the bot cannot answer: {engine.not_ready_reason}")
        report = ask(engine, asked, progress=not quiet and sys.stderr.isatty())
    finally:
        engine.close()
    click.echo(format_report(report))
    if out:
        write_outcomes(report, out)
        click.echo(f"wrote {out}")


@click.group("models", cls=AppGroup)
def models_group() -> None:
    """Trained model versions: the registry (list, show, diff, promote, rollback, retire)."""


def _db_url() -> str:
    return current_app.config["SQLALCHEMY_DATABASE_URI"]


def _share(value: float | None) -> str:
    return f"{value:.0%}" if value else ""


@models_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per version.")
def models_list(as_json: bool) -> None:
    """Versions, newest first, with their status; * marks the active one (or, without a
    registry, the one models/current names)."""
    from app.db import session_scope
    from app.nlp import registry
    from app.nlp.store import current_version, list_versions

    models_dir = current_app.config["MODELS_DIR"]
    current = current_version(models_dir)
    with session_scope(_db_url()) as session:
        rows = {r.version: r for r in registry.all_versions(session)}
        entries = [(r.manifest, r.status, r.traffic_share) for r in rows.values()]
    local = [m for m in list_versions(models_dir) if m.get("version") not in rows]
    entries += [(m, None, None) for m in local]
    entries.sort(key=lambda e: e[0].get("trained_at", ""), reverse=True)
    if not entries:
        click.echo(f"no model versions in {models_dir}; run `tierdesk train`")
    for manifest, status, share in entries:
        router = manifest.get("metrics", {}).get("router", {})
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "version": manifest.get("version"),
                        "status": status,
                        "share": share,
                        "trained_at": manifest.get("trained_at"),
                        "val_accuracy": router.get("val_accuracy"),
                    }
                )
            )
            continue
        active = status == "active" if rows else manifest.get("version") == current
        click.echo(
            f"{'*' if active else ' '} {manifest.get('version')}  "
            f"{(status or 'local') + (' ' + _share(share) if status in ('shadow', 'canary') else ''):<14} "
            f"trained {manifest.get('trained_at')}  "
            f"data {manifest.get('data_hash', '')[:12]}  "
            f"held-out accuracy {router.get('val_accuracy')}"
        )


@models_group.command("show")
@click.argument("version")
def models_show(version: str) -> None:
    """A version's status, manifest, live metrics and history of status changes."""
    from app.db import session_scope
    from app.nlp import registry
    from app.nlp.canary import version_metrics

    with session_scope(_db_url()) as session:
        try:
            row = registry.get(session, version)
        except registry.RegistryError as exc:
            _fail(str(exc))
        m = row.manifest
        router = m.get("metrics", {}).get("router", {})
        click.echo(f"version     {row.version}")
        click.echo(f"status      {row.status} {_share(row.traffic_share)}".rstrip())
        click.echo(f"trained_at  {m.get('trained_at')}")
        click.echo(f"data_hash   {m.get('data_hash')}")
        click.echo(f"artifacts   {row.size_bytes / 1e6:.1f} MB, sha256 {row.digest}")
        active = m.get("tiers_active") or {}
        click.echo(
            "tiers       "
            + ", ".join(f"{k}: {'on' if v.get('active') else 'off'}" for k, v in active.items())
        )
        click.echo(
            f"held-out    accuracy {router.get('val_accuracy')}, answered "
            f"{router.get('val_answered_accuracy')} at coverage {router.get('val_coverage')}, "
            f"BERT on {router.get('val_bert_share')}"
        )
        if m.get("eval"):
            click.echo(f"eval        {json.dumps(m['eval'], sort_keys=True)}")
        live = version_metrics(session, row.version)
        click.echo(
            f"live        {live.answers} answers, escalated {live.escalation_rate:.1%}, "
            f"thumbs-down {live.thumbs_down_rate:.1%} of {live.answered}, drafts changed "
            f"{live.drafts_changed_rate:.1%} of {live.drafts_reviewed}, p50 "
            f"{live.latency_p50_ms} ms"
        )
        click.echo("history")
        for event in reversed(registry.history(session, row.version)):
            click.echo(
                f"  {event.created_at:%Y-%m-%d %H:%M:%S}  {event.from_status or '-'} -> "
                f"{event.to_status} {_share(event.traffic_share)}  by {event.actor}: {event.reason}"
            )


@models_group.command("diff")
@click.argument("a")
@click.argument("b")
def models_diff(a: str, b: str) -> None:
    """Manifest fields that differ between two registered versions."""
    from app.db import session_scope
    from app.nlp import registry

    with session_scope(_db_url()) as session:
        try:
            rows = registry.get(session, a), registry.get(session, b)
        except registry.RegistryError as exc:
            _fail(str(exc))
        changes = registry.diff(*rows)
    if not changes:
        click.echo("no differences in the manifests")
    for key, left, right in changes:
        click.echo(f"{key}: {json.dumps(left)} -> {json.dumps(right)}")


def _registry_move(action, *args, **kwargs):
    from app.db import session_scope
    from app.nlp import registry

    try:
        with session_scope(_db_url()) as session:
            row = action(session, *args, **kwargs)
            return row.version, row.status, row.traffic_share
    except registry.RegistryError as exc:
        _fail(str(exc))


@models_group.command("promote")
@click.argument("version")
@click.option(
    "--to",
    "to",
    type=click.Choice(["shadow", "canary", "active"]),
    default=None,
    help="Where to [default: the next step: candidate -> shadow -> canary -> active].",
)
@click.option(
    "--share",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=None,
    help="shadow: share of questions sampled [0.2]; canary: share of conversations [0.1].",
)
@click.option("--reason", default="", help="Kept in the version's history.")
def models_promote(version: str, to: str | None, share: float | None, reason: str) -> None:
    """Move VERSION on; every server follows within seconds."""
    from app.nlp import registry
    from app.vocab import ModelStatus

    name, status, got = _registry_move(
        registry.promote,
        version,
        to=ModelStatus(to) if to else None,
        share=share,
        reason=reason,
        actor=_actor(),
    )
    click.echo(f"{name} is now {status}{' on ' + _share(got) if status != 'active' else ''}")


@models_group.command("rollback")
@click.argument("version", required=False)
@click.option("--reason", default="", help="Kept in the version's history.")
def models_rollback(version: str | None, reason: str) -> None:
    """Make the previously active version (or VERSION) active again; the current one retires."""
    from app.nlp import registry

    name, _, _ = _registry_move(registry.rollback, version, reason=reason, actor=_actor())
    click.echo(f"rolled back: {name} is active")


@models_group.command("retire")
@click.argument("version")
@click.option("--reason", default="", help="Kept in the version's history.")
def models_retire(version: str, reason: str) -> None:
    """End a candidate, shadow or canary; its traffic returns to the active version."""
    from app.nlp import registry

    name, _, _ = _registry_move(registry.retire, version, reason=reason, actor=_actor())
    click.echo(f"{name} is retired")


@models_group.command("check")
def models_check() -> None:
    """Apply the canary's automatic rollback rule now (servers do it every minute)."""
    from app.db import session_scope
    from app.nlp.canary import check_canary

    with session_scope(_db_url()) as session:
        verdict = check_canary(session, current_app.config)
    click.echo("no canary" if verdict is None else verdict.reason)


@models_group.command("activate")
@click.argument("version")
def models_activate(version: str) -> None:
    """Make VERSION serve everyone (rollback); running servers reload it."""
    from app.nlp import registry
    from app.nlp.store import StoreError

    try:
        registry.activate_version(_db_url(), current_app.config["MODELS_DIR"], version, _actor())
    except (StoreError, registry.RegistryError) as exc:
        _fail(str(exc))
    click.echo(f"activated {version}")


def _actor() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "cli"


@click.command("distill")
@click.option(
    "--min-confidence",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Calibrated BERT confidence that labels a logged question [default: tau_review].",
)
@click.option("--quiet", is_flag=True, help="No progress bars.")
def distill_command(min_confidence: float | None, quiet: bool) -> None:
    """Train a candidate on the training data plus logged customer questions labelled by
    reviewers' answers and confident BERT decisions (then `tierdesk models promote`)."""
    from app.nlp.distill import distill

    try:
        report, sources = distill(
            current_app.config, min_confidence=min_confidence, progress=not quiet
        )
    except (TrainingError, StoreError) as exc:
        _fail(str(exc))
    click.echo(
        f"logged questions: {sources['added']} added ({sources['by_reviewer']} by reviewers, "
        f"{sources['by_bert']} by BERT at >= {sources['min_confidence']}), "
        f"{sources['unlabelled']} unsure, {sources['already_known']} already in the data"
    )
    click.echo(report.summary())
    click.echo(
        f"registered {report.version} as a candidate: tierdesk models promote {report.version}"
    )


@click.group("experiment", cls=AppGroup)
def experiment_group() -> None:
    """Two router configurations over the active models, compared on live traffic."""


@experiment_group.command("start")
@click.argument("name")
@click.option(
    "--share",
    type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
    default=0.5,
    show_default=True,
    help="Share of conversations in arm b.",
)
@click.option("--set", "settings", multiple=True, help="Arm b threshold, e.g. tau_review=0.8.")
@click.option("--tier", "tiers", multiple=True, help="Arm b tier, e.g. card_arrival=complex.")
def experiment_start(name: str, share: float, settings: tuple, tiers: tuple) -> None:
    """Start experiment NAME: arm a as tuned, arm b with the given thresholds and tiers."""
    from app.db import session_scope
    from app.nlp.experiments import ExperimentError, parse_overrides, parse_tiers, start
    from app.nlp.store import now_iso

    try:
        with session_scope(_db_url()) as session:
            experiment = start(
                session,
                name,
                share,
                parse_overrides(list(settings)),
                parse_tiers(list(tiers)),
                now_iso(),
            )
    except ExperimentError as exc:
        _fail(str(exc))
    click.echo(
        f"experiment {experiment.name} started: arm b on {experiment.share:.0%} of conversations "
        f"with {json.dumps({**experiment.thresholds, **experiment.tiers}, sort_keys=True)}"
    )


@experiment_group.command("stop")
def experiment_stop() -> None:
    """Stop the running experiment (its results stay readable with `show NAME`)."""
    from app.db import session_scope
    from app.nlp.experiments import ExperimentError, stop
    from app.nlp.store import now_iso

    try:
        with session_scope(_db_url()) as session:
            experiment = stop(session, now_iso())
    except ExperimentError as exc:
        _fail(str(exc))
    click.echo(f"experiment {experiment.name} stopped")


@experiment_group.command("show")
@click.argument("name", required=False)
def experiment_show(name: str | None) -> None:
    """Per-arm metrics and the significance of their differences (default: the running one)."""
    from app.db import session_scope
    from app.nlp.canary import arm_metrics
    from app.nlp.experiments import current, history, significance

    with session_scope(_db_url()) as session:
        running = current(session)
        known = {e.name: e for e in history(session)} | ({running.name: running} if running else {})
        experiment = known.get(name) if name else running
        if experiment is None:
            _fail(f"no experiment {name!r}" if name else "no experiment is running")
        arms = {arm: arm_metrics(session, experiment.name, arm) for arm in ("a", "b")}
    click.echo(
        f"experiment {experiment.name}: arm b on {experiment.share:.0%} with "
        f"{json.dumps({**experiment.thresholds, **experiment.tiers}, sort_keys=True)}, started "
        f"{experiment.started_at}{', stopped ' + experiment.stopped_at if experiment.stopped_at else ''}"
    )
    for arm, m in arms.items():
        click.echo(
            f"  arm {arm}: {m.answers} answers, escalated {m.escalation_rate:.1%}, thumbs-down "
            f"{m.thumbs_down_rate:.1%} of {m.answered}, drafts changed "
            f"{m.drafts_changed_rate:.1%} of {m.drafts_reviewed}, p50 {m.latency_p50_ms} ms"
        )
    for rate, test in significance(arms["a"], arms["b"]).items():
        if test["diff"] is not None:
            click.echo(f"  {rate}: b - a = {test['diff']:+.1%}, p = {test['p_value']:.3f}")


commands: list = [
    ask_command,
    train_command,
    tune_command,
    eval_command,
    distill_command,
    models_group,
    experiment_group,
]
