"""``tierdesk eval``: train on TRAIN only, answer TEST four ways, report accuracy and latency.

Everything happens in a temporary workspace (models are saved there and nothing touches the
app database). The KB is one article per category, titled after the category, whose alternate
questions are that category's training texts (all, or a sample with ``questions_per_article``).

Strategies, all through the same ``Router`` with the same trained models:

- ``fast``: FastText + BM25 restricted to the predicted intent; never BERT, never escalates;
- ``bert``: the BERT route alone; never escalates;
- ``hybrid``: the router with escalation off;
- ``hybrid_review``: the router with escalation on.

A query is correct when the answered article is its category's article. Accuracy counts every
test query, ``answered_accuracy`` only those answered; ``bert_share`` is the share that ran BERT.

Test queries are answered in a shuffled order (seeded): live traffic does not arrive sorted by
category, and ``hybrid_review`` runs as the server does, with spare review capacity on
(app/nlp/capacity.py) unless ``spare_review=False``. The details file also gives its figures
without the spare reviews (``hybrid_review_tuned``: exactly the tuned ``tau_review``), from the
same run.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from app.config import PROJECT_ROOT
from app.nlp.capacity import SpareReview
from app.nlp.finetune import EPOCHS as FINE_TUNE_EPOCHS
from app.nlp.pipeline.data import (
    TrainingError,
    read_labelled_csv,
    read_oos_dev,
    split_out_of_scope,
)
from app.nlp.pipeline.kb import bm25_docs
from app.nlp.pipeline.replay import ranked_risk
from app.nlp.router import Router, RouterModels
from app.nlp.store import save_version
from app.nlp.thresholds import ANSWERED_TARGET, BERT_BUDGET, DEFAULTS
from app.nlp.training import train_from_csv
from app.vocab import Reason

STRATEGIES = {
    "fast": {"mode": "fast", "escalation": False},
    "bert": {"mode": "bert", "escalation": False},
    "hybrid": {"mode": "hybrid", "escalation": False},
    "hybrid_review": {"mode": "hybrid", "escalation": True},
}
WARMUP_QUERIES = 20


def _limit(texts: list[str], labels: list[str], keep: set[str]) -> tuple[list[str], list[str]]:
    pairs = [(t, lab) for t, lab in zip(texts, labels, strict=True) if lab in keep]
    return [t for t, _ in pairs], [lab for _, lab in pairs]


def write_labelled_csv(path: Path, texts: Sequence[str], labels: Sequence[str]) -> None:
    """A ``text,category`` CSV, as ``read_labelled_csv`` reads it."""
    import csv

    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "category"])
        writer.writerows(zip(texts, labels, strict=True))


def _latency(ms: list[float]) -> dict:
    arr = np.asarray(ms) if ms else np.zeros(1)
    return {
        "mean": round(float(arr.mean()), 4),
        "p50": round(float(np.percentile(arr, 50)), 4),
        "p99": round(float(np.percentile(arr, 99)), 4),
    }


def risk_coverage(
    confidence: Sequence[float], correct: Sequence[bool]
) -> list[tuple[float, float]]:
    """(coverage, risk) when answering only the most confident queries first."""
    risk = ranked_risk(confidence, correct)
    n = len(risk)
    return [(float(k / n), float(r)) for k, r in enumerate(risk, start=1)]


def run_eval(
    train_csv: str | Path,
    test_csv: str | Path,
    oos_csv: str | Path | None = None,
    *,
    json_out: str | Path | None = None,
    plot_out: str | Path | None = None,
    limit_categories: int | None = None,
    questions_per_article: int | None = None,
    budget: float = DEFAULTS.budget,
    bert_budget: float = BERT_BUDGET,
    oos_dev_dir: str | Path | None = PROJECT_ROOT / "intents",
    bert_path: str | Path | None = None,
    progress: bool = True,
    seed: int = 0,
    fine_tune_epochs: int = FINE_TUNE_EPOCHS,
    query_threads: int | None = None,
    spare_review: bool = False,
) -> dict:
    """``query_threads``: torch threads while answering test queries (training keeps the
    process's setting); None leaves it alone."""
    train_texts, train_labels, train_oos = split_out_of_scope(*read_labelled_csv(train_csv))
    # Test rows of an out-of-scope category (CLINC150's "oos") are out-of-scope queries.
    test_texts, test_labels, oos_texts = split_out_of_scope(*read_labelled_csv(test_csv))
    if oos_csv:
        oos_texts += read_labelled_csv(oos_csv, category_required=False)[0]
    if not train_texts:
        raise TrainingError(f"{train_csv}: every row is out of scope; no intent to train")
    if not test_texts:
        raise TrainingError(f"{test_csv}: every row is out of scope; no in-scope query to test")
    if limit_categories:
        keep = sorted(set(train_labels))
        keep = set(random.Random(seed).sample(keep, min(limit_categories, len(keep))))
        train_texts, train_labels = _limit(train_texts, train_labels, keep)
        test_texts, test_labels = _limit(test_texts, test_labels, keep)
    unknown = sorted(set(test_labels) - set(train_labels))
    if unknown:
        raise TrainingError(
            f"{test_csv}: categories absent from the training set: {', '.join(unknown[:5])}"
        )
    with tempfile.TemporaryDirectory(prefix="tierdesk-eval-") as workspace:
        work = Path(workspace)
        write_labelled_csv(work / "train.csv", train_texts, train_labels)
        started = time.perf_counter()
        trained, data = train_from_csv(
            work / "train.csv",
            questions_per_article=questions_per_article,
            oos_dev=read_oos_dev(oos_dev_dir),
            oos_labelled=train_oos,
            budget=budget,
            bert_budget=bert_budget,
            bert_path=bert_path,
            progress=progress,
            seed=seed,
            fine_tune_epochs=fine_tune_epochs,
        )
        from app.nlp.bm25 import BM25Retriever

        bm25 = BM25Retriever(bm25_docs(data.articles))
        train_seconds = time.perf_counter() - started
        version = save_version(work / "models", trained, data)
        router = Router(
            RouterModels(
                fasttext=trained.fasttext,
                bm25=bm25,
                bert=trained.bert,
                calibration=trained.calibration,
                thresholds=trained.thresholds,
                tiers=trained.tiers["effective"],
                version=version,
            )
        )
        if query_threads is not None:
            from app.nlp.bert import configure_threads

            configure_threads(query_threads)
        for query in test_texts[:WARMUP_QUERIES]:
            for spec in STRATEGIES.values():
                router.route(query, **spec)
        if spare_review:  # as the server does: after warm-up, so only test queries feed it
            router.spare = SpareReview(trained.thresholds.budget)
        order = list(range(len(test_texts)))
        random.Random(seed).shuffle(order)
        results, details = _run_strategies(
            router, [test_texts[i] for i in order], [test_labels[i] for i in order], progress
        )
        details["spare_review"] = router.spare.snapshot() if router.spare else None
        report = {
            "n_test": len(test_texts),
            "train_seconds": round(train_seconds, 2),
            "strategies": results,
        }
        if oos_texts:
            decisions = [
                router.route(q, mode="hybrid", escalation=True)
                for q in tqdm(oos_texts, desc="out-of-scope", disable=not progress)
            ]
            report["oos"] = {
                "n": len(oos_texts),
                "escalation_recall": round(float(np.mean([d.escalate for d in decisions])), 4),
            }
            # What a reviewer would want to see: the out-of-scope questions the bot answered.
            details["oos_answered"] = [
                {
                    "query": d.query,
                    "intent": d.intent,
                    "confidence": round(d.confidence, 4),
                    "route": d.route,
                }
                for d in sorted(decisions, key=lambda d: -d.confidence)
                if not d.escalate
            ]
        details.update(
            {
                "thresholds": trained.thresholds.to_dict(),
                "tiers": {
                    "f1_min": trained.tiers["f1_min"],
                    "complex": sorted(
                        k for k, v in trained.tiers["effective"].items() if v == "complex"
                    ),
                },
                "training_metrics": trained.metrics,
                "questions_per_article": questions_per_article,
                "n_categories": len(set(train_labels)),
                "n_train": len(train_texts),
            }
        )
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(report, indent=2) + "\n")
        details_path = Path(json_out).with_suffix(".details.json")
        details_path.write_text(json.dumps(details, indent=2, default=float) + "\n")
    if plot_out:
        plot(report, details["risk_coverage"], plot_out)
    report_details = dict(report)
    report_details["_details"] = details
    return report_details


