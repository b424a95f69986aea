"""The NLP engine held by the app: loads models and indexes, answers queries through the router.

- ``load()`` reads the registry's serving plan (``app/nlp/registry.py``: the active version,
  a canary, a shadow; ``models/current`` alone when nothing is registered), fetches a version
  missing on this host from the registry's store (verified by its digest), loads each as a
  ``LoadedVersion`` (``app/nlp/store.py``), builds BM25 and the BERT KB index from the
  published articles, warms every router with a few queries and only then reports ``ready``.
- ``answer(text, conversation_id)`` picks the router: the canary for the conversations in its
  share (sticky: a hash of the id), an experiment's arm b (``app/nlp/experiments.py``), else
  the active version; then the answer cache (app/nlp/answer_cache.py: per process, and shared across
  workers and hosts in Redis) keyed by the normalised text and a tag of the router's model, KB
  revision and arm, then the router, whose BERT call passes admission control
  (app/nlp/admission.py); it records stage latencies, decisions, cache events and answers
  made without BERT.
  A sample of the active version's answers goes to the shadow (``app/nlp/shadow.py``) in the
  background.
- Every ``REVISION_POLL_SECONDS``, a watcher thread (and any request) looks at KB_REVISION /
  MODEL_REVISION in the database (one small query). When either moved, a background thread
  builds new routers (reusing the loaded models when only the KB changed) and swaps them in
  with one reference assignment: requests use either the old or the new plan, never a
  half-built one. A server checks the canary's automatic rollback rule every
  ``CANARY_CHECK_SECONDS`` (``app/nlp/canary.py``).
- With ``TIERDESK_SPARE_REVIEW`` on (opt-in) and a ceiling on reviews (``budget`` < 1), the
  router serving traffic carries a ``SpareReview``: review capacity the ceiling leaves unused
  goes to the least confident answers. It is attached after warm-up and kept across reloads
  while the budget is the same.
- BERT failing to load leaves the engine ready in degraded mode (fast tier, escalating when
  unsure); BERT failing on a query is handled the same way by the router.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
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
from app.nlp.passages import forget_splits
from app.nlp.registry import ServingPlan, conversation_bucket
from app.nlp.store import LoadedVersion
from app.nlp.types import Decision
from app.vocab import Reason

log = logging.getLogger(__name__)

REVISION_POLL_SECONDS = 2.0
CACHE_SIZE = 2048
WARMUP_QUERIES = ("hello", "I have a question about my account", "asdf qwerty")


# Loaded models of the served versions, shared by every Engine of the process (a reload after a
# KB change, or a second app in tests, reuses them instead of loading BERT again).
_LOADED: dict[tuple, LoadedVersion] = {}
_LOADED_LOCK = threading.Lock()


@dataclasses.dataclass
class _Built:
    routers: dict  # version -> Router, every version of the plan that loaded
    plan: ServingPlan
    revisions: tuple[int, int]
    manifests: dict  # version -> manifest
    experiment: Any = None


@dataclasses.dataclass(frozen=True)
class _Serving:
    """The routers answering now, swapped in as one object."""

    active: Any
    canary: Any = None
    canary_share: float = 0.0
    shadow: Any = None
    shadow_sample: float = 0.0
    experiment: Any = None  # app.nlp.experiments.Experiment
    arm_b: Any = None  # the active version's models under the experiment's arm b


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
        self._serving: _Serving | None = None
        self._shadow = None  # app.nlp.shadow.ShadowRunner, started with the first shadow
        # Per process, and shared through Redis when a client is given (app/nlp/answer_cache.py).
        self._cache = AnswerCache(
            int(config.get("ANSWER_CACHE_SIZE", CACHE_SIZE)),
            redis_client,
            config.get("REDIS_PREFIX", "tierdesk:"),
            shared=bool(config.get("ANSWER_CACHE_SHARED", True)),
            ttl_min=int(config.get("ANSWER_CACHE_TTL_MIN", 60)),
            ttl_max=int(config.get("ANSWER_CACHE_TTL_MAX", 3600)),
        )
        # app/nlp/admission.py; None (BERT_ADMISSION false): BERT always runs, whatever the load
        self.admission: Admission | None = (
            Admission.from_config(config, PROCESS_LOAD)
            if config.get("BERT_ADMISSION", True)
            else None
        )
        self._reload_lock = threading.Lock()
        self._reloading = False
        self._next_check = 0.0
        self._next_canary = 0.0
        self._watcher_pid: int | None = None
        self._closed = False
        self._check_lock = threading.Lock()
        self._shown_threshold: float | None = None  # last value of the effective-threshold gauge
        self._erasures: int | None = None  # erasure revision the answer cache was checked at

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
        from app.state import ERASURE_REVISION, KB_REVISION, MODEL_REVISION, get_revision

        with session_scope(self._db_url()) as session:
            erasures = get_revision(session, ERASURE_REVISION)
            revisions = get_revision(session, KB_REVISION), get_revision(session, MODEL_REVISION)
        if erasures != self._erasures:
            # A customer's data was erased (app/privacy/erasure.py): drop every cached answer
            # (keys are the questions as typed) in this process too.
            self._erasures = erasures
            self._cache.clear_local()  # the erasing process emptied the shared cache
        return revisions

    def _build(self) -> _Built:
        models_dir = Path(self.config["MODELS_DIR"])
        revisions = self._read_revisions()
        plan = self._serving_plan(models_dir)
        articles, declared = self._read_kb()
        if not articles:
            raise EngineNotReady("the knowledge base has no published articles")
        routers, manifests = {}, {}
        try:
            for version in plan.versions():
                try:
                    loaded = self._load_version(models_dir, version)
                    router = self._make_router(loaded, articles, declared, models_dir)
                    for query in WARMUP_QUERIES:  # every tier, whatever route they take
                        router.route(query)
                        router.route(query, mode="bert")
                except Exception:
                    if version == plan.active:
                        raise
                    # a canary or shadow that cannot load must not stop the active version
                    log.exception("model version %s failed to load; serving without it", version)
                    continue
                routers[version] = router
                manifests[version] = loaded.manifest
        finally:
            forget_splits()  # the indexes are built: the bodies' passages need not stay
        with _LOADED_LOCK:  # only the plan's versions stay in memory
            for key in [k for k in _LOADED if k[1] not in routers]:
                del _LOADED[key]
        return _Built(routers, plan, revisions, manifests, self._read_experiment())

    def _read_experiment(self):
        from app.db import session_scope
        from app.nlp.experiments import current

        try:
            with session_scope(self._db_url()) as session:
                return current(session)
        except Exception:  # noqa: BLE001 - a broken experiment must not stop serving
            log.exception("could not read the running experiment; serving without it")
            return None

    def _arm_b(self, router, experiment):
        """Arm b of ``experiment``: ``router``'s models with its thresholds and tiers."""
        from app.nlp.router import Router

        try:
            models = dataclasses.replace(
                router.m,
                thresholds=experiment.thresholds_b(router.m.thresholds),
                tiers=experiment.tiers_b(dict(router.m.tiers)),
            )
        except Exception:  # noqa: BLE001
            log.exception("experiment %s cannot run; serving without it", experiment.name)
            return None
        arm = Router(models)
        arm.arm = f"{experiment.name}:b"
        return arm

    def _serving_plan(self, models_dir: Path):
        """The registry's plan; ``models/current`` alone while no version is registered."""
        from app.db import session_scope
        from app.nlp.registry import ServingPlan, serving_plan
        from app.nlp.store import current_version

        with session_scope(self._db_url()) as session:
            plan = serving_plan(session)
        if plan is not None:
            return plan
        version = current_version(models_dir)
        if not version:
            raise EngineNotReady(f"no trained models in {models_dir}; run `tierdesk train`")
        return ServingPlan(active=version)

    def _read_kb(self):
        """Published articles as the router matches them (taught examples included) and the
        declared tiers; the same reading as training's."""
        from app.db import session_scope
        from app.nlp.pipeline.data import data_from_db

        with session_scope(self._db_url()) as session:
            data = data_from_db(session)
        return data.articles, data.declared_tiers

    def _load_version(self, models_dir: Path, version: str) -> LoadedVersion:
        """The version's models, from this host's disk; a registered version missing here (or
        whose files do not match its digest) is fetched from the registry's store first.
        Reused from an earlier load of the same version in this process."""
        from app.nlp.store import load_version, version_folder

        folder = version_folder(models_dir, version)
        key = (
            str(folder.resolve()),
            version,
            self.config.get("BERT_PATH"),
            bool(self.config.get("BERT_QUANTIZE", True)),
        )
        with _LOADED_LOCK:
            cached = _LOADED.get(key)
        if cached is not None:
            return cached
        self._fetch(models_dir, version)
        loaded = load_version(
            models_dir,
            version,
            bert_path=self.config.get("BERT_PATH"),
            quantize=self.config.get("BERT_QUANTIZE", True),
        )
        with _LOADED_LOCK:
            _LOADED[key] = loaded
        return loaded

    def _fetch(self, models_dir: Path, version: str) -> None:
        from app.db import session_scope
        from app.models import ModelVersion
        from app.nlp.registry import ensure_local

        with session_scope(self._db_url()) as session:
            if session.get(ModelVersion, version) is not None:
                ensure_local(session, models_dir, version)

    def _thresholds(self, loaded: LoadedVersion, models_dir: Path):
        """``models/thresholds.json`` (written by ``tierdesk tune``) wins over the version's."""
        from app.nlp.thresholds import THRESHOLDS_FILE, Thresholds

        override = models_dir / THRESHOLDS_FILE
        if override.is_file():
            return Thresholds.load(override), str(override)
        return copy.deepcopy(loaded.thresholds), str(loaded.folder / THRESHOLDS_FILE)

    def _make_router(self, loaded: LoadedVersion, articles, declared, models_dir: Path):
        from app.nlp.bm25 import BM25Retriever
        from app.nlp.pipeline.kb import bert_with_kb, bm25_docs, kb_entries
        from app.nlp.router import Router, RouterModels
        from app.nlp.tiers import effective_tiers

        thresholds, source = self._thresholds(loaded, models_dir)
        thresholds.provenance = {**thresholds.provenance, "file": source}
        bert = loaded.bert
        bert_error = loaded.bert_error
        if bert is not None:
            try:
                bert = bert_with_kb(bert, kb_entries(articles))
                # the next reload (KB change, another app in this process) reuses the vectors
                loaded.bert.reuse_kb_vectors(bert.kb_vectors)
            except Exception as exc:  # noqa: BLE001
                bert, bert_error = None, f"{type(exc).__name__}: {exc}"
                log.exception("BERT KB index failed; serving in degraded mode")
        tiers = effective_tiers(loaded.tiers.get("derived", {}), declared)
        return Router(
            RouterModels(
                fasttext=loaded.fasttext,
                bm25=BM25Retriever(bm25_docs(articles)),
                bert=bert,
                calibration=loaded.calibration,
                thresholds=thresholds,
                tiers=tiers,
                bert_error=bert_error,
                version=loaded.version,
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

    def _swap(self, built: _Built) -> None:
        plan = built.plan
        router = built.routers[plan.active]
        router.spare = self._spare_review(router)  # after warm-up: only live answers feed it
        canary = built.routers.get(plan.canary) if plan.canary else None
        shadow = built.routers.get(plan.shadow) if plan.shadow else None
        experiment = built.experiment
        arm_b = self._arm_b(router, experiment) if experiment is not None else None
        serving = _Serving(
            active=router,
            canary=canary,
            canary_share=plan.canary_share if canary is not None else 0.0,
            shadow=shadow,
            shadow_sample=plan.shadow_sample if shadow is not None else 0.0,
            experiment=experiment if arm_b is not None else None,
            arm_b=arm_b,
        )
        REVIEW_THRESHOLD.labels("tuned").set(router.m.thresholds.tau_review)
        self._show_threshold(router.m.thresholds.tau_review)
        # What a cached answer depends on (a KB import or a model change moves it); old
        # answers leave Redis.
        tags = set()
        for each in (router, canary, shadow, arm_b):
            if each is not None:
                each.cache_tag = cache_tag(
                    each.m.version, each.m.bm25.version, built.revisions, getattr(each, "arm", None)
                )
                tags.add(each.cache_tag)
        self._cache.purge_other_tags(tags)
        self._serving = serving  # one assignment: a request sees the old or the new plan
        self._router = router
        self.revisions = built.revisions
        self.model_version = router.m.version
        self.trained_at = built.manifests[plan.active].get("trained_at")
        self._cache.clear_local()
        self.ready = True
        self.not_ready_reason = None
        MODEL_INFO.clear()
        for tier, version in router.versions().items():
            if version:
                MODEL_INFO.labels(tier, version).set(1)
        log.info(
            "NLP engine ready: models %s%s%s, kb/model revisions %s%s",
            router.m.version,
            f", canary {canary.m.version} on {serving.canary_share:.0%}" if canary else "",
            f", shadow {shadow.m.version} on {serving.shadow_sample:.0%}" if shadow else "",
            built.revisions,
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

    def _start_watcher(self) -> None:
        """A thread of this process polling the revisions, so that an idle worker switches
        versions too (started on first use, as threads do not survive a gunicorn fork)."""
        if self._watcher_pid == os.getpid() or self.config.get("TESTING"):
            return
        self._watcher_pid = os.getpid()

        def watch() -> None:
            while not self._closed:
                time.sleep(REVISION_POLL_SECONDS)
                self._maybe_check()

        threading.Thread(target=watch, name="tierdesk-model-watch", daemon=True).start()

    def _maybe_check(self) -> None:
        self._start_watcher()
        now = time.monotonic()
        if now < self._next_check or not self._check_lock.acquire(blocking=False):
            return
        try:
            self._next_check = now + REVISION_POLL_SECONDS
            self.check_for_updates(wait=False)
            serving = self._serving
            if serving is not None and serving.canary is not None and now >= self._next_canary:
                self._next_canary = now + float(self.config.get("CANARY_CHECK_SECONDS", 60))
                threading.Thread(
                    target=self.check_canary, name="tierdesk-canary-check", daemon=True
                ).start()
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

    def check_canary(self):
        """The canary's automatic rollback rule (app/nlp/canary.py); the retire it may make
        bumps MODEL_REVISION, and every worker drops the canary at its next poll."""
        from app.db import session_scope
        from app.nlp.canary import check_canary
        from app.nlp.registry import RegistryError

        try:
            with session_scope(self._db_url()) as session:
                verdict = check_canary(session, self.config)
        except RegistryError:
            return None  # another worker retired it first
        except Exception:  # noqa: BLE001 - a failed check must not touch serving
            log.exception("canary check failed")
            return None
        if verdict is not None and verdict.rollback:
            log.warning("canary rolled back: %s", verdict.reason)
        return verdict

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
        self,
        text: str,
        conversation_id: str | None = None,
        *,
        priority: Priority = Priority.NORMAL,
        started: float | None = None,
    ) -> Decision:
        """The decision for ``text``: from the canary when ``conversation_id`` falls in its
        share (sticky per conversation), else from the active version (or an experiment's arm);
        from the answer cache, else the router, whose BERT call goes through admission control
        (``priority`` and ``started``, the request's start on ``time.monotonic()``, feed it). A
        sample of the active version's answers is offered to the shadow in the background."""
        self._maybe_check()
        serving = self._serving
        if serving is None:
            raise EngineNotReady(self.not_ready_reason or "models not loaded")
        in_canary = (
            serving.canary is not None
            and conversation_id is not None
            and conversation_bucket(conversation_id) < serving.canary_share
        )
        router, arm = serving.canary if in_canary else serving.active, None
        if serving.experiment is not None and conversation_id is not None and not in_canary:
            arm = serving.experiment.arm(conversation_id)
            router = serving.arm_b if arm == "b" else router
        decision = self._decide(router, text, priority, started)
        if arm is not None:
            decision.trace["experiment"] = {"name": serving.experiment.name, "arm": arm}
        if serving.shadow is not None and router is serving.active:
            self._offer_shadow(serving, decision, conversation_id)
        return decision

    def _offer_shadow(self, serving: _Serving, decision: Decision, conversation_id) -> None:
        from app.nlp.shadow import ShadowRunner

        if self._shadow is None:
            with self._reload_lock:
                if self._shadow is None:
                    self._shadow = ShadowRunner(
                        self._db_url(),
                        queue_size=int(self.config.get("SHADOW_QUEUE_SIZE", 64)),
                    )
        self._shadow.offer(serving.shadow, decision, serving.shadow_sample, conversation_id)

    def _decide(self, router, text: str, priority: Priority, started: float | None) -> Decision:
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

        admission = self.admission

        def admit(fast_confidence):
            return admission.ask(
                started=started, priority=priority, fast_confidence=fast_confidence, words=words
            )

        decision = router.route(text, admit=admit if admission is not None else None)
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

    def forget_cached_answers(self) -> None:
        """Drop every cached answer now, here and in Redis (an erasure)."""
        self._cache.clear_all()

    def status(self) -> dict:
        router = self._router
        return {
            "ready": self.ready,
            "not_ready_reason": self.not_ready_reason,
            "degraded": bool(router and router.m.bert is None),
            "versions": router.versions() if router else {},
            "canary": _role(self._serving, "canary"),
            "shadow": _role(self._serving, "shadow"),
            "experiment": (
                {"name": self._serving.experiment.name, "share": self._serving.experiment.share}
                if self._serving is not None and self._serving.experiment is not None
                else None
            ),
            "revisions": self.revisions,
            "trained_at": self.trained_at,
            "cache_entries": len(self._cache),
        }

    def close(self) -> None:
        """Stop the watcher and the shadow worker (reload threads are short-lived daemons)."""
        self._closed = True
        if self._shadow is not None:
            self._shadow.close()


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


def _role(serving: _Serving | None, name: str) -> dict | None:
    router = getattr(serving, name, None) if serving else None
    if router is None:
        return None
    share = serving.canary_share if name == "canary" else serving.shadow_sample
    return {"version": router.m.version, "share": share}
