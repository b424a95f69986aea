"""Training orchestration: data from the database (or a CSV), held-out tuning, versioned models.

``fit_models`` is the one pipeline (used by ``tierdesk train``, ``tune`` and ``eval``):

1. Hold texts out (``held_out_folds``): under FOLD_TEXTS_MAX labelled texts, FOLDS folds in
   which every text is held out once; from it on, one stratified split (15%, at most
   HELD_OUT_MAX; one-text intents sampled too). A KB without intent data has held-out queries
   either way: its titles and alternate questions.
2. Per fold, train FastText (grid chosen on the first fold; none beyond FASTTEXT_MAX_LABELS
   intents) and the BERT tier (encoder fine-tune only with a split and enough data, then the
   head when the intents have enough examples) on the rest; build BM25 and the BERT KB index
   *without* the held-out texts, titles included (they would leak the answer).
3. Run every held-out query, and out-of-scope negatives (``intents/out_of_scope/dev.csv`` and
   generated nonsense), through both routes; fit the two calibrators; derive the tiers and
   search the thresholds on cross-fitted calibrated confidences (``tau_review``: the fewest
   escalations that reach ``answered_target``).
4. Retrain FastText and the BERT head on all the data (same hyper-parameters; the encoder
   fine-tuned in step 2 is kept) for serving, and say which tiers are active and why.

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
import random
import string
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from app.nlp.bm25 import BM25Retriever
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
from app.nlp.passages import split_passages
from app.nlp.router import TOP_K
from app.nlp.store import save_version
from app.nlp.thresholds import (
    ANSWERED_TARGET,
    BERT_BUDGET,
    BERT_CALL_COST,
    DEFAULTS,
    OutOfScopeOutcomes,
    Thresholds,
    ValidationOutcomes,
    tune_thresholds,
)
from app.nlp.tiers import F1_GRID, derive_tiers, effective_tiers, label_scores
from app.nlp.types import TierResult

log = logging.getLogger(__name__)

VAL_FRACTION = 0.15
CALIBRATION_FOLDS = 5
GENERATED_NEGATIVES = 60
# Under this many labelled texts every text is held out once (FOLDS folds); from it on, one
# stratified split (the encoder fine-tune needs held-out data it never saw, one pass only).
FOLD_TEXTS_MAX = 6000
FOLDS = 5
# Under this many right held-out answers a route's calibrator uses only its FEW_* features.
MIN_CORRECT_FOR_ALL_FEATURES = 30
FEW_SIMPLE_FEATURES = ("ft_p1", "bm25_confidence")
FEW_COMPLEX_FEATURES = ("bert_similarity", "bert_score_margin")
# The BERT index embeds the first BERT_PASSAGES passages of each body, fewer per article (down
# to the first one) when the KB would exceed BERT_PASSAGE_BUDGET passages: embedding a passage
# costs about 3 ms of CPU, a title under 1 ms.
BERT_PASSAGES = 4
BERT_PASSAGE_BUDGET = 40_000
# A split holds out at most this many texts (a large KB: more would only cost time).
HELD_OUT_MAX = 3000
# Beyond this many intents FastText is not trained (a softmax over 100,000 one-example
# articles costs minutes and learns nothing the KB matching does not know).
FASTTEXT_MAX_LABELS = 5000


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
    title and alternate questions; articles with a category add theirs to that intent. The
    examples of an intent that has exactly one article are matched as that article's questions
    too (``with_examples_as_questions``).
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
    articles = with_examples_as_questions(articles, texts, labels)
    return TrainingData(texts, labels, articles, declared, read_oos_dev(intents_dir))


def with_examples_as_questions(
    articles: Sequence[KbArticle], texts: Sequence[str], labels: Sequence[str]
) -> list[KbArticle]:
    """Articles whose intent is theirs alone also get that intent's examples as questions.

    BM25 and BERT match a query against an article's texts; an example a reviewer taught for
    an intent answered by one article is one more way of asking for that article, and is
    matched from the next training on, even before the intent classifier has enough data.
    """
    owners = Counter(a.intent for a in articles)
    extra: dict[str, list[str]] = {}
    for text, label in zip(texts, labels, strict=True):
        if owners.get(label) == 1:
            extra.setdefault(label, []).append(text)
    out = []
    for a in articles:
        more = [t for t in extra.get(a.intent, []) if t != a.title]
        questions = list(dict.fromkeys([*a.questions, *more]))
        out.append(KbArticle(a.slug, a.title, questions, a.body, a.intent))
    return out


# -- the pipeline ------------------------------------------------------------------------


@dataclass
class TrainedModels:
    fasttext: FastTextIntent | None  # None when the data are too thin for an intent tier
    bert: object  # BertTier
    calibration: CalibrationSet
    thresholds: Thresholds
    tiers: dict  # {"derived", "declared", "effective", "f1_min", "per_label"}
    metrics: dict
    train_seconds: float


def bm25_docs(articles: Sequence[KbArticle], drop: set[str] | None = None):
    """BM25's view of the KB; texts in ``drop`` (held-out queries) are not indexed, titles
    included (the document keeps its title for display only when it is indexed)."""
    from app.nlp.bm25 import BM25Doc

    drop = drop or set()
    return [
        BM25Doc(
            a.slug,
            "" if a.title in drop else a.title,
            [q for q in a.questions if q not in drop],
            a.body,
            a.intent,
        )
        for a in articles
    ]


def bert_passage_limit(counts: Sequence[int]) -> int:
    """Passages per article the BERT index embeds, from each body's passage count: up to
    BERT_PASSAGES, fewer (at least the first) when the bodies would exceed BERT_PASSAGE_BUDGET
    passages in all (BM25 indexes every passage)."""
    limit = BERT_PASSAGES
    while limit > 1 and sum(min(c, limit) for c in counts) > BERT_PASSAGE_BUDGET:
        limit -= 1
    return limit


def kb_entries(
    articles: Sequence[KbArticle], drop: set[str] | None = None, passages: int | None = None
):
    """BERT's view of the KB (texts in ``drop`` left out, as in ``bm25_docs``); ``passages``
    overrides the per-article passage limit."""
    from app.nlp.bert import KbEntry

    drop = drop or set()
    bodies = [split_passages(a.body) for a in articles]
    limit = bert_passage_limit([len(b) for b in bodies]) if passages is None else passages
    return [
        KbEntry(
            a.slug,
            a.title,
            a.intent,
            [q for q in a.questions if q not in drop],
            [p for p in body[:limit] if p not in drop],
            index_title=a.title not in drop,
        )
        for a, body in zip(articles, bodies, strict=True)
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
    texts,
    labels,
    entries,
    *,
    bert_path,
    quantize,
    progress,
    seed,
    fine_tune_epochs=0,
    encoder=None,
    vectors=None,
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
        vectors=vectors,
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
    accuracy = {}
    for weight in FASTTEXT_WEIGHT_GRID:
        _, scores, entries = bert.score(vectors, rows, weight)
        if not entries:
            return 0.0, {}
        answered = [entries[i].intent for i in scores.argmax(axis=1)]
        hits = [is_right(a, t) for a, t in zip(answered, labels, strict=True)]
        accuracy[str(weight)] = round(float(np.mean(hits)), 4)
    best = max(FASTTEXT_WEIGHT_GRID, key=lambda w: (accuracy[str(w)], -w))
    return best, accuracy


def is_right(answer: str | None, truth: str | frozenset | None) -> bool:
    """A held-out answer is right when it is the query's intent, or one of them: a question a
    KB lists under two answers (a QnA export's "Good morning") is answered by either."""
    if truth is None or answer is None:
        return False
    return answer in truth if isinstance(truth, frozenset) else answer == truth


def held_out_truth(texts: Sequence[str], labels: Sequence[str]) -> list[str | frozenset]:
    """Each held-out text's intent, or every intent it is listed under when there are several."""
    intents: dict[str, set[str]] = {}
    for text, label in zip(texts, labels, strict=True):
        intents.setdefault(text, set()).add(label)
    return [
        label if len(intents[text]) == 1 else frozenset(intents[text])
        for text, label in zip(texts, labels, strict=True)
    ]


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
        out["simple_ok"].append(is_right(simple_answer, label))
        out["bert_ok"].append(is_right(bert_answer, label))
        out["ft_top"].append(top or "")
        p1 = f.intents[0][1] if f.intents else 0.0
        p2 = f.intents[1][1] if len(f.intents) > 1 else 0.0
        out["ft_p1"].append(p1)
        out["ft_margin"].append(p1 - p2)
    for key in ("simple_ok", "bert_ok", "ft_p1", "ft_margin"):
        out[key] = np.asarray(out[key])
    return out


def held_out_folds(
    labels: Sequence[str], *, val_fraction: float, seed: int
) -> tuple[str, list[tuple[list[int], list[int]]]]:
    """How held-out signal is made: ``("split", [(fit, held)])`` or ``("folds", [...])``.

    With at least FOLD_TEXTS_MAX labelled texts, one stratified split (``val_fraction`` of each
    intent held out, at most HELD_OUT_MAX in all; intents with a single text are sampled too,
    so a KB without intent data still has held-out queries). With fewer, FOLDS folds: every
    text is a held-out query once, against models and indexes that never saw it (a plain FAQ
    of 40 titles gives 40 held-out queries, not 6).
    """
    n = len(labels)
    if n >= FOLD_TEXTS_MAX:
        fit, held = stratified_split(labels, val_fraction, seed)
        if len(held) > HELD_OUT_MAX:  # a large KB: a sample is enough to tune on
            rng = random.Random(seed)
            keep = set(rng.sample(held, HELD_OUT_MAX))
            fit = sorted([*fit, *(i for i in held if i not in keep)])
            held = sorted(keep)
        counts = Counter(labels)
        singles = [i for i in fit if counts[labels[i]] == 1]
        room = max(0, HELD_OUT_MAX - len(held))
        take = min(room, int(round(len(singles) * val_fraction)))
        if take:
            extra = set(random.Random(seed).sample(singles, take))
            fit = [i for i in fit if i not in extra]
            held = sorted([*held, *extra])
        return "split", [(fit, held)]
    order = list(range(n))
    random.Random(seed).shuffle(order)
    k = min(FOLDS, n)
    folds = [sorted(order[i::k]) for i in range(k)]
    return "folds", [
        (sorted(set(order) - set(fold)), fold) for fold in folds if fold and len(fold) < n
    ]


def _fasttext_plan(labels: Sequence[str]) -> tuple[bool, str]:
    counts = Counter(labels)
    median = float(np.median(list(counts.values()))) if counts else 0.0
    if len(counts) > FASTTEXT_MAX_LABELS:
        return False, (
            f"{len(counts)} intents (more than {FASTTEXT_MAX_LABELS}) with a median of "
            f"{median:g} examples each; BM25 and BERT match the KB directly"
        )
    return True, f"trained on {len(labels)} examples of {len(counts)} intents (median {median:g})"


def _no_intents(queries: Sequence[str]) -> list[TierResult]:
    return [TierResult(tier="fasttext") for _ in queries]


@dataclass
class _Fold:
    """The models of one held-out fold and its queries (texts, then negatives)."""

    ft: FastTextIntent | None
    bert: object
    bm25: object
    queries: list[str]
    truth: list[str | None]
    n_val: int
    ft_results: list
    vectors: np.ndarray


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
    large enough and held out by a split; 0 keeps the frozen encoder)."""

    started = time.perf_counter()
    if not data.texts:
        raise TrainingError("nothing to train on: no articles with a title and no examples")
    labels_all = sorted(set(data.labels))
    ft_active, ft_reason = _fasttext_plan(data.labels)
    if validation is None:
        mode, folds = held_out_folds(data.labels, val_fraction=val_fraction, seed=seed)
        texts_v = list(data.texts)
        labels_v = list(data.labels)
    else:
        mode = "given"
        texts_v = [*data.texts, *validation[0]]
        labels_v = [*data.labels, *validation[1]]
        n = len(data.texts)
        folds = [(list(range(n)), list(range(n, len(texts_v))))]
        refit = False
    if not folds or not any(held for _, held in folds):
        raise TrainingError("too few texts to hold any out for tuning (need at least 2)")
    truth_of = held_out_truth(texts_v, labels_v)
    bar = _Progress(progress, len(folds) + (3 if refit else 1))
    negatives = list(dict.fromkeys([*data.oos_texts, *generated_negatives(seed=seed)]))
    try:
        base_encoder = None
        all_vectors = None
        if mode == "folds":  # one frozen encoder and one embedding pass serve every fold
            from app.nlp.bert import Encoder, _resolve_bert_path

            base_encoder = Encoder(_resolve_bert_path(bert_path), quantize=False)
            all_vectors = base_encoder.encode(texts_v, progress=progress)
        kb_cache: dict[str, np.ndarray] = {}
        ft_cell = None
        fold_models: list[_Fold] = []
        for number, (fit_idx, val_idx) in enumerate(folds):
            fit_texts = [texts_v[i] for i in fit_idx]
            fit_labels = [labels_v[i] for i in fit_idx]
            val_texts = [texts_v[i] for i in val_idx]
            val_labels = [labels_v[i] for i in val_idx]
            ft = None
            if ft_active:
                if ft_cell is None:
                    ft = FastTextIntent.select(
                        fit_texts, fit_labels, val_texts, val_labels, seed=seed, progress=bar.note
                    )
                    ft_cell = ft.metrics["chosen"]
                    ft_metrics = ft.metrics
                else:
                    ft = FastTextIntent.train(fit_texts, fit_labels, seed=seed, **ft_cell)
            held = set(val_texts)
            val_entries = kb_entries(data.articles, held)
            bert = _train_bert(
                fit_texts,
                fit_labels,
                [],
                bert_path=bert_path,
                quantize=quantize,
                progress=progress and mode != "folds",
                seed=seed,
                fine_tune_epochs=fine_tune_epochs if mode != "folds" else 0,
                encoder=base_encoder,
                vectors=None if all_vectors is None else all_vectors[fit_idx],
            )
            bert._text_cache = kb_cache
            bert.set_kb(val_entries)
            kb_cache.update(bert._text_cache)
            bm25_val = BM25Retriever(bm25_docs(data.articles, held))
            mine = negatives[number :: len(folds)]
            queries = [*val_texts, *mine]
            truth: list = [*(truth_of[i] for i in val_idx), *[None] * len(mine)]
            ft_results = (
                [ft.run(q, k=TOP_K) for q in queries] if ft is not None else _no_intents(queries)
            )
            vectors = bert.encoder.encode(queries, progress=progress and mode != "folds")
            fold_models.append(
                _Fold(ft, bert, bm25_val, queries, truth, len(val_texts), ft_results, vectors)
            )
            bar.step(f"held-out fold {number + 1}/{len(folds)}" if mode == "folds" else "tiers")
        # FastText and BERT see every held-out query once: for the blend's weight, then routes
        fasttext_weight, blend_accuracy = 0.0, {}
        if ft_active:
            fasttext_weight, blend_accuracy = choose_fasttext_weight_folds(fold_models)
        parts = [
            evaluate_routes(
                f.ft,
                f.bm25,
                f.bert,
                f.queries,
                f.truth,
                progress=progress and mode != "folds",
                fasttext_weight=fasttext_weight,
                ft_results=f.ft_results,
                vectors=f.vectors,
            )
            for f in fold_models
        ]
        routes, n_val = _in_scope_first(parts, [f.n_val for f in fold_models])
        val_labels_all = [labels_v[i] for _, val_idx in folds for i in val_idx]
        from app.nlp.bert import HEAD_MIN_EXAMPLES

        thin = float(np.median(list(Counter(data.labels).values()))) < HEAD_MIN_EXAMPLES
        calibration, outcomes, cal_metrics = _calibrate(routes, n_val, seed, thin)
        per_label = label_scores(routes["ft_top"][:n_val], val_labels_all) if ft_active else {}
        tier_maps = {
            f: effective_tiers(derive_tiers(per_label, f, labels_all), data.declared_tiers)
            for f in (F1_GRID if ft_active else (0.0,))
        }
        thresholds, f1_min, figures = tune_thresholds(
            outcomes,
            tier_maps,
            budget=budget,
            bert_cost=bert_cost,
            bert_budget=bert_budget,
            answered_target=answered_target,
        )
        if not ft_active or figures.get("val_bert_share", 1.0) >= 1.0:
            # No intent tier, or none of its held-out answers kept the simple route: keep it
            # off for live queries too (FastText trained on all the data is surer of itself).
            thresholds.tau_fast = 1.0
            thresholds.margin = 1.0
        thresholds.fasttext_weight = fasttext_weight
        figures["val_bert_accuracy_by_fasttext_weight"] = blend_accuracy
        _name_reason_thresholds(thresholds, routes, n_val)
        thresholds.provenance.update(figures)
        thresholds.provenance["held_out"] = mode
        bar.step("calibrated and tuned")
        first = fold_models[0]
        metrics = {
            "fasttext_val_accuracy": round(float(routes["simple_ok"][:n_val].mean()), 4)
            if ft_active
            else None,
            "bert_val_accuracy": round(float(routes["bert_ok"][:n_val].mean()), 4),
            "fasttext": ft_metrics if ft_active else None,
            "bert_fine_tune": first.bert.metadata.get("fine_tune"),
            "calibration": cal_metrics,
            "router": figures,
            "held_out": {"mode": mode, "folds": len(folds), "queries": n_val},
            "n_train": len(data.texts),
            "n_val": n_val,
            "n_oos_negatives": len(negatives),
            "n_intents": len(labels_all),
        }
        if refit:
            ft = None
            if ft_active:
                ft = FastTextIntent.train(data.texts, data.labels, seed=seed, **ft_cell)
                ft.metrics = ft_metrics
            bar.step("fasttext (all data)")
            fitted = first.bert
            # The head is refitted on all the data; the encoder stays the one fine-tuned on the
            # fit part (a second fine-tune on all the data doubled the training time and did
            # not help on BANKING77: hybrid_review 98.38% answered against 98.45%).
            encoder = base_encoder if mode == "folds" else fitted.training_encoder
            bert = _train_bert(
                data.texts,
                data.labels,
                [],
                bert_path=bert_path,
                quantize=quantize,
                progress=progress,
                seed=seed,
                encoder=encoder,
                vectors=all_vectors,
            )
            bert = bert_with_kb(bert, kb_entries(data.articles), reuse_from=fitted)
            bar.step("bert (all data)")
        else:
            ft, bert = first.ft, first.bert
            bert.set_kb(kb_entries(data.articles))
        for f in fold_models:
            f.bert.training_encoder = None
        bert.training_encoder = None  # the fp32 copy is only needed while training
        derived = derive_tiers(per_label, f1_min, labels_all)
        tiers = {
            "f1_min": f1_min,
            "derived": derived,
            "declared": dict(data.declared_tiers),
            "effective": effective_tiers(derived, data.declared_tiers),
            "per_label": {k: {m: round(v, 4) for m, v in s.items()} for k, s in per_label.items()},
        }
        metrics["tiers_active"] = tiers_active(
            ft_active, ft_reason, thresholds, figures, bert, len(data.articles)
        )
        bar.step("done")
    finally:
        bar.close()
    return TrainedModels(
        ft, bert, calibration, thresholds, tiers, metrics, round(time.perf_counter() - started, 2)
    )


def choose_fasttext_weight_folds(folds: Sequence[_Fold]) -> tuple[float, dict[str, float]]:
    """``choose_fasttext_weight`` over every fold's held-out texts (counts pooled)."""
    hits: dict[str, float] = {}
    total = 0
    for f in folds:
        n = f.n_val
        _, accuracy = choose_fasttext_weight(f.ft_results[:n], f.bert, f.vectors[:n], f.truth[:n])
        for key, value in accuracy.items():
            hits[key] = hits.get(key, 0.0) + value * n
        total += n
    if not hits or not total:
        return 0.0, {}
    accuracy = {key: round(value / total, 4) for key, value in hits.items()}
    best = max(FASTTEXT_WEIGHT_GRID, key=lambda w: (accuracy.get(str(w), -1), -w))
    return best, accuracy