def _run_strategies(
    router: Router, texts: Sequence[str], labels: Sequence[str], progress: bool
) -> tuple[dict, dict]:
    raw = {
        name: {
            "ok": [],
            "answered": [],
            "bert": [],
            "ms": [],
            "route": [],
            "conf": [],
            "spare": [],
        }
        for name in STRATEGIES
    }
    for query, label in tqdm(
        list(zip(texts, labels, strict=True)), desc="evaluating", unit="query", disable=not progress
    ):
        for name, spec in STRATEGIES.items():
            start = time.perf_counter()
            decision = router.route(query, **spec)
            elapsed = (time.perf_counter() - start) * 1000
            r = raw[name]
            r["ok"].append(decision.article is not None and decision.article.intent == label)
            r["answered"].append(not decision.escalate)
            r["bert"].append("bert" in decision.trace["stages"])
            r["ms"].append(elapsed)
            r["route"].append(decision.route)
            r["conf"].append(decision.confidence)
            r["spare"].append(decision.escalation_reason == Reason.SPARE_CAPACITY)
    results = {name: _summary(r, r["answered"]) for name, r in raw.items()}
    for name, r in raw.items():
        results[name]["coverage_at_target"] = coverage_at(r["conf"], r["ok"], ANSWERED_TARGET)
    hybrid = raw["hybrid"]
    review = raw["hybrid_review"]
    # The same run with exactly the tuned tau_review: spare-capacity escalations answered.
    tuned = _summary(review, np.asarray(review["answered"]) | np.asarray(review["spare"]))
    routes = np.asarray(hybrid["route"])
    ms = np.asarray(hybrid["ms"])
    details = {
        "route_latency_ms": {
            route: _latency(list(ms[routes == route])) | {"n": int((routes == route).sum())}
            for route in ("simple", "complex")
        },
        # The router with escalation on (its confidences decide what a person sees); the
        # escalation-off routing, which checks fewer fast answers with BERT, for comparison.
        "risk_coverage": risk_coverage(review["conf"], review["ok"]),
        "risk_coverage_hybrid": risk_coverage(hybrid["conf"], hybrid["ok"]),
        "hybrid_review_tuned": {k: tuned[k] for k in ("coverage", "answered_accuracy")},
        "spare_escalations": int(np.sum(review["spare"])),
        "fast_confident_vs_bert": fast_against_bert(raw["fast"], raw["bert"]),
    }
    return results, details


