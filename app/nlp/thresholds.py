"""Routing thresholds as data: a small JSON file written by ``tierdesk tune`` / ``tierdesk train``.

- ``tau_fast``: minimum FastText top-1 probability for the simple (BM25) route.
- ``margin``: minimum FastText top-1 minus top-2 probability for the simple route.
- ``tau_review``: minimum calibrated confidence to answer without a human.
- ``budget``: the escalation budget (share of in-scope queries) the tuner respected.
- ``kl_disagree``: KL divergence (FastText || BERT) above which the tiers are said to disagree
  (used only to name the escalation reason).
- ``oos_similarity``: BERT cosine similarity to the nearest KB text under which a query that
  escalates is called out of scope (again only the reason's name).

Defaults live in ``DEFAULTS``; the server reads the file at start-up and on every model reload.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

THRESHOLDS_FILE = "thresholds.json"


class ThresholdsError(ValueError):
    """A thresholds file that cannot be used; the message names the file and the problem."""


@dataclass
class Thresholds:
    tau_fast: float = 0.7
    margin: float = 0.3
    tau_review: float = 0.6
    budget: float = 0.10
    kl_disagree: float = 2.0
    oos_similarity: float = 0.5
    # How the values were chosen (objective, validation figures); free-form, for humans.
    provenance: dict = field(default_factory=dict)

    def validate(self, source: str = "thresholds") -> Thresholds:
        for name in ("tau_fast", "margin", "tau_review", "budget", "oos_similarity"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
                raise ThresholdsError(f"{source}: {name} must be a number, got {value!r}")
            if not 0.0 <= value <= 1.0:
                raise ThresholdsError(f"{source}: {name} must be between 0 and 1, got {value}")
        if not isinstance(self.kl_disagree, int | float) or self.kl_disagree < 0:
            raise ThresholdsError(f"{source}: kl_disagree must be a number >= 0")
        if not isinstance(self.provenance, dict):
            raise ThresholdsError(f"{source}: provenance must be an object")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object, source: str = "thresholds") -> Thresholds:
        if not isinstance(data, dict):
            raise ThresholdsError(f"{source}: expected a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ThresholdsError(
                f"{source}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**data).validate(source)

    def save(self, path: str | Path) -> None:
        """Write atomically (temp file + rename), so a reader never sees half a file."""
        self.validate(str(path))
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".thresholds-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_dict(), fh, indent=2, sort_keys=True)
            fh.write("\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> Thresholds:
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ThresholdsError(f"{path}: no such file") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ThresholdsError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        return cls.from_dict(data, str(path))


DEFAULTS = Thresholds()


# -- tuning -------------------------------------------------------------------------------

GRID_STEP = 0.05
TAU_FAST_GRID = tuple(round(x, 2) for x in np.arange(0.30, 1.0001, GRID_STEP))
MARGIN_GRID = tuple(round(x, 2) for x in np.arange(0.0, 0.9001, GRID_STEP))
TAU_REVIEW_GRID = tuple(round(x, 2) for x in np.arange(0.05, 0.9901, 0.01))
# Answered accuracy may be this much below the best feasible point to save BERT calls.
ANSWERED_SLACK = 0.002
# The routing may lose at most this much escalation-off accuracy to the best grid point.
ACCURACY_SLACK = 0.003


@dataclass
class ValidationOutcomes:
    """Per held-out query: what each route would answer and how sure it would be.

    ``simple_conf``/``bert_conf`` must be calibrated on data other than the query itself
    (cross-fitted), or the search would trust an over-fitted calibrator.
    """

    ft_top: list[str]
    ft_p1: np.ndarray
    ft_margin: np.ndarray
    simple_correct: np.ndarray
    simple_conf: np.ndarray
    bert_correct: np.ndarray
    bert_conf: np.ndarray


def tune_thresholds(
    outcomes: ValidationOutcomes,
    tier_maps: dict[float, dict[str, str]],
    *,
    budget: float = DEFAULTS.budget,
    answered_slack: float = ANSWERED_SLACK,
    accuracy_slack: float = ACCURACY_SLACK,
) -> tuple[Thresholds, float, dict]:
    """Grid search of (tier rule, tau_fast, margin, tau_review) on held-out outcomes.

    Objective, exactly:
      1. feasible: share of held-out (in-scope) queries escalated <= ``budget``, and the
         escalation-off accuracy within ``accuracy_slack`` of the best escalation-off accuracy
         any grid point reaches;
      2. near-best: answered accuracy within ``answered_slack`` of the best feasible one (the
         budget is spent on catching wrong answers);
      3. among those, the fewest BERT calls; ties: higher answered accuracy, fewer escalations.

    ``tier_maps`` maps each candidate ``f1_min`` to its tier map. Returns the thresholds, the
    chosen ``f1_min`` and the validation figures at that point.
    """
    ok_s = np.asarray(outcomes.simple_correct, dtype=bool)
    ok_b = np.asarray(outcomes.bert_correct, dtype=bool)
    conf_s = np.asarray(outcomes.simple_conf, dtype=float)
    conf_b = np.asarray(outcomes.bert_conf, dtype=float)
    p1 = np.asarray(outcomes.ft_p1, dtype=float)
    margin = np.asarray(outcomes.ft_margin, dtype=float)
    n = len(p1)
    if n == 0:
        raise ThresholdsError("no validation queries to tune on")
    tau_r = np.asarray(TAU_REVIEW_GRID)[:, None]
    rows = []
    for f1_min, tiers in tier_maps.items():
        simple_tier = np.array([tiers.get(t, "simple") == "simple" for t in outcomes.ft_top])
        for tau_fast in TAU_FAST_GRID:
            confident = simple_tier & (p1 >= tau_fast - 1e-9)
            for m in MARGIN_GRID:
                eligible = confident & (margin >= m - 1e-9)
                simple = eligible[None, :] & (conf_s[None, :] >= tau_r)  # cascade below tau_review
                correct = np.where(simple, ok_s[None, :], ok_b[None, :])
                conf = np.where(simple, conf_s[None, :], conf_b[None, :])
                answered = conf >= tau_r
                n_answered = answered.sum(axis=1)
                accuracy = correct.mean(axis=1)
                answered_acc = (correct & answered).sum(axis=1) / np.maximum(n_answered, 1)
                escalation = 1.0 - n_answered / n
                bert_share = 1.0 - simple.mean(axis=1)
                for i, tr in enumerate(TAU_REVIEW_GRID):
                    rows.append(
                        (
                            f1_min,
                            tau_fast,
                            m,
                            tr,
                            accuracy[i],
                            answered_acc[i],
                            escalation[i],
                            bert_share[i],
                        )
                    )
    table = np.array([r[4:] for r in rows])
    best_accuracy = table[:, 0].max()
    feasible = (table[:, 2] <= budget + 1e-9) & (table[:, 0] >= best_accuracy - accuracy_slack)
    if not feasible.any():
        feasible = table[:, 2] <= budget + 1e-9
    best_answered = table[feasible, 1].max()
    near_best = feasible & (table[:, 1] >= best_answered - answered_slack)
    order = np.lexsort((table[:, 2], -table[:, 1], table[:, 3]))
    chosen = next(i for i in order if near_best[i])
    f1_min, tau_fast, m, tr, accuracy, answered_acc, escalation, bert_share = rows[chosen]
    figures = {
        "val_accuracy": round(float(accuracy), 4),
        "val_answered_accuracy": round(float(answered_acc), 4),
        "val_coverage": round(1.0 - float(escalation), 4),
        "val_bert_share": round(float(bert_share), 4),
        "best_grid_accuracy": round(float(best_accuracy), 4),
        "n_val": n,
    }
    objective = (
        f"fewest BERT calls among points with answered accuracy >= best - {answered_slack}, "
        f"escalation <= {budget} and escalation-off accuracy >= best - {accuracy_slack}; "
        f"grid step {GRID_STEP} (tau_review 0.01)"
    )
    thresholds = Thresholds(
        tau_fast=float(tau_fast),
        margin=float(m),
        tau_review=float(tr),
        budget=budget,
        provenance={"objective": objective, "f1_min": f1_min, **figures},
    )
    return thresholds, float(f1_min), figures
