"""The NLP engine held by the app: loads models and indexes, answers queries through the router.

(Interface only for now; the routing issue fills it in.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.nlp.types import Decision


class EngineNotReady(RuntimeError):
    """The models are not loaded (not trained yet, or failed to load)."""


class Engine:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.ready = False
        self.not_ready_reason: str | None = "models not loaded"

    def load(self) -> None:
        """Load models and indexes from disk and the database, then warm them."""
        self.not_ready_reason = "routing not implemented yet"

    def answer(self, text: str) -> Decision:
        raise EngineNotReady(self.not_ready_reason)
