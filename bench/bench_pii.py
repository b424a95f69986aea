"""PII detectors: precision and recall per detector, and the latency masking adds per message.

Accuracy: every message of tests/data/pii_cases.jsonl (valid card numbers, IBANs, e-mails and
phone numbers in several formats, and look-alikes: Luhn-failing cards, IBANs with wrong check
digits, dates, amounts, order numbers, IPs, versions; plus known hard cases), scored by
app/privacy/scoring.py.

Latency: what the chat service adds to a turn, ``mask(text)`` + ``mask_value(trace)`` +
``emails(text)``, timed per message (median of REPEATS runs each), on customer questions
without PII (the telco and Tasklane test queries) and on the PII set; in the same run, the
``_json_safe(trace)`` the chat path already does per turn, as a yardstick (ratio).

    python bench/bench_pii.py
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.chat.service import _json_safe  # noqa: E402
from app.privacy.pii import Masker  # noqa: E402
from app.privacy.scoring import load_cases, score  # noqa: E402

CASES = ROOT / "tests" / "data" / "pii_cases.jsonl"
REPEATS = 15
# The shape and size of a stored trace (router keys, three tiers with intents and candidates).
TRACE = {
    "mode": "hybrid",
    "route": "complex",
    "stages": ["fasttext", "bm25", "bert"],
    "timings_ms": {"fasttext": 0.05, "bm25": 0.31, "bert": 3.2, "total": 3.9},
    "versions": {"fasttext": "20261201-105950-a0b1c2d3", "bert": "20261201-105950-a0b1c2d3"},
    "thresholds": {"tau_review": 0.912, "tau_simple": 0.8, "cascade_below": 0.95},
    "tier": "simple",
    "simple_eligible": True,
    "cascaded": True,
    "verified": False,
    "escalation_reason": None,
    "would_escalate": None,
    "tau_review_effective": 0.912,
    "cache": "miss",
    "tiers": {
        name: {
            "intents": [[f"intent_{i}", 0.5 / (i + 1)] for i in range(5)],
            "candidates": [
                {"slug": f"article-{i}", "title": f"Article title {i}", "score": 7.2 - i}
                for i in range(5)
            ],
            "confidence": 0.41,
            "ms": 1.2,
        }
        for name in ("fasttext", "bm25", "bert")
    },
}


def plain_questions() -> list[str]:
    texts = []
    for path, column in (
        (ROOT / "bench/datasets/telco_intents/test.csv", "text"),
        (ROOT / "bench/datasets/tasklane_faq/queries.csv", "text"),
    ):
        with path.open(encoding="utf-8") as rows:
            texts += [row[column] for row in csv.DictReader(rows) if row.get(column)]
    return texts


def per_message_us(texts: list[str], work) -> list[float]:
    out = []
    for text in texts:
        runs = []
        for _ in range(REPEATS):
            start = time.perf_counter_ns()
            work(text)
            runs.append(time.perf_counter_ns() - start)
        out.append(statistics.median(runs) / 1000)
    return out


def main() -> None:
    masker = Masker()
    cases = load_cases(CASES)
    scores = score(masker, cases)
    print(f"#### PII detectors on tests/data/pii_cases.jsonl ({len(cases)} messages)\n")
    print("| detector | spans | precision | recall | false positives | missed |")
    print("|---|---|---|---|---|---|")
    for name, s in scores.items():
        print(f"| {name} | {s.support} | {s.precision:.3f} | {s.recall:.3f} | {s.fp} | {s.fn} |")

    def added(text: str) -> None:
        masker.mask(text)
        masker.mask_value(TRACE)
        masker.emails(text)

    plain = plain_questions()
    pii = [c["text"] for c in cases if c["pii"]]
    rows = {
        "questions without PII": per_message_us(plain, added),
        "messages with PII": per_message_us(pii, added),
        "text only, no PII": per_message_us(plain, masker.mask),
        "text only, with PII": per_message_us(pii, masker.mask),
    }
    yardstick = statistics.median(per_message_us(plain[:200], lambda _t: _json_safe(TRACE)))
    print("\n#### Latency masking adds per message (median of per-message medians)\n")
    print("| what | messages | median µs | p90 µs | vs _json_safe(trace) |")
    print("|---|---|---|---|---|")
    for label, values in rows.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"| {label} | {len(values)} | {median:.1f} | {p90:.1f} | {median / yardstick:.2f}x |")
    print(f"| _json_safe(trace), already in the chat path | 200 | {yardstick:.1f} | | 1.00x |")

    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "pii.json").write_text(
        json.dumps(
            {
                "scores": {
                    k: {
                        "tp": s.tp,
                        "fp": s.fp,
                        "fn": s.fn,
                        "precision": s.precision,
                        "recall": s.recall,
                    }
                    for k, s in scores.items()
                },
                "latency_us": {k: statistics.median(v) for k, v in rows.items()},
                "json_safe_us": yardstick,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
