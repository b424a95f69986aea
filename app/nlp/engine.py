"""The NLP engine held by the app: loads models and indexes, answers queries through the router.

- ``load()`` reads the current model version (FastText, BERT head, calibrators, thresholds,
  tiers), builds BM25 and the BERT KB index from the published articles, warms every tier with
  a few queries and only then reports ``ready``.
- ``answer(text)`` goes through the answer cache (app/nlp/answer_cache.py: per process, and
  shared across workers and hosts in Redis) keyed by the normalised text and the model and KB
  versions, then the router, whose BERT call passes admission control (app/nlp/admission.py);
  it records stage latencies, decisions, cache events and answers made without BERT.
- Every ``REVISION_POLL_SECONDS`` at most, a request looks at KB_REVISION / MODEL_REVISION in
  the database (one small query). When either moved, a background thread builds a new router
  (reusing the loaded models when only the KB changed) and swaps it in with one reference
  assignment: requests use either the old or the new router, never a half-built one.
- With ``TIERDESK_SPARE_REVIEW`` on (opt-in) and a ceiling on reviews (``budget`` < 1), the
  router serving traffic carries a ``SpareReview``: review capacity the ceiling leaves unused
  goes to the least confident answers. It is attached after warm-up and kept across reloads
  while the budget is the same.
- BERT failing to load leaves the engine ready in degraded mode (fast tier, escalating when
  unsure); BERT failing on a query is handled the same way by the router.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.metrics import (
    CACHE_EVENTS,
    CONFIDENCE,
    DEGRADED,
    MODEL_INFO,
    REVIEW_THRESHOLD,
    ROUTE_DECISIONS,
    STAGE_LATENCY,
)
from app.nlp.admission import PROCESS_LOAD, Admission, Priority
from app.nlp.answer_cache import AnswerCache, cache_tag
from app.nlp.capacity import SpareReview
from app.nlp.normalize import normalize
from app.nlp.types import Decision
from app.vocab import Reason

log = logging.getLogger(__name__)

REVISION_POLL_SECONDS = 2.0
CACHE_SIZE = 2048
WARMUP_QUERIES = ("hello", "I have a question about my account", "asdf qwerty")


# Loaded models of the current version, shared by every Engine of the process (a reload after a
# KB change, or a second app in tests, reuses them instead of loading BERT again).
_LOADED: dict[tuple, dict] = {}
_LOADED_LOCK = threading.Lock()


class EngineNotReady(RuntimeError):
    """The models are not loaded (not trained yet, or failed to load)."""


class Engine:
    def __init__(self, config: Mapping[str, Any], redis_client=None) -> None:
        self.config = config
        self.ready = False
        self.not_ready_reason: str | None = "models not loaded"
        self.trained_at: str | None = None
        self.model_version: str | None = None
        self.revisions: tuple[int, int] | None = None  # (kb, model) the router was built from
        self._router = None
        # Per process, and shared through Redis when a client is given (app/nlp/answer_cache.py).
        self._cache = AnswerCache(
            int(config.get("ANSWER_CACHE_SIZE", CACHE_SIZE)),
            redis_client,
            config.get("REDIS_PREFIX", "tierdesk:"),
            shared=bool(config.get("ANSWER_CACHE_SHARED", True)),
            ttl_min=int(config.get("ANSWER_CACHE_TTL_MIN", 60)),
            ttl_max=int(config.get("ANSWER_CACHE_TTL_MAX", 3600)),
        )
        self.admission = Admission.from_config(config, PROCESS_LOAD)  # app/nlp/admission.py
        self._reload_lock = threading.Lock()
        self._reloading = False
        self._next_check = 0.0
        self._check_lock = threading.Lock()
        self._shown_threshold: float | None = None  # last value of the effective-threshold gauge

    # -- loading -------------------------------------------------------------------------

    def load(self) -> None:
        """Load models and indexes from disk and the database, then warm them."""
        try:
            self._swap(self._build())
        except EngineNotReady as exc:
            self.ready, self.not_ready_reason = False, str(exc)
            log.warning("NLP engine not ready: %s", exc)
        except Exception as exc:  # noqa: BLE001 - a broken model must not stop the app
            self.ready = False
            self.not_ready_reason = f"failed to load models: {type(exc).__name__}: {exc}"
            log.exception("NLP engine failed to load")
        self._next_check = time.monotonic() + REVISION_POLL_SECONDS

    def _db_url(self) -> str:
        return self.config["SQLALCHEMY_DATABASE_URI"]

    def _read_revisions(self) -> tuple[int, int]:
        from app.db import session_scope
        from app.state import KB_REVISION, MODEL_REVISION, get_revision

        with session_scope(self._db_url()) as session:
            return get_revision(session, KB_REVISION), get_revision(session, MODEL_REVISION)

    def _build(self):
        from app.nlp.training import current_version, version_folder

        models_dir = Path(self.config["MODELS_DIR"])
        version = current_version(models_dir)
        if not version:
            raise EngineNotReady(f"no trained models in {models_dir}; run `tierdesk train`")
        folder = version_folder(models_dir, version)
        revisions = self._read_revisions()
        articles, declared = self._read_kb()
        if not articles:
            raise EngineNotReady("the knowledge base has no published articles")
        loaded = self._load_models(folder, version)
        router = self._make_router(loaded, articles, declared, models_dir)
        for query in WARMUP_QUERIES:  # every tier, whatever route these queries take
            router.route(query)
            router.route(query, mode="bert")
        return router, revisions, loaded["manifest"]

    def _read_kb(self):
        """Published articles as the router matches them (taught examples included) and the
        declared tiers; the same reading as training's."""
        from app.db import session_scope
        from app.nlp.training import data_from_db

        with session_scope(self._db_url()) as session:
            data = data_from_db(session)
        return data.articles, data.declared_tiers

    def _load_models(self, folder: Path, version: str) -> dict:
        """The version's models; reused from the previous load when the version is the same."""
        key = (
            str(folder.resolve()),
            self.config.get("BERT_PATH"),
            bool(self.config.get("BERT_QUANTIZE", True)),
        )
        with _LOADED_LOCK:
            cached = _LOADED.get(key)
        if cached is not None:
            return {**cached, "version": version, "folder": folder}
        from app.nlp.calibration import CalibrationSet
        from app.nlp.intent import FastTextIntent
        from app.nlp.training import BERT_DIR, CALIBRATION_FILE, FASTTEXT_DIR, MANIFEST, TIERS_FILE

        manifest = json.loads((folder / MANIFEST).read_text())
        loaded = {
            "version": version,
            "folder": folder,
            "manifest": manifest,
            "fasttext": FastTextIntent.load(folder / FASTTEXT_DIR)
            if (folder / FASTTEXT_DIR).is_dir()
            else None,  # a version trained without an intent tier
            "calibration": CalibrationSet.load(folder / CALIBRATION_FILE),
            "tiers": json.loads((folder / TIERS_FILE).read_text()),
            "bert": None,
            "bert_error": None,
        }
        try:
            from app.nlp.bert import BertTier

            loaded["bert"] = BertTier.load(
                folder / BERT_DIR,
                bert_path=self.config.get("BERT_PATH"),
                quantize=self.config.get("BERT_QUANTIZE", True),
            )
        except Exception as exc:  # noqa: BLE001 - degrade to the fast tier
            loaded["bert_error"] = f"{type(exc).__name__}: {exc}"
            log.exception("BERT tier failed to load; serving in degraded mode")
        with _LOADED_LOCK:
            _LOADED.clear()  # one version's models in memory per process
            _LOADED[key] = loaded
        return loaded

    def _thresholds(self, folder: Path, models_dir: Path):
        """``models/thresholds.json`` (written by ``tierdesk tune``) wins over the version's."""
        from app.nlp.thresholds import THRESHOLDS_FILE, Thresholds

        override = models_dir / THRESHOLDS_FILE
        path = override if override.is_file() else folder / THRESHOLDS_FILE
        return Thresholds.load(path), str(path)

    def _make_router(self, loaded: dict, articles, declared, models_dir: Path):
        from app.nlp.bm25 import BM25Retriever
        from app.nlp.router import Router, RouterModels
        from app.nlp.tiers import effective_tiers
        from app.nlp.training import bert_with_kb, bm25_docs, kb_entries

        thresholds, source = self._thresholds(loaded["folder"], models_dir)
        thresholds.provenance = {**thresholds.provenance, "file": source}
        bert = loaded["bert"]
        bert_error = loaded["bert_error"]
        if bert is not None:
            try:
                bert = bert_with_kb(bert, kb_entries(articles))
                # the next reload (KB change, another app in this process) reuses the vectors
                loaded["bert"]._text_cache = dict(bert._text_cache)
            except Exception as exc:  # noqa: BLE001
                bert, bert_error = None, f"{type(exc).__name__}: {exc}"
                log.exception("BERT KB index failed; serving in degraded mode")
        tiers = effective_tiers(loaded["tiers"].get("derived", {}), declared)
        return Router(
            RouterModels(
                fasttext=loaded["fasttext"],
                bm25=BM25Retriever(bm25_docs(articles)),
                bert=bert,
                calibration=loaded["calibration"],
                thresholds=thresholds,
                tiers=tiers,
                bert_error=bert_error,
                version=loaded["version"],
            )
        )

    def _spare_review(self, router) -> SpareReview | None:
        """Spare review capacity for the new router: the previous one's (its window of live
        confidences) while the budget is unchanged."""
        budget = router.m.thresholds.budget
        if not self.config.get("SPARE_REVIEW", False) or budget >= 1.0:
            return None  # opt-in, and only under a ceiling on reviews
        old = self._router.spare if self._router is not None else None
        return old if old is not None and old.budget == budget else SpareReview(budget)

    def _swap(self, built) -> None:
        router, revisions, manifest = built
        router.spare = self._spare_review(router)  # after warm-up: only live answers feed it
        REVIEW_THRESHOLD.labels("tuned").set(router.m.thresholds.tau_review)
        self._show_threshold(router.m.thresholds.tau_review)
        # What a cached answer depends on: a KB import or a model change moves it.
        router.cache_tag = cache_tag(router.m.version, router.m.bm25.version, revisions)
        self._cache.purge_other_tags(router.cache_tag)  # old answers leave Redis
        self._router = router
        self.revisions = revisions
        self.model_version = router.m.version
        self.trained_at = manifest.get("trained_at")
        self._cache.clear_local()
        self.ready = True
        self.not_ready_reason = None
        MODEL_INFO.clear()
        for tier, version in router.versions().items():
            if version:
                MODEL_INFO.labels(tier, version).set(1)
        log.info(
            "NLP engine ready: models %s, kb/model revisions %s%s",
            router.m.version,
            revisions,
            " (degraded: BERT unavailable)" if router.m.bert is None else "",
        )

    def _show_threshold(self, value: float) -> None:
        """The effective review threshold gauge, written only when it moved (it moves every 25
        answers at most; under gunicorn a gauge write goes to a memory-mapped file)."""
        if value != self._shown_threshold:
            self._shown_threshold = value
            REVIEW_THRESHOLD.labels("effective").set(value)

    # -- hot reload ----------------------------------------------------------------------

    def poll(self) -> None:
        """Cheap, rate-limited check for a new KB or model revision (health checks call it)."""
        self._maybe_check()

    def _maybe_check(self) -> None:
        now = time.monotonic()
        if now < self._next_check or not self._check_lock.acquire(blocking=False):
            return
        try:
            self._next_check = now + REVISION_POLL_SECONDS
            self.check_for_updates(wait=False)
        finally:
            self._check_lock.release()

    def check_for_updates(self, wait: bool = False) -> bool:
        """Reload when the KB or model revision moved (or the engine is not ready yet).

        Returns True when a reload was started. ``wait`` blocks until it finished.
        """
        try:
            revisions = self._read_revisions()
        except Exception:  # noqa: BLE001 - the database may be briefly unavailable
            log.warning("could not read revisions", exc_info=True)
            return False
        if self.ready and revisions == self.revisions:
            return False
        with self._reload_lock:
            if self._reloading:
                return False
            self._reloading = True
        thread = threading.Thread(target=self._reload, name="tierdesk-nlp-reload", daemon=True)
        thread.start()
        if wait:
            thread.join()
        return True

    def _reload(self) -> None:
        try:
            self._swap(self._build())
        except EngineNotReady as exc:
            if not self.ready:
                self.not_ready_reason = str(exc)
            log.warning("reload skipped: %s", exc)
        except Exception:  # noqa: BLE001 - keep serving the old router
            log.exception("reload failed; still serving the previous models")
        finally:
            with self._reload_lock:
                self._reloading = False

    # -- answering -----------------------------------------------------------------------

    @property
    def router(self):
        return self._router

    def answer(
        self, text: str, *, priority: Priority = Priority.NORMAL, started: float | None = None
    ) -> Decision:
        """The decision for ``text``: from the answer cache, else the router, whose BERT call
        goes through admission control (``priority`` and ``started``, the request's start on
        ``time.monotonic()``, feed it)."""
        self._maybe_check()
        router = self._router
        if router is None:
            raise EngineNotReady(self.not_ready_reason or "models not loaded")
        normalized = normalize(text)
        tag = router.cache_tag
        cached, level = self._cache.get(normalized, tag)
        if cached is not None:
            CACHE_EVENTS.labels(level).inc()
            # A shallow copy: consumers read a decision and never change its parts in place
            # (a deep copy of the trace cost ~6% of a worker's time under load).
            decision = dataclasses.replace(
                cached, query=text, trace={**cached.trace, "cache": level}
            )
            ROUTE_DECISIONS.labels(decision.route, _outcome(decision)).inc()
            return decision
        CACHE_EVENTS.labels("miss").inc()
        started = time.monotonic() if started is None else started
        words = len(normalized.split())

        def admit(fast_confidence):
            return self.admission.ask(
                started=started, priority=priority, fast_confidence=fast_confidence, words=words
            )

        decision = router.route(text, admit=admit)
        CONFIDENCE.labels(decision.route).observe(decision.confidence)
        without_bert = _without_bert(decision)
        if without_bert is not None:
            DEGRADED.labels(without_bert, "escalated" if decision.escalate else "fast_answer").inc()
        self._show_threshold(decision.trace["tau_review_effective"])
        for stage, ms in decision.trace.get("timings_ms", {}).items():
            STAGE_LATENCY.labels(stage).observe(ms / 1000)
        ROUTE_DECISIONS.labels(decision.route, _outcome(decision)).inc()
        decision.trace["cache"] = "miss"
        # A spare-capacity escalation depends on the moment's review capacity, not on the
        # models: replayed from the cache, every repeat of a hot question would go to review
        # outside the budget.
        # Neither is an answer that BERT was refused for: it depended on the moment's load.
        if (
            self._cache.enabled
            and decision.escalation_reason not in (Reason.SPARE_CAPACITY, Reason.DEGRADED)
            and without_bert is None
        ):
            self._cache.put(
                normalized,
                tag,
                dataclasses.replace(decision, trace=dict(decision.trace)),
                router.m.thresholds.tau_review,
            )
        return decision

    def status(self) -> dict:
        router = self._router
        return {
            "ready": self.ready,
            "not_ready_reason": self.not_ready_reason,
            "degraded": bool(router and router.m.bert is None),
            "versions": router.versions() if router else {},
            "revisions": self.revisions,
            "trained_at": self.trained_at,
            "cache_entries": len(self._cache),
        }

    def close(self) -> None:
        """Nothing to stop: reload threads are short-lived daemons."""


def _without_bert(decision: Decision) -> str | None:
    """Why the router went without BERT although it wanted it (None: it did not want it, or
    BERT answered): the admission refusal, else ``unavailable``."""
    bert = decision.trace.get("stages", {}).get("bert")
    if not bert or "error" not in bert:
        return None
    admission = decision.trace.get("admission")
    if admission and not admission["granted"]:
        return admission["reason"]
    return "unavailable"


def _outcome(decision: Decision) -> str:
    return "escalated" if decision.escalate else "answered"
