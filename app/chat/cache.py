"""A small per-process cache of the engine's decisions for repeated identical questions.

Keyed by the normalised question (``app.nlp.normalize.normalize``, the canonical form the
classifier sees, so "Where is my card?" and "where is my card" share an entry). Each entry is
valid only for the engine version it came from: when a training run or a KB import changes the
engine's ``version``, the cache empties itself. Engines without a ``version`` are not cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from app.metrics import CACHE_EVENTS
from app.nlp.types import Decision

try:
    from app.nlp.normalize import normalize as _normalize
except ImportError:  # pragma: no cover - the routing area always ships it
    def _normalize(text: str) -> str:
        return " ".join(text.lower().split())


class AnswerCache:
    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, Decision] = OrderedDict()
        self._version: object = None
        self._lock = threading.Lock()

    @staticmethod
    def _engine_version(engine) -> object:
        return getattr(engine, "version", None)

    def _sync_version(self, version: object) -> None:
        if version != self._version:
            self._entries.clear()
            self._version = version

    def get(self, engine, text: str) -> Decision | None:
        version = self._engine_version(engine)
        if version is None or self.size <= 0:
            return None
        key = _normalize(text)
        with self._lock:
            self._sync_version(version)
            decision = self._entries.get(key)
            if decision is not None:
                self._entries.move_to_end(key)
        CACHE_EVENTS.labels("hit" if decision is not None else "miss").inc()
        return decision

    def put(self, engine, text: str, decision: Decision) -> None:
        version = self._engine_version(engine)
        if version is None or self.size <= 0:
            return
        key = _normalize(text)
        with self._lock:
            self._sync_version(version)
            self._entries[key] = decision
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
