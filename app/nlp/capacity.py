"""Spare review capacity (opt-in): when fewer answers escalate than a ceiling on reviews
(``budget`` < 1) allows, the least confident of the answers that would go out unreviewed go
to a reviewer instead.

``tau_review`` is tuned to spend the fewest reviews that reach the answered target; a team that
has paid for more review time than that may want it used on the least sure answers. Live
questions can also be easier than held-out training questions, and then a fixed
``tau_review`` leaves more of that time unused. ``SpareReview`` watches the calibrated
confidences of live answers and:

- keeps a window of the last ``window`` confidences and, every ``refresh`` answers, takes its
  ``budget`` quantile: the threshold under which the budget's share of traffic lies;
- lets that threshold replace ``tau_review`` only when it is higher (it never answers anything
  the tuned threshold would escalate) and only while review capacity is left: each answer adds
  ``budget`` of a review to an allowance, each escalation (for any reason) takes one, the
  allowance never exceeds ``burst`` reviews and never owes more than ``burst``.

Spare reviews only spend savings, so they never push escalations over the budget; they go to
the least confident answers; with too little traffic seen (``min_seen``) nothing changes.
It needs no labels: only the router's own confidences. One instance per router and process.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

WINDOW = 2000
MIN_SEEN = 200
REFRESH = 25
BURST = 20.0


class SpareReview:
    def __init__(
        self,
        budget: float,
        *,
        window: int = WINDOW,
        min_seen: int = MIN_SEEN,
        refresh: int = REFRESH,
        burst: float = BURST,
    ) -> None:
        if not 0.0 <= budget <= 1.0:
            raise ValueError(f"budget must be between 0 and 1, got {budget}")
        if min_seen < 1 or refresh < 1 or window < min_seen or burst < 1:
            raise ValueError("need window >= min_seen >= 1, refresh >= 1 and burst >= 1")
        self.budget = float(budget)
        self.min_seen = min_seen
        self.refresh = refresh
        self.burst = float(burst)
        self._confidences: deque[float] = deque(maxlen=window)
        self._allowance = 0.0
        self._since_refresh = 0
        self._quantile: float | None = None
        self._lock = threading.Lock()
        self.seen = 0
        self.spare_escalations = 0

    def threshold(self, tau_review: float) -> float:
        """The review threshold for the next answer: ``tau_review``, or higher while spare
        capacity is left."""
        q = self._quantile
        if q is None or q <= tau_review or self._allowance < 1.0:
            return tau_review
        return q

    def record(self, confidence: float, escalated: bool, spare: bool = False) -> None:
        """One live answer: its calibrated confidence, whether it escalated, and whether only
        the spare capacity made it escalate."""
        with self._lock:
            self.seen += 1
            self._confidences.append(float(confidence))
            allowance = self._allowance + self.budget - (1.0 if escalated else 0.0)
            self._allowance = min(self.burst, max(-self.burst, allowance))
            self.spare_escalations += int(spare)
            self._since_refresh += 1
            if self.seen >= self.min_seen and self._since_refresh >= self.refresh:
                self._since_refresh = 0
                self._quantile = float(np.quantile(self._confidences, self.budget))

    def snapshot(self) -> dict:
        """For traces, metrics and tests."""
        return {
            "seen": self.seen,
            "quantile": self._quantile,
            "allowance": round(self._allowance, 4),
            "spare_escalations": self.spare_escalations,
        }
