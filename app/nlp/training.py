"""Training entry points: ``tierdesk train`` (``train_models``), ``tune`` and ``eval``
(``train_from_csv``) and the pipeline they share (``fit_models``).

``fit_models`` runs the named stages of ``app.nlp.pipeline`` in order, each passing a typed
result to the next: splits (held-out folds or one split), fit FastText and fit BERT per fold,
replay the held-out queries through both routes, calibrate, tune the tiers and thresholds,
refit on all the data, choose ``tau_review`` on recent traffic when reviews allow, publish.
``train_models`` reads the database (the data stage), runs the pipeline, saves the version
folder through the store (app/nlp/store.py), enters it in the registry (app/nlp/registry.py)
and, unless it is a candidate, makes it active.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from app.nlp.finetune import EPOCHS as FINE_TUNE_EPOCHS
from app.nlp.passages import forget_splits
from app.nlp.pipeline.calibrate import calibrate, thin_intents
from app.nlp.pipeline.data import (
    TrainingData,
    TrainingError,
    articles_from_categories,
    data_from_db,
    read_labelled_csv,
    split_out_of_scope,
)
from app.nlp.pipeline.fit import fit_bert, fit_fasttext
from app.nlp.pipeline.progress import Progress
from app.nlp.pipeline.publish import TrainedModels, publish
from app.nlp.pipeline.refit import refit as refit_models
from app.nlp.pipeline.replay import replay_held_out
from app.nlp.pipeline.splits import VAL_FRACTION, plan_held_out
from app.nlp.pipeline.traffic import review_on_recent_traffic
from app.nlp.pipeline.tune import effective_tier_map, tune
from app.nlp.store import save_version
from app.nlp.thresholds import (
    ANSWERED_TARGET,
    BERT_BUDGET,
    BERT_CALL_COST,
    DEFAULTS,
    Thresholds,
)
from app.vocab import counted

__all__ = [
    "TrainReport",
    "TrainingError",
    "fit_models",
    "publish_version",
    "train_from_csv",
    "train_models",
]


def fit_models(
    data: TrainingData,
    *,
    budget: float = DEFAULTS.budget,
    bert_cost: float = BERT_CALL_COST,
    bert_budget: float = BERT_BUDGET,
    answered_target: float = ANSWERED_TARGET,
    bert_path: str | Path | None = None,
    quantize: bool = True,
    progress: bool = True,
    seed: int = 0,
    val_fraction: float = VAL_FRACTION,
    validation: tuple[list[str], list[str]] | None = None,
    refit: bool = True,
    fine_tune_epochs: int = FINE_TUNE_EPOCHS,
) -> TrainedModels:
    """The stages of ``app.nlp.pipeline`` on ``data``. ``validation`` replaces the held-out
    split with a given labelled set (``tierdesk tune --val``); then nothing is refit.
    ``fine_tune_epochs``: BERT encoder fine-tuning (on the fit part only, when the data are
    large enough and held out by a split; 0 keeps the frozen encoder)."""
    started = time.perf_counter()
    if not data.texts:
        raise TrainingError("nothing to train on: no articles with a title and no examples")
    plan = plan_held_out(
        data, validation=validation, val_fraction=val_fraction, seed=seed, refit=refit
    )
    bar = Progress(progress, len(plan.folds) + (8 if plan.refit else 6))
    try:
        fasttext = fit_fasttext(data, plan, seed=seed, note=bar.note)
        bar.step("fasttext")
        bert = fit_bert(
            data,
            plan,
            bert_path=bert_path,
            quantize=quantize,
            seed=seed,
            fine_tune_epochs=fine_tune_epochs,
            progress=progress,
            step=bar.step,
        )
        replay = replay_held_out(data, plan, fasttext, bert, progress=progress)
        bar.step("held-out replayed")
        calibrated = calibrate(
            replay, seed=seed, thin=thin_intents(data.labels), weights=plan.held_weights()
        )
        bar.step("calibrated")
        tuned = tune(
            data,
            plan,
            fasttext,
            replay,
            calibrated,
            budget=budget,
            bert_cost=bert_cost,
            bert_budget=bert_budget,
            answered_target=answered_target,
        )
        bar.step("tuned")
        serving = refit_models(
            data,
            plan,
            fasttext,
            bert,
            bert_path=bert_path,
            quantize=quantize,
            seed=seed,
            progress=progress,
            step=bar.step,
        )
        bert.release_training_encoders()  # the fp32 copies are only needed while training
        tuned = review_on_recent_traffic(
            data,
            plan,
            calibrated,
            tuned,
            serving,
            effective_tier_map(data, tuned),
            answered_target=answered_target,
            budget=budget,
            progress=progress,
            note=bar.note,
        )
        bar.step("traffic")
        trained = publish(
            data,
            plan,
            fasttext,
            bert,
            replay,
            calibrated,
            tuned,
            serving,
            train_seconds=round(time.perf_counter() - started, 2),
        )
        bar.step("published")
    finally:
        bar.close()
        forget_splits()
    return trained


@dataclass
class TrainReport:
    version: str
    train_seconds: float
    metrics: dict
    thresholds: Thresholds
    n_texts: int  # labelled texts: intent examples plus the KB's titles and alternate questions
    n_intents: int
    n_articles: int
    n_intent_examples: int = 0  # of them, examples imported or taught (not the KB's own)

    def summary(self) -> str:
        r = self.metrics.get("router", {})
        active = self.metrics.get("tiers_active") or {}
        lines = [
            f"  {name}: {'on' if info['active'] else 'off'} - {info['reason']}"
            for name, info in active.items()
        ]
        return self._figures(r) + ("\ntiers:\n" + "\n".join(lines) if lines else "")

    def _figures(self, r: dict) -> str:
        t = self.thresholds
        fasttext = self.metrics.get("fasttext_val_accuracy")
        return (
            f"version {self.version}: {counted(self.n_texts, 'labelled text')}"
            f" ({counted(self.n_intent_examples, 'intent example')}, the rest the KB's titles and"
            f" questions), {counted(self.n_intents, 'intent')},"
            f" {counted(self.n_articles, 'article')}, trained in {self.train_seconds:.0f} s\n"
            f"held out: accuracy fasttext {_share(fasttext, 'not trained')}, bert "
            f"{_share(self.metrics.get('bert_val_accuracy'))}, router "
            f"{_share(r.get('val_accuracy'))}; answered {_share(r.get('val_answered_accuracy'))}"
            f" right at {_share(r.get('val_coverage'))} coverage, BERT on"
            f" {_share(r.get('val_bert_share'))}\n"
            f"thresholds: tau_fast={t.tau_fast} margin={t.margin} tau_cascade={t.cascade_below}"
            f" tau_verify={t.verify_below} tau_review={t.tau_review}"
            f" fasttext_weight={t.fasttext_weight}"
        )


def _share(value: float | None, missing: str = "-") -> str:
    """A held-out figure as a percentage; ``missing`` when there is none."""
    return missing if value is None else f"{value:.2%}"


def no_articles_message(data: TrainingData) -> str:
    """Why there is nothing to serve, and what to do: a bot answers with articles, so intent
    examples alone (a ``text,category`` data set) train nothing it could say."""
    message = "the knowledge base has no published articles; import some first (tierdesk kb import)"
    intents = len(set(data.labels))
    if intents:
        message += (
            f". The {len(data.texts)} examples of {intents} intents need articles to answer"
            " with (an article's category names its intent); to measure the intent data"
            " alone, run tierdesk eval --train TRAIN.csv --test TEST.csv"
        )
    return message


def train_models(
    config: Mapping,
    *,
    progress: bool = True,
    on_data: Callable[[TrainingData], None] | None = None,
    candidate: bool = False,
) -> TrainReport:
    """Train from the app database into a new version folder, enter it in the registry and
    make it active (``candidate``: registered only, serving nobody until promoted)."""
    from app.db import session_scope

    url = config["SQLALCHEMY_DATABASE_URI"]
    with session_scope(url) as session:
        data = data_from_db(session, config.get("INTENTS_DIR"))
    if on_data:
        on_data(data)
    if not data.articles:
        raise TrainingError(no_articles_message(data))
    trained = fit_models(
        data,
        bert_path=config.get("BERT_PATH"),
        quantize=config.get("BERT_QUANTIZE", True),
        progress=progress,
        fine_tune_epochs=config.get("BERT_FINETUNE_EPOCHS", FINE_TUNE_EPOCHS),
    )
    models_dir = Path(config["MODELS_DIR"])
    version = save_version(models_dir, trained, data)
    publish_version(config, version, candidate=candidate)
    return TrainReport(
        version,
        trained.train_seconds,
        trained.metrics,
        trained.thresholds,
        len(data.texts),
        len(set(data.labels)),
        len(data.articles),
        data.n_examples,
    )


def examples_since_last_version(session) -> tuple[int, str | None, datetime | None]:
    """(intent examples added since the newest registered version, that version, when it was
    registered); every example and ``None``s when no version was ever trained. What reviewers
    teach and imports add both count: either is new training data."""
    from sqlalchemy import func, select

    from app.models import ModelVersion, TrainingExample

    latest = session.scalars(
        select(ModelVersion).order_by(ModelVersion.created_at.desc()).limit(1)
    ).first()
    query = select(func.count()).select_from(TrainingExample)
    if latest is not None:
        query = query.where(TrainingExample.created_at > latest.created_at)
    count = session.scalar(query) or 0
    if latest is None:
        return count, None, None
    return count, latest.version, latest.created_at


def publish_version(config: Mapping, version: str, *, candidate: bool = False) -> None:
    """Register a saved version (artifacts into the shared store), activate it unless it is a
    candidate, and prune old local folders (never one the registry serves)."""
    from app.db import session_scope
    from app.nlp import registry
    from app.nlp.store import activate, prune_versions
    from app.vocab import ModelStatus

    url = config["SQLALCHEMY_DATABASE_URI"]
    models_dir = Path(config["MODELS_DIR"])
    status = ModelStatus.CANDIDATE if candidate else ModelStatus.ACTIVE
    with session_scope(url) as session:
        registry.register(session, models_dir, version, status=status)
        plan = registry.serving_plan(session)
    if not candidate:
        activate(models_dir, version)
    prune_versions(models_dir, protect=plan.versions() if plan else ())


def train_from_csv(
    train_csv: str | Path,
    *,
    questions_per_article: int | None = None,
    oos_dev: Sequence[str] = (),
    oos_labelled: Sequence[str] = (),
    **kwargs,
) -> tuple[TrainedModels, TrainingData]:
    """Train on a ``text,category`` CSV with a one-article-per-category KB (eval and tune).
    Out-of-scope negatives: ``oos_dev`` (development guesses, such as
    ``intents/out_of_scope/dev.csv``), ``oos_labelled`` (the user's own out-of-scope rows) and
    the CSV's rows of an out-of-scope category (``oos``...), which count as labelled."""
    texts, labels, oos_rows = split_out_of_scope(*read_labelled_csv(train_csv))
    if not texts:
        raise TrainingError(f"{train_csv}: every row is out of scope; no intent to train")
    articles = articles_from_categories(texts, labels, questions_per_article)
    labelled = [*oos_labelled, *oos_rows]
    data = TrainingData(texts, labels, articles, {}, [*oos_dev, *labelled], oos_labelled=labelled)
    return fit_models(data, **kwargs), data
