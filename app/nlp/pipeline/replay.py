"""Stage 5, replay held-out: every held-out query, and the fold's out-of-scope negatives,
through both routes of the router, with the fold's models. Development negatives that the
fold's intents claim (``splits.claimed_negatives``) are left out.

Per query: the simple route's answer (``Router.simple_retrieve``, BM25 restricted to
FastText's intent, as live) and the BERT route's (blended with FastText's view), whether each
is right, and the calibrators' features of each. First the weight of FastText in the BERT
route's blend is chosen on the in-scope held-out queries of every fold (``FASTTEXT_WEIGHT_GRID``:
the weight under which the blended probability ranks wrong answers lowest).
The tuner then replays these outcomes through the router's rule (``app.nlp.router``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

from app.nlp.bm25 import BM25Retriever
from app.nlp.calibration import CalibrationSet, complex_features, simple_features
from app.nlp.pipeline.data import TrainingData
from app.nlp.pipeline.fit import BertFit, FastTextFit, intent_results
from app.nlp.pipeline.kb import bm25_docs
from app.nlp.pipeline.splits import HeldOutPlan, Truth, claimed_negatives
from app.nlp.router import TOP_K, Router, RouterModels
from app.nlp.thresholds import Thresholds
from app.nlp.types import Tier, TierResult

if TYPE_CHECKING:
    from app.nlp.bert import BertTier

FASTTEXT_WEIGHT_GRID = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
VALIDATION_BATCH = 256


def is_right(answer: str | None, truth: Truth) -> bool:
    """A held-out answer is right when it is the query's intent, or one of them: a question a
    KB lists under two answers (a QnA export's "Good morning") is answered by either."""
    if truth is None or answer is None:
        return False
    return answer in truth if isinstance(truth, frozenset) else answer == truth


@dataclass(frozen=True)
class RouteOutcomes:
    """Per query, in-scope queries first (``n_in_scope``), then out-of-scope ones: both routes'
    calibration features and correctness, and FastText's top intent, top-1 and margin."""

    simple_rows: list[dict[str, float]]
    complex_rows: list[dict[str, float]]
    simple_ok: np.ndarray
    bert_ok: np.ndarray
    ft_top: list[str]
    ft_p1: np.ndarray
    ft_margin: np.ndarray
    # per query: one of the data's own out-of-scope rows (``TrainingData.oos_labelled``)
    labelled_oos: np.ndarray
    n_in_scope: int

    @classmethod
    def concat(cls, parts: Sequence[RouteOutcomes]) -> RouteOutcomes:
        """Every part's in-scope queries, then every part's out-of-scope ones."""
        if len(parts) == 1:
            return parts[0]

        def joined(name: str):
            values = [getattr(p, name)[: p.n_in_scope] for p in parts]
            values += [getattr(p, name)[p.n_in_scope :] for p in parts]
            if isinstance(values[0], np.ndarray):
                return np.concatenate(values)
            return [x for chunk in values for x in chunk]

        per_query = [f.name for f in dataclasses.fields(cls) if f.name != "n_in_scope"]
        return cls(
            **{name: joined(name) for name in per_query},
            n_in_scope=sum(p.n_in_scope for p in parts),
        )


@dataclass(frozen=True)
class HeldOutReplay:
    """The routes' outcomes on every fold's held-out queries and the chosen blend weight."""

    outcomes: RouteOutcomes
    held_labels: list[str]  # label of each in-scope outcome (the per-intent scores)
    fasttext_weight: float
    # per grid weight: held-out BERT-route accuracy and area under its risk-coverage curve
    blend_figures: dict[str, dict[str, float]]
    # development negatives not held out because an intent claims them (``claimed_negatives``)
    claimed_negatives: list[str] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class _FoldQueries:
    bert: BertTier
    bm25: BM25Retriever
    queries: list[str]
    truth: list[Truth]
    n_in_scope: int
    ft_results: list[TierResult]
    vectors: np.ndarray


def replay_held_out(
    data: TrainingData,
    plan: HeldOutPlan,
    fasttext: FastTextFit,
    bert: BertFit,
    *,
    progress: bool,
) -> HeldOutReplay:
    folds = []
    claimed: list[str] = []
    for number, model in enumerate(bert.models):
        queries, truth, n_in_scope = plan.queries(number)
        ft_results = fasttext.results[number]
        held = plan.held_texts(number)
        # embedded one by one, as the router embeds a live query (Encoder.encode_queries)
        vectors = model.encoder.encode_queries(
            queries, progress=progress and not plan.shared_encoder
        )
        # development negatives that the fold's intents claim are not held out (splits.py);
        # the head's example memory is the fold's training texts (empty without a head)
        drop = claimed_negatives(vectors[n_in_scope:], model.memory, model.memory_labels)
        drop &= np.array([q not in plan.fixed_negatives for q in queries[n_in_scope:]], bool)
        if drop.any():
            keep = np.concatenate([np.ones(n_in_scope, dtype=bool), ~drop])
            claimed += [q for q, k in zip(queries, keep, strict=True) if not k]
            queries = [q for q, k in zip(queries, keep, strict=True) if k]
            truth = [t for t, k in zip(truth, keep, strict=True) if k]
            ft_results = [r for r, k in zip(ft_results, keep, strict=True) if k]
            vectors = vectors[keep]
        folds.append(
            _FoldQueries(
                bert=model,
                bm25=BM25Retriever(bm25_docs(data.articles, held)),
                queries=queries,
                truth=truth,
                n_in_scope=n_in_scope,
                ft_results=ft_results,
                vectors=vectors,
            )
        )
    labelled = frozenset(data.oos_labelled)
    weight, figures = 0.0, {}
    if fasttext.active:  # FastText and BERT see every held-out query once: the blend, then routes
        weight, figures = choose_fasttext_weight_folds(folds)
    parts = [
        evaluate_routes(
            None,  # FastText's view of each query is in ft_results
            f.bm25,
            f.bert,
            f.queries,
            f.truth,
            n_in_scope=f.n_in_scope,
            progress=progress and not plan.shared_encoder,
            fasttext_weight=weight,
            ft_results=f.ft_results,
            vectors=f.vectors,
            labelled_oos=labelled,
        )
        for f in folds
    ]
    return HeldOutReplay(
        RouteOutcomes.concat(parts), plan.held_labels(), weight, figures, sorted(claimed)
    )


def evaluate_routes(
    ft: Tier | None,
    bm25: BM25Retriever,
    bert: BertTier,
    queries: Sequence[str],
    labels: Sequence[Truth],
    *,
    n_in_scope: int | None = None,
    progress: bool = False,
    fasttext_weight: float = 0.0,
    ft_results: Sequence[TierResult] | None = None,
    vectors: np.ndarray | None = None,
    labelled_oos: frozenset[str] = frozenset(),
) -> RouteOutcomes:
    """Run both routes on every query as the router runs them; ``labels`` None marks
    out-of-scope (never correct), and ``n_in_scope`` says how many come first (default: those
    with a label). ``ft_results`` and ``vectors`` (FastText's results and BERT embeddings of
    ``queries``) are computed here unless given; ``labelled_oos``: the data's own out-of-scope
    rows, told apart from the other negatives (``escalated_share``)."""
    router = Router(RouterModels(ft, bm25, bert, CalibrationSet.untrained(), Thresholds(), {}))
    if ft_results is None:
        ft_results = intent_results(ft, queries)
    bert_results: list[TierResult] = []
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
    simple_rows, complex_rows, simple_ok, bert_ok, ft_top, ft_p1, ft_margin = ([] for _ in range(7))
    for query, label, f, b in zip(queries, labels, ft_results, bert_results, strict=True):
        m = router.simple_retrieve(query, f)
        simple_answer = m.candidates[0].intent if m.candidates else None
        bert_answer = b.candidates[0].intent if b.candidates else None
        simple_rows.append(simple_features(f, m))
        complex_rows.append(complex_features(f, b, bert.head_weight))
        simple_ok.append(is_right(simple_answer, label))
        bert_ok.append(is_right(bert_answer, label))
        ft_top.append(f.intents[0][0] if f.intents else "")
        p1 = f.intents[0][1] if f.intents else 0.0
        p2 = f.intents[1][1] if len(f.intents) > 1 else 0.0
        ft_p1.append(p1)
        ft_margin.append(p1 - p2)
    if n_in_scope is None:
        n_in_scope = sum(label is not None for label in labels)
    own = [i >= n_in_scope and q in labelled_oos for i, q in enumerate(queries)]
    return RouteOutcomes(
        simple_rows,
        complex_rows,
        np.asarray(simple_ok),
        np.asarray(bert_ok),
        ft_top,
        np.asarray(ft_p1),
        np.asarray(ft_margin),
        np.asarray(own, dtype=bool),
        n_in_scope,
    )


def blend_outcomes(
    ft_results: Sequence[TierResult], bert: BertTier, vectors: np.ndarray, labels: Sequence[Truth]
) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Per grid weight of FastText in the BERT route's blend: whether each query's answer is
    right, and the blended probability of its top intent (the route's ``bert_p1``). Empty when
    the tier has no KB to answer from."""
    rows = np.stack([bert.prior_vector(f.intents) for f in ft_results])
    outcomes = {}
    for weight in FASTTEXT_WEIGHT_GRID:
        probs, scores, entries = bert.score(vectors, rows, weight)
        if not entries:
            return {}
        answered = [entries[i].intent for i in scores.argmax(axis=1)]
        hits = np.array([is_right(a, t) for a, t in zip(answered, labels, strict=True)])
        top = probs.max(axis=1) if probs.shape[1] else scores.max(axis=1)
        outcomes[weight] = (hits, top)
    return outcomes


def ranked_risk(confidence: Sequence[float], correct: Sequence[bool]) -> np.ndarray:
    """The error rate of the k most confident answers, for k = 1..n: the risks of the
    risk-coverage curve (``app.nlp.evaluation.risk_coverage`` pairs them with coverage)."""
    order = np.argsort(-np.asarray(confidence, dtype=float), kind="stable")
    wrong = 1.0 - np.asarray(correct, dtype=float)[order]
    return np.cumsum(wrong) / np.arange(1, len(wrong) + 1)


def risk_coverage_area(confidence: Sequence[float], correct: Sequence[bool]) -> float:
    """Area under the risk-coverage curve (mean of ``ranked_risk``): low when wrong answers
    rank below right ones and when there are few."""
    return float(ranked_risk(confidence, correct).mean()) if len(correct) else 0.0


def choose_fasttext_weight_folds(
    folds: Sequence[_FoldQueries],
) -> tuple[float, dict[str, dict[str, float]]]:
    """The weight of FastText in the BERT route's blend whose held-out answers rank best for
    review: the lowest area under the risk-coverage curve of the blended top-intent
    probability, over every fold's in-scope queries pooled (ties: the smaller weight). The
    review threshold cuts that ranking, so its quality, not top-1 accuracy alone, decides how
    many answers can go out unreviewed. Returns the weight and each grid weight's accuracy and
    area."""
    pooled: dict[float, list[tuple[np.ndarray, np.ndarray]]] = {}
    for f in folds:
        n = f.n_in_scope
        for weight, result in blend_outcomes(
            f.ft_results[:n], f.bert, f.vectors[:n], f.truth[:n]
        ).items():
            pooled.setdefault(weight, []).append(result)
    if not pooled:
        return 0.0, {}
    figures = {}
    for weight, parts in pooled.items():
        hits = np.concatenate([h for h, _ in parts])
        top = np.concatenate([c for _, c in parts])
        if not len(hits):
            return 0.0, {}
        figures[str(weight)] = {
            "accuracy": round(float(hits.mean()), 4),
            "risk_coverage_area": round(risk_coverage_area(top, hits), 5),
        }
    best = min(pooled, key=lambda w: (figures[str(w)]["risk_coverage_area"], w))
    return best, figures