def _in_scope_first(parts: Sequence[dict], n_vals: Sequence[int]) -> tuple[dict, int]:
    """Concatenate the folds' route outcomes: every fold's in-scope queries, then negatives."""
    if len(parts) == 1:
        return parts[0], n_vals[0]
    merged: dict = {}
    for key in parts[0]:
        values = [p[key][:n] for p, n in zip(parts, n_vals, strict=True)]
        values += [p[key][n:] for p, n in zip(parts, n_vals, strict=True)]
        if isinstance(parts[0][key], np.ndarray):
            merged[key] = np.concatenate(values)
        else:
            merged[key] = [x for chunk in values for x in chunk]
    return merged, int(sum(n_vals))


def tiers_active(
    ft_active: bool, ft_reason: str, thresholds: Thresholds, figures: dict, bert, n_articles: int
) -> dict[str, dict]:
    """Which tiers serve, and why, in the user's terms (printed by ``tierdesk train``)."""
    simple_share = 1.0 - float(figures.get("val_bert_share", 1.0))
    if not ft_active:
        fasttext = {"active": False, "reason": ft_reason}
    elif simple_share <= 0.0:
        fasttext = {
            "active": False,
            "reason": ft_reason + "; its confident answers were not better than BERT's on "
            "held-out queries, so the simple route is off until reviewers teach more examples",
        }
    else:
        fasttext = {
            "active": True,
            "reason": ft_reason + f"; simple route on {simple_share:.0%} of held-out queries",
        }
    head = getattr(bert, "has_head", True)
    return {
        "fasttext": fasttext,
        "bm25": {
            "active": bool(fasttext["active"]),
            "reason": f"{n_articles} articles (titles, questions, body passages); answers the "
            "simple route" + ("" if fasttext["active"] else ", which is off"),
        },
        "bert": {
            "active": True,
            "reason": "KB matching (titles, questions, body passages)"
            + (
                " with an intent head"
                if head
                else "; no intent head: " + str(bert.metadata.get("head_off_reason", ""))
            ),
        },
        "review": {
            "active": True,
            "reason": f"answers under tau_review {thresholds.tau_review} go to a person",
        },
    }


