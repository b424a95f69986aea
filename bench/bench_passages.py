"""Benchmark: what the BERT index loses and saves when a large KB's passages are cut short.

Past ``BERT_PASSAGE_WORDS`` words of body passages, a KB gets fewer passages per article
embedded, down to the first, and then each first passage cut to its first words
(``PassageWindow`` in ``app/nlp/pipeline/kb.py``, whose cut this applies). This measures both
sides of that trade on the int8 encoder that serves:

- accuracy: BERT's top-1 article (``kb_similarity`` of the best title and the first passage,
  as the complex route scores articles) on four plain FAQs: the demo ``knowledge_base/`` as
  title and body asked BANKING77 TEST (right when the article's category is the query's), and
  ``bench/datasets/{tasklane,parcelpost,voltwise}_faq`` asked their ``queries.csv``; for the
  title alone, the whole first passage, and the first passage cut to 32, 24 and 16 words;
- time: embedding the titles and the first passages (whole and cut) of generated help-centre
  articles (``bench_train_scale.py``'s), each kind timed three times in turn in one run
  (medians, and ratios to the whole passages).

    .venv/bin/python bench/bench_passages.py [--articles 2000]

Writes bench/out/passages.json and prints two Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_faq import BANKING77, DATASETS, _read_csv  # noqa: E402

from app.nlp import bert  # noqa: E402
from app.nlp.passages import PASSAGE_WORDS, split_passages  # noqa: E402
from app.nlp.pipeline.kb import PassageWindow  # noqa: E402

OUT = ROOT / "bench" / "out" / "passages.json"
CUTS = (PASSAGE_WORDS, 32, 24, 16)


def _demo() -> tuple[list[tuple[str, str]], list[tuple[str, int]]] | None:
    """The demo KB's (title, body) and BANKING77 TEST as (query, article index)."""
    if not (BANKING77 / "test.csv").exists():
        return None
    articles, index_of_category = [], {}
    for path in sorted((ROOT / "knowledge_base").glob("*.md")):
        _, front, body = path.read_text(encoding="utf-8").split("---", 2)
        meta = yaml.safe_load(front)
        index_of_category[meta["category"]] = len(articles)
        articles.append((meta["title"], body.strip()))
    queries = [
        (r["text"], index_of_category[r["category"]])
        for r in _read_csv(BANKING77 / "test.csv")
        if r["category"] in index_of_category
    ]
    return articles, queries


def _faq(folder: str) -> tuple[list[tuple[str, str]], list[tuple[str, int]]]:
    rows = _read_csv(DATASETS / folder / "faq.csv")
    index = {r["question"]: i for i, r in enumerate(rows)}
    queries = [
        (r["text"], index[r["question"]]) for r in _read_csv(DATASETS / folder / "queries.csv")
    ]
    return [(r["question"], r["answer"]) for r in rows], queries


def cut(passage: str, words: int) -> str:
    """The passage as a KB whose first passages are cut to ``words`` words embeds it."""
    return PassageWindow(1, words).cut([passage])[0]


def accuracy(encoder: bert.Encoder, articles, queries) -> dict[str, float]:
    """Top-1 over all articles: title alone, then title with the first passage at each cut."""
    query_vectors = encoder.encode_queries([q for q, _ in queries])
    truth = np.array([i for _, i in queries])
    titles = bert.cosines(query_vectors, encoder.encode([t for t, _ in articles]))
    out = {"title": float(np.mean(titles.argmax(1) == truth))}
    first = [(split_passages(body) or [""])[0] for _, body in articles]
    for words in CUTS:
        passages = bert.cosines(query_vectors, encoder.encode([cut(p, words) for p in first]))
        scores = bert.kb_similarity(titles, passages)
        out[str(words)] = float(np.mean(scores.argmax(1) == truth))
    return out


def timing(encoder: bert.Encoder, n_articles: int, repeats: int = 3) -> dict[str, float]:
    """Median seconds to embed ``n_articles`` generated titles, and first passages per cut."""
    import bench_train_scale

    rng = random.Random(0)
    generated = [bench_train_scale._article(n, rng) for n in range(n_articles)]
    first = [split_passages(a["body"])[0] for a in generated]
    kinds = {"title": [a["title"] for a in generated]}
    kinds.update({str(w): [cut(p, w) for p in first] for w in CUTS})
    encoder.encode(kinds["title"][:128])  # warm
    seconds: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(repeats):
        for kind, texts in kinds.items():
            started = time.perf_counter()
            encoder.encode(texts)
            seconds[kind].append(time.perf_counter() - started)
    return {k: statistics.median(v) for k, v in seconds.items()}


def _label(kind: str) -> str:
    if kind == "title":
        return "title alone"
    return "+ whole first passage" if int(kind) == PASSAGE_WORDS else f"+ first {kind} words"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=2000, help="generated articles to time")
    args = parser.parse_args()
    bert.configure_threads(None)
    encoder = bert.Encoder(bert.default_bert_path(), quantize=True)
    sets = {}
    demo = _demo()
    if demo is not None:
        sets["demo KB, BANKING77 TEST"] = demo
    for folder in ("tasklane_faq", "parcelpost_faq", "voltwise_faq"):
        sets[folder] = _faq(folder)
    results = {
        name: {"queries": len(queries), "top1": accuracy(encoder, articles, queries)}
        for name, (articles, queries) in sets.items()
    }
    seconds = timing(encoder, args.articles)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"accuracy": results, "seconds": seconds, "articles": args.articles}, indent=2)
        + "\n"
    )
    kinds = ["title", *map(str, CUTS)]
    print("| KB (queries) | " + " | ".join(_label(k) for k in kinds) + " |")
    print("| --- | " + " | ".join("---:" for _ in kinds) + " |")
    for name, r in results.items():
        cells = " | ".join(f"{100 * r['top1'][k]:.1f}%" for k in kinds)
        print(f"| {name} ({r['queries']:,}) | {cells} |")
    whole = seconds[str(PASSAGE_WORDS)]
    print(
        f"\n| of {args.articles:,} generated articles, embedded | seconds | ratio to whole passages |"
    )
    print("| --- | ---: | ---: |")
    for kind in kinds:
        label = {"title": "titles", str(PASSAGE_WORDS): "whole first passages"}.get(
            kind, f"first passages' first {kind} words"
        )
        print(f"| {label} | {seconds[kind]:.2f} | {seconds[kind] / whole:.2f}x |")


if __name__ == "__main__":
    main()
