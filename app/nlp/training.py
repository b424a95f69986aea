"""Training orchestration: data from the database (or a CSV), held-out tuning, versioned models.

``fit_models`` is the one pipeline (used by ``tierdesk train``, ``tune`` and ``eval``):

1. Split the labelled texts, stratified: 85% fit, 15% held out.
2. Train FastText (one model per grid cell; the best on the held-out part is kept) and the
   BERT tier (encoder fine-tune when the data are large enough, then the head) on the fit part;
   build BM25 and the BERT KB index from the KB *without* the held-out texts (they may be
   alternate questions too, which would leak the answer).
3. Run every held-out query, and out-of-scope negatives (``intents/out_of_scope/dev.csv`` and
   generated nonsense), through both routes; fit the two calibrators; derive the tiers and
   search the thresholds on cross-fitted calibrated confidences.
4. Retrain FastText and the BERT head on all the data (same hyper-parameters; the encoder
   fine-tuned in step 2 is kept) for serving.

``train_models`` reads the database, runs the pipeline, writes ``models/versions/<version>/``
(with a manifest: version, data hash, validation metrics, trained_at), switches
``models/current`` atomically, keeps older versions for rollback and bumps MODEL_REVISION.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import logging
import os
import random
import shutil
import string
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from app.nlp.calibration import (
    COMPLEX_FEATURES,
    SIMPLE_FEATURES,
    CalibrationSet,
    Calibrator,
    complex_features,
    expected_calibration_error,
    reliability_bins,
    simple_features,
)
from app.nlp.finetune import EPOCHS as FINE_TUNE_EPOCHS
from app.nlp.intent import FastTextIntent, stratified_split
from app.nlp.router import TOP_K
from app.nlp.thresholds import (
    ANSWERED_TARGET,
    BERT_BUDGET,
    BERT_CALL_COST,
    DEFAULTS,
    THRESHOLDS_FILE,
    OutOfScopeOutcomes,
    Thresholds,
    ValidationOutcomes,
    tune_thresholds,
)
from app.nlp.tiers import F1_GRID, derive_tiers, effective_tiers

log = logging.getLogger(__name__)

CURRENT_POINTER = "current"
VERSIONS_DIR = "versions"
MANIFEST = "manifest.json"
CALIBRATION_FILE = "calibration.json"
TIERS_FILE = "tiers.json"
FASTTEXT_DIR = "fasttext"
BERT_DIR = "bert"
KEEP_VERSIONS = 5
VAL_FRACTION = 0.15
CALIBRATION_FOLDS = 5
GENERATED_NEGATIVES = 60


class TrainingError(RuntimeError):
    """Training cannot start or finish; the message says why in the user's terms."""


# -- data --------------------------------------------------------------------------------


@dataclass
class KbArticle:
    """A published article as training sees it (its intent is its category, or its slug)."""

    slug: str
    title: str
    questions: list[str]
    body: str
    intent: str


@dataclass
class TrainingData:
    texts: list[str]
    labels: list[str]
    articles: list[KbArticle]
    declared_tiers: dict[str, str] = field(default_factory=dict)
    oos_texts: list[str] = field(default_factory=list)

    def data_hash(self) -> str:
        digest = hashlib.sha256()
        for text, label in sorted(zip(self.texts, self.labels, strict=True)):
            digest.update(f"{label}\t{text}\n".encode())
        for a in sorted(self.articles, key=lambda a: a.slug):
            digest.update(json.dumps([a.slug, a.title, a.questions, a.intent]).encode())
        for name, tier in sorted(self.declared_tiers.items()):
            digest.update(f"{name}={tier}\n".encode())
        return digest.hexdigest()


def read_labelled_csv(path: str | Path) -> tuple[list[str], list[str]]:
    """``text,category`` rows; errors name ``file:line``."""
    path = Path(path)
    texts: list[str] = []
    labels: list[str] = []
    try:
        fh = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TrainingError(f"{path}: cannot read: {exc.strerror}") from None
    with fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"text", "category"} <= set(reader.fieldnames):
            raise TrainingError(f"{path}:1: expected a header with columns text,category")
        for row in reader:
            text = (row.get("text") or "").strip()
            label = (row.get("category") or "").strip()
            if not text or not label:
                raise TrainingError(f"{path}:{reader.line_num}: empty text or category")
            texts.append(text)
            labels.append(label)
    if not texts:
        raise TrainingError(f"{path}: no rows")
    return texts, labels


def category_title(category: str) -> str:
    return category.replace("_", " ").replace("-", " ").strip().capitalize()


