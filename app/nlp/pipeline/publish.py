"""Stage 10, publish: the trained version as the model store saves it (``TrainedModels``),
with its tiers file, its held-out metrics and which tiers serve, and why, in the user's terms
(printed by ``tierdesk train``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.nlp.calibration import CalibrationSet
from app.nlp.intent import FastTextIntent
from app.nlp.pipeline.calibrate import Calibrated
from app.nlp.pipeline.data import TrainingData
from app.nlp.pipeline.fit import BertFit, FastTextFit
from app.nlp.pipeline.kb import PassageWindow, passage_window
from app.nlp.pipeline.refit import ServingModels
from app.nlp.pipeline.replay import HeldOutReplay
from app.nlp.pipeline.splits import HeldOutPlan, fold_repeats
from app.nlp.pipeline.tune import Tuned
from app.nlp.thresholds import Thresholds
from app.nlp.tiers import derive_tiers, effective_tiers

if TYPE_CHECKING:
    from app.nlp.bert import BertTier


@dataclass
class TrainedModels:
    fasttext: FastTextIntent | None  # None when the data are too thin for an intent tier
    bert: BertTier
    calibration: CalibrationSet
    thresholds: Thresholds
    tiers: dict  # tiers.json: {"derived", "declared", "effective", "f1_min", "per_label"}
    metrics: dict  # the manifest's held-out figures
    train_seconds: float


def publish(
    data: TrainingData,
    plan: HeldOutPlan,
    fasttext: FastTextFit,
    bert: BertFit,
    replay: HeldOutReplay,
    calibrated: Calibrated,
    tuned: Tuned,
    serving: ServingModels,
    *,
    train_seconds: float,
) -> TrainedModels:
    routes = replay.outcomes
    n = routes.n_in_scope
    derived = derive_tiers(tuned.per_label, tuned.f1_min, sorted(set(data.labels)))
    tiers = {
        "f1_min": tuned.f1_min,
        "derived": derived,
        "declared": dict(data.declared_tiers),
        "effective": effective_tiers(derived, data.declared_tiers),
        "per_label": {
            k: {m: round(v, 4) for m, v in s.items()} for k, s in tuned.per_label.items()
        },
    }
    metrics = {
        "fasttext_val_accuracy": round(float(routes.simple_ok[:n].mean()), 4)
        if fasttext.active
        else None,
        "bert_val_accuracy": round(float(routes.bert_ok[:n].mean()), 4),
        "fasttext": fasttext.metrics if fasttext.active else None,
        "bert_fine_tune": bert.models[0].metadata.get("fine_tune"),
        "calibration": calibrated.metrics,
        "router": tuned.figures,
        "held_out": {
            "mode": plan.mode,
            "folds": len(plan.folds),
            "repeats": fold_repeats(len(plan.texts)) if plan.mode == "folds" else 1,
            "queries": n,
        },
        "n_train": len(data.texts),
        "n_val": n,
        "n_oos_negatives": len(plan.negatives) - len(replay.claimed_negatives),
        # of them, the data's own out-of-scope rows: at least 95% of these escalate too
        "n_oos_negatives_own": len(set(plan.negatives) & set(data.oos_labelled)),
        # out-of-scope negatives that are also labelled texts (a KB question), not held out
        "n_oos_negatives_in_kb": plan.negatives_labelled,
        # development negatives one of the data's intents claims (splits.claimed_negatives)
        "oos_negatives_claimed": replay.claimed_negatives,
        "n_intents": len(set(data.labels)),
        "tiers_active": tiers_active(
            fasttext,
            tuned.thresholds,
            tuned.figures,
            serving.bert,
            len(data.articles),
            window=passage_window(data.articles),
            claimed=replay.claimed_negatives,
        ),
    }
    return TrainedModels(
        serving.fasttext,
        serving.bert,
        calibrated.calibration,
        tuned.thresholds,
        tiers,
        metrics,
        train_seconds,
    )


def tiers_active(
    fasttext: FastTextFit,
    thresholds: Thresholds,
    figures: dict,
    bert: BertTier,
    n_articles: int,
    *,
    window: PassageWindow | None = None,
    claimed: Sequence[str] = (),
) -> dict[str, dict]:
    """Which tiers serve, and why, in the user's terms; ``claimed``: the development
    out-of-scope negatives the data's intents answer (``HeldOutReplay.claimed_negatives``)."""
    simple_share = 1.0 - float(figures.get("val_bert_share", 1.0))
    if not fasttext.active:
        intent = {"active": False, "reason": fasttext.reason}
    elif simple_share <= 0.0:
        intent = {
            "active": False,
            "reason": fasttext.reason + "; its confident answers were not better than BERT's on "
            "held-out queries, so the simple route is off until reviewers teach more examples",
        }
    else:
        intent = {
            "active": True,
            "reason": fasttext.reason + f"; simple route on {simple_share:.0%} of held-out queries",
        }
    review = f"answers under tau_review {thresholds.tau_review} go to a person"
    if traffic := thresholds.provenance.get("traffic"):
        review += f"; {traffic['reason']}"
    if claimed:
        review += (
            f"; not counted as out of scope: {len(claimed)} of the development out-of-scope "
            f"questions, which your intents answer (such as {claimed[0]!r})"
        )
    return {
        "fasttext": intent,
        "bm25": {
            "active": bool(intent["active"]),
            "reason": f"{n_articles} articles (titles, questions, body passages); answers the "
            "simple route" + ("" if intent["active"] else ", which is off"),
        },
        "bert": {
            "active": True,
            "reason": f"KB matching (titles, questions, {(window or PassageWindow()).describe()})"
            + (
                " with an intent head"
                if bert.has_head
                else "; no intent head: " + str(bert.metadata.get("head_off_reason", ""))
            ),
        },
        "review": {
            "active": True,
            "reason": review,
        },
    }
