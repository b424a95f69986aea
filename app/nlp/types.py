"""The small interface shared by the tiers and everything that consumes the router.

Every tier is a ``Tier``: it takes a query and returns a ``TierResult`` (ranked intents with
probabilities, ranked knowledge-base candidates with scores, a confidence and its own timing)
and names its model version. FastText (``app.nlp.intent``) is a plain ``Tier``; BM25
(``app.nlp.bm25``) is a ``KbRetriever`` (it can be restricted to one intent and lists its
documents); BERT (``app.nlp.bert``) is a ``BlendingTier`` (it blends another tier's intent
distribution into its own). The router composes tiers into a ``Decision``, which the chat API
stores and the review console shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol

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


class Tier(Protocol):
    """A query in, a ``TierResult`` with at most ``k`` intents and candidates out."""

    @property
    def version(self) -> str: ...

    def run(self, query: str, k: int = 5) -> TierResult: ...


class KbDocument(Protocol):
    slug: str
    title: str
    intent: str | None


class KbRetriever(Tier, Protocol):
    """A tier over the KB's articles that can be restricted to one intent's articles."""

    @property
    def docs(self) -> Sequence[KbDocument]: ...

    def run(self, query: str, k: int = 5, *, intent: str | None = None) -> TierResult: ...


class BlendingTier(Tier, Protocol):
    """A tier whose intent distribution can take another tier's in (weight ``prior_weight``);
    ``head_weight`` is its intent head's share in its article scores (0: KB matching only;
    None: its scores are similarities as they are)."""

    @property
    def head_weight(self) -> float | None: ...

    def run(
        self,
        query: str,
        k: int = 5,
        *,
        prior: list[tuple[str, float]] | None = None,
        prior_weight: float = 0.0,
    ) -> TierResult: ...
