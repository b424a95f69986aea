"""Training entry points: ``tierdesk train`` (``train_models``), ``tune`` and ``eval``
(``train_from_csv``), the pipeline they share (``fit_models``) and the versioned model folders.

``fit_models`` runs the named stages of ``app.nlp.pipeline`` in order, each passing a typed
result to the next: splits (held-out folds or one split), fit FastText and fit BERT per fold,
replay the held-out queries through both routes, calibrate, tune the tiers and thresholds,
refit on all the data, publish. ``train_models`` reads the database (the data stage), runs
the pipeline, writes ``models/versions/<version>/`` (with a manifest: version, data hash,
validation metrics, trained_at), switches ``models/current`` atomically, keeps older versions
for rollback and bumps MODEL_REVISION.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.files import write_json_atomic
from app.nlp.finetune import EPOCHS as FINE_TUNE_EPOCHS
from app.nlp.pipeline.calibrate import calibrate
from app.nlp.pipeline.data import (
    TrainingData,
    TrainingError,
    articles_from_categories,
    data_from_db,
    read_labelled_csv,
)
from app.nlp.pipeline.fit import fit_bert, fit_fasttext
from app.nlp.pipeline.progress import Progress
from app.nlp.pipeline.publish import TrainedModels, publish
from app.nlp.pipeline.refit import refit as refit_models
from app.nlp.pipeline.replay import replay_held_out
from app.nlp.pipeline.splits import VAL_FRACTION, plan_held_out
from app.nlp.pipeline.tune import tune
from app.nlp.thresholds import (
    ANSWERED_TARGET,
    BERT_BUDGET,
    BERT_CALL_COST,
    DEFAULTS,
    THRESHOLDS_FILE,
    Thresholds,
)

__all__ = ["TrainReport", "TrainingError", "fit_models", "train_from_csv", "train_models"]

CURRENT_POINTER = "current"
VERSIONS_DIR = "versions"
MANIFEST = "manifest.json"
CALIBRATION_FILE = "calibration.json"
TIERS_FILE = "tiers.json"
FASTTEXT_DIR = "fasttext"
BERT_DIR = "bert"
KEEP_VERSIONS = 5


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
    from app.nlp.bert import HEAD_MIN_EXAMPLES

    started = time.perf_counter()
    if not data.texts:
        raise TrainingError("nothing to train on: no articles with a title and no examples")
    plan = plan_held_out(
        data, validation=validation, val_fraction=val_fraction, seed=seed, refit=refit
    )
    bar = Progress(progress, len(plan.folds) + (7 if plan.refit else 5))
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
        # intents too thin for FastText or a head to know a held-out query's intent
        thin = float(np.median(list(Counter(data.labels).values()))) < HEAD_MIN_EXAMPLES
        calibrated = calibrate(replay, seed=seed, thin=thin)
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
    return trained


# -- versioned model folders -------------------------------------------------------------


def current_version(models_dir: str | Path) -> str | None:
    pointer = Path(models_dir) / CURRENT_POINTER
    try:
        return json.loads(pointer.read_text())["version"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
        return None


def version_folder(models_dir: str | Path, version: str) -> Path:
    return Path(models_dir) / VERSIONS_DIR / version


def models_present(models_dir: str | Path) -> bool:
    """True when ``models/current`` names a complete version folder."""
    version = current_version(models_dir)
    return bool(version) and (version_folder(models_dir, version) / MANIFEST).is_file()


def list_versions(models_dir: str | Path) -> list[dict]:
    """Manifests of every saved version, newest first."""
    root = Path(models_dir) / VERSIONS_DIR
    manifests = []
    for folder in root.iterdir() if root.is_dir() else []:
        try:
            manifests.append(json.loads((folder / MANIFEST).read_text()))
        except (FileNotFoundError, json.JSONDecodeError):
            continue
    return sorted(manifests, key=lambda m: m.get("trained_at", ""), reverse=True)


def activate(models_dir: str | Path, version: str, db_url: str | None = None) -> None:
    """Point ``models/current`` at ``version`` (atomically) and tell running servers."""
    if not (version_folder(models_dir, version) / MANIFEST).is_file():
        raise TrainingError(f"no model version {version!r} in {Path(models_dir) / VERSIONS_DIR}")
    Path(models_dir).mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        Path(models_dir) / CURRENT_POINTER, {"version": version, "activated_at": _now()}
    )
    if db_url:
        from app.db import session_scope
        from app.state import MODEL_REVISION, bump_revision

        with session_scope(db_url) as session:
            bump_revision(session, MODEL_REVISION)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def save_version(models_dir: str | Path, trained: TrainedModels, data: TrainingData) -> str:
    """Write a complete version folder (under a temp name, renamed when complete)."""
    root = Path(models_dir) / VERSIONS_DIR
    root.mkdir(parents=True, exist_ok=True)
    data_hash = data.data_hash()
    version = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + data_hash[:8]
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{version}-"))
    if trained.fasttext is not None:
        trained.fasttext.save(staging / FASTTEXT_DIR)
    trained.bert.save(staging / BERT_DIR)
    trained.calibration.save(staging / CALIBRATION_FILE)
    trained.thresholds.save(staging / THRESHOLDS_FILE)
    (staging / TIERS_FILE).write_text(json.dumps(trained.tiers, indent=2, sort_keys=True))
    manifest = {
        "version": version,
        "trained_at": _now(),
        "data_hash": data_hash,
        "train_seconds": trained.train_seconds,
        "metrics": trained.metrics,
        "fasttext_version": trained.fasttext.version if trained.fasttext else None,
        "tiers_active": trained.metrics.get("tiers_active"),
        "bert_version": getattr(trained.bert, "version", None),
        "n_articles": len(data.articles),
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    final = root / version
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    return version


def prune_versions(models_dir: str | Path, keep: int = KEEP_VERSIONS) -> list[str]:
    """Delete all but the ``keep`` newest versions (never the current one)."""
    current = current_version(models_dir)
    removed = []
    for manifest in list_versions(models_dir)[keep:]:
        if manifest["version"] != current:
            shutil.rmtree(version_folder(models_dir, manifest["version"]), ignore_errors=True)
            removed.append(manifest["version"])
    return removed


@dataclass
class TrainReport:
    version: str
    train_seconds: float
    metrics: dict
    thresholds: Thresholds
    n_examples: int
    n_intents: int
    n_articles: int

    def summary(self) -> str:
        r = self.metrics.get("router", {})
        active = self.metrics.get("tiers_active") or {}
        lines = [
            f"  {name}: {'on' if info['active'] else 'off'} - {info['reason']}"
            for name, info in active.items()
        ]
        return self._figures(r) + ("\ntiers:\n" + "\n".join(lines) if lines else "")

    def _figures(self, r: dict) -> str:
        return (
            f"version {self.version}: {self.n_examples} examples, {self.n_intents} intents, "
            f"{self.n_articles} articles in {self.train_seconds:.0f}s; held-out accuracy "
            f"fasttext {self.metrics.get('fasttext_val_accuracy')}, bert "
            f"{self.metrics.get('bert_val_accuracy')}, router {r.get('val_accuracy')} "
            f"(answered {r.get('val_answered_accuracy')} at coverage "
            f"{r.get('val_coverage')}, BERT on {r.get('val_bert_share')}); thresholds "
            f"tau_fast={self.thresholds.tau_fast} margin={self.thresholds.margin} "
            f"tau_cascade={self.thresholds.cascade_below} tau_verify="
            f"{self.thresholds.verify_below} tau_review={self.thresholds.tau_review}"
            f" fasttext_weight={self.thresholds.fasttext_weight}"
        )


def train_models(
    config: Mapping, *, progress: bool = True, on_data: Callable[[TrainingData], None] | None = None
) -> TrainReport:
    """Train from the app database into a new version folder and make it current."""
    from app.db import session_scope

    url = config["SQLALCHEMY_DATABASE_URI"]
    with session_scope(url) as session:
        data = data_from_db(session, config.get("INTENTS_DIR"))
    if on_data:
        on_data(data)
    if not data.articles:
        raise TrainingError(
            "the knowledge base has no published articles; import some first (tierdesk kb import)"
        )
    trained = fit_models(
        data,
        bert_path=config.get("BERT_PATH"),
        quantize=config.get("BERT_QUANTIZE", True),
        progress=progress,
        fine_tune_epochs=config.get("BERT_FINETUNE_EPOCHS", FINE_TUNE_EPOCHS),
    )
    models_dir = Path(config["MODELS_DIR"])
    version = save_version(models_dir, trained, data)
    activate(models_dir, version, url)
    prune_versions(models_dir)
    return TrainReport(
        version,
        trained.train_seconds,
        trained.metrics,
        trained.thresholds,
        len(data.texts),
        len(set(data.labels)),
        len(data.articles),
    )


def train_from_csv(
    train_csv: str | Path,
    *,
    questions_per_article: int | None = None,
    oos_dev: Sequence[str] = (),
    **kwargs,
) -> tuple[TrainedModels, TrainingData]:
    """Train on a ``text,category`` CSV with a one-article-per-category KB (eval and tune)."""
    texts, labels = read_labelled_csv(train_csv)
    articles = articles_from_categories(texts, labels, questions_per_article)
    data = TrainingData(texts, labels, articles, {}, list(oos_dev))
    return fit_models(data, **kwargs), data
