"""The router: the cheapest tier that is good enough, a calibrated confidence, and the reason
whenever a human has to take over.

Per query (``mode="hybrid"``):

1. FastText predicts the intent (top-k with probabilities).
2. Simple route when the intent's tier is ``simple``, top-1 >= ``tau_fast`` and
   top-1 - top-2 >= ``margin``: BM25 restricted to that intent's articles answers, and the
   simple calibrator turns (FastText top-1, margin, entropy, BM25 confidence, BM25 restricted
   against unrestricted) into P(correct). If that probability is under ``tau_cascade`` the
   query falls through to BERT (a cascade: the careful tier gets a look before anyone is
   bothered). With escalation on, the bar is ``tau_verify`` (at least ``tau_cascade``): a fast
   answer that would go out unreviewed is checked by BERT first unless it is surer than that,
   since a confident FastText mistake is what a reviewer would otherwise never see. A fast
   answer kept but under ``tau_review`` goes to review.
3. Otherwise the BERT route: semantic matching against the KB plus the intent head, whose
   distribution is blended log-linearly with FastText's (weight ``fasttext_weight``, chosen on
   held-out data: the two models err on different queries); the complex calibrator uses the
   blend's top-1 and margins, cosine similarity to the KB, FastText's view and the KL
   divergence between the two intent distributions.
4. Under ``tau_review`` the decision escalates (when escalation is on) with the reason:
   ``out_of_scope`` (the query is far from every KB text), ``tiers_disagree`` (FastText and BERT
   name different intents and diverge beyond ``kl_disagree``), ``ambiguous`` (small margin) or
   ``below_threshold``. If BERT is unavailable or fails, the fast tier answers when it is sure
   and escalates with ``degraded`` otherwise; a query never fails because BERT is down. The
   same holds when admission control (``admit``, app/nlp/admission.py) refuses the BERT call
   under load or for lack of time.
5. With a ``SpareReview`` attached (the server and ``tierdesk eval`` attach one after warm-up),
   review capacity the budget leaves unused goes to the least confident answers: the review
   threshold rises above ``tau_review`` while escalations run under the budget, and such an
   escalation says ``spare_capacity`` (app/nlp/capacity.py).

``mode="fast"`` (FastText + BM25 only) and ``mode="bert"`` (BERT only) exist for evaluation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from app.nlp.calibration import CalibrationSet, complex_features, simple_features
from app.nlp.capacity import SpareReview
from app.nlp.rule import answers, keeps_simple, simple_eligible, tier_of
from app.nlp.thresholds import Thresholds
from app.nlp.types import BlendingTier, Candidate, Decision, KbRetriever, Tier, TierResult
from app.vocab import Reason

log = logging.getLogger(__name__)

TOP_K = 10
SUGGESTIONS = 3
MODES = ("hybrid", "fast", "bert")


@dataclass
class RouterModels:
    """Everything the router needs, swapped as one object on reload."""

    fasttext: Tier | None  # app.nlp.intent.FastTextIntent; None when the data are too thin
    bm25: KbRetriever  # app.nlp.bm25.BM25Retriever
    bert: BlendingTier | None  # app.nlp.bert.BertTier, None when it failed to load
    calibration: CalibrationSet
    thresholds: Thresholds
    tiers: Mapping[str, str]  # intent -> "simple" | "complex"
    bert_error: str | None = None
    version: str | None = None  # the models folder's version id


class Router:
    def __init__(self, models: RouterModels) -> None:
        self.m = models
        # Attached by whoever serves live traffic: live answers (hybrid, escalation on) feed it
        # and it may raise the review threshold.
        self.spare: SpareReview | None = None
        self.cache_tag: str | None = None  # set by the engine: what its cached answers depend on
        self._thresholds_trace = {
            k: v for k, v in models.thresholds.to_dict().items() if k != "provenance"
        }
        # The first article of each intent: the answer when BM25 finds no word in common with
        # the query but FastText is sure of the intent (short queries, tiny KBs).
        self._intent_article: dict[str, Candidate] = {}
        for doc in models.bm25.docs:
            if doc.intent and doc.intent not in self._intent_article:
                self._intent_article[doc.intent] = Candidate(doc.slug, doc.title, 0.0, doc.intent)

    # -- stages -------------------------------------------------------------------------

    def _head_weight(self) -> float | None:
        return self.m.bert.head_weight if self.m.bert is not None else None

    def simple_retrieve(self, query: str, ft: TierResult) -> TierResult:
        """BM25 restricted to FastText's top intent (boosted by its distribution)."""
        top = ft.intents[0][0] if ft.intents else None
        # Restricted to one intent, a boost by intent probability would scale every
        # candidate alike: it is skipped (it costs a pass over the index).
        result = self.m.bm25.run(query, k=SUGGESTIONS + 1, intent=top)
        if not result.candidates and top in self._intent_article:
            result.candidates = [self._intent_article[top]]
        return result

    def _tier_of(self, intent: str | None) -> str:
        return tier_of(self.m.tiers, intent)

    def _simple_eligible(self, ft: TierResult) -> bool:
        if not ft.intents:
            return False
        p1 = ft.intents[0][1]
        p2 = ft.intents[1][1] if len(ft.intents) > 1 else 0.0
        th = self.m.thresholds
        simple_tier = self._tier_of(ft.intents[0][0]) == "simple"
        return bool(simple_eligible(simple_tier, p1, p1 - p2, th.tau_fast, th.margin))

    # -- the decision -------------------------------------------------------------------

    def route(
        self, query: str, *, mode: str = "hybrid", escalation: bool = True, admit=None
    ) -> Decision:
        """``admit`` (hybrid mode only): called with the fast tier's calibrated confidence (or
        None) before BERT runs; it returns an ``app.nlp.admission.Verdict``. A refused verdict
        is handled as BERT being unavailable (fast answer when sure, else ``degraded``)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        started = time.perf_counter()
        th = self.m.thresholds
        stages: dict[str, dict] = {}
        timings: dict[str, float] = {}
        ft = bm = bert = verdict = None
        simple_conf = None
        spare = self.spare if mode == "hybrid" and escalation else None
        tau_review = spare.threshold(th.tau_review) if spare is not None else th.tau_review
        if mode != "bert" and self.m.fasttext is not None:
            ft = self.m.fasttext.run(query, k=TOP_K)
            stages["fasttext"] = _stage(ft)
            timings["fasttext"] = ft.ms
        eligible = ft is not None and self._simple_eligible(ft)
        if ft is not None and (
            mode == "fast" or (mode == "hybrid" and (eligible or self.m.bert is None))
        ):
            bm = self.simple_retrieve(query, ft)
            stages["bm25"] = _stage(bm)
            timings["bm25"] = bm.ms
            features = simple_features(ft, bm)
            simple_conf = self.m.calibration.simple.predict(features)
            stages["bm25"]["features"] = features
            stages["bm25"]["calibrated"] = simple_conf
        # With escalation on, an answer nobody reviews must clear the higher bar tau_verify:
        # under it BERT takes a look too (its calibrated confidence weighs FastText's view).
        keep_below = th.verify_below if escalation else th.cascade_below
        if (mode == "fast" and ft is not None) or (
            mode == "hybrid" and eligible and keeps_simple(True, simple_conf, keep_below)
        ):
            unsure = mode == "hybrid" and not answers(simple_conf, tau_review)
            decision = self._simple_decision(
                query,
                ft,
                bm,
                simple_conf,
                escalate_reason=Reason.BELOW_THRESHOLD if unsure else None,
            )
        else:
            prior = ft.intents if ft is not None else None
            if admit is not None and mode == "hybrid" and self.m.bert is not None:
                verdict = admit(simple_conf)
            if verdict is not None and not verdict.granted:
                bert, bert_error = None, f"not admitted: {verdict.reason}"
            elif mode != "fast":
                try:
                    bert, bert_error = self._run_bert(query, prior)
                finally:
                    if verdict is not None:
                        verdict.release(bert.ms if bert is not None else None)
            else:
                bert, bert_error = None, None
            if bert is None:
                stages["bert"] = {"error": bert_error or self.m.bert_error or "unavailable"}
                if bm is None:
                    bm = self.simple_retrieve(query, ft) if ft else None
                if ft is None or bm is None:
                    decision = _empty_decision(query, "complex", Reason.DEGRADED)
                else:
                    sure = (
                        eligible and simple_conf is not None and answers(simple_conf, th.tau_review)
                    )
                    decision = self._simple_decision(
                        query,
                        ft,
                        bm,
                        simple_conf or 0.0,
                        escalate_reason=None if sure else Reason.DEGRADED,
                    )
            else:
                stages["bert"] = _stage(bert)
                timings["bert"] = bert.ms
                features = complex_features(ft, bert, self._head_weight())
                conf = self.m.calibration.complex.predict(features)
                stages["bert"]["features"] = features
                stages["bert"]["calibrated"] = conf
                reason = None if answers(conf, tau_review) else self._reason(features)
                decision = self._bert_decision(query, bert, conf, reason)
        spared = bool(
            spare is not None
            and decision.escalation_reason not in (None, Reason.DEGRADED)
            and th.tau_review <= decision.confidence < tau_review
        )
        if spared:
            decision.escalation_reason = Reason.SPARE_CAPACITY
        if spare is not None:
            spare.record(decision.confidence, decision.escalate, spared)
        would_escalate = decision.escalation_reason
        if mode != "hybrid" or not escalation:
            decision.escalate = False
            decision.escalation_reason = None
        timings["total"] = (time.perf_counter() - started) * 1000
        decision.trace = {
            "mode": mode,
            "route": decision.route,
            "stages": stages,
            "timings_ms": {k: round(v, 4) for k, v in timings.items()},
            "versions": self.versions(),
            "thresholds": dict(self._thresholds_trace),
            "tier": self._tier_of(ft.intents[0][0]) if ft and ft.intents else None,
            "simple_eligible": eligible,
            "cascaded": eligible and "bert" in stages,
            "verified": bool(
                eligible
                and "bert" in stages
                and simple_conf is not None
                and simple_conf >= th.cascade_below
            ),
            "escalation_reason": decision.escalation_reason,
            "would_escalate": would_escalate,
            "tau_review_effective": tau_review,
            "admission": verdict.trace() if verdict is not None else None,
        }
        return decision

    def _run_bert(
        self, query: str, prior: list[tuple[str, float]] | None = None
    ) -> tuple[TierResult | None, str | None]:
        """BERT's view, blended with FastText's (``prior``) when the thresholds say so."""
        if self.m.bert is None:
            return None, self.m.bert_error or "BERT tier not loaded"
        weight = self.m.thresholds.fasttext_weight
        try:
            if prior and weight > 0:
                return self.m.bert.run(query, k=TOP_K, prior=prior, prior_weight=weight), None
            return self.m.bert.run(query, k=TOP_K), None
        except Exception as exc:  # noqa: BLE001 - the careful tier must never fail a query
            log.exception("BERT tier failed; answering from the fast tier")
            return None, f"{type(exc).__name__}: {exc}"

    def _reason(self, features: dict[str, float]) -> str:
        th = self.m.thresholds
        if features["bert_similarity"] < th.oos_similarity:
            return Reason.OUT_OF_SCOPE
        if not features["tiers_agree"] and features["kl_ft_bert"] > th.kl_disagree:
            return Reason.TIERS_DISAGREE
        if features["bert_margin"] < th.margin:
            return Reason.AMBIGUOUS
        return Reason.BELOW_THRESHOLD

    def _simple_decision(
        self, query: str, ft: TierResult, bm: TierResult, conf: float, escalate_reason: str | None
    ) -> Decision:
        intent = ft.intents[0][0] if ft.intents else None
        article = bm.candidates[0] if bm.candidates else None
        if article is None:
            escalate_reason = escalate_reason or Reason.OUT_OF_SCOPE
            conf = 0.0
        return Decision(
            query=query,
            route="simple",
            intent=intent,
            article=article,
            confidence=float(conf),
            escalate=escalate_reason is not None,
            escalation_reason=escalate_reason,
            suggestions=_suggestions(bm.candidates),
        )

    def _bert_decision(
        self, query: str, bert: TierResult, conf: float, reason: str | None
    ) -> Decision:
        article = bert.candidates[0] if bert.candidates else None
        intent = (
            article.intent
            if article and article.intent
            else (bert.intents[0][0] if bert.intents else None)
        )
        if article is None:
            reason, conf = Reason.OUT_OF_SCOPE, 0.0
        return Decision(
            query=query,
            route="complex",
            intent=intent,
            article=article,
            confidence=float(conf),
            escalate=reason is not None,
            escalation_reason=reason,
            suggestions=_suggestions(bert.candidates),
        )

    def versions(self) -> dict[str, str | None]:
        return {
            "models": self.m.version,
            "fasttext": self.m.fasttext.version if self.m.fasttext is not None else None,
            "bm25": self.m.bm25.version,
            "bert": self.m.bert.version if self.m.bert is not None else None,
        }


def _stage(result: TierResult) -> dict:
    return {
        "intents": [[name, round(p, 5)] for name, p in result.intents[:5]],
        "candidates": [
            {"slug": c.slug, "score": round(c.score, 5), "intent": c.intent}
            for c in result.candidates[:5]
        ],
        "confidence": round(result.confidence, 5),
        "ms": round(result.ms, 4),
        **(
            {"signals": {k: round(v, 5) for k, v in result.signals.items()}}
            if result.signals
            else {}
        ),
    }


def _suggestions(candidates: list[Candidate]) -> list[Candidate]:
    return list(candidates[1 : SUGGESTIONS + 1])


def _empty_decision(query: str, route: str, reason: str) -> Decision:
    return Decision(
        query=query,
        route=route,
        intent=None,
        article=None,
        confidence=0.0,
        escalate=True,
        escalation_reason=reason,
    )
