"""Reading a stored routing trace for the console, whatever its exact shape.

The chat API stores the router's ``Decision.trace`` (plus a few keys of its own) on the bot's
message. The console must show it even when keys are missing, renamed or of unexpected types,
so everything here is defensive: unknown shapes are skipped, never raised on.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

MAX_DEPTH = 5
MAX_ROWS = 10


@dataclass
class TierView:
    name: str
    intents: list[tuple[str, float | None]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)  # slug, title, score, intent
    details: dict[str, str] = field(default_factory=dict)  # confidence, ms, model version...


@dataclass
class TraceView:
    summary: dict[str, str]
    tiers: list[TierView]
    raw_json: str


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (str, int, bool)) or value is None:
        return str(value)
    text = json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _intent_rows(value: Any) -> list[tuple[str, float | None]]:
    rows: list[tuple[str, float | None]] = []
    if isinstance(value, dict):
        value = list(value.items())
    if not isinstance(value, list):
        return rows
    for entry in value[:MAX_ROWS]:
        if isinstance(entry, (list, tuple)) and entry:
            rows.append((str(entry[0]), _number(entry[1]) if len(entry) > 1 else None))
        elif isinstance(entry, dict):
            name = entry.get("intent") or entry.get("name") or entry.get("label")
            score = next(
                (entry[k] for k in ("p", "prob", "probability", "score") if k in entry), None
            )
            if name is not None:
                rows.append((str(name), _number(score)))
        elif isinstance(entry, str):
            rows.append((entry, None))
    return rows


def _candidate_rows(value: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if not isinstance(value, list):
        return rows
    for entry in value[:MAX_ROWS]:
        if isinstance(entry, dict) and (entry.get("slug") or entry.get("title")):
            rows.append(
                {
                    "slug": str(entry.get("slug") or ""),
                    "title": str(entry.get("title") or entry.get("slug") or ""),
                    "score": _number(entry.get("score")),
                    "intent": entry.get("intent"),
                }
            )
        elif isinstance(entry, (list, tuple)) and entry:
            rows.append(
                {
                    "slug": str(entry[0]),
                    "title": str(entry[0]),
                    "score": _number(entry[1]) if len(entry) > 1 else None,
                    "intent": None,
                }
            )
    return rows


def _tier_from(name: str, node: dict) -> TierView | None:
    intents = _intent_rows(node.get("intents"))
    candidates = _candidate_rows(node.get("candidates"))
    if not intents and not candidates:
        return None
    details = {
        key: _short(value)
        for key, value in node.items()
        if key not in ("intents", "candidates", "tier", "name")
        and isinstance(value, (str, int, float, bool))
    }
    return TierView(str(node.get("tier") or node.get("name") or name), intents, candidates, details)


def _collect(node: Any, name: str, depth: int, out: list[TierView]) -> None:
    if depth > MAX_DEPTH:
        return
    if isinstance(node, dict):
        tier = _tier_from(name, node)
        if tier is not None:
            out.append(tier)
        for key, value in node.items():
            if key in ("intents", "candidates"):
                continue
            _collect(value, str(key), depth + 1, out)
    elif isinstance(node, list):
        for index, value in enumerate(node[:20]):
            _collect(value, f"{name}[{index}]", depth + 1, out)


def read_trace(trace: Any) -> TraceView:
    """The parts of a trace the console shows: top-level facts, per-tier rankings, raw JSON."""
    if not isinstance(trace, dict):
        trace = {} if trace is None else {"value": trace}
    summary = {
        str(key): _short(value)
        for key, value in trace.items()
        if isinstance(value, (str, int, float, bool)) or value is None
    }
    tiers: list[TierView] = []
    _collect(trace, "trace", 0, tiers)
    try:
        raw = json.dumps(trace, indent=2, sort_keys=True, default=str)
    except (TypeError, ValueError):
        raw = repr(trace)
    return TraceView(summary, tiers, raw)
