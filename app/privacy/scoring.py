"""Precision and recall of the PII detectors on a labelled set of messages.

A labelled message is ``{"text", "pii": [[kind, original], ...]}`` (tests/data/pii_cases.jsonl).
A detection counts as right when its kind and its characters (ignoring case, spaces and
dashes) equal one of the message's labelled spans; every other detection is a false positive,
every labelled span not detected a false negative.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from app.privacy.pii import DETECTORS, Masker


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch not in " -")


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def support(self) -> int:
        return self.tp + self.fn


def load_cases(path: str | Path) -> list[dict]:
    with open(path, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def score(masker: Masker, cases: Iterable[dict]) -> dict[str, Score]:
    """Per-detector counts over ``cases``."""
    scores = {name: Score() for name in DETECTORS}
    for case in cases:
        expected = [(kind, _norm(original)) for kind, original in case["pii"]]
        for kind, original in masker.find(case["text"]):
            entry = scores.setdefault(kind, Score())
            if (kind, _norm(original)) in expected:
                expected.remove((kind, _norm(original)))
                entry.tp += 1
            else:
                entry.fp += 1
        for kind, _original in expected:
            scores.setdefault(kind, Score()).fn += 1
    return scores
