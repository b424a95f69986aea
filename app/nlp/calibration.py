"""Calibrated confidence: P(the answered article is right) from signals that transfer across
domains (tier probabilities, margins, BM25 and cosine similarity to the KB, tier agreement).

One logistic regression per route, fit on held-out data (queries the models never trained on,
plus out-of-scope negatives, which are never right). Both output the same quantity, so a
simple-route 0.8 and a BERT-route 0.8 mean the same thing and one ``tau_review`` serves both.
Features are kept few and generic on purpose: no intent names, no words.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.nlp.types import TierResult

EPS = 1e-4
# Standardisation guards: a feature that barely varies on held-out data (FastText's top-1 when
# it never saw the held-out intents) must not turn a small change at serving time into a huge
# z-score, so scales have a floor and standardised values are clipped.
MIN_SCALE = 0.05
MAX_Z = 5.0

SIMPLE_FEATURES = (
    "ft_p1",
    "ft_logit_p1",
    "ft_margin",
    "ft_entropy",
    "bm25_confidence",
    "bm25_unrestricted_agrees",
    "bm25_share_of_best",
)
COMPLEX_FEATURES = (
    "bert_p1",
    "bert_logit_p1",
    "bert_margin",
    "bert_similarity",
    "bert_score_margin",
    "ft_p1",
    "ft_prob_of_bert_top",
    "tiers_agree",
    "kl_ft_bert",
)


def _logit(p: float) -> float:
    p = min(max(p, EPS), 1 - EPS)
    return math.log(p / (1 - p))


def _margin(intents: Sequence[tuple[str, float]]) -> float:
    if not intents:
        return 0.0
    second = intents[1][1] if len(intents) > 1 else 0.0
    return intents[0][1] - second


def _entropy(intents: Sequence[tuple[str, float]]) -> float:
    """Entropy of the top-k distribution (the rest of the mass as one bucket), in nats."""
    probs = [max(p, 0.0) for _, p in intents]
    rest = max(0.0, 1.0 - sum(probs))
    return -sum(p * math.log(p) for p in [*probs, rest] if p > 0)


def kl_divergence(p: Sequence[tuple[str, float]], q: Sequence[tuple[str, float]]) -> float:
    """KL(p || q) over the union of two top-k lists; mass outside a list is spread thinly.

    Each distribution gives its unlisted labels an equal share of its leftover mass (at least
    ``EPS``), which keeps the divergence finite and comparable between queries.
    """
    pd, qd = dict(p), dict(q)
    labels = set(pd) | set(qd)
    if not labels:
        return 0.0
    p_rest = max(EPS, (1.0 - sum(pd.values())) / max(1, len(labels) - len(pd) + 1))
    q_rest = max(EPS, (1.0 - sum(qd.values())) / max(1, len(labels) - len(qd) + 1))
    total = 0.0
    for label in labels:
        pv = max(pd.get(label, p_rest), EPS)
        qv = max(qd.get(label, q_rest), EPS)
        total += pv * math.log(pv / qv)
    return max(0.0, total)


def bert_similarity(bert: TierResult, head_weight: float | None) -> float:
    """Cosine similarity of the query to the answered article's nearest KB text.

    The BERT tier scores an article as ``w * P_head(intent) + (1 - w) * best cosine``; the
    cosine part is recovered from the score and the head probability it reported.
    """
    if not bert.candidates:
        return 0.0
    top = bert.candidates[0]
    if head_weight is None or head_weight >= 1.0:
        return float(top.score)
    head = dict(bert.intents).get(top.intent or "", 0.0)
    return float((top.score - head_weight * head) / (1.0 - head_weight))


def simple_features(ft: TierResult, bm25: TierResult | None) -> dict[str, float]:
    p1 = ft.intents[0][1] if ft.intents else 0.0
    signals = bm25.signals if bm25 is not None and bm25.candidates else {}
    return {
        "ft_p1": p1,
        "ft_logit_p1": _logit(p1),
        "ft_margin": _margin(ft.intents),
        "ft_entropy": _entropy(ft.intents),
        "bm25_confidence": bm25.confidence if bm25 and bm25.candidates else 0.0,
        # BM25 restricted to FastText's intent against BM25 over the whole KB (see bm25.py)
        "bm25_unrestricted_agrees": signals.get("unrestricted_agrees", 0.0),
        "bm25_share_of_best": signals.get("share_of_best", 0.0),
    }


def complex_features(
    ft: TierResult | None, bert: TierResult, head_weight: float | None
) -> dict[str, float]:
    p1 = bert.intents[0][1] if bert.intents else 0.0
    top_intent = bert.intents[0][0] if bert.intents else None
    cand = bert.candidates
    score_margin = (
        cand[0].score - cand[1].score if len(cand) > 1 else (cand[0].score if cand else 0)
    )
    ft_intents = ft.intents if ft else []
    ft_p1 = ft_intents[0][1] if ft_intents else 0.0
    return {
        "bert_p1": p1,
        "bert_logit_p1": _logit(p1),
        "bert_margin": _margin(bert.intents),
        "bert_similarity": bert_similarity(bert, head_weight),
        "bert_score_margin": float(score_margin),
        "ft_p1": ft_p1,
        "ft_prob_of_bert_top": dict(ft_intents).get(top_intent, 0.0) if top_intent else 0.0,
        "tiers_agree": 1.0 if ft_intents and top_intent and ft_intents[0][0] == top_intent else 0.0,
        "kl_ft_bert": kl_divergence(ft_intents, bert.intents) if ft_intents else 0.0,
    }


@dataclass
class Calibrator:
    """Logistic regression on standardised features -> P(correct)."""

    features: tuple[str, ...]
    coef: list[float] = field(default_factory=list)
    intercept: float = 0.0
    mean: list[float] = field(default_factory=list)
    scale: list[float] = field(default_factory=list)
    n_fit: int = 0
    base_rate: float | None = None  # set instead of coef when the fit data had one class only

    def _matrix(self, rows: Sequence[dict[str, float]]) -> np.ndarray:
        return np.array([[row[f] for f in self.features] for row in rows], dtype=np.float64)

    def fit(
        self,
        rows: Sequence[dict[str, float]],
        correct: Sequence[bool],
        weights: Sequence[float] | None = None,
        c: float = 1.0,
    ) -> Calibrator:
        y = np.asarray(correct, dtype=int)
        self.n_fit = len(y)
        if len(y) == 0 or y.min() == y.max():
            # One class only: a smoothed base rate is the honest answer.
            self.base_rate = (float(y.sum()) + 1.0) / (len(y) + 2.0)
            return self
        from sklearn.linear_model import LogisticRegression

        x = self._matrix(rows)
        mean = x.mean(axis=0)
        scale = x.std(axis=0)
        scale = np.maximum(scale, MIN_SCALE)
        model = LogisticRegression(C=c, max_iter=2000)
        model.fit(np.clip((x - mean) / scale, -MAX_Z, MAX_Z), y, sample_weight=weights)
        self.coef = [float(v) for v in model.coef_[0]]
        self.intercept = float(model.intercept_[0])
        self.mean = [float(v) for v in mean]
        self.scale = [float(v) for v in scale]
        self.base_rate = None
        return self

    def predict_many(self, rows: Sequence[dict[str, float]]) -> np.ndarray:
        if self.base_rate is not None:
            return np.full(len(rows), self.base_rate)
        if not rows:
            return np.zeros(0)
        standard = np.clip((self._matrix(rows) - self.mean) / self.scale, -MAX_Z, MAX_Z)
        z = standard @ np.asarray(self.coef) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def predict(self, row: dict[str, float]) -> float:
        if self.base_rate is not None:
            return self.base_rate
        z = self.intercept
        for name, coef, mean, scale in zip(
            self.features, self.coef, self.mean, self.scale, strict=True
        ):
            z += coef * min(MAX_Z, max(-MAX_Z, (row[name] - mean) / scale))
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def to_dict(self) -> dict:
        return {
            "features": list(self.features),
            "coef": self.coef,
            "intercept": self.intercept,
            "mean": self.mean,
            "scale": self.scale,
            "n_fit": self.n_fit,
            "base_rate": self.base_rate,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Calibrator:
        return cls(
            features=tuple(data["features"]),
            coef=data["coef"],
            intercept=data["intercept"],
            mean=data["mean"],
            scale=data["scale"],
            n_fit=data.get("n_fit", 0),
            base_rate=data.get("base_rate"),
        )


@dataclass
class CalibrationSet:
    """The two route calibrators, saved together as ``calibration.json``."""

    simple: Calibrator
    complex: Calibrator
    metrics: dict = field(default_factory=dict)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(
            json.dumps(
                {
                    "simple": self.simple.to_dict(),
                    "complex": self.complex.to_dict(),
                    "metrics": self.metrics,
                },
                indent=2,
            )
        )

    @classmethod
    def load(cls, path: str | Path) -> CalibrationSet:
        data = json.loads(Path(path).read_text())
        return cls(
            Calibrator.from_dict(data["simple"]),
            Calibrator.from_dict(data["complex"]),
            data.get("metrics", {}),
        )

    @classmethod
    def untrained(cls) -> CalibrationSet:
        """Base-rate calibrators (used only before any held-out data exists)."""
        return cls(
            Calibrator(SIMPLE_FEATURES, base_rate=0.5), Calibrator(COMPLEX_FEATURES, base_rate=0.5)
        )


def reliability_bins(
    confidence: Sequence[float], correct: Sequence[bool], n_bins: int = 5
) -> list[dict]:
    """Accuracy per equal-count confidence bin, lowest confidence first (calibration check)."""
    conf = np.asarray(confidence, dtype=float)
    ok = np.asarray(correct, dtype=float)
    order = np.argsort(conf, kind="stable")
    bins = []
    for chunk in np.array_split(order, n_bins):
        if len(chunk):
            bins.append(
                {
                    "mean_confidence": float(conf[chunk].mean()),
                    "accuracy": float(ok[chunk].mean()),
                    "n": int(len(chunk)),
                }
            )
    return bins


def expected_calibration_error(
    confidence: Sequence[float], correct: Sequence[bool], n_bins: int = 10
) -> float:
    bins = reliability_bins(confidence, correct, n_bins)
    total = sum(b["n"] for b in bins) or 1
    return sum(b["n"] * abs(b["mean_confidence"] - b["accuracy"]) for b in bins) / total
