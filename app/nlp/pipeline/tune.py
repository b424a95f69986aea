"""Stage 7, tune: the tiers and thresholds, searched on the cross-fitted held-out outcomes.

Candidate tier maps come from FastText's per-intent held-out F1 (``app.nlp.tiers``, one per
``F1_GRID`` value, declared tiers winning); ``app.nlp.thresholds.tune_thresholds`` replays the
outcomes through the router's rule and picks the point (``tau_review``: the fewest escalations
that reach ``answered_target``). When FastText is off, or none of its held-out answers kept
the simple route, the simple route stays off live too (FastText trained on all the data is
surer of itself). Two cut-offs only name escalation reasons (``reason_cutoffs``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from app.nlp.pipeline.calibrate import Calibrated
from app.nlp.pipeline.data import TrainingData
from app.nlp.pipeline.fit import FastTextFit
from app.nlp.pipeline.replay import HeldOutReplay, RouteOutcomes
from app.nlp.pipeline.splits import HeldOutPlan
from app.nlp.thresholds import Thresholds, tune_thresholds
from app.nlp.tiers import F1_GRID, derive_tiers, effective_tiers, label_scores


@dataclass(frozen=True)
class Tuned:
    """The thresholds for serving, the tier rule chosen (``f1_min``), FastText's per-intent
    held-out scores and the held-out figures at the chosen point."""

    thresholds: Thresholds
    f1_min: float
    per_label: dict[str, dict]
    figures: dict


def tune(
    data: TrainingData,
    plan: HeldOutPlan,
    fasttext: FastTextFit,
    replay: HeldOutReplay,
    calibrated: Calibrated,
    *,
    budget: float,
    bert_cost: float,
    bert_budget: float,
    answered_target: float,
) -> Tuned:
    routes = replay.outcomes
    n = routes.n_in_scope
    labels = sorted(set(data.labels))
    per_label = label_scores(routes.ft_top[:n], replay.held_labels) if fasttext.active else {}
    tier_maps = {
        f1: effective_tiers(derive_tiers(per_label, f1, labels), data.declared_tiers)
        for f1 in (F1_GRID if fasttext.active else (0.0,))
    }
    searched, f1_min, figures = tune_thresholds(
        calibrated.outcomes,
        tier_maps,
        budget=budget,
        bert_cost=bert_cost,
        bert_budget=bert_budget,
        answered_target=answered_target,
    )
    figures = {**figures, "val_bert_blend_by_fasttext_weight": replay.blend_figures}
    simple_off = not fasttext.active or figures.get("val_bert_share", 1.0) >= 1.0
    thresholds = dataclasses.replace(
        searched,
        **({"tau_fast": 1.0, "margin": 1.0} if simple_off else {}),
        fasttext_weight=replay.fasttext_weight,
        **reason_cutoffs(routes),
        provenance={**searched.provenance, **figures, "held_out": plan.mode},
    )
    return Tuned(thresholds, f1_min, per_label, figures)


def effective_tier_map(data: TrainingData, tuned: Tuned) -> dict[str, str]:
    """The tier of every intent at the chosen rule (``f1_min``), declared tiers winning."""
    derived = derive_tiers(tuned.per_label, tuned.f1_min, sorted(set(data.labels)))
    return effective_tiers(derived, data.declared_tiers)


def reason_cutoffs(routes: RouteOutcomes) -> dict[str, float]:
    """Cut-offs that only name escalation reasons, read off in-scope held-out queries: a query
    less similar to the KB than 95% of answerable ones is called out of scope; a KL divergence
    larger than 90% of correctly answered ones means the tiers disagree. Empty (the defaults)
    when no held-out answer was right."""
    n = routes.n_in_scope
    rows = routes.complex_rows[:n]
    ok = routes.bert_ok[:n].astype(bool)
    if not ok.any():
        return {}
    sims = np.array([r["bert_similarity"] for r in rows])
    kls = np.array([r["kl_ft_bert"] for r in rows])
    return {
        "oos_similarity": float(np.clip(np.percentile(sims[ok], 5), 0.0, 1.0)),
        "kl_disagree": float(max(0.0, np.percentile(kls[ok], 90))),
    }
