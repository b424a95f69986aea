"""Routing thresholds as data: a small JSON file written by ``tierdesk tune`` / ``tierdesk train``.

- ``tau_fast``: minimum FastText top-1 probability for the simple (BM25) route.
- ``margin``: minimum FastText top-1 minus top-2 probability for the simple route.
- ``tau_review``: minimum calibrated confidence to answer without a human.
- ``tau_cascade``: a simple-route answer whose calibrated confidence is under it goes to BERT
  before anything else (absent: ``tau_review``, as files written before it existed).
- ``tau_verify``: with escalation on, a simple-route answer under it is checked by BERT before
  it may go out unreviewed (absent: ``tau_cascade``); at least ``tau_cascade``.
- ``budget``: the ceiling on escalations (share of in-scope queries) the tuner respected; the
  tuner spends the fewest reviews that reach ``answered_target`` and uses the whole ceiling
  only when the target is out of its reach.
- ``kl_disagree``: KL divergence (FastText || BERT) above which the tiers are said to disagree
  (used only to name the escalation reason).
- ``oos_similarity``: BERT cosine similarity to the nearest KB text under which a query that
  escalates is called out of scope (again only the reason's name).
- ``fasttext_weight``: on the BERT route, weight of FastText's intent distribution in the
  log-linear blend with BERT's (0 = BERT alone); chosen on held-out data by ``tierdesk train``.

Defaults live in ``DEFAULTS``; the server reads the file at start-up and on every model reload.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from app.files import write_json_atomic
from app.nlp.rule import answers, keeps_simple, simple_eligible, tier_of

THRESHOLDS_FILE = "thresholds.json"


class ThresholdsError(ValueError):
    """A thresholds file that cannot be used; the message names the file and the problem."""


@dataclass
class Thresholds:
    tau_fast: float = 0.7
    margin: float = 0.3
    tau_review: float = 0.6
    # Ceiling on the share of in-scope queries escalated (1.0: none; the answered target
    # decides how many reviews are spent).
    budget: float = 1.0
    kl_disagree: float = 2.0
    oos_similarity: float = 0.5
    fasttext_weight: float = 0.0
    tau_cascade: float | None = None
    tau_verify: float | None = None
    # How the values were chosen (objective, validation figures); free-form, for humans.
    provenance: dict = field(default_factory=dict)

    def validate(self, source: str = "thresholds") -> Thresholds:
        names = ("tau_fast", "margin", "tau_review", "budget", "oos_similarity", "fasttext_weight")
        for name in (*names, "tau_cascade", "tau_verify"):
            value = getattr(self, name)
            if name in ("tau_cascade", "tau_verify") and value is None:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
                raise ThresholdsError(f"{source}: {name} must be a number, got {value!r}")
            if not 0.0 <= value <= 1.0:
                raise ThresholdsError(f"{source}: {name} must be between 0 and 1, got {value}")
        if not isinstance(self.kl_disagree, int | float) or self.kl_disagree < 0:
            raise ThresholdsError(f"{source}: kl_disagree must be a number >= 0")
        if not isinstance(self.provenance, dict):
            raise ThresholdsError(f"{source}: provenance must be an object")
        return self

    @property
    def cascade_below(self) -> float:
        """The simple route's confidence under which BERT takes over."""
        return self.tau_review if self.tau_cascade is None else self.tau_cascade

    @property
    def verify_below(self) -> float:
        """With escalation on: the simple route's confidence under which BERT checks the answer
        (never below ``cascade_below``)."""
        verify = self.cascade_below if self.tau_verify is None else self.tau_verify
        return max(verify, self.cascade_below)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object, source: str = "thresholds") -> Thresholds:
        if not isinstance(data, dict):
            raise ThresholdsError(f"{source}: expected a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ThresholdsError(
                f"{source}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**data).validate(source)

    def save(self, path: str | Path) -> None:
        """Write atomically (temp file + rename), so a reader never sees half a file."""
        self.validate(str(path))
        write_json_atomic(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> Thresholds:
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ThresholdsError(f"{path}: no such file") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ThresholdsError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
        return cls.from_dict(data, str(path))


DEFAULTS = Thresholds()


# -- tuning -------------------------------------------------------------------------------

GRID_STEP = 0.05
TAU_FAST_GRID = tuple(round(x, 2) for x in np.arange(0.30, 1.0001, GRID_STEP))
MARGIN_GRID = tuple(round(x, 2) for x in np.arange(0.0, 0.9501, GRID_STEP))
# tau_review in steps of 0.001: near the top of the calibrated confidences, where it lands,
# a step of 0.01 moved held-out coverage by up to 1.5 points on BANKING77, so much of the
# escalation budget went unspent.
REVIEW_STEP = 0.001
TAU_REVIEW_GRID = tuple(round(x, 3) for x in np.arange(0.05, 0.9991, REVIEW_STEP))
TAU_CASCADE_GRID = tuple(round(x, 2) for x in np.arange(0.0, 0.9501, GRID_STEP))
# 1.0 verifies every simple answer (calibrated confidences stay under 1).
TAU_VERIFY_GRID = tuple(round(x, 2) for x in np.arange(0.0, 1.0001, 0.01))
# What one BERT call costs, in correct answers: the router sends a query to BERT when that
# fixes at least one answer in 1 / BERT_CALL_COST calls. 0.02 = one fix per 50 calls, i.e. a
# BERT call (over 10x the fast route's time) is worth 2% of a correct answer. A product
# setting, not fitted to data: `tierdesk tune --bert-cost` changes it.
BERT_CALL_COST = 0.02
# Capacity: the complex tier is sized for BERT on at most this share of queries, cascade and
# (with escalation on) checks of fast answers together. At ~4 ms of CPU per BERT call (int8,
# traced, one thread) 40% of the traffic adds ~1.6 ms per request on average, under half of
# what a worker already spends per request (3.3-4.1 ms, bench_load.py). On BANKING77 the
# cascade alone stays far under it (12-15%: BERT_CALL_COST decides); on a general assistant's
# intents the fast tier answers 60% of queries as well as BERT does (docs/benchmarks.md).
# `tierdesk tune --bert-budget` changes it; 1.0 lifts the cap.
BERT_BUDGET = 0.4
# Accuracy (routing), or coverage at the answered target (checks of fast answers), the BERT
# budget may cost before it is dropped (the figures say so).
CAPACITY_SLACK = 0.01
# Out-of-scope questions must escalate: the operating point must escalate at least this share
# of the held-out out-of-scope queries (when any point can).
OOS_RECALL_MIN = 0.95
# With escalation on, the share of unreviewed answers that must be right: tau_review and the
# BERT checks of fast answers (tau_verify) spend the fewest escalations whose held-out answered
# accuracy reaches it with a standard error to spare (``review_for_target``). A product
# setting (what the support team promises), not fitted to data: `tierdesk tune
# --answered-target` changes it.
ANSWERED_TARGET = 0.985
# Grid points whose utility is within this of the best are equivalent (about one validation
# query in a thousand); among them the one that answers most accurately wins.
UTILITY_TOLERANCE = 0.001


@dataclass
class ValidationOutcomes:
    """Per held-out query: what each route would answer and how sure it would be.

    ``simple_conf``/``bert_conf`` must be calibrated on data other than the query itself
    (cross-fitted), or the search would trust an over-fitted calibrator.
    """

    ft_top: list[str]
    ft_p1: np.ndarray
    ft_margin: np.ndarray
    simple_correct: np.ndarray
    simple_conf: np.ndarray
    bert_correct: np.ndarray
    bert_conf: np.ndarray
    # The same for out-of-scope queries (never correct); empty when there are none.
    oos: OutOfScopeOutcomes | None = None


@dataclass
class OutOfScopeOutcomes:
    """Per held-out out-of-scope query: FastText's view and each route's calibrated confidence."""

    ft_top: list[str]
    ft_p1: np.ndarray
    ft_margin: np.ndarray
    simple_conf: np.ndarray
    bert_conf: np.ndarray
    # per query: one of the data's own out-of-scope rows (``TrainingData.oos_labelled``)
    # rather than one of our development negatives or generated nonsense; None: none are
    labelled: np.ndarray | None = None


def escalated_share(
    oos_conf: np.ndarray,
    taus: np.ndarray,
    labelled: np.ndarray | None = None,
    *,
    spare_error: bool = False,
) -> np.ndarray:
    """Share of the out-of-scope queries escalated (calibrated confidence under t), per row of
    ``oos_conf`` (routings x queries) and each of that row's thresholds (``taus``, rows x k).

    With ``labelled`` (per query: one of the data's own out-of-scope rows), the lower of the
    share among those and among the others. The data's own rows are its owner's sample of
    what the bot is asked out of scope, near misses included; our development negatives and
    generated nonsense are easier, and must not outnumber them in one average.
    ``spare_error``: the data's own rows' share minus one standard error, as the answered
    target is held. They are a sample of the user's out-of-scope traffic, often a small one
    (40 rows: 95% is 2 answered), and a point that only just escalates enough of them is as
    likely to escalate too few new ones. Our development negatives are the same fixed guess
    for every data set, not a sample of anyone's traffic: their share is held as measured.
    """
    conf = np.atleast_2d(np.asarray(oos_conf, dtype=float))
    taus = np.asarray(taus, dtype=float)
    mask = np.zeros(conf.shape[1], dtype=bool) if labelled is None else np.asarray(labelled, bool)
    share = np.ones(taus.shape)
    for group, sampled in ((mask, True), (~mask, False)):
        if not group.any():
            continue
        ranked = np.sort(conf[:, group], axis=1)
        below = np.stack(
            [np.searchsorted(ranked[r], taus[r] - 1e-12, side="left") for r in range(len(conf))]
        )
        part = below / group.sum()
        if spare_error and sampled:
            part = part - np.sqrt(part * (1.0 - part) / group.sum())
        share = np.minimum(share, part)
    return share


def oos_escalation(
    oos_conf: np.ndarray | None, tau_review: np.ndarray, labelled: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``oos_conf`` at its ``tau_review``: the share of out-of-scope queries
    escalated as the constraint holds it (the data's own rows less a standard error) and as
    measured; all ones when there are none."""
    if oos_conf is None:
        return np.ones(len(tau_review)), np.ones(len(tau_review))
    held, measured = (
        escalated_share(oos_conf, tau_review[:, None], labelled, spare_error=spare)[:, 0]
        for spare in (True, False)
    )
    return held, measured


def tune_thresholds(
    outcomes: ValidationOutcomes,
    tier_maps: dict[float, dict[str, str]],
    *,
    budget: float = DEFAULTS.budget,
    bert_cost: float = BERT_CALL_COST,
    bert_budget: float = BERT_BUDGET,
    answered_target: float = ANSWERED_TARGET,
) -> tuple[Thresholds, float, dict]:
    """Grid search of (tier rule, tau_fast, margin, tau_cascade, tau_review) on held-out outcomes,
    then of ``tau_verify`` (``_choose_verify``).

    The first four decide the route of every query; ``tau_review`` then spends the fewest
    escalations that keep the promise (``review_for_target``: held-out answered accuracy minus
    one standard error >= ``answered_target``, out-of-scope escalated >= OOS_RECALL_MIN); the
    budget is a ceiling, filled only when the target is out of its reach. Objective, exactly:
      1. feasible: escalation <= ``budget`` of held-out (in-scope) queries, share of held-out
         out-of-scope queries escalated >= OOS_RECALL_MIN (the best reachable when none can;
         of the data's own out-of-scope rows, minus one standard error, and of our other
         negatives each: ``escalated_share``),
         and share that runs BERT <= ``bert_budget`` (dropped when no point fits it, e.g. when
         the intents declared ``complex`` alone take more, or when holding it costs more than
         CAPACITY_SLACK of accuracy; the figures say so);
      2. utility = escalation-off accuracy - ``bert_cost`` * share of queries that run BERT
         (the highest accuracy, paying for every BERT call); points within
         UTILITY_TOLERANCE of the best utility are equivalent;
      3. among those, the highest answered accuracy; ties: fewer BERT calls, then fewer
         escalations.

    ``tier_maps`` maps each candidate ``f1_min`` to its tier map. Returns the thresholds, the
    chosen ``f1_min`` and the validation figures at that point.
    """
    for name, value in (
        ("bert_cost", bert_cost),
        ("bert_budget", bert_budget),
        ("answered_target", answered_target),
    ):
        if not 0.0 <= value <= 1.0:
            raise ThresholdsError(f"{name} must be between 0 and 1, got {value}")
    ok_s = np.asarray(outcomes.simple_correct, dtype=bool)
    ok_b = np.asarray(outcomes.bert_correct, dtype=bool)
    conf_s = np.asarray(outcomes.simple_conf, dtype=float)
    conf_b = np.asarray(outcomes.bert_conf, dtype=float)
    p1 = np.asarray(outcomes.ft_p1, dtype=float)
    margin = np.asarray(outcomes.ft_margin, dtype=float)
    n = len(p1)
    if n == 0:
        raise ThresholdsError("no validation queries to tune on")
    cascade = np.asarray(TAU_CASCADE_GRID)[:, None]
    review_grid = np.asarray(TAU_REVIEW_GRID)
    allowed_escalations = int(math.floor(budget * n + 1e-9))
    oos = outcomes.oos
    rows = []
    for f1_min, tiers in tier_maps.items():
        simple_tier = _simple_tiers(tiers, outcomes.ft_top)
        oos_tier = _simple_tiers(tiers, oos.ft_top) if oos else np.array([], dtype=bool)
        for tau_fast in TAU_FAST_GRID:
            for m in MARGIN_GRID:
                eligible = simple_eligible(simple_tier, p1, margin, tau_fast, m)
                # one row per tau_cascade: who stays on the simple route, and how sure it is
                simple = keeps_simple(eligible[None, :], conf_s[None, :], cascade)
                correct = np.where(simple, ok_s[None, :], ok_b[None, :])
                conf = np.where(simple, conf_s[None, :], conf_b[None, :])
                oos_conf = _oos_conf(oos, oos_tier, tau_fast, m, cascade[:, 0])
                tau_review, _ = review_for_target(
                    conf,
                    correct,
                    oos_conf,
                    allowed_escalations,
                    answered_target,
                    review_grid,
                    oos_labelled=oos.labelled if oos else None,
                )
                answered = answers(conf, tau_review[:, None])
                n_answered = answered.sum(axis=1)
                accuracy = correct.mean(axis=1)
                answered_acc = (correct & answered).sum(axis=1) / np.maximum(n_answered, 1)
                escalation = 1.0 - n_answered / n
                bert_share = 1.0 - simple.mean(axis=1)
                oos_held, oos_recall = oos_escalation(
                    oos_conf, tau_review, oos.labelled if oos else None
                )
                for i, tc in enumerate(TAU_CASCADE_GRID):
                    rows.append(
                        (
                            f1_min,
                            tau_fast,
                            m,
                            tc,
                            tau_review[i],
                            accuracy[i],
                            answered_acc[i],
                            escalation[i],
                            bert_share[i],
                            oos_held[i],
                            oos_recall[i],
                        )
                    )
    table = np.array([r[5:-1] for r in rows])
    accuracy_col, answered_col, escalation_col, share_col, oos_col = table.T
    feasible = escalation_col <= budget + 1e-9
    if not feasible.any():  # the budget is below any reachable escalation rate: least escalation
        feasible = escalation_col <= escalation_col.min() + 1e-9
    feasible &= oos_col >= min(OOS_RECALL_MIN, oos_col[feasible].max()) - 1e-9
    within_capacity = feasible & (share_col <= bert_budget + 1e-9)
    utility = accuracy_col - bert_cost * share_col
    # The BERT budget holds unless it costs more than CAPACITY_SLACK of accuracy: a capacity
    # plan is no reason to send answers that BERT would get right through a fast tier that
    # gets them wrong (a plain FAQ, whose intent tier knows one title per article).
    capped = bool(within_capacity.any()) and (
        utility[within_capacity].max() >= utility[feasible].max() - CAPACITY_SLACK
    )
    if capped:  # else complex tiers alone exceed the BERT budget, or it costs too much
        feasible = within_capacity
    best_utility = utility[feasible].max()
    near_best = feasible & (utility >= best_utility - UTILITY_TOLERANCE)
    order = np.lexsort((escalation_col, share_col, -answered_col))
    chosen = next(i for i in order if near_best[i])
    f1_min, tau_fast, m, tc, tr, accuracy, answered_acc, escalation, bert_share, _, oos_recall = (
        rows[chosen]
    )
    figures = {
        "val_accuracy": round(float(accuracy), 4),
        "val_answered_accuracy": round(float(answered_acc), 4),
        "val_coverage": round(1.0 - float(escalation), 4),
        "val_bert_share": round(float(bert_share), 4),
        "val_oos_escalation_recall": round(float(oos_recall), 4) if oos else None,
        "best_grid_accuracy": round(float(accuracy_col[feasible].max()), 4),
        "bert_budget_held": bool(capped),
        "n_val": n,
    }
    objective = (
        f"max accuracy - {bert_cost} x BERT share (within {UTILITY_TOLERANCE}), then max "
        f"answered accuracy, with escalation <= {budget}, out-of-scope escalation >= "
        f"{OOS_RECALL_MIN} and BERT share <= {bert_budget}; tau_review the lowest value whose "
        f"answered accuracy minus one standard error reaches {answered_target} with "
        f"out-of-scope escalation >= {OOS_RECALL_MIN} (the highest within the escalation "
        f"ceiling when none does); out-of-scope escalation held for the data's own "
        f"out-of-scope rows (minus one standard error) and for the other negatives each; grid "
        f"step {GRID_STEP} (tau_review {REVIEW_STEP})"
    )
    simple_tier = _simple_tiers(tier_maps[f1_min], outcomes.ft_top)
    eligible = simple_eligible(simple_tier, p1, margin, tau_fast, m)
    oos_eligible = None
    if oos is not None and len(oos.ft_p1):
        oos_eligible = simple_eligible(
            _simple_tiers(tier_maps[f1_min], oos.ft_top), oos.ft_p1, oos.ft_margin, tau_fast, m
        )
    tv, tr, review_figures = _choose_verify(
        outcomes,
        eligible,
        oos_eligible,
        float(tc),
        allowed_escalations,
        budget=budget,
        bert_cost=bert_cost,
        bert_budget=bert_budget,
        answered_target=answered_target,
    )
    figures.update(review_figures)
    objective += (
        f"; with escalation on, tau_verify the lowest grid value (step 0.01) whose answered "
        f"accuracy minus one standard error reaches {answered_target} within the same BERT "
        f"budget (else the most checks that budget allows, unless they answer worse than none; "
        f"else the highest answered accuracy - {bert_cost} x BERT share), each with its own "
        f"tau_review chosen as above"
    )
    thresholds = Thresholds(
        tau_fast=float(tau_fast),
        margin=float(m),
        tau_review=float(tr),
        tau_cascade=float(tc),
        tau_verify=float(tv),
        budget=budget,
        provenance={"objective": objective, "f1_min": f1_min, **figures},
    )
    return thresholds, float(f1_min), figures


@dataclass(frozen=True)
class Replayed:
    """Per held-out query, what the router with ``thresholds`` does (``replay``)."""

    simple: np.ndarray  # the simple route's answer stands
    correct: np.ndarray  # the answer given is right
    conf: np.ndarray  # its calibrated confidence
    answered: np.ndarray  # it goes out without a human (with escalation on)

    def figures(self) -> dict[str, float]:
        """Accuracy, answered accuracy, coverage and BERT share, as the tuner reports them."""
        n_answered = int(self.answered.sum())
        return {
            "accuracy": round(float(self.correct.mean()), 4),
            "answered_accuracy": round(
                float((self.correct & self.answered).sum() / max(n_answered, 1)), 4
            ),
            "coverage": round(n_answered / max(len(self.conf), 1), 4),
            "bert_share": round(1.0 - float(self.simple.mean()), 4),
        }


def replay(
    outcomes: ValidationOutcomes,
    tiers: dict[str, str],
    thresholds: Thresholds,
    *,
    escalation: bool = True,
) -> Replayed:
    """The router's rule (app/nlp/rule.py) at one operating point, on held-out outcomes: the
    decision ``Router.route`` takes for each query, given the same tier results."""
    simple_tier = _simple_tiers(tiers, outcomes.ft_top)
    eligible = simple_eligible(
        simple_tier,
        np.asarray(outcomes.ft_p1),
        np.asarray(outcomes.ft_margin),
        thresholds.tau_fast,
        thresholds.margin,
    )
    keep_below = thresholds.verify_below if escalation else thresholds.cascade_below
    conf_s = np.asarray(outcomes.simple_conf, dtype=float)
    simple = keeps_simple(eligible, conf_s, keep_below)
    correct = np.where(simple, outcomes.simple_correct, outcomes.bert_correct).astype(bool)
    conf = np.where(simple, conf_s, np.asarray(outcomes.bert_conf, dtype=float))
    return Replayed(simple, correct, conf, answers(conf, thresholds.tau_review))


def replay_out_of_scope(
    outcomes: ValidationOutcomes, tiers: dict[str, str], thresholds: Thresholds
) -> np.ndarray | None:
    """The calibrated confidence of every held-out out-of-scope query at one operating point,
    with escalation on (None when there are none)."""
    oos = outcomes.oos
    if oos is None or not len(oos.ft_p1):
        return None
    conf = _oos_conf(
        oos,
        _simple_tiers(tiers, oos.ft_top),
        thresholds.tau_fast,
        thresholds.margin,
        np.asarray([thresholds.verify_below]),
    )
    return conf[0]


def _choose_verify(
    outcomes: ValidationOutcomes,
    eligible: np.ndarray,
    oos_eligible: np.ndarray | None,
    tau_cascade: float,
    allowed_escalations: int,
    *,
    budget: float,
    bert_cost: float,
    bert_budget: float,
    answered_target: float,
) -> tuple[float, float, dict]:
    """``tau_verify`` and ``tau_review`` for the router with escalation on.

    A simple answer under ``tau_verify`` gets a BERT look (whose calibrated confidence, which
    also weighs FastText's view, then decides), so fewer confident fast-tier mistakes go out
    unreviewed. Each candidate gets its own ``tau_review`` (``review_for_target``); it must
    keep the out-of-scope share escalated and BERT's share within ``bert_budget`` (which gives
    way when holding it costs more than CAPACITY_SLACK of coverage at the target). Among them:

    1. of those that reach ``answered_target`` with one standard error to spare (a point that
       only just reaches it on held-out data is as likely to miss as to hit on new queries),
       the fewest escalations, then the fewest BERT checks;
    2. else the highest answered accuracy - ``bert_cost`` x BERT share.

    Returns (tau_verify, tau_review, figures).
    """
    ok_s = np.asarray(outcomes.simple_correct, dtype=bool)
    ok_b = np.asarray(outcomes.bert_correct, dtype=bool)
    conf_s = np.asarray(outcomes.simple_conf, dtype=float)
    conf_b = np.asarray(outcomes.bert_conf, dtype=float)
    grid = np.asarray([v for v in TAU_VERIFY_GRID if v >= tau_cascade - 1e-9] or [tau_cascade])
    simple = keeps_simple(eligible[None, :], conf_s[None, :], grid[:, None])
    correct = np.where(simple, ok_s[None, :], ok_b[None, :])
    conf = np.where(simple, conf_s[None, :], conf_b[None, :])
    oos = outcomes.oos
    oos_conf = None
    if oos_eligible is not None:
        oos_simple = keeps_simple(oos_eligible[None, :], oos.simple_conf[None, :], grid[:, None])
        oos_conf = np.where(oos_simple, oos.simple_conf[None, :], oos.bert_conf[None, :])
    tau_review, reached = review_for_target(
        conf,
        correct,
        oos_conf,
        allowed_escalations,
        answered_target,
        np.asarray(TAU_REVIEW_GRID),
        oos_labelled=oos.labelled if oos is not None else None,
    )
    answered = answers(conf, tau_review[:, None])
    n_answered = answered.sum(axis=1)
    answered_acc = (correct & answered).sum(axis=1) / np.maximum(n_answered, 1)
    share = 1.0 - simple.mean(axis=1)
    coverage = n_answered / max(len(conf_s), 1)
    oos_held, oos_recall = oos_escalation(
        oos_conf, tau_review, oos.labelled if oos is not None else None
    )
    allowed = (1.0 - coverage <= budget + 1e-9) & (
        oos_held >= min(OOS_RECALL_MIN, oos_held[0]) - 1e-9
    )
    allowed[0] = True  # no verification is always allowed
    within = allowed & (share <= max(bert_budget, share[0]) + 1e-9)
    within[0] = True
    # The BERT budget gives way when it would cost more than CAPACITY_SLACK of coverage at the
    # target: a review costs a person minutes, a BERT check a few milliseconds of CPU.
    best_free = coverage[allowed & reached].max() if (allowed & reached).any() else 0.0
    best_within = coverage[within & reached].max() if (within & reached).any() else 0.0
    capacity_held = best_free - best_within <= CAPACITY_SLACK + 1e-12
    feasible = within if capacity_held else allowed
    reaching = np.flatnonzero(feasible & reached)
    if len(reaching):
        # The target is met: the fewest reviews (highest coverage), then the fewest BERT checks.
        best = coverage[reaching].max()
        i = int(next(j for j in reaching if coverage[j] >= best - 1e-9))
    else:
        # Out of reach within the ceiling: the most accurate answers it allows, paying for
        # each BERT check.
        utility = np.where(feasible, answered_acc - bert_cost * share, -np.inf)
        i = int(np.argmax(utility))
    figures = {
        "val_review_answered_accuracy": round(float(answered_acc[i]), 4),
        "val_review_coverage": round(float(coverage[i]), 4),
        "val_review_bert_share": round(float(share[i]), 4),
        "val_review_oos_escalation_recall": round(float(oos_recall[i]), 4)
        if oos_eligible is not None
        else None,
        "answered_target_reached": bool(len(reaching)),
        "review_bert_budget_held": bool(capacity_held),
        "answered_target": answered_target,
    }
    return float(grid[i]), float(tau_review[i]), figures


def review_for_target(
    conf: np.ndarray,
    correct: np.ndarray,
    oos_conf: np.ndarray | None,
    allowed_escalations: int,
    answered_target: float,
    grid: np.ndarray,
    oos_recall_min: float = OOS_RECALL_MIN,
    *,
    oos_labelled: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``conf`` (rows: routings, columns: held-out queries), the review threshold
    that spends the fewest reviews: the lowest grid value t whose answered accuracy, minus one
    standard error, reaches ``answered_target`` and which escalates at least
    ``oos_recall_min`` of the out-of-scope queries (``oos_conf``, same rows; of the data's own
    ones, ``oos_labelled``, and of the others, each: ``escalated_share``). The budget
    (``allowed_escalations``) is a ceiling: where the target needs more reviews than it allows,
    or cannot be reached at all, t is the highest value within the budget (the most accurate
    answers the ceiling allows). Returns (t, target reached) per row.
    """
    rows, n = conf.shape
    order = np.argsort(-conf, axis=1, kind="stable")
    ranked = np.take_along_axis(conf, order, axis=1)
    hits = np.cumsum(np.take_along_axis(correct, order, axis=1), axis=1)
    # answered(t) per grid value: how many confidences are >= t
    ascending = ranked[:, ::-1]
    answered = n - np.stack(
        [np.searchsorted(ascending[r], grid - 1e-12, side="left") for r in range(rows)]
    )
    got = np.where(answered > 0, np.take_along_axis(hits, np.maximum(answered - 1, 0), 1), 0)
    accuracy = got / np.maximum(answered, 1)
    error = np.sqrt(accuracy * (1.0 - accuracy) / np.maximum(answered, 1))
    reaching = (answered > 0) & (accuracy - error >= answered_target - 1e-9)
    within = (n - answered) <= allowed_escalations
    ok = reaching & within
    if oos_conf is not None and oos_conf.shape[1]:
        escalated = escalated_share(
            oos_conf,
            np.broadcast_to(grid, (rows, len(grid))),
            oos_labelled,
            spare_error=True,
        )
        ok &= escalated >= oos_recall_min - 1e-9
    fallback = _review_within_budget(conf, allowed_escalations, grid)
    first = np.argmax(ok, axis=1)
    reached = ok.any(axis=1)
    return np.where(reached, grid[first], fallback), reached


def review_on_traffic(
    labelled_conf: np.ndarray,
    labelled_correct: np.ndarray,
    labelled_weight: float,
    unlabelled_conf: np.ndarray,
    oos_conf: np.ndarray | None,
    answered_target: float,
    *,
    budget: float = 1.0,
    grid: np.ndarray | None = None,
    oos_recall_min: float = OOS_RECALL_MIN,
    oos_labelled: np.ndarray | None = None,
) -> tuple[float | None, dict]:
    """``tau_review`` chosen on recent live questions rather than on held-out ones.

    Held-out queries stand for what reviewers taught, the questions the bot escalated, not for
    the traffic it answers; recent traffic is the sample the promise is about. Its reviewed
    questions (``labelled_*``: each one's held-out confidence and whether the answer was right,
    counted ``labelled_weight`` times when only a share of them was held out) count right when
    they were; a question nobody reviewed, answered at calibrated confidence c, counts c right.
    The threshold is the lowest grid value whose estimated answered accuracy minus one standard
    error reaches ``answered_target``, with at most ``budget`` of the traffic escalated and at
    least ``oos_recall_min`` of the held-out out-of-scope queries (``oos_conf``; of the data's
    own, ``oos_labelled``, and of the others, each). Returns
    (threshold or None when no value qualifies, figures at it).

    The reviewed questions do not check the calibrator on the unreviewed ones: they are the
    questions an earlier model was unsure of, harder than their features say. Scaling the
    unreviewed answers by their ratio of right to expected answers set 0.977 on the BANKING77
    replay where this estimate sets 0.957, and TEST automation fell from 71.5% to 52.1%
    (docs/cold_start.md).
    """
    grid = np.asarray(TAU_REVIEW_GRID if grid is None else grid, dtype=float)
    lc = np.asarray(labelled_conf, dtype=float)
    lok = np.asarray(labelled_correct, dtype=float)
    uc = np.asarray(unlabelled_conf, dtype=float)
    total = labelled_weight * len(lc) + len(uc)
    if total <= 0:
        return None, {}
    # per grid value: the out-of-scope share escalated as the constraint holds it
    oos_held = np.ones(len(grid))
    if oos_conf is not None and len(oos_conf):
        oos = np.asarray(oos_conf, dtype=float)[None, :]
        oos_held = escalated_share(oos, grid[None, :], oos_labelled, spare_error=True)[0]
    for t, t_oos in zip(grid, oos_held, strict=True):
        above_l = lc >= t - 1e-12
        above_u = uc >= t - 1e-12
        answered = labelled_weight * above_l.sum() + above_u.sum()
        if answered <= 0:
            break
        accuracy = (labelled_weight * lok[above_l].sum() + uc[above_u].sum()) / answered
        error = math.sqrt(max(accuracy * (1.0 - accuracy), 0.0) / answered)
        escalated = 1.0 - answered / total
        if t_oos < oos_recall_min - 1e-9:
            continue
        if escalated > budget + 1e-9:
            break  # higher thresholds escalate more
        if accuracy - error >= answered_target - 1e-9:
            return float(t), {
                "estimated_answered_accuracy": round(float(accuracy), 4),
                "estimated_coverage": round(1.0 - float(escalated), 4),
            }
    return None, {}


def _review_within_budget(
    conf: np.ndarray, allowed_escalations: int, grid: np.ndarray
) -> np.ndarray:
    """Per row of ``conf``, the highest grid value t with at most ``allowed_escalations``
    confidences under t (the lowest grid value when even that escalates more)."""
    n = conf.shape[1]
    if allowed_escalations >= n:
        return np.full(conf.shape[0], grid[-1])
    limit = np.sort(conf, axis=1)[:, allowed_escalations]
    index = np.searchsorted(grid, limit + 1e-12, side="right") - 1
    return grid[np.clip(index, 0, len(grid) - 1)]


def _simple_tiers(tiers: dict[str, str], ft_top: list[str]) -> np.ndarray:
    """Per query: FastText's top intent is in the simple tier."""
    return np.array([tier_of(tiers, t) == "simple" for t in ft_top], dtype=bool)


def _oos_conf(
    oos: OutOfScopeOutcomes | None,
    simple_tier: np.ndarray,
    tau_fast: float,
    margin: float,
    tau_cascade: np.ndarray,
) -> np.ndarray | None:
    """Calibrated confidence of every out-of-scope query, per tau_cascade (None if none)."""
    if oos is None or not len(oos.ft_p1):
        return None
    eligible = simple_eligible(simple_tier, oos.ft_p1, oos.ft_margin, tau_fast, margin)
    simple = keeps_simple(eligible[None, :], oos.simple_conf[None, :], tau_cascade[:, None])
    return np.where(simple, oos.simple_conf[None, :], oos.bert_conf[None, :])