def coverage_at(confidence: Sequence[float], correct: Sequence[bool], target: float) -> float:
    """The largest share of queries that can be answered, most confident first, with answered
    accuracy at least ``target`` (0 when not even the surest answer reaches it)."""
    curve = risk_coverage(confidence, correct)
    reached = [c for c, risk in curve if 1.0 - risk >= target - 1e-12]
    return round(max(reached), 4) if reached else 0.0


def fast_against_bert(fast: dict, bert: dict, shares=(0.1, 0.25, 0.5, 0.75, 1.0)) -> list[dict]:
    """Accuracy of the fast tier's most confident X% of queries against BERT's on the same
    queries: where they are equal, the router has no reason to send those queries to BERT."""
    conf = np.asarray(fast["conf"], dtype=float)
    order = np.argsort(-conf, kind="stable")
    fast_ok = np.asarray(fast["ok"], dtype=bool)[order]
    bert_ok = np.asarray(bert["ok"], dtype=bool)[order]
    rows = []
    for share in shares:
        k = max(1, int(round(share * len(order))))
        rows.append(
            {
                "share": share,
                "fast_accuracy": round(float(fast_ok[:k].mean()), 4),
                "bert_accuracy": round(float(bert_ok[:k].mean()), 4),
            }
        )
    return rows


