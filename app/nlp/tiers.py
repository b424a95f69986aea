"""Tier derivation: which intents the fast tier may answer alone.

Data sets declare no tiers, so they are derived from validation data on the training set: an
intent whose FastText F1 on held-out examples is under ``f1_min`` becomes ``complex`` (FastText
confuses it with others, so BERT should look), the rest ``simple``. ``f1_min`` itself is chosen
by the threshold search together with ``tau_fast``/``margin``/``tau_review`` (see
``app.nlp.thresholds.tune_thresholds``). Intents with fewer than ``MIN_SUPPORT`` held-out examples cannot be judged
and stay ``simple``: ``tau_fast`` and the calibrated confidence still guard them.

Declared tiers (``intents/*.yaml``, Intent rows with ``tier_source == "declared"``) win over
derived ones; ``effective_tiers`` merges the two.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

MIN_SUPPORT = 3
F1_GRID = (0.0, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9)


def derive_tiers(
    per_label: Mapping[str, Mapping[str, float]], f1_min: float, labels: list[str] | None = None
) -> dict[str, str]:
    """``{intent: "simple" | "complex"}`` from per-label held-out scores (precision/recall/f1)."""
    tiers: dict[str, str] = {}
    for label in labels if labels is not None else per_label:
        scores = per_label.get(label)
        if not scores or scores.get("support", 0) < MIN_SUPPORT:
            tiers[label] = "simple"
        else:
            tiers[label] = "complex" if scores["f1"] < f1_min else "simple"
    return tiers


def effective_tiers(derived: Mapping[str, str], declared: Mapping[str, str]) -> dict[str, str]:
    """Declared tiers where there are any, derived ones elsewhere."""
    merged = dict(derived)
    merged.update({k: v for k, v in declared.items() if v in ("simple", "complex")})
    return merged


def label_scores(predicted: Sequence[str], actual: Sequence[str]) -> dict[str, dict]:
    """Precision, recall, F1 and support per intent from top-1 predictions on held-out data."""
    guessed: Counter = Counter(predicted)
    support: Counter = Counter(actual)
    correct: Counter = Counter(a for p, a in zip(predicted, actual, strict=True) if p == a)
    scores = {}
    for label in support:
        p = correct[label] / guessed[label] if guessed[label] else 0.0
        r = correct[label] / support[label]
        scores[label] = {
            "precision": p,
            "recall": r,
            "support": support[label],
            "f1": 2 * p * r / (p + r) if p + r else 0.0,
        }
    return scores