def articles_from_categories(
    texts: Sequence[str],
    labels: Sequence[str],
    questions_per_article: int | None = None,
    seed: int = 0,
) -> list[KbArticle]:
    """One article per category (the eval KB): title from the name, training texts as its
    alternate questions (all of them, or a sample of ``questions_per_article``)."""
    by_label: dict[str, list[str]] = {}
    for text, label in zip(texts, labels, strict=True):
        by_label.setdefault(label, []).append(text)
    rng = random.Random(seed)
    articles = []
    for label in sorted(by_label):
        questions = list(dict.fromkeys(by_label[label]))
        if questions_per_article is not None and len(questions) > questions_per_article:
            questions = rng.sample(questions, questions_per_article)
        articles.append(
            KbArticle(
                slug=label, title=category_title(label), questions=questions, body="", intent=label
            )
        )
    return articles


def generated_negatives(n: int = GENERATED_NEGATIVES, seed: int = 0) -> list[str]:
    """Nonsense no KB can answer: keyboard mash and random letters (domain-free negatives)."""
    rng = random.Random(seed)
    rows = ["qwertyuiop", "asdfghjkl", "zxcvbnm", "lorem ipsum dolor sit amet", "?????", "..."]
    while len(rows) < n:
        words = [
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
            for _ in range(rng.randint(1, 6))
        ]
        rows.append(" ".join(words))
    return rows[:n]


def read_oos_dev(intents_dir: str | Path | None) -> list[str]:
    """Development out-of-scope queries (never the test file)."""
    if not intents_dir:
        return []
    path = Path(intents_dir) / "out_of_scope" / "dev.csv"
    if not path.is_file():
        return []
    texts, _ = read_labelled_csv(path)
    return texts


def data_from_db(session, intents_dir: str | Path | None = None) -> TrainingData:
    """Intents, training examples of every origin and published articles from the database.

    An article without a category is its own intent (named after its slug), trained on its
    title and alternate questions; articles with a category add theirs to that intent.
    """
    from sqlalchemy import select

    from app.models import Article, Intent, TrainingExample

    pairs: dict[tuple[str, str], None] = {}
    for text, intent in session.execute(select(TrainingExample.text, TrainingExample.intent)):
        if text and text.strip() and intent:
            pairs[(text.strip(), intent)] = None
    articles: list[KbArticle] = []
    for art in session.scalars(
        select(Article).where(Article.published.is_(True)).order_by(Article.slug)
    ):
        intent = art.category or art.slug
        questions = [q for q in (art.questions or []) if isinstance(q, str) and q.strip()]
        articles.append(KbArticle(art.slug, art.title, questions, art.body or "", intent))
        for text in [art.title, *questions]:
            pairs[(text.strip(), intent)] = None
    declared = {
        i.name: i.tier for i in session.scalars(select(Intent)) if i.tier_source == "declared"
    }
    texts = [t for t, _ in pairs]
    labels = [lab for _, lab in pairs]
    return TrainingData(texts, labels, articles, declared, read_oos_dev(intents_dir))


# -- the pipeline ------------------------------------------------------------------------


@dataclass
class TrainedModels:
    fasttext: FastTextIntent
    bert: object  # BertTier
    calibration: CalibrationSet
    thresholds: Thresholds
    tiers: dict  # {"derived", "declared", "effective", "f1_min", "per_label"}
    metrics: dict
    train_seconds: float


def bm25_docs(articles: Sequence[KbArticle], drop: set[str] | None = None):
    from app.nlp.bm25 import BM25Doc

    drop = drop or set()
    return [
        BM25Doc(a.slug, a.title, [q for q in a.questions if q not in drop], a.body, a.intent)
        for a in articles
    ]


def kb_entries(articles: Sequence[KbArticle], drop: set[str] | None = None):
    from app.nlp.bert import KbEntry

    drop = drop or set()
    return [
        KbEntry(a.slug, a.title, a.intent, [q for q in a.questions if q not in drop])
        for a in articles
    ]


class _Progress:
    """A tqdm bar over the pipeline's steps (silent when disabled)."""

    def __init__(self, enabled: bool, steps: int) -> None:
        self.bar = tqdm(total=steps, desc="training", unit="step", disable=not enabled)

    def step(self, label: str) -> None:
        self.bar.set_postfix_str(label)
        self.bar.update(1)

    def note(self, label: str) -> None:
        self.bar.set_postfix_str(label)

    def close(self) -> None:
        self.bar.close()


