"""The routing benchmark: ``tierdesk eval`` on BANKING77 with our out-of-scope test set.

Trains every model on TRAIN only (thresholds tuned on a split of TRAIN), answers the 3,080 TEST
queries with the four strategies and measures out-of-scope escalation on
``intents/out_of_scope/test.csv`` (never used for fitting). Prints a Markdown table and writes
``bench/out/eval.json`` (the harness's JSON), ``bench/out/eval.details.json`` (route latencies,
thresholds, derived tiers, training metrics) and ``bench/out/eval.png``.

    python bench/bench_eval.py
    python bench/bench_eval.py --limit-categories 20      # a quick run
    python bench/bench_eval.py --questions-per-article 10 # KB with a sample of questions
    python bench/bench_eval.py --data bench/datasets/telco_intents --name eval_telco

``--data`` names another ``text,category`` set (a folder with ``train.csv`` and ``test.csv``);
its ``oos.csv``, when there is one, replaces our out-of-scope test set. Given more than once,
the sets are asked as one multi-domain set, in the shape of CLINC150 (150 intents of many small
domains, with out-of-scope queries): their TRAIN, TEST and out-of-scope files concatenated, a
category name two sets share being one intent (BANKING77's and the assistant set's
``exchange_rate``):

    python bench/bench_eval.py --data ../shared/data/banking77 --data bench/datasets/telco_intents \
        --data bench/datasets/assistant_intents --name eval_multi

``--resplit-oos SEED``
pools the training file's out-of-scope rows with ``oos.csv`` and draws as many training rows
again at random, as CLINC150 draws its out-of-scope splits from one pool.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = Path(os.environ.get("TIERDESK_BANKING77", ROOT.parent / "shared" / "data" / "banking77"))
OUT = ROOT / "bench" / "out"

TARGETS = (
    ("bert accuracy >= 93.5%", lambda r, d: r["strategies"]["bert"]["accuracy"] >= 0.935),
    (
        "hybrid accuracy within 0.5 pt of bert",
        lambda r, d: (
            r["strategies"]["hybrid"]["accuracy"] >= r["strategies"]["bert"]["accuracy"] - 0.005
        ),
    ),
    (
        "hybrid mean latency <= 0.3x bert",
        lambda r, d: (
            r["strategies"]["hybrid"]["latency_ms"]["mean"]
            <= 0.3 * r["strategies"]["bert"]["latency_ms"]["mean"]
        ),
    ),
    (
        "hybrid within 0.3 pt of bert with BERT on <= 40%",
        lambda r, d: (
            r["strategies"]["hybrid"]["accuracy"] >= r["strategies"]["bert"]["accuracy"] - 0.003
            and r["strategies"]["hybrid"]["bert_share"] <= 0.40
        ),
    ),
    (
        "hybrid_review automation >= 88% at answered accuracy >= 98.5%",
        lambda r, d: (
            r["strategies"]["hybrid_review"]["answered_accuracy"] >= 0.985
            and r["strategies"]["hybrid_review"]["accuracy"] >= 0.88
        ),
    ),
    (
        "out-of-scope escalated >= 95%",
        lambda r, d: r.get("oos", {}).get("escalation_recall", 0) >= 0.95,
    ),
    (
        "simple route p50 <= 1 ms",
        lambda r, d: d["route_latency_ms"]["simple"]["p50"] <= 1.0,
    ),
    (
        "BERT route p50 <= 8 ms",
        lambda r, d: d["route_latency_ms"]["complex"]["p50"] <= 8.0,
    ),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        action="append",
        help="folder with train.csv and test.csv (and optionally oos.csv) [default: BANKING77]; "
        "given more than once, the sets are asked as one",
    )
    parser.add_argument("--limit-categories", type=int, default=None)
    parser.add_argument("--questions-per-article", type=int, default=None)
    # A ceiling on escalations; the product's default has none (the answered target decides).
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument(
        "--bert-budget",
        type=float,
        default=None,
        help="largest share of queries the BERT tier may take [default: the product's]",
    )
    parser.add_argument("--name", default="eval", help="output file stem under bench/out")
    parser.add_argument(
        "--fine-tune-epochs",
        type=int,
        default=None,
        help="BERT encoder fine-tuning epochs [default: the product's, 0: frozen encoder]",
    )
    parser.add_argument(
        "--spare-review",
        action="store_true",
        help="hybrid_review with spare review capacity under the --budget ceiling (opt-in)",
    )
    parser.add_argument(
        "--resplit-oos",
        type=int,
        default=None,
        metavar="SEED",
        help="draw the training file's out-of-scope rows again from one pool with oos.csv",
    )
    args = parser.parse_args()

    from app.nlp.bert import configure_threads
    from app.nlp.evaluation import format_table, run_eval

    configure_threads()  # training (the BERT fine-tune above all) uses every core

    OUT.mkdir(parents=True, exist_ok=True)
    folders = args.data or [DATA]
    for folder in folders:
        for name in ("train.csv", "test.csv"):
            if not (folder / name).is_file():
                sys.exit(
                    f"{folder / name}: no such file "
                    "(--data names a folder with train.csv and test.csv)"
                )
    with tempfile.TemporaryDirectory(prefix="tierdesk-bench-") as workspace:
        if len(folders) == 1:
            data = folders[0]
            oos = _oos_file(data)
        else:
            data, oos = combine_sets(folders, Path(workspace) / "combined")
        train = data / "train.csv"
        if args.resplit_oos is not None:
            train, oos = resplit_out_of_scope(train, oos, Path(workspace), args.resplit_oos)
        report = run_eval(
            train,
            data / "test.csv",
            oos,
            json_out=OUT / f"{args.name}.json",
            plot_out=OUT / f"{args.name}.png",
            limit_categories=args.limit_categories,
            questions_per_article=args.questions_per_article,
            budget=args.budget,
            # One intra-op thread for the queries: per-query latency on a shared 2-core machine is
            # steadier and no slower than two threads fighting other processes.
            query_threads=1,
            spare_review=args.spare_review and args.budget < 1.0,
            **(
                {} if args.fine_tune_epochs is None else {"fine_tune_epochs": args.fine_tune_epochs}
            ),
            **({} if args.bert_budget is None else {"bert_budget": args.bert_budget}),
        )
    details = report.pop("_details")
    data_name = " + ".join(
        "BANKING77" if folder.resolve() == DATA.resolve() else folder.name for folder in folders
    )
    oos_files = [_oos_file(folder) for folder in folders] if len(folders) > 1 else [oos]
    oos_shown = ", ".join(
        str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path) for path in oos_files
    )
    print(f"### Routing on {data_name} (`tierdesk eval`, out-of-scope: {oos_shown})\n")
    print(format_table(report))
    # ru_maxrss is in KiB on Linux: the whole run's peak, training included
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\n{details['n_categories']} categories, {details['n_train']} training texts, "
        f"{report['n_test']} TEST queries; "
        f"training {report['train_seconds']:.0f} s; peak memory {peak_mib:.0f} MiB"
    )
    routes = details["route_latency_ms"]
    print(
        f"\nRoute latency p50 (hybrid): simple {routes['simple']['p50']:.2f} ms "
        f"(n={routes['simple']['n']}), BERT {routes['complex']['p50']:.2f} ms "
        f"(n={routes['complex']['n']})"
    )
    tuned = details["hybrid_review_tuned"]
    print(
        f"hybrid_review with exactly the tuned tau_review (same run): "
        f"{tuned['answered_accuracy']:.2%} answered accuracy at {tuned['coverage']:.2%} "
        f"coverage; {details['spare_escalations']} spare-capacity escalations"
    )
    th = details["thresholds"]
    print(
        f"Thresholds (tuned on a split of TRAIN): tau_fast={th['tau_fast']} "
        f"margin={th['margin']} tau_cascade={th['tau_cascade']} tau_verify={th['tau_verify']} "
        f"tau_review={th['tau_review']}; "
        f"{len(details['tiers']['complex'])} categories derived complex "
        f"(FastText held-out F1 < {details['tiers']['f1_min']})"
    )
    answered_oos = details.get("oos_answered", [])
    if answered_oos:
        shown = "; ".join(f'"{x["query"]}" -> {x["intent"]}' for x in answered_oos[:5])
        print(f"Out-of-scope questions answered: {len(answered_oos)}, most confident: {shown}")
    print("\n| target | met |\n|---|---|")
    for label, check in TARGETS:
        try:
            met = "yes" if check(report, details) else "**no**"
        except (KeyError, TypeError):
            met = "n/a"
        print(f"| {label} | {met} |")
    print(json.dumps({"written": [str(OUT / f"{args.name}.json"), str(OUT / f"{args.name}.png")]}))


def _oos_file(folder: Path) -> Path:
    """A set's own out-of-scope test queries, or ours when it has none (BANKING77)."""
    own = folder / "oos.csv"
    return own if own.is_file() else ROOT / "intents/out_of_scope/test.csv"


