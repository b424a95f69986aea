"""The routing rule, in one place: which route answers a query and whether a human must look.

``Router.route`` (app/nlp/router.py) applies it to one live query with Python numbers; the
tuner (app/nlp/thresholds.py) replays held-out outcomes through it with numpy arrays (one row
per grid point, one column per query). The functions use only comparisons and ``&``, so both
get the same answer; tests/test_rule.py checks the two on every held-out query of a trained
demo model.

Per query: the simple route may answer when ``simple_eligible``; its answer stands when
``keeps_simple`` (else BERT answers); the answer goes out without a human when ``answers``.
"""

from __future__ import annotations

from collections.abc import Mapping

TOLERANCE = 1e-9  # a probability this close under a threshold counts as reaching it


def tier_of(tiers: Mapping[str, str], intent: str | None) -> str:
    """The tier of FastText's top intent: ``simple`` unless the tier map says ``complex``."""
    return tiers.get(intent or "", "simple")


def simple_eligible(simple_tier, p1, margin, tau_fast: float, min_margin: float):
    """The simple route may answer: the intent's tier is ``simple`` and FastText's top-1 and
    its lead over the runner-up reach ``tau_fast`` and ``margin``."""
    return simple_tier & (p1 >= tau_fast - TOLERANCE) & (margin >= min_margin - TOLERANCE)


def keeps_simple(eligible, simple_conf, keep_below):
    """An eligible simple answer stands when its calibrated confidence reaches ``keep_below``
    (``tau_cascade``, or ``tau_verify`` with escalation on); otherwise BERT answers."""
    return eligible & (simple_conf >= keep_below - 1e-12)


def answers(conf, tau_review):
    """Answered without a human: the calibrated confidence reaches ``tau_review``."""
    return conf >= tau_review
