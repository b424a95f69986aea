"""Experiments: two router configurations over the same models, compared on live traffic.

Arm ``a`` is the active version as tuned; arm ``b`` is the same models with some thresholds
(``tau_review``, ``tau_fast``, ...) and intent tiers overridden. A conversation's arm is fixed
by a hash of the experiment's name and its id, so it is sticky and independent of the canary's
buckets; ``share`` of the conversations get ``b``. Conversations in the canary are not in the
experiment. One experiment runs at a time; it lives in ``system_state`` (key ``experiment``)
and starting or stopping it bumps MODEL_REVISION, so every worker follows within seconds.

Every bot turn of an experiment carries ``trace.experiment = {"name", "arm"}``; the per-arm
metrics are the canary's (``app/nlp/canary.py``: escalation, thumbs-down, drafts changed,
latency) over those turns, and ``significance`` gives each rate's difference with a two-sided
p-value of the two-proportion z-test (pooled).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from statistics import NormalDist

from sqlalchemy.orm import Session

from app.models import SystemState
from app.nlp.thresholds import DEFAULTS, Thresholds, ThresholdsError
from app.state import MODEL_REVISION, bump_revision

EXPERIMENT_KEY = "experiment"
HISTORY_KEY = "experiment_history"
TIERS = ("simple", "complex")
OVERRIDABLE = ("tau_fast", "margin", "tau_review", "tau_cascade", "tau_verify", "fasttext_weight")


class ExperimentError(ValueError):
    """An experiment that cannot start or stop; the message says why."""


@dataclass(frozen=True)
class Experiment:
    name: str
    share: float  # of conversations in arm b
    thresholds: dict = field(default_factory=dict)  # overrides of arm b
    tiers: dict = field(default_factory=dict)  # intent -> simple | complex, arm b
    started_at: str = ""
    stopped_at: str | None = None

    def arm(self, conversation_id: str) -> str:
        digest = hashlib.sha256(f"{self.name}\0{conversation_id}".encode()).hexdigest()
        return "b" if int(digest[:8], 16) / 2**32 < self.share else "a"

    def thresholds_b(self, base: Thresholds) -> Thresholds:
        merged = {**base.to_dict(), **self.thresholds}
        return Thresholds.from_dict(merged, f"experiment {self.name}")

    def tiers_b(self, base: dict) -> dict:
        return {**base, **self.tiers}


def parse_overrides(pairs: list[str]) -> dict:
    """``["tau_review=0.8", ...]`` as numbers, checked against what thresholds accept."""
    out: dict = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or name not in OVERRIDABLE:
            raise ExperimentError(
                f"{pair!r}: expected NAME=VALUE with NAME one of {', '.join(OVERRIDABLE)}"
            )
        try:
            out[name] = float(value)
        except ValueError:
            raise ExperimentError(f"{pair!r}: {value!r} is not a number") from None
    try:
        Thresholds.from_dict({**DEFAULTS.to_dict(), **out}, "experiment")
    except ThresholdsError as exc:
        raise ExperimentError(str(exc)) from None
    return out


def parse_tiers(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        intent, sep, tier = pair.partition("=")
        if not sep or tier not in TIERS or not intent.strip():
            raise ExperimentError(f"{pair!r}: expected INTENT=simple or INTENT=complex")
        out[intent.strip()] = tier
    return out


def current(session: Session) -> Experiment | None:
    row = session.get(SystemState, EXPERIMENT_KEY)
    if row is None or not row.value:
        return None
    return Experiment(**json.loads(row.value))


def history(session: Session) -> list[Experiment]:
    row = session.get(SystemState, HISTORY_KEY)
    return [Experiment(**e) for e in json.loads(row.value)] if row is not None else []


def start(
    session: Session, name: str, share: float, thresholds: dict, tiers: dict, now: str
) -> Experiment:
    if current(session) is not None:
        raise ExperimentError(f"experiment {current(session).name!r} is running; stop it first")
    if not name.strip():
        raise ExperimentError("an experiment needs a name")
    if any(e.name == name for e in history(session)):
        raise ExperimentError(f"an experiment named {name!r} ran before; pick another name")
    if not 0.0 < share < 1.0:
        raise ExperimentError(f"the share of arm b must be between 0 and 1, got {share}")
    if not thresholds and not tiers:
        raise ExperimentError("arm b needs at least one threshold or tier different from arm a")
    experiment = Experiment(name, share, thresholds, tiers, now)
    _put(session, EXPERIMENT_KEY, json.dumps(asdict(experiment)))
    bump_revision(session, MODEL_REVISION)
    return experiment


def stop(session: Session, now: str) -> Experiment:
    experiment = current(session)
    if experiment is None:
        raise ExperimentError("no experiment is running")
    done = Experiment(**{**asdict(experiment), "stopped_at": now})
    past = [asdict(e) for e in history(session)] + [asdict(done)]
    _put(session, HISTORY_KEY, json.dumps(past))
    _put(session, EXPERIMENT_KEY, "")
    bump_revision(session, MODEL_REVISION)
    return done


def _put(session: Session, key: str, value: str) -> None:
    row = session.get(SystemState, key, with_for_update=True)
    if row is None:
        session.add(SystemState(key=key, value=value))
    else:
        row.value = value
    session.flush()


def two_proportion(x_a: int, n_a: int, x_b: int, n_b: int) -> dict:
    """Rates, difference b - a and the two-sided p-value of the pooled z-test."""
    if not n_a or not n_b:
        return {"a": None, "b": None, "diff": None, "p_value": None}
    p_a, p_b = x_a / n_a, x_b / n_b
    pooled = (x_a + x_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    p_value = 1.0 if se == 0 else 2 * (1 - NormalDist().cdf(abs(p_b - p_a) / se))
    return {"a": p_a, "b": p_b, "diff": p_b - p_a, "p_value": p_value}


def significance(a, b) -> dict:
    """Per rate (escalation, thumbs-down, drafts changed): the arms' rates and p-value."""
    return {
        "escalation": two_proportion(a.escalated, a.answers, b.escalated, b.answers),
        "thumbs_down": two_proportion(a.thumbs_down, a.answered, b.thumbs_down, b.answered),
        "drafts_changed": two_proportion(
            a.drafts_changed, a.drafts_reviewed, b.drafts_changed, b.drafts_reviewed
        ),
    }
