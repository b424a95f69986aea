"""Stage 6, calibrate: the two calibrators (``app.nlp.calibration``), fit on the replayed
held-out outcomes, and cross-fitted confidences for the tuner.

Each held-out query's confidence comes from a calibrator fit without it (CALIBRATION_FOLDS
chunks), or the search would trust an over-fitted calibrator. With few right held-out answers
a route uses only its most direct signals (``calibration_features``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from app.nlp.calibration import (
    COMPLEX_FEATURES,
    SIMPLE_FEATURES,
    CalibrationSet,
    Calibrator,
    expected_calibration_error,
    reliability_bins,
)
from app.nlp.pipeline.replay import HeldOutReplay
from app.nlp.thresholds import OutOfScopeOutcomes, ValidationOutcomes

CALIBRATION_FOLDS = 5
# Under this many right held-out answers a route's calibrator uses only its FEW_* features.
MIN_CORRECT_FOR_ALL_FEATURES = 30
FEW_SIMPLE_FEATURES = ("ft_p1", "bm25_confidence")
FEW_COMPLEX_FEATURES = ("bert_similarity", "bert_score_margin")
# Under this median of labelled texts per intent (a title and a few alternate questions per
# article) the BERT route's calibrator uses only FEW_COMPLEX_FEATURES. FastText and the head
# learn such intents from a handful of texts, and the fold models that answer held-out queries
# learn them from fewer still: their probabilities mean something else held out than live. On
# our three FAQ sets with alternate questions (6 texts per article), the threshold tuned with
# every feature answered less live on two sets of three than with the two KB-matching signals
# (docs/cold_start.md).
INTENT_SIGNALS_MIN_EXAMPLES = 10


@dataclass(frozen=True)
class Calibrated:
    """The calibrators for serving, the held-out outcomes with cross-fitted confidences (what
    the tuner searches on) and the calibration figures."""

    calibration: CalibrationSet
    outcomes: ValidationOutcomes
    metrics: dict


def calibrate(
    replay: HeldOutReplay,
    *,
    seed: int,
    thin: bool = False,
    weights: Sequence[float] | None = None,
) -> Calibrated:
    """``thin``: intents have too few examples (INTENT_SIGNALS_MIN_EXAMPLES) for FastText's or
    the head's probabilities to mean the same on held-out queries as live; the BERT route then
    uses only the KB-matching signals. ``weights``: each in-scope held-out query's weight in
    the fits (``HeldOutPlan.held_weights``; out-of-scope negatives weigh 1). Held-out queries
    are mostly questions some model escalated, harder than the answers it gives; a spot-checked
    answer weighs 1/share so that the fit sees the answered traffic in its true proportion."""
    routes = replay.outcomes
    simple_ok = routes.simple_ok.astype(bool)
    bert_ok = routes.bert_ok.astype(bool)
    n = routes.n_in_scope
    w = fit_weights(weights, n, len(simple_ok))
    simple_used = calibration_features(
        SIMPLE_FEATURES, FEW_SIMPLE_FEATURES, int(simple_ok[:n].sum())
    )
    complex_used = calibration_features(
        COMPLEX_FEATURES, FEW_COMPLEX_FEATURES, 0 if thin else int(bert_ok[:n].sum())
    )
    simple = Calibrator(simple_used).fit(routes.simple_rows, simple_ok, w)
    complex_ = Calibrator(complex_used).fit(routes.complex_rows, bert_ok, w)
    conf_s = cross_fitted(simple_used, routes.simple_rows, simple_ok, CALIBRATION_FOLDS, seed, w)
    conf_b = cross_fitted(complex_used, routes.complex_rows, bert_ok, CALIBRATION_FOLDS, seed, w)
    metrics = {
        "simple_ece": round(expected_calibration_error(conf_s[:n], simple_ok[:n]), 4),
        "complex_ece": round(expected_calibration_error(conf_b[:n], bert_ok[:n]), 4),
        "simple_bins": reliability_bins(conf_s[:n], simple_ok[:n]),
        "complex_bins": reliability_bins(conf_b[:n], bert_ok[:n]),
        # held-out queries that are spot-checked answers, weighed 1/share (0: none yet)
        "spot_checked_queries": 0 if w is None else int((w[:n] != 1.0).sum()),
    }
    outcomes = ValidationOutcomes(
        ft_top=routes.ft_top[:n],
        ft_p1=routes.ft_p1[:n],
        ft_margin=routes.ft_margin[:n],
        simple_correct=simple_ok[:n],
        simple_conf=conf_s[:n],
        bert_correct=bert_ok[:n],
        bert_conf=conf_b[:n],
        oos=OutOfScopeOutcomes(
            ft_top=routes.ft_top[n:],
            ft_p1=routes.ft_p1[n:],
            ft_margin=routes.ft_margin[n:],
            simple_conf=conf_s[n:],
            bert_conf=conf_b[n:],
            labelled=routes.labelled_oos[n:],
        ),
    )
    return Calibrated(CalibrationSet(simple, complex_, metrics), outcomes, metrics)


def fit_weights(weights: Sequence[float] | None, n_in_scope: int, n: int) -> np.ndarray | None:
    """Per held-out row (in-scope, then negatives at 1), or None when every weight is 1."""
    if weights is None or all(x == 1.0 for x in weights):
        return None
    if len(weights) != n_in_scope:
        raise ValueError(f"{len(weights)} weights for {n_in_scope} in-scope held-out queries")
    return np.concatenate([np.asarray(weights, dtype=float), np.ones(n - n_in_scope)])


def thin_intents(labels: Sequence[str]) -> bool:
    """The median intent has fewer than INTENT_SIGNALS_MIN_EXAMPLES labelled texts."""
    counts = sorted(Counter(labels).values())
    return bool(counts) and float(np.median(counts)) < INTENT_SIGNALS_MIN_EXAMPLES


def calibration_features(
    full: tuple[str, ...], few: tuple[str, ...], n_correct: int
) -> tuple[str, ...]:
    """The full feature set, or the ``few`` most direct signals when fewer than
    MIN_CORRECT_FOR_ALL_FEATURES held-out answers were right: a regression on nine features
    fit to a handful of positives (a plain FAQ of a few articles) learns noise, while a higher
    similarity and a clearer lead stay reasons to be surer on any KB."""
    return full if n_correct >= MIN_CORRECT_FOR_ALL_FEATURES else few


def cross_fitted(
    features: tuple[str, ...],
    rows: Sequence[dict[str, float]],
    correct: np.ndarray,
    folds: int,
    seed: int,
    weights: np.ndarray | None = None,
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
        cal = Calibrator(features).fit(
            [rows[i] for i in np.flatnonzero(mask)],
            correct[mask],
            None if weights is None else weights[mask],
        )
        out[chunk] = cal.predict_many([rows[i] for i in chunk])
    return out
