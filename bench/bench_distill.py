"""Distillation from live traffic on BANKING77: the BERT share of ``hybrid`` before and after.

The set-up a new deployment has: a few labelled examples per intent (``--base``, 10 by default,
drawn from TRAIN with a fixed seed) and a log of customer questions nobody labelled: the rest
of TRAIN with its labels hidden. ``before`` is trained on the base examples (KB: one article per
category with them as questions). Its BERT route answers every logged question; those at a
calibrated confidence of at least its ``tau_review`` are labelled with BERT's intent
(``app.nlp.distill.label_logged``, the same code as ``tierdesk distill``). ``after`` is trained
on the base examples plus those labels, with the same KB. Both answer the 3,080 TEST queries.

Reported: the pseudo-labels' accuracy against the hidden labels; for each version ``hybrid``
with its tuned thresholds (accuracy, BERT share) and, at equal accuracy, the smallest BERT share
with which fast answers (most confident first) and BERT answers (the rest) reach ``before``'s
hybrid accuracy. The encoder is not fine-tuned in either (``--fine-tune-epochs 0``), so the
difference is what the fast tier and the BERT head learnt from the log. Writes
``bench/out/distill.json``.

    python bench/bench_distill.py
    python bench/bench_distill.py --base 5 --limit-categories 20   # a quick run
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = Path(os.environ.get("TIERDESK_BANKING77", ROOT.parent / "shared" / "data" / "banking77"))
OUT = ROOT / "bench" / "out"


def split_base(texts, labels, per_intent: int, seed: int):
    by_label = defaultdict(list)
    for i, label in enumerate(labels):
        by_label[label].append(i)
    rng = random.Random(seed)
    base = set()
    for idx in by_label.values():
        base.update(rng.sample(idx, min(per_intent, len(idx))))
    base_i = sorted(base)
    rest = [i for i in range(len(texts)) if i not in base]
    return base_i, rest


def train(texts, labels, articles, oos, epochs: int):
    from app.nlp.training import TrainingData, fit_models

    data = TrainingData(list(texts), list(labels), articles, {}, list(oos))
    return fit_models(data, progress=False, fine_tune_epochs=epochs), data


def router_of(trained, data):
    from app.nlp.pipeline.kb import router_over

    return router_over(
        data.articles,
        fasttext=trained.fasttext,
        bert=trained.bert,
        calibration=trained.calibration,
        thresholds=trained.thresholds,
        tiers=trained.tiers["effective"],
        version="bench",
    )


def answer_test(router, texts, labels) -> dict:
    fast_conf, fast_ok, bert_ok, hybrid_ok, hybrid_bert = [], [], [], [], []
    for text, label in zip(texts, labels, strict=True):
        fast = router.route(text, mode="fast", escalation=False)
        bert = router.route(text, mode="bert", escalation=False)
        hybrid = router.route(text, mode="hybrid", escalation=False)
        fast_conf.append(fast.confidence)
        fast_ok.append(bool(fast.article and fast.article.intent == label))
        bert_ok.append(bool(bert.article and bert.article.intent == label))
        hybrid_ok.append(bool(hybrid.article and hybrid.article.intent == label))
        hybrid_bert.append("bert" in hybrid.trace["stages"])
    return {
        "fast_conf": fast_conf,
        "fast_ok": fast_ok,
        "bert_ok": bert_ok,
        "hybrid_accuracy": float(np.mean(hybrid_ok)),
        "hybrid_bert_share": float(np.mean(hybrid_bert)),
        "bert_accuracy": float(np.mean(bert_ok)),
        "fast_accuracy": float(np.mean(fast_ok)),
    }


def bert_share_at(run: dict, target: float) -> float | None:
    """Smallest BERT share at which the most confident fast answers plus BERT on the rest
    reach ``target`` accuracy (None: never)."""
    order = np.argsort(-np.asarray(run["fast_conf"]), kind="stable")
    fast = np.asarray(run["fast_ok"], dtype=float)[order]
    bert = np.asarray(run["bert_ok"], dtype=float)[order]
    n = len(order)
    fast_prefix = np.concatenate([[0.0], np.cumsum(fast)])  # fast answers the first k
    bert_suffix = np.concatenate([np.cumsum(bert[::-1])[::-1], [0.0]])  # BERT the rest
    accuracy = (fast_prefix + bert_suffix) / n
    ok = np.nonzero(accuracy >= target - 1e-12)[0]
    return None if len(ok) == 0 else float((n - ok.max()) / n)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=int, default=10, help="labelled examples per intent")
    parser.add_argument("--limit-categories", type=int, default=None)
    parser.add_argument("--fine-tune-epochs", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from app.nlp.bert import configure_threads
    from app.nlp.distill import label_logged
    from app.nlp.pipeline.data import articles_from_categories, read_labelled_csv, read_oos_dev

    texts, labels = read_labelled_csv(DATA / "train.csv")
    test_texts, test_labels = read_labelled_csv(DATA / "test.csv")
    if args.limit_categories:
        keep = set(random.Random(args.seed).sample(sorted(set(labels)), args.limit_categories))
        texts, labels = zip(
            *[(t, lab) for t, lab in zip(texts, labels, strict=True) if lab in keep], strict=True
        )
        test_texts, test_labels = zip(
            *[(t, lab) for t, lab in zip(test_texts, test_labels, strict=True) if lab in keep],
            strict=True,
        )
    base_i, logged_i = split_base(texts, labels, args.base, args.seed)
    base_texts = [texts[i] for i in base_i]
    base_labels = [labels[i] for i in base_i]
    articles = articles_from_categories(base_texts, base_labels)
    oos = read_oos_dev(ROOT / "intents")
    configure_threads(os.cpu_count() or 1)

    started = time.perf_counter()
    before, before_data = train(base_texts, base_labels, articles, oos, args.fine_tune_epochs)
    before_s = time.perf_counter() - started
    router = router_of(before, before_data)
    threshold = before.thresholds.tau_review
    started = time.perf_counter()
    labelled = label_logged(router, [(texts[i], None) for i in logged_i], base_texts, threshold)
    label_s = time.perf_counter() - started
    truth = {texts[i]: labels[i] for i in logged_i}
    pseudo_accuracy = (
        float(
            np.mean(
                [truth[t] == lab for t, lab in zip(labelled.texts, labelled.labels, strict=True)]
            )
        )
        if labelled.texts
        else None
    )
    started = time.perf_counter()
    after, after_data = train(
        [*base_texts, *labelled.texts],
        [*base_labels, *labelled.labels],
        articles,
        oos,
        args.fine_tune_epochs,
    )
    after_s = time.perf_counter() - started
    configure_threads(1)  # answering as a server worker does
    runs = {
        "before": answer_test(router, test_texts, test_labels),
        "after": answer_test(router_of(after, after_data), test_texts, test_labels),
    }
    target = runs["before"]["hybrid_accuracy"]
    report = {
        "base_per_intent": args.base,
        "n_base": len(base_texts),
        "n_logged": len(logged_i),
        "n_test": len(test_texts),
        "min_confidence": round(threshold, 4),
        "labelled": labelled.summary(),
        "pseudo_label_accuracy": pseudo_accuracy,
        "seconds": {
            "train_before": round(before_s),
            "label": round(label_s),
            "train_after": round(after_s),
        },
        "equal_accuracy_target": target,
    }
    for name, run in runs.items():
        report[name] = {
            k: round(run[k], 4)
            for k in ("hybrid_accuracy", "hybrid_bert_share", "bert_accuracy", "fast_accuracy")
        } | {"bert_share_at_equal_accuracy": bert_share_at(run, target)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "distill.json").write_text(json.dumps(report, indent=2))

    print("#### Distillation from live traffic (BANKING77)")
    print()
    print(
        f"{report['n_base']} labelled examples ({args.base} per intent), {report['n_logged']} "
        f"logged TRAIN questions without labels; {labelled.by_bert} labelled by BERT at >= "
        f"{threshold:.3f} ({pseudo_accuracy:.1%} right), {labelled.unlabelled} left out"
    )
    print()
    print(
        "| version | hybrid accuracy | hybrid BERT share | BERT share at equal accuracy | fast accuracy | bert accuracy |"
    )
    print("|---|---|---|---|---|---|")
    for name in ("before", "after"):
        r = report[name]
        share = r["bert_share_at_equal_accuracy"]
        print(
            f"| {name} | {r['hybrid_accuracy']:.2%} | {r['hybrid_bert_share']:.1%} | "
            f"{'-' if share is None else f'{share:.1%}'} | {r['fast_accuracy']:.2%} | {r['bert_accuracy']:.2%} |"
        )


if __name__ == "__main__":
    main()
