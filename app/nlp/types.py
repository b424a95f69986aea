"""The small interface shared by the tiers and everything that consumes the router.

Every tier takes a query and returns a ``TierResult``: ranked intents with probabilities,
ranked knowledge-base candidates with scores, a confidence and its own timing. The router
composes tiers into a ``Decision``, which the chat API stores and the review console shows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

from app.vocab import ROUTER_REASONS

Route = Literal["simple", "complex"]

# Why a decision was escalated to a human (None when it was answered): app/vocab.py.
ESCALATION_REASONS = ROUTER_REASONS


@dataclass
class Candidate:
    """A knowledge-base article proposed as the answer."""

    slug: str
    title: str
    score: float
    intent: str | None = None


@dataclass
class TierResult:
    """What one tier said about a query."""

    tier: str  # "fasttext" | "bm25" | "bert"
    intents: list[tuple[str, float]] = field(default_factory=list)  # best first, probabilities
    candidates: list[Candidate] = field(default_factory=list)  # best first
    confidence: float = 0.0
    ms: float = 0.0
    model_version: str | None = None
    # Tier-specific numbers the calibrators may use (e.g. how BM25 restricted to an intent
    # compares with BM25 over the whole KB); names are documented by the tier.
    signals: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Decision:
    """The router's answer to one query, with everything needed to explain it."""

    query: str
    route: Route
    intent: str | None
    article: Candidate | None  # the answer, None when nothing fits
    confidence: float  # calibrated probability that the answer is right
    escalate: bool
    escalation_reason: str | None
    suggestions: list[Candidate] = field(default_factory=list)  # other likely articles
    trace: dict = field(default_factory=dict)  # stages, scores, timings, model versions

    def to_dict(self) -> dict:
        return asdict(self)