def _summary(r: dict, answered: Sequence[bool]) -> dict:
    ok = np.asarray(r["ok"], dtype=bool)
    answered = np.asarray(answered, dtype=bool)
    n = max(len(ok), 1)
    return {
        # answered and right over all queries: the automation rate when escalation is on
        "accuracy": round(float((ok & answered).sum() / n), 4),
        "escalations": int((~answered).sum()),
        "coverage": round(float(answered.mean()) if len(ok) else 0.0, 4),
        "answered_accuracy": round(float((ok & answered).sum() / max(answered.sum(), 1)), 4),
        "bert_share": round(float(np.mean(r["bert"])) if len(ok) else 0.0, 4),
        "latency_ms": _latency(r["ms"]),
    }


def plot(report: dict, curve: Sequence[tuple[float, float]], out: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, s in report["strategies"].items():
        left.scatter(s["latency_ms"]["mean"], s["accuracy"] * 100, s=60)
        left.annotate(
            name,
            (s["latency_ms"]["mean"], s["accuracy"] * 100),
            textcoords="offset points",
            xytext=(6, 4),
        )
    left.set_xlabel("mean latency per query (ms)")
    left.set_ylabel("answered and right (% of all test queries)")
    left.set_title("Accuracy against latency")
    left.grid(alpha=0.3)
    if curve:
        coverage, risk = zip(*curve, strict=True)
        right.plot(
            np.asarray(coverage) * 100, np.asarray(risk) * 100, label="hybrid_review confidences"
        )
    review = report["strategies"].get("hybrid_review")
    if review:
        right.scatter(
            review["coverage"] * 100,
            (1 - review["answered_accuracy"]) * 100,
            color="red",
            zorder=3,
            label="tau_review operating point",
        )

    right.axhline(
        (1 - ANSWERED_TARGET) * 100, color="grey", linestyle=":", label="answered-accuracy target"
    )
    if review and review.get("coverage_at_target"):
        right.axvline(
            review["coverage_at_target"] * 100,
            color="green",
            linestyle="--",
            label="most coverage at the target",
        )
    right.set_xlabel("coverage (% answered, most confident first)")
    right.set_ylabel("risk (% of answered that are wrong)")
    right.set_title("Router risk-coverage")
    right.legend()
    right.grid(alpha=0.3)
    fig.tight_layout()
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def format_table(report: dict) -> str:
    lines = [
        "| strategy | automation | coverage | answered acc. | escalations | coverage at "
        f"{ANSWERED_TARGET:.1%} | BERT share | mean ms | p50 ms | p99 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report["strategies"].items():
        lat = s["latency_ms"]
        lines.append(
            f"| {name} | {s['accuracy']:.2%} | {s['coverage']:.2%} | "
            f"{s['answered_accuracy']:.2%} | {s.get('escalations', 0)} | "
            f"{s.get('coverage_at_target', 0):.2%} | {s['bert_share']:.2%} | {lat['mean']:.2f} "
            f"| {lat['p50']:.2f} | {lat['p99']:.2f} |"
        )
    if "oos" in report:
        lines.append(
            f"\nOut-of-scope escalation recall: {report['oos']['escalation_recall']:.2%} "
            f"of {report['oos']['n']}"
        )
    compared = (report.get("_details") or {}).get("fast_confident_vs_bert")
    if compared:
        pairs = ", ".join(
            f"{row['share']:.0%}: {row['fast_accuracy']:.2%} / {row['bert_accuracy']:.2%}"
            for row in compared
        )
        lines.append(f"\nFastText's most confident X% of queries, fast / bert accuracy: {pairs}")
    lines.append(f"\nTest queries: {report['n_test']}; training: {report['train_seconds']:.0f} s")
    return "\n".join(lines)