def _train_bert(
    texts, labels, entries, *, bert_path, quantize, progress, seed, fine_tune_epochs=0, encoder=None
):
    from app.nlp.bert import BertTier

    return BertTier.train(
        list(texts),
        list(labels),
        entries,
        bert_path=bert_path,
        quantize=quantize,
        progress=progress,
        seed=seed,
        fine_tune_epochs=fine_tune_epochs,
        encoder=encoder,
    )


def bert_with_kb(bert, entries, reuse_from=None):
    """A BERT tier sharing ``bert``'s encoder and head, indexed on ``entries``.

    A shallow copy (``set_kb`` assigns new arrays, never mutates them), so requests still using
    a previous router keep a complete index; KB texts already embedded by ``reuse_from`` (same
    base encoder) are not embedded again.
    """
    clone = copy.copy(bert)
    source = reuse_from if reuse_from is not None else bert
    clone._text_cache = dict(getattr(source, "_text_cache", {}))
    clone.set_kb(entries)
    return clone


def _cross_fitted(
    calibrator_features: tuple[str, ...],
    rows: list[dict],
    correct: np.ndarray,
    folds: int,
    seed: int,
) -> np.ndarray:
    """Calibrated confidences where each row's value comes from a fit without that row."""
    n = len(rows)
    out = np.zeros(n)
    order = np.random.default_rng(seed).permutation(n)
    for chunk in np.array_split(order, min(folds, max(n, 1))):
        if not len(chunk):
            continue
        mask = np.ones(n, dtype=bool)
        mask[chunk] = False
        cal = Calibrator(calibrator_features).fit(
            [rows[i] for i in np.flatnonzero(mask)], correct[mask]
        )
        out[chunk] = cal.predict_many([rows[i] for i in chunk])
    return out


FASTTEXT_WEIGHT_GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
VALIDATION_BATCH = 256


def choose_fasttext_weight(
    ft_results: Sequence, bert, vectors: np.ndarray, labels: Sequence[str]
) -> tuple[float, dict[str, float]]:
    """The weight of FastText in the BERT route's blend that answers most held-out queries
    right (ties: the smaller weight), from FastText's results and the queries' embeddings.
    Returns it and the accuracy of every grid weight."""
    rows = np.stack([bert.prior_vector(f.intents) for f in ft_results])
    truth = np.asarray(labels)
    accuracy = {}
    for weight in FASTTEXT_WEIGHT_GRID:
        _, scores, entries = bert.score(vectors, rows, weight)
        if not entries:
            return 0.0, {}
        answered = np.array([entries[i].intent for i in scores.argmax(axis=1)])
        accuracy[str(weight)] = round(float((answered == truth).mean()), 4)
    best = max(FASTTEXT_WEIGHT_GRID, key=lambda w: (accuracy[str(w)], -w))
    return best, accuracy