def combine_sets(folders: list[Path], into: Path) -> tuple[Path, Path]:
    """Several ``text,category`` sets as one (``train.csv``, ``test.csv``, ``oos.csv`` under
    ``into``); a category name two sets share is one intent, out-of-scope rows stay out of
    scope, and the out-of-scope test queries are every set's (ours for BANKING77)."""
    from app.nlp.evaluation import write_labelled_csv
    from app.nlp.pipeline.data import read_labelled_csv

    into.mkdir(parents=True)
    merged: dict[str, tuple[list[str], list[str]]] = {"train.csv": ([], []), "test.csv": ([], [])}
    oos_texts: list[str] = []
    for folder in folders:
        for name, (texts, labels) in merged.items():
            rows = read_labelled_csv(folder / name)
            texts += rows[0]
            labels += rows[1]
        oos_texts += read_labelled_csv(_oos_file(folder), category_required=False)[0]
    for name, (texts, labels) in merged.items():
        write_labelled_csv(into / name, texts, labels)
    write_labelled_csv(into / "oos.csv", oos_texts, ["oos"] * len(oos_texts))
    return into, into / "oos.csv"


def resplit_out_of_scope(train: Path, oos: Path, into: Path, seed: int) -> tuple[Path, Path]:
    """``train``'s out-of-scope rows and ``oos``'s queries as one pool, split again at random
    with as many training rows as before: copies under ``into``."""
    from app.nlp.evaluation import write_labelled_csv
    from app.nlp.pipeline.data import read_labelled_csv, split_out_of_scope

    texts, labels, own = split_out_of_scope(*read_labelled_csv(train))
    pool = own + read_labelled_csv(oos, category_required=False)[0]
    random.Random(seed).shuffle(pool)
    drawn, rest = pool[: len(own)], pool[len(own) :]
    write_labelled_csv(into / "train.csv", [*texts, *drawn], [*labels, *["oos"] * len(drawn)])
    write_labelled_csv(into / "oos.csv", rest, ["oos"] * len(rest))
    return into / "train.csv", into / "oos.csv"


if __name__ == "__main__":
    main()
