"""BM25 simple route: held-out quality on BANKING77 and speed/memory at 10k and 100k articles.

Quality (``--quality``): one article per BANKING77 category, its alternate questions a sample of
that category's training texts (10, 30 or all). Choices are compared on a dev split of TRAIN
(80/20 per category, out-of-scope dev set); the chosen default is then measured once on TEST
(and the out-of-scope test set). Columns: top-1 accuracy (article category == gold), AUROC of
``confidence`` for right vs wrong answers, and AUROC for right in-scope answers vs out-of-scope.

Scale (``--scale``): a synthetic knowledge base with a Zipf-distributed pseudo-word vocabulary
(titles, 10 alternate questions and a body per article, sharing per-article topic words).
Each (size, backend) runs in its own process so that peak RSS is its own. Queries are fresh
paraphrases of a random article (topic words plus common words); "self hit" = that article
ranked first.

    python bench/bench_bm25.py                   # everything (~10 min idle 2 cores, 25 busy)
    python bench/bench_bm25.py --scale --sizes 10000
    python bench/bench_bm25.py --quality
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.nlp.bm25 import DEFAULT_FIELD_WEIGHTS, BM25Doc, BM25Retriever  # noqa: E402
from app.nlp.normalize import STOPWORDS  # noqa: E402

OUT = ROOT / "bench" / "out" / "bm25.json"
DATA = Path(os.environ.get("TIERDESK_BANKING77", ROOT.parent / "shared" / "data" / "banking77"))
OOS_DIR = ROOT / "intents" / "out_of_scope"
QUESTIONS_PER_ARTICLE = 10
QUERY_POOL = 1000


# ---------------------------------------------------------------- synthetic knowledge base


ONSETS = "- b c d f g h k l m n p r s t v w br cl dr fl gr pl pr sh st tr ch th sp".split()
VOWELS = "a e i o u ai ea ou io y".split()
CODAS = "- - n r s t l m nd st rk ng".split()


def make_vocabulary(rng: np.random.Generator, size: int = 40_000) -> list[str]:
    """A vocabulary ordered by frequency rank, like real support text.

    Pseudo-words of 1 to 4 syllables, except that three of every four of the 100 most frequent
    ranks are English function words (those the tokenizer drops as stop words), interleaved
    with frequent content words: in English the top hundred words are mostly function words
    and make up about half of all text, and a support KB repeats a few topic words ("card").
    """
    syllables = [(o + v + c).replace("-", "") for o in ONSETS for v in VOWELS for c in CODAS]
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(1, 5))
        words.add("".join(rng.choice(syllables, n)))
    content = sorted(words - STOPWORDS, key=lambda w: (len(w), w))
    function_words = sorted(STOPWORDS)
    ranked: list[str] = []
    while function_words and len(ranked) < 100:
        ranked.append(content.pop(0) if len(ranked) % 4 == 3 else function_words.pop(0))
    return ranked + content[: size - len(ranked)]


class SyntheticKB:
    """Deterministic generator of articles and queries with Zipfian word frequencies.

    Every article has four topic words from the less frequent part of the vocabulary; its title,
    questions and body mix some of them with common words. Word order is irrelevant to BM25, so
    texts are generated vectorised: topic words first, then common words.
    """

    def __init__(self, seed: int = 42) -> None:
        self.rng = np.random.default_rng(seed)
        self.vocab = make_vocabulary(self.rng)
        ranks = np.arange(1, len(self.vocab) + 1)
        weights = 1.0 / ranks**1.05
        self.cdf = np.cumsum(weights / weights.sum())
        self.topic_floor = 300  # topic words come from the less frequent part of the vocabulary
        self.topics = np.empty((0, 4), dtype=np.int64)

    def texts(self, owners: np.ndarray, n_topic: np.ndarray, n_common: np.ndarray) -> list[str]:
        """One text per entry of ``owners`` (article index) with the given word counts."""
        lengths = n_topic + n_common
        topic_owner = np.repeat(owners, n_topic)
        topic_ids = self.topics[topic_owner, self.rng.integers(0, 4, len(topic_owner))]
        common_ids = np.searchsorted(self.cdf, self.rng.random(int(n_common.sum())))
        words = list(map(self.vocab.__getitem__, np.concatenate([topic_ids, common_ids]).tolist()))
        topic_words, common_words = words[: len(topic_ids)], words[len(topic_ids) :]
        topic_end, common_end = np.cumsum(n_topic).tolist(), np.cumsum(n_common).tolist()
        out = []
        t0 = c0 = 0
        for t1, c1 in zip(topic_end, common_end, strict=True):
            out.append(" ".join(topic_words[t0:t1] + common_words[c0:c1]))
            t0, c0 = t1, c1
        assert len(out) == len(lengths)
        return out

    def articles(self, count: int) -> list[BM25Doc]:
        rng, q = self.rng, QUESTIONS_PER_ARTICLE
        self.topics = rng.integers(self.topic_floor, len(self.vocab), (count, 4))
        ids = np.arange(count)
        titles = self.texts(ids, np.full(count, 2), rng.integers(2, 5, count))
        bodies = self.texts(ids, np.full(count, 4), rng.integers(30, 56, count))
        owners = np.repeat(ids, q)
        questions = self.texts(
            owners, rng.integers(1, 3, count * q), rng.integers(4, 10, count * q)
        )
        return [
            BM25Doc(
                f"a{i}", titles[i], questions[i * q : (i + 1) * q], bodies[i], f"intent{i % 500}"
            )
            for i in range(count)
        ]

    def queries(self, docs: list[BM25Doc], count: int) -> list[tuple[str, str]]:
        """Fresh paraphrases: one or two of an article's topic words among common words."""
        owners = self.rng.integers(0, len(docs), count)
        texts = self.texts(owners, self.rng.integers(1, 3, count), self.rng.integers(3, 8, count))
        return [(text, docs[i].slug) for text, i in zip(texts, owners.tolist(), strict=True)]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scale_worker(size: int, backend: str, n_queries: int) -> dict:
    """Build one index and time queries; runs in its own process (see ``scale``)."""
    kb = SyntheticKB()
    started = time.perf_counter()
    docs = kb.articles(size)
    # A fixed pool, so that both backends get the same queries whatever their counts.
    queries = kb.queries(docs, max(QUERY_POOL, n_queries))[:n_queries]
    generate_s = time.perf_counter() - started
    rss_docs = rss_mb()
    started, cpu = time.perf_counter(), time.process_time()
    index = BM25Retriever(docs, backend=backend)
    build_s, build_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    rss_index = rss_mb()
    peak = peak_rss_mb()
    index.run(queries[0][0])  # first call pays one-off lazy set-up
    latencies, cpu_latencies, rankings, hits = [], [], [], 0
    for text, slug in queries:
        started, cpu = time.perf_counter(), time.thread_time()
        result = index.run(text, k=5)
        latencies.append((time.perf_counter() - started) * 1000)
        cpu_latencies.append((time.thread_time() - cpu) * 1000)
        rankings.append([(c.slug, c.score) for c in result.candidates])
        hits += bool(result.candidates) and result.candidates[0].slug == slug
    figures = {
        "articles": size,
        "backend": backend,
        "rows": {name: field.n_rows for name, field in index.fields.items()},
        "generate_s": generate_s,
        "build_s": build_s,
        "build_cpu_s": build_cpu_s,
        "rss_docs_mb": rss_docs,
        "index_rss_mb": rss_index - rss_docs,
        "peak_rss_mb": peak,
        "n_queries": len(queries),
        "p50_ms": float(np.percentile(latencies, 50)),
        "p99_ms": float(np.percentile(latencies, 99)),
        "mean_ms": float(np.mean(latencies)),
        "cpu_p50_ms": float(np.percentile(cpu_latencies, 50)),
        "cpu_p99_ms": float(np.percentile(cpu_latencies, 99)),
        "self_hit": hits / len(queries),
        "load_average_1min": os.getloadavg()[0],
        "rankings": rankings,
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bm25.npz"
        started = time.perf_counter()
        index.save(path)
        figures["save_s"] = time.perf_counter() - started
        figures["file_mb"] = path.stat().st_size / 2**20
        del index
        if backend == "sparse":  # a rank_bm25 index is rebuilt on load: load time = build time
            started = time.perf_counter()
            BM25Retriever.load(path)
            figures["load_s"] = time.perf_counter() - started
    return figures


def run_worker(size: int, backend: str, n_queries: int) -> dict:
    command = [sys.executable, __file__, "--worker", str(size), backend, str(n_queries)]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"worker {size} {backend} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def agreement(a: dict, b: dict) -> dict:
    """Compare the rankings both backends gave for the same queries (rank_bm25 ran fewer)."""
    pairs = list(zip(a["rankings"], b["rankings"], strict=False))
    same = sum([s for s, _ in x] == [s for s, _ in y] for x, y in pairs)
    worst = max(
        (abs(sx - sy) for x, y in pairs for (_, sx), (_, sy) in zip(x, y, strict=False)),
        default=0.0,
    )
    return {"queries": len(pairs), "same_top5": same, "max_score_diff": worst}


def scale(sizes: list[int], n_queries: int, rank_queries: dict[int, int]) -> list[dict]:
    rows = []
    for size in sizes:
        sparse_figures = run_worker(size, "sparse", n_queries)
        print(
            f"  {size} sparse: build {sparse_figures['build_s']:.1f} s, "
            f"p50 {sparse_figures['p50_ms']:.2f} ms",
            file=sys.stderr,
            flush=True,
        )
        rank_figures = run_worker(size, "rank_bm25", rank_queries.get(size, 30))
        print(
            f"  {size} rank_bm25: build {rank_figures['build_s']:.1f} s, "
            f"p50 {rank_figures['p50_ms']:.1f} ms",
            file=sys.stderr,
            flush=True,
        )
        rows.append(
            {
                "articles": size,
                "sparse": sparse_figures,
                "rank_bm25": rank_figures,
                "p50_ratio_sparse_over_rank_bm25": sparse_figures["p50_ms"]
                / rank_figures["p50_ms"],
                "agreement": agreement(sparse_figures, rank_figures),
            }
        )
    return rows


def print_scale(rows: list[dict]) -> None:
    print("#### BM25 at scale (synthetic KB, 10 alternate questions per article)")
    print()
    print(
        "| articles | backend | build s (CPU s) | index RSS MB | peak RSS MB | queries "
        "| p50 ms (CPU) | p99 ms (CPU) | self hit | load s | p50 sparse/rank_bm25 |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        for backend in ("sparse", "rank_bm25"):
            f = row[backend]
            ratio = f"{row['p50_ratio_sparse_over_rank_bm25']:.4f}" if backend == "sparse" else ""
            load = f"{f['load_s']:.1f}" if "load_s" in f else "= build"
            print(
                f"| {f['articles']:,} | {backend} | {f['build_s']:.1f} ({f['build_cpu_s']:.1f}) "
                f"| {f['index_rss_mb']:.0f} | {f['peak_rss_mb']:.0f} | {f['n_queries']} "
                f"| {f['p50_ms']:.2f} ({f['cpu_p50_ms']:.2f}) | {f['p99_ms']:.2f} ({f['cpu_p99_ms']:.2f}) "
                f"| {f['self_hit']:.1%} | {load} | {ratio} |"
            )
    print()
    for row in rows:
        a = row["agreement"]
        print(
            f"{row['articles']:,} articles: backends gave the same top-5 for {a['same_top5']}"
            f"/{a['queries']} queries, largest score difference {a['max_score_diff']:.1e}; "
            f"load average {row['sparse']['load_average_1min']:.1f} on "
            f"{os.cpu_count()} CPUs (wall times wait for CPU when it exceeds that)."
        )
    print()


# ---------------------------------------------------------------- BANKING77 quality


def read_csv(path: Path) -> list[tuple[str, str]]:
    with open(path, newline="") as f:
        return [(row["text"], row["category"]) for row in csv.DictReader(f)]


def category_docs(groups: dict[str, list[str]], n: int | None, seed: int = 7) -> list[BM25Doc]:
    rng = random.Random(seed)
    return [
        BM25Doc(
            slug=category,
            title=category.replace("_", " "),
            questions=texts if n is None else rng.sample(texts, min(n, len(texts))),
            intent=category,
        )
        for category, texts in sorted(groups.items())
    ]


def auroc(scores, labels) -> float:
    """Probability that a random positive outranks a random negative (ties count half)."""
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    pos, neg = scores[labels], scores[~labels]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    values = np.concatenate([pos, neg])
    for value in np.unique(values):  # average ranks of ties
        tied = values == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def evaluate(docs, queries, oos, **settings) -> dict:
    index = BM25Retriever(docs, **settings)
    correct, confidence, latencies = [], [], []
    for text, category in queries:
        started = time.perf_counter()
        result = index.run(text, k=2)
        latencies.append((time.perf_counter() - started) * 1000)
        correct.append(bool(result.candidates) and result.candidates[0].intent == category)
        confidence.append(result.confidence)
    oos_confidence = [index.run(text, k=2).confidence for text in oos]
    correct_arr = np.asarray(correct)
    right = np.asarray(confidence)[correct_arr]
    return {
        "accuracy": float(correct_arr.mean()),
        "auroc_right_vs_wrong": auroc(confidence, correct),
        "auroc_right_vs_oos": auroc(
            np.concatenate([right, oos_confidence]),
            np.r_[np.ones(len(right), bool), np.zeros(len(oos_confidence), bool)],
        ),
        "p50_ms": float(np.percentile(latencies, 50)),
    }


FIELD_CHOICES = {
    "best question": {"title": 0.5, "questions": 1.0},
    "question pool": {"title": 0.5, "question_pool": 1.0},
    "best + pool": dict(DEFAULT_FIELD_WEIGHTS),
}
TOKENIZER_CHOICES = {
    "plain": {"stem": False, "drop_stopwords": False},
    "stem": {"stem": True, "drop_stopwords": False},
    "stop words": {"stem": False, "drop_stopwords": True},
    "stem + stop words": {"stem": True, "drop_stopwords": True},
}
SAMPLES = {"10": 10, "30": 30, "all": None}


def quality() -> dict | None:
    if not (DATA / "train.csv").exists():
        print(f"(BANKING77 not found under {DATA}: quality section skipped)")
        return None
    train, test = read_csv(DATA / "train.csv"), read_csv(DATA / "test.csv")
    oos_dev = [t for t, _ in read_csv(OOS_DIR / "dev.csv")] if OOS_DIR.exists() else []
    oos_test = [t for t, _ in read_csv(OOS_DIR / "test.csv")] if OOS_DIR.exists() else []
    by_category: dict[str, list[str]] = defaultdict(list)
    for text, category in train:
        by_category[category].append(text)
    rng = random.Random(13)
    fit: dict[str, list[str]] = {}
    dev: list[tuple[str, str]] = []
    for category, texts in sorted(by_category.items()):
        texts = texts[:]
        rng.shuffle(texts)
        cut = int(len(texts) * 0.8)
        fit[category] = texts[:cut]
        dev += [(t, category) for t in texts[cut:]]
    results: dict = {"dev": {}, "test": {}}
    for sample, n in SAMPLES.items():
        docs = category_docs(fit, n)
        for field_name, weights in FIELD_CHOICES.items():
            for tok_name, tok in TOKENIZER_CHOICES.items():
                key = f"{sample} | {field_name} | {tok_name}"
                results["dev"][key] = evaluate(docs, dev, oos_dev, field_weights=weights, **tok)
        print(f"  dev done for {sample} questions", file=sys.stderr, flush=True)
    for sample, n in SAMPLES.items():
        docs = category_docs(by_category, n)
        for field_name in ("best question", "best + pool"):
            for tok_name in ("plain", "stem + stop words"):
                key = f"{sample} | {field_name} | {tok_name}"
                results["test"][key] = evaluate(
                    docs,
                    test,
                    oos_test,
                    field_weights=FIELD_CHOICES[field_name],
                    **TOKENIZER_CHOICES[tok_name],
                )
    results.update(
        n_dev=len(dev), n_test=len(test), n_oos_dev=len(oos_dev), n_oos_test=len(oos_test)
    )
    return results


def print_quality(results: dict) -> None:
    for split, label in (("dev", "dev split of TRAIN (choices)"), ("test", "TEST (measurement)")):
        n = results[f"n_{split}"]
        n_oos = results[f"n_oos_{split}"]
        print(f"#### BM25 on BANKING77, {label}: {n} queries, {n_oos} out-of-scope")
        print()
        print(
            "| questions/article | fields | tokenizer | top-1 acc | AUROC right/wrong "
            "| AUROC right/OOS | p50 ms |"
        )
        print("|---|---|---|---:|---:|---:|---:|")
        for key, r in results[split].items():
            cells = " | ".join(key.split(" | "))
            print(
                f"| {cells} | {r['accuracy']:.1%} | {r['auroc_right_vs_wrong']:.3f} "
                f"| {r['auroc_right_vs_oos']:.3f} | {r['p50_ms']:.2f} |"
            )
        print()


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--worker", nargs=3, metavar=("SIZE", "BACKEND", "QUERIES"), help=argparse.SUPPRESS
    )
    parser.add_argument("--quality", action="store_true", help="only the BANKING77 section")
    parser.add_argument("--scale", action="store_true", help="only the synthetic-KB section")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300, help="sparse queries per size")
    parser.add_argument(
        "--rank-queries",
        type=int,
        default=10,
        help="rank_bm25 queries at the largest size (3x as many below it)",
    )
    args = parser.parse_args()
    if args.worker:
        size, backend, n_queries = args.worker
        print(json.dumps(scale_worker(int(size), backend, int(n_queries))))
        return 0
    both = not (args.quality or args.scale)
    report: dict = json.loads(OUT.read_text()) if OUT.exists() else {}
    if args.quality or both:
        results = quality()
        if results:
            print_quality(results)
            report["quality"] = results
    if args.scale or both:
        largest = max(args.sizes)
        rank_queries = {s: args.rank_queries * (1 if s == largest else 3) for s in args.sizes}
        rows = scale(sorted(args.sizes), args.queries, rank_queries)
        print_scale(rows)
        for row in rows:
            for backend in ("sparse", "rank_bm25"):
                row[backend].pop("rankings")
        report["scale"] = rows
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2))
    print(f"(written {OUT.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