def evaluate_routes(
    ft: FastTextIntent,
    bm25,
    bert,
    queries: Sequence[str],
    labels: Sequence[str | None],
    progress: bool = False,
    fasttext_weight: float = 0.0,
    ft_results: Sequence | None = None,
    vectors: np.ndarray | None = None,
) -> dict:
    """Run both routes on every query; ``labels`` None marks out-of-scope (never correct).
    ``ft_results`` and ``vectors`` (FastText's results and BERT embeddings of ``queries``)
    are computed here unless given."""
    from app.nlp.router import Router, RouterModels

    head_weight = getattr(bert, "head_weight", None)
    retriever = Router(RouterModels(ft, bm25, bert, CalibrationSet.untrained(), Thresholds(), {}))
    if ft_results is None:
        ft_results = [ft.run(q, k=TOP_K) for q in queries]
    bert_results = []
    for start in tqdm(
        range(0, len(queries), VALIDATION_BATCH),
        desc="validating",
        unit="batch",
        disable=not progress,
        leave=False,
    ):
        stop = start + VALIDATION_BATCH
        bert_results.extend(
            bert.run_batch(
                list(queries[start:stop]),
                k=TOP_K,
                priors=[f.intents for f in ft_results[start:stop]],
                prior_weight=fasttext_weight,
                vectors=None if vectors is None else vectors[start:stop],
            )
        )
    out = {
        "simple_rows": [],
        "complex_rows": [],
        "simple_ok": [],
        "bert_ok": [],
        "ft_top": [],
        "ft_p1": [],
        "ft_margin": [],
    }
    for query, label, f, b in zip(queries, labels, ft_results, bert_results, strict=True):
        top = f.intents[0][0] if f.intents else None
        m = retriever.simple_retrieve(query, f)
        simple_answer = m.candidates[0].intent if m.candidates else None
        bert_answer = b.candidates[0].intent if b.candidates else None
        out["simple_rows"].append(simple_features(f, m))
        out["complex_rows"].append(complex_features(f, b, head_weight))
        out["simple_ok"].append(label is not None and simple_answer == label)
        out["bert_ok"].append(label is not None and bert_answer == label)
        out["ft_top"].append(top or "")
        p1 = f.intents[0][1] if f.intents else 0.0
        p2 = f.intents[1][1] if len(f.intents) > 1 else 0.0
        out["ft_p1"].append(p1)
        out["ft_margin"].append(p1 - p2)
    for key in ("simple_ok", "bert_ok", "ft_p1", "ft_margin"):
        out[key] = np.asarray(out[key])
    return out


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
    """The whole pipeline (module docstring). ``validation`` replaces the held-out split with
    a given labelled set (``tierdesk tune --val``); then nothing is refit.
    ``fine_tune_epochs``: BERT encoder fine-tuning (on the fit part only, when the data are
    large enough; 0 keeps the frozen encoder)."""
    from app.nlp.bm25 import BM25Retriever

    started = time.perf_counter()
    if len(set(data.labels)) < 2:
        raise TrainingError(f"need at least 2 intents with examples, found {len(set(data.labels))}")
    bar = _Progress(progress, 6 if refit and validation is None else 4)
    try:
        if validation is None:
            fit_idx, val_idx = stratified_split(data.labels, val_fraction, seed)
            fit_texts = [data.texts[i] for i in fit_idx]
            fit_labels = [data.labels[i] for i in fit_idx]
            val_texts = [data.texts[i] for i in val_idx]
            val_labels = [data.labels[i] for i in val_idx]
        else:
            fit_texts, fit_labels = list(data.texts), list(data.labels)
            val_texts, val_labels = list(validation[0]), list(validation[1])
            refit = False
        if not val_texts:
            raise TrainingError(
                "too few examples to hold any out for tuning (each intent needs at least 2)"
            )
        held = set(val_texts)
        ft = FastTextIntent.select(
            fit_texts, fit_labels, val_texts, val_labels, seed=seed, progress=bar.note
        )
        bar.step("fasttext")
        val_entries = kb_entries(data.articles, held)
        bert = _train_bert(
            fit_texts,
            fit_labels,
            val_entries,
            bert_path=bert_path,
            quantize=quantize,
            progress=progress,
            seed=seed,
            fine_tune_epochs=fine_tune_epochs,
        )
        bar.step("bert")
        bm25_val = BM25Retriever(bm25_docs(data.articles, held))
        negatives = list(dict.fromkeys([*data.oos_texts, *generated_negatives(seed=seed)]))
        queries = [*val_texts, *negatives]
        truth: list[str | None] = [*val_labels, *[None] * len(negatives)]
        # FastText and BERT see every held-out query once: for the blend's weight, then both routes
        ft_results = [ft.run(q, k=TOP_K) for q in queries]
        vectors = bert.encoder.encode(queries, progress=progress)
        n_val = len(val_texts)
        fasttext_weight, blend_accuracy = choose_fasttext_weight(
            ft_results[:n_val], bert, vectors[:n_val], val_labels
        )
        routes = evaluate_routes(
            ft,
            bm25_val,
            bert,
            queries,
            truth,
            progress=progress,
            fasttext_weight=fasttext_weight,
            ft_results=ft_results,
            vectors=vectors,
        )
        calibration, outcomes, cal_metrics = _calibrate(routes, len(val_texts), seed)
        per_label = ft.per_label_scores(val_texts, val_labels)
        tier_maps = {
            f: effective_tiers(
                derive_tiers(per_label, f, sorted(set(data.labels))), data.declared_tiers
            )
            for f in F1_GRID
        }
        thresholds, f1_min, figures = tune_thresholds(
            outcomes,
            tier_maps,
            budget=budget,
            bert_cost=bert_cost,
            bert_budget=bert_budget,
            answered_target=answered_target,
        )
        thresholds.fasttext_weight = fasttext_weight
        figures["val_bert_accuracy_by_fasttext_weight"] = blend_accuracy
        _name_reason_thresholds(thresholds, routes, len(val_texts))
        thresholds.provenance.update(figures)
        bar.step("calibrated and tuned")
        metrics = {
            "fasttext_val_accuracy": round(float(routes["simple_ok"][: len(val_texts)].mean()), 4),
            "bert_val_accuracy": round(float(routes["bert_ok"][: len(val_texts)].mean()), 4),
            "fasttext": ft.metrics,
            "bert_fine_tune": bert.metadata.get("fine_tune"),
            "calibration": cal_metrics,
            "router": figures,
            "n_train": len(data.texts),
            "n_val": len(val_texts),
            "n_oos_negatives": len(negatives),
            "n_intents": len(set(data.labels)),
        }
        if refit:
            ft = FastTextIntent.train(data.texts, data.labels, seed=seed, **ft.metrics["chosen"])
            ft.metrics = metrics["fasttext"]
            bar.step("fasttext (all data)")
            fitted_bert = bert
            # The head is refitted on all the data; the encoder stays the one fine-tuned on the
            # fit part (a second fine-tune on all the data doubled the training time and did
            # not help on BANKING77: hybrid_review 98.38% answered against 98.45%).
            bert = _train_bert(
                data.texts,
                data.labels,
                [],
                bert_path=bert_path,
                quantize=quantize,
                progress=progress,
                seed=seed,
                encoder=fitted_bert.training_encoder,
            )
            bert = bert_with_kb(bert, kb_entries(data.articles), reuse_from=fitted_bert)
            fitted_bert.training_encoder = None
            bar.step("bert (all data)")
        else:
            bert.set_kb(kb_entries(data.articles))
        bert.training_encoder = None  # the fp32 copy is only needed while training
        derived = derive_tiers(per_label, f1_min, sorted(set(data.labels)))
        tiers = {
            "f1_min": f1_min,
            "derived": derived,
            "declared": dict(data.declared_tiers),
            "effective": effective_tiers(derived, data.declared_tiers),
            "per_label": {k: {m: round(v, 4) for m, v in s.items()} for k, s in per_label.items()},
        }
        bar.step("done")
    finally:
        bar.close()
    return TrainedModels(
        ft, bert, calibration, thresholds, tiers, metrics, round(time.perf_counter() - started, 2)
    )


