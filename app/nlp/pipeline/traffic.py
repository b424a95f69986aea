"""Stage 9, traffic: ``tau_review`` chosen on the questions the bot is actually asked.

The held-out queries the tuner reads are mostly what reviewers taught: the questions the bot
escalated, harder than the traffic it answers, and answered by fold models that saw less data
than the ones that serve. A threshold that keeps the promise on them keeps it on live traffic
with room to spare, and that room is reviews nobody needed. This stage scores the recent
questions the bot was asked (``TrainingData.traffic``) with the serving models: a reviewed
question counts with its held-out outcome, an unreviewed one with its calibrated confidence
(``app.nlp.thresholds.review_on_traffic``). It needs TRAFFIC_MIN_LABELLED reviewed recent
questions among the held-out queries, and labelled texts that are mostly intent examples
rather than the KB's own titles and alternate questions (TRAFFIC_MIN_EXAMPLES_SHARE). Otherwise
(a new bot, ``tierdesk tune --val``, ``tierdesk eval``) the held-out threshold stands. The
manifest says which, and why (``router.traffic``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from tqdm import tqdm

from app.nlp.pipeline.calibrate import Calibrated
from app.nlp.pipeline.data import TrainingData
from app.nlp.pipeline.kb import router_over
from app.nlp.pipeline.refit import ServingModels
from app.nlp.pipeline.splits import HeldOutPlan
from app.nlp.pipeline.tune import Tuned
from app.nlp.thresholds import replay, replay_out_of_scope, review_on_traffic

# Traffic decides tau_review once the held-out queries hold at least this many reviewed recent
# questions, and once at least this share of the labelled texts are intent examples: the
# calibrators, fit on held-out queries, must have learnt mostly from questions people ask
# before their confidences on unreviewed ones count as answers right (a new bot's calibrators
# know its own titles and alternate questions only).
TRAFFIC_MIN_LABELLED = 200
TRAFFIC_MIN_EXAMPLES_SHARE = 0.5


def review_on_recent_traffic(
    data: TrainingData,
    plan: HeldOutPlan,
    calibrated: Calibrated,
    tuned: Tuned,
    serving: ServingModels,
    tiers: dict[str, str],
    *,
    answered_target: float,
    budget: float,
    progress: bool = False,
    note: Callable[[str], None] = lambda _: None,
) -> Tuned:
    """``tuned`` with ``tau_review`` chosen on ``data.traffic`` when it has enough reviewed
    questions (module docstring); the figures record what was used and why."""
    figures: dict = {
        "questions": len(data.traffic),
        "held_out_tau_review": tuned.thresholds.tau_review,
    }
    if not plan.refit:
        return _with(tuned, figures, used=False, reason="chosen on the given held-out set")
    at_point = replay(calibrated.outcomes, tiers, tuned.thresholds)
    outcome = {
        _key(text): (float(c), bool(ok))
        for text, c, ok in zip(plan.held_out_texts(), at_point.conf, at_point.correct, strict=True)
    }
    trained_on = {_key(t) for t in plan.texts}
    keys = [_key(t) for t in data.traffic]
    labelled = [outcome[k] for k in keys if k in outcome]
    n_trained = sum(k in trained_on for k in keys)
    unlabelled = [t for t, k in zip(data.traffic, keys, strict=True) if k not in trained_on]
    figures.update(reviewed=n_trained, reviewed_held_out=len(labelled), unreviewed=len(unlabelled))
    if len(labelled) < TRAFFIC_MIN_LABELLED:
        return _with(
            tuned,
            figures,
            used=False,
            reason=f"chosen on held-out queries: {len(labelled)} of the recent questions were "
            f"reviewed ({TRAFFIC_MIN_LABELLED} needed to choose it on traffic)",
        )
    share = data.n_examples / max(len(data.texts), 1)
    if share < TRAFFIC_MIN_EXAMPLES_SHARE:
        return _with(
            tuned,
            figures,
            used=False,
            reason=f"chosen on held-out queries: {data.n_examples} of {len(data.texts)} labelled "
            f"texts are intent examples, the rest the KB's own titles and questions "
            f"({TRAFFIC_MIN_EXAMPLES_SHARE:.0%} needed to choose it on traffic)",
        )
    note(f"traffic: scoring {len(unlabelled)} unreviewed recent questions")
    router = router_over(
        data.articles,
        fasttext=serving.fasttext,
        bert=serving.bert,
        calibration=calibrated.calibration,
        thresholds=tuned.thresholds,
        tiers=tiers,
    )
    conf = []
    for text in tqdm(
        unlabelled, desc="recent traffic", unit="q", leave=False, disable=not progress
    ):
        decision = router.route(text)
        conf.append(decision.confidence if decision.article is not None else 0.0)
    threshold, estimate = review_on_traffic(
        np.array([c for c, _ in labelled]),
        np.array([ok for _, ok in labelled]),
        n_trained / len(labelled),  # a split holds out a share of what reviewers taught
        np.array(conf),
        replay_out_of_scope(calibrated.outcomes, tiers, tuned.thresholds),
        answered_target,
        budget=budget,
        oos_labelled=calibrated.outcomes.oos.labelled if calibrated.outcomes.oos else None,
    )
    if threshold is None:
        return _with(
            tuned,
            figures,
            used=False,
            reason="chosen on held-out queries: no value reaches the target on recent traffic",
        )
    figures.update(estimate)
    return _with(
        tuned,
        figures,
        used=True,
        reason=f"chosen on {len(data.traffic)} recent questions, {n_trained} of them reviewed",
        tau_review=threshold,
    )


def _key(text: str) -> str:
    """A question as stored and as taught compare equal (the console drops control characters
    and outer spaces of what it teaches)."""
    return " ".join("".join(ch for ch in text if ch.isprintable() or ch.isspace()).split())


def _with(tuned: Tuned, figures: dict, *, used: bool, reason: str, tau_review=None) -> Tuned:
    traffic = {**figures, "used": used, "reason": reason}
    if tau_review is not None:
        traffic["tau_review"] = tau_review
    th = tuned.thresholds
    thresholds = dataclasses.replace(
        th,
        tau_review=th.tau_review if tau_review is None else float(tau_review),
        provenance={**th.provenance, "traffic": traffic},
    )
    return dataclasses.replace(
        tuned, thresholds=thresholds, figures={**tuned.figures, "traffic": traffic}
    )
