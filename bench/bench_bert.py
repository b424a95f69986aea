"""BERT complex route on BANKING77: accuracy, latency (fp32 vs int8, eager vs traced), training
time, memory.

Trains the BERT tier on TRAIN (or reuses the model cached in ``bench/out/bert_model`` when it was
trained on the same data with the same code version), builds a knowledge base of one article per
category (title = the category name, alternate questions = a seeded sample of that category's
training texts) and answers every TEST query. A query is correct when the top candidate
article's intent is its category. The same saved model is loaded twice, fp32 and int8 (dynamic
quantization of the Linear layers), and each runs single queries both through the traced
TorchScript encoder (the default) and through eager PyTorch; all four are measured interleaved in
the same run.

    python bench/bench_bert.py                    # uses the cached model when valid
    python bench/bench_bert.py --retrain --kb-sample 20
"""

from __future__ import annotations

import argparse
import copy
import csv
import gc
import hashlib
import json
import random
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.nlp.bert import BertTier, KbEntry, configure_threads  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "banking77"
OUT = ROOT / "bench" / "out"


def read_csv(path: Path) -> tuple[list[str], list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [r["text"] for r in rows], [r["category"] for r in rows]


def build_kb(texts: list[str], labels: list[str], sample: int, seed: int) -> list[KbEntry]:
    """One article per category: the category name as title, a sample of its training texts."""
    by_label: dict[str, list[str]] = defaultdict(list)
    for text, label in zip(texts, labels, strict=True):
        by_label[label].append(text)
    rng = random.Random(seed)
    entries = []
    for label in sorted(by_label):
        pool = by_label[label]
        picked = pool if sample <= 0 or sample >= len(pool) else rng.sample(pool, sample)
        entries.append(
            KbEntry(slug=label, title=label.replace("_", " "), intent=label, texts=list(picked))
        )
    return entries


def data_hash(texts: list[str], labels: list[str]) -> str:
    digest = hashlib.sha256()
    for text, label in zip(texts, labels, strict=True):
        digest.update(f"{label}\t{text}\n".encode())
    return digest.hexdigest()[:16]


def training_params() -> list:
    """What changes the trained model besides the data (a cached model must match)."""
    from app.nlp import bert

    return [bert.HEAD_L2, bert.HEAD_MAX_ITER, bert.KNN_SHARE, bert.KNN_TEMPERATURE, bert.MAX_TOKENS]


def load_or_train(args, texts, labels, kb) -> tuple[float | None, bool]:
    """Train and save unless a model for this data and code version is cached."""
    folder = args.out / "bert_model"
    stamp_path = folder / "bench_stamp.json"
    stamp = {"data": data_hash(texts, labels), "seed": args.seed, "params": training_params()}
    if not args.retrain and stamp_path.is_file():
        if json.loads(stamp_path.read_text()) == stamp:
            return None, True
    started = time.perf_counter()
    tier = BertTier.train(texts, labels, kb, quantize=False, progress=True, seed=args.seed)
    seconds = time.perf_counter() - started
    tier.save(folder)
    stamp_path.write_text(json.dumps(stamp))
    del tier
    gc.collect()
    return seconds, False


def measure_accuracy(
    folder: Path, quantize: bool, kb: list[KbEntry], test_texts: list[str], test_labels: list[str]
) -> tuple[BertTier, dict]:
    started = time.perf_counter()
    tier = BertTier.load(folder, quantize=quantize)
    tier.set_kb(kb)
    load_seconds = time.perf_counter() - started
    results = tier.run_batch(test_texts, k=5)
    article_ok = [r.candidates[0].intent == g for r, g in zip(results, test_labels, strict=True)]
    intent_ok = [r.intents[0][0] == g for r, g in zip(results, test_labels, strict=True)]
    return tier, {
        "accuracy": float(np.mean(article_ok)),
        "intent_accuracy": float(np.mean(intent_ok)),
        "batch_ms_per_query": results[0].ms,
        "load_seconds": load_seconds,
        "version": tier.version,
        "metadata": tier.metadata,
    }


def measure_latency(tiers: dict[str, BertTier], queries: list[str], threads: int) -> dict:
    """Single-query latency, variants interleaved query by query so they share the same load."""
    batch_threads = configure_threads()
    configure_threads(threads)  # one query at a time: one thread avoids contention
    latencies: dict[str, list[float]] = {name: [] for name in tiers}
    for query in queries[:20]:  # warm-up
        for tier in tiers.values():
            tier.run(query)
    for query in queries:
        for name, tier in tiers.items():
            t0 = time.perf_counter()
            tier.run(query)
            latencies[name].append((time.perf_counter() - t0) * 1000.0)
    configure_threads(batch_threads)
    return {
        name: {
            "p50": float(np.percentile(values, 50)),
            "p99": float(np.percentile(values, 99)),
            "mean": float(np.mean(values)),
            "threads": threads,
        }
        for name, values in latencies.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--kb-sample", type=int, default=20, help="texts per article, 0 = all")
    parser.add_argument("--latency-queries", type=int, default=500)
    parser.add_argument("--latency-threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--retrain", action="store_true")
    args = parser.parse_args()
    configure_threads()
    args.out.mkdir(parents=True, exist_ok=True)
    train_texts, train_labels = read_csv(args.data / "train.csv")
    test_texts, test_labels = read_csv(args.data / "test.csv")
    kb = build_kb(train_texts, train_labels, args.kb_sample, args.seed)
    train_seconds, cached = load_or_train(args, train_texts, train_labels, kb)
    figures = {"n_train": len(train_texts), "n_test": len(test_texts)}
    figures["kb_sample"] = args.kb_sample
    figures["train_seconds"] = train_seconds
    figures["cached_model"] = cached
    tiers = {}
    for name, quantize in (("fp32", False), ("int8", True)):
        tiers[name], figures[name] = measure_accuracy(
            args.out / "bert_model", quantize, kb, test_texts, test_labels
        )
    variants = {}
    for name in ("fp32", "int8"):
        eager = copy.copy(tiers[name])
        eager.encoder = tiers[name].encoder.eager_copy()
        variants[f"{name} eager"] = eager
        variants[name] = tiers[name]
    latency = measure_latency(variants, test_texts[: args.latency_queries], args.latency_threads)
    for name in ("fp32", "int8"):
        figures[name]["latency_ms"] = latency[name]
        figures[name]["eager_latency_ms"] = latency[f"{name} eager"]
        figures[name]["traced_over_eager_p50"] = (
            latency[name]["p50"] / latency[f"{name} eager"]["p50"]
        )
    figures["int8_over_fp32_p50"] = latency["int8"]["p50"] / latency["fp32"]["p50"]
    if train_seconds is None:
        figures["train_seconds"] = figures["fp32"]["metadata"].get("train_seconds")
    figures["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (args.out / "bert.json").write_text(json.dumps(figures, indent=2))
    train_s = figures["train_seconds"]
    train_cell = f"{train_s:.0f}" if train_s is not None else "n/a"
    print("#### BERT route on BANKING77 (test, one article per category)")
    print()
    print(
        "| variant | accuracy | intent head acc. | p50 ms traced (eager) | p99 ms traced (eager) "
        "| traced/eager p50 | train s | peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in ("fp32", "int8"):
        f = figures[name]
        lat, eager = f["latency_ms"], f["eager_latency_ms"]
        print(
            f"| {name} | {f['accuracy']:.2%} | {f['intent_accuracy']:.2%} "
            f"| {lat['p50']:.1f} ({eager['p50']:.1f}) | {lat['p99']:.1f} ({eager['p99']:.1f}) "
            f"| {f['traced_over_eager_p50']:.2f} | {train_cell} | {figures['peak_rss_mib']:.0f} |"
        )
    meta = figures["fp32"]["metadata"]
    print()
    print(
        f"head: {meta.get('head')}, KB: {args.kb_sample or 'all'} texts per article, "
        f"{'cached model' if cached else 'trained in this run'}; int8/fp32 p50 latency ratio "
        f"{figures['int8_over_fp32_p50']:.2f} (traced; all four variants interleaved query by "
        f"query in the same run, {args.latency_threads} torch thread(s))"
    )


if __name__ == "__main__":
    main()