def _calibrate(routes: dict, n_in_scope: int, seed: int):
    simple_ok = routes["simple_ok"].astype(bool)
    bert_ok = routes["bert_ok"].astype(bool)
    simple = Calibrator(SIMPLE_FEATURES).fit(routes["simple_rows"], simple_ok)
    complex_ = Calibrator(COMPLEX_FEATURES).fit(routes["complex_rows"], bert_ok)
    conf_s = _cross_fitted(
        SIMPLE_FEATURES, routes["simple_rows"], simple_ok, CALIBRATION_FOLDS, seed
    )
    conf_b = _cross_fitted(
        COMPLEX_FEATURES, routes["complex_rows"], bert_ok, CALIBRATION_FOLDS, seed
    )
    n = n_in_scope
    metrics = {
        "simple_ece": round(expected_calibration_error(conf_s[:n], simple_ok[:n]), 4),
        "complex_ece": round(expected_calibration_error(conf_b[:n], bert_ok[:n]), 4),
        "simple_bins": reliability_bins(conf_s[:n], simple_ok[:n]),
        "complex_bins": reliability_bins(conf_b[:n], bert_ok[:n]),
    }
    calibration = CalibrationSet(simple, complex_, metrics)
    outcomes = ValidationOutcomes(
        ft_top=routes["ft_top"][:n],
        ft_p1=routes["ft_p1"][:n],
        ft_margin=routes["ft_margin"][:n],
        simple_correct=simple_ok[:n],
        simple_conf=conf_s[:n],
        bert_correct=bert_ok[:n],
        bert_conf=conf_b[:n],
        oos=OutOfScopeOutcomes(
            ft_top=routes["ft_top"][n:],
            ft_p1=routes["ft_p1"][n:],
            ft_margin=routes["ft_margin"][n:],
            simple_conf=conf_s[n:],
            bert_conf=conf_b[n:],
        ),
    )
    routes["conf_s"], routes["conf_b"] = conf_s, conf_b
    return calibration, outcomes, metrics


def _name_reason_thresholds(thresholds: Thresholds, routes: dict, n: int) -> None:
    """Cut-offs that only name escalation reasons, read off in-scope held-out queries:
    a query less similar to the KB than 95% of answerable ones is called out of scope; a KL
    divergence larger than 90% of correctly answered ones means the tiers disagree."""
    rows = routes["complex_rows"][:n]
    ok = routes["bert_ok"][:n].astype(bool)
    sims = np.array([r["bert_similarity"] for r in rows])
    kls = np.array([r["kl_ft_bert"] for r in rows])
    if ok.any():
        thresholds.oos_similarity = float(np.clip(np.percentile(sims[ok], 5), 0.0, 1.0))
        thresholds.kl_disagree = float(max(0.0, np.percentile(kls[ok], 90)))


# -- versioned model folders -------------------------------------------------------------


def _write_json_atomic(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


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
    _write_json_atomic(
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
        "fasttext_version": trained.fasttext.version,
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