def calibration_features(
    full: tuple[str, ...], few: tuple[str, ...], n_correct: int
) -> tuple[str, ...]:
    """The full feature set, or the ``few`` most direct signals when fewer than
    MIN_CORRECT_FOR_ALL_FEATURES held-out answers were right: a regression on nine features
    fit to a handful of positives (a plain FAQ of a few articles) learns noise, while a higher
    similarity and a clearer lead stay reasons to be surer on any KB."""
    return full if n_correct >= MIN_CORRECT_FOR_ALL_FEATURES else few


def _calibrate(routes: dict, n_in_scope: int, seed: int, thin: bool = False):
    """The two calibrators and the cross-fitted held-out confidences. ``thin``: intents have
    too few examples for FastText or a head to know a held-out query's intent, so their
    signals mean something else on held-out queries than live; the BERT route then uses only
    the KB-matching signals."""
    simple_ok = routes["simple_ok"].astype(bool)
    bert_ok = routes["bert_ok"].astype(bool)
    n = n_in_scope
    simple_features_used = calibration_features(
        SIMPLE_FEATURES, FEW_SIMPLE_FEATURES, int(simple_ok[:n].sum())
    )
    complex_features_used = calibration_features(
        COMPLEX_FEATURES, FEW_COMPLEX_FEATURES, 0 if thin else int(bert_ok[:n].sum())
    )
    simple = Calibrator(simple_features_used).fit(routes["simple_rows"], simple_ok)
    complex_ = Calibrator(complex_features_used).fit(routes["complex_rows"], bert_ok)
    conf_s = _cross_fitted(
        simple_features_used, routes["simple_rows"], simple_ok, CALIBRATION_FOLDS, seed
    )
    conf_b = _cross_fitted(
        complex_features_used, routes["complex_rows"], bert_ok, CALIBRATION_FOLDS, seed
    )
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
    publish_version(config, version, candidate=candidate)
    return TrainReport(
        version,
        trained.train_seconds,
        trained.metrics,
        trained.thresholds,
        len(data.texts),
        len(set(data.labels)),
        len(data.articles),
    )


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
    **kwargs,
) -> tuple[TrainedModels, TrainingData]:
    """Train on a ``text,category`` CSV with a one-article-per-category KB (eval and tune)."""
    texts, labels = read_labelled_csv(train_csv)
    articles = articles_from_categories(texts, labels, questions_per_article)
    data = TrainingData(texts, labels, articles, {}, list(oos_dev))
    return fit_models(data, **kwargs), data
