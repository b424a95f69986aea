"""The learning-curve benchmark: how fast reviewers' teaching turns escalations into answers.

Starts from the demo knowledge base only (``knowledge_base/``, imported with its categories,
which are the BANKING77 category names; none of the ``intents/`` examples are loaded) in a
temporary, migrated SQLite database, trains the models on it, then replays BANKING77 TRAIN
(``../shared/data/banking77`` or ``TIERDESK_BANKING77``; read in place, never copied) as live
traffic in a seeded shuffled order through the router with escalation on. Each routed question
is stored as the chat service stores a turn (the customer's message and the bot's turn replying
to it), so that retraining reads it as recent traffic. Every escalated question goes to a
simulated reviewer who teaches its true intent (its category) through the reviewer console's
code path, ``app.review.service.teach_intent``. A random ``--spot-check-share`` of the
answered questions is spot-checked as the product checks them (``app.review.spot_checks``): the
simulated reviewer teaches its true intent with the share, whether the bot was right or not;
spot checks count as reviews spent. As soon as ``--every-reviews`` questions (default 1,000)
were taught since the last retrain, the cadence of ``tierdesk train --min-new-examples N`` run
by a timer (or every ``--every`` questions instead), the models are retrained from the
database as ``tierdesk train`` trains them, with a frozen BERT encoder (under 6,000 texts the
held-out folds never fine-tune it), and the replay goes on through the new router. Before
any traffic and at each checkpoint, the current router answers BANKING77 TEST
(``--test-limit`` samples it): automation (answered and right, over all TEST queries),
coverage, answered accuracy, the share of ``intents/out_of_scope/test.csv`` escalated, reviews
spent so far and the retrain's wall time.

    python bench/bench_learning.py                                   # the full replay (10,003)
    python bench/bench_learning.py --limit 600 --every 300 --test-limit 300   # a quick run
    python bench/bench_learning.py --supervised-automation 0.85      # with a reference line
    python bench/bench_learning.py --every 2000 --limit 6000         # retrain per 2,000 questions
    python bench/bench_learning.py --compare bench/out/earlier.json  # its curve in the plot too
    python bench/bench_learning.py --spot-check-share 0              # escalations only

Prints a Markdown table, writes ``bench/out/learning.json`` (after every checkpoint, so an
interrupted run keeps what it measured) and a plot of automation and answered accuracy
against reviews spent (``--plot``, default ``docs/learning.png``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.config import DEFAULT_SPOT_CHECK_SHARE  # noqa: E402 - after the path is set
from app.nlp.thresholds import ANSWERED_TARGET  # noqa: E402

DATA = Path(os.environ.get("TIERDESK_BANKING77", ROOT.parent / "shared" / "data" / "banking77"))
OUT = ROOT / "bench" / "out"
INTENTS_DIR = ROOT / "intents"  # only for intents/out_of_scope/dev.csv (training negatives)
KB_DIR = ROOT / "knowledge_base"
OOS_TEST = INTENTS_DIR / "out_of_scope" / "test.csv"
DEFAULT_EVERY_REVIEWS = 1000
DEFAULT_PLOT = ROOT / "docs" / "learning.png"


# -- models --------------------------------------------------------------------------------


def retrain(session, seed: int, answered_target: float = ANSWERED_TARGET):
    """A retrain on everything the database holds, and the router serving it (``router_over``,
    as ``app.nlp.engine.Engine._make_router`` builds one). Returns (router, seconds, info)."""
    from app.nlp.pipeline.data import data_from_db
    from app.nlp.pipeline.kb import router_over
    from app.nlp.training import fit_models

    started = time.perf_counter()
    data = data_from_db(session, INTENTS_DIR)
    trained = fit_models(
        data, fine_tune_epochs=0, progress=False, seed=seed, answered_target=answered_target
    )
    router = router_over(
        data.articles,
        fasttext=trained.fasttext,
        bert=trained.bert,  # fit_models indexed it on data.articles
        calibration=trained.calibration,
        thresholds=trained.thresholds,
        tiers=trained.tiers["effective"],
    )
    seconds = time.perf_counter() - started
    info = {
        "n_texts": len(data.texts),
        "n_intents": len(set(data.labels)),
        "n_articles": len(data.articles),
        "n_oos_dev": len(data.oos_texts),
        "fit_seconds": trained.train_seconds,
        "tiers_active": {
            name: bool(tier.get("active"))
            for name, tier in (trained.metrics.get("tiers_active") or {}).items()
        },
        "complex_intents": sum(1 for t in trained.tiers["effective"].values() if t == "complex"),
        "thresholds": {k: v for k, v in trained.thresholds.to_dict().items() if k != "provenance"},
        "val_router": trained.metrics.get("router", {}),
    }
    return router, seconds, info


def evaluate(router, test: list[tuple[str, str]], oos: list[str], label: str) -> dict:
    """The router (hybrid, escalation on) on TEST and on the out-of-scope test queries."""
    answered = right = 0
    started = time.perf_counter()
    for text, category in tqdm(test, desc=f"{label}: test", unit="q", leave=False, file=sys.stderr):
        decision = router.route(text)
        if not decision.escalate:
            answered += 1
            right += decision.article is not None and decision.article.intent == category
    oos_escalated = sum(
        router.route(text).escalate
        for text in tqdm(oos, desc=f"{label}: oos", unit="q", leave=False, file=sys.stderr)
    )
    n = len(test)
    return {
        "n_test": n,
        "answered": answered,
        "answered_right": right,
        "automation": right / n if n else 0.0,
        "coverage": answered / n if n else 0.0,
        "answered_accuracy": right / answered if answered else 0.0,
        "n_oos": len(oos),
        "oos_escalated": oos_escalated / len(oos) if oos else 0.0,
        "eval_seconds": round(time.perf_counter() - started, 2),
    }


# -- output --------------------------------------------------------------------------------


def format_table(rows: list[dict]) -> str:
    lines = [
        "| checkpoint | questions replayed | reviews spent (spot checks) | automation | coverage "
        "| answered accuracy | oos escalated | retrain s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['checkpoint']} | {r['questions']:,} | {r['reviews']:,} "
            f"({r.get('spot_checks', 0):,}) "
            f"| {r['automation']:.2%} | {r['coverage']:.2%} | {r['answered_accuracy']:.2%} "
            f"| {r['oos_escalated']:.2%} | {r['retrain_seconds']:.1f} |"
        )
    return "\n".join(lines)


def run_label(config: dict) -> str:
    """How a run retrained, for a legend: "every 2,000 questions, seed 0"."""
    if config.get("every_reviews"):
        cadence = f"a retrain per {config['every_reviews']:,} reviews"
    else:
        cadence = f"every {config['every']:,} questions"
    share = config.get("spot_check_share") or 0
    checks = f"{share:.0%} of answers spot-checked" if share else "no spot checks"
    return f"{cadence}, {checks}, seed {config['seed']}"


def plot(
    rows: list[dict],
    out: Path,
    supervised: float | None,
    run: str = "",
    others: list[tuple[str, list[dict]]] = (),
) -> None:
    """Automation and answered accuracy against reviews spent; ``others``: the automation of
    earlier runs (``--compare``), drawn thinner beside this one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reviews = [r["reviews"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 6 + 0.35 * len(others)))
    suffix = f", {run}" if run else ""
    ax.plot(
        reviews,
        [r["automation"] * 100 for r in rows],
        "o-",
        color="tab:blue",
        label=f"automation{suffix}",
    )
    colours = ("tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:gray")
    for (name, other), marker, colour in zip(others, "^vDP*x", colours, strict=False):
        ax.plot(
            [r["reviews"] for r in other],
            [r["automation"] * 100 for r in other],
            marker=marker,
            color=colour,
            linestyle="-",
            linewidth=1,
            alpha=0.6,
            label=f"automation, {name}",
        )
    if supervised is not None:
        ax.axhline(
            supervised * 100,
            color="tab:blue",
            linestyle=":",
            label=f"fully supervised automation ({supervised:.1%})",
        )
    ax.set_xlabel("reviews spent (escalated and spot-checked TRAIN questions taught)")
    ax.set_ylabel("automation (% of TEST answered and right)", color="tab:blue")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    acc = ax.twinx()
    acc.plot(
        reviews,
        [r["answered_accuracy"] * 100 for r in rows],
        "s--",
        color="tab:red",
        label=f"answered accuracy{suffix}",
    )
    acc.set_ylabel("answered accuracy (% of answered that are right)", color="tab:red")
    acc.set_ylim(0, 100)
    handles = ax.get_legend_handles_labels()[0] + acc.get_legend_handles_labels()[0]
    # Under the axes: the curves may run anywhere in the plot.
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14),
        ncol=1,  # the labels name the run: one per line
        frameon=False,
    )
    ax.set_title("Learning from reviews on BANKING77 (demo KB, reviewed questions taught)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


def write_json(path: Path, config: dict, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"config": config, "checkpoints": rows}, indent=2) + "\n")


# -- the run -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cadence = parser.add_mutually_exclusive_group()
    cadence.add_argument(
        "--every-reviews",
        type=int,
        default=DEFAULT_EVERY_REVIEWS,
        help="retrain as soon as N questions were taught since the last retrain, the cadence of "
        "`tierdesk train --min-new-examples N` on a timer [default: %(default)s]",
    )
    cadence.add_argument(
        "--every", type=int, default=None, help="retrain every N replayed questions instead"
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="TRAIN questions replayed [default: all]"
    )
    parser.add_argument("--seed", type=int, default=0, help="replay order, samples, training")
    parser.add_argument(
        "--test-limit", type=int, default=None, help="a seeded sample of TEST [default: all]"
    )
    parser.add_argument("--plot", type=Path, default=DEFAULT_PLOT, help="the PNG written")
    parser.add_argument(
        "--supervised-automation",
        type=float,
        default=None,
        help="a fully supervised automation (0-1) drawn as a reference line",
    )
    parser.add_argument("--json", type=Path, default=OUT / "learning.json")
    parser.add_argument(
        "--compare",
        type=Path,
        action="append",
        default=[],
        metavar="JSON",
        help="an earlier run's --json whose automation the plot draws too (repeatable)",
    )
    parser.add_argument(
        "--spot-check-share",
        type=float,
        default=DEFAULT_SPOT_CHECK_SHARE,
        help="the share of answered questions spot-checked (0: none) [default: %(default)s]",
    )
    parser.add_argument(
        "--answered-target",
        type=float,
        default=ANSWERED_TARGET,
        help="the product's answered-accuracy promise the retrains tune for",
    )
    args = parser.parse_args()
    if args.every is not None:
        if args.every < 1:
            parser.error("--every must be at least 1")
        args.every_reviews = None
    elif args.every_reviews < 1:
        parser.error("--every-reviews must be at least 1")
    if not 0.0 <= args.spot_check_share < 1.0:
        parser.error("--spot-check-share must be in [0, 1)")
    others = []
    for path in args.compare:
        try:
            earlier = json.loads(path.read_text())
            others.append((run_label(earlier["config"]), earlier["checkpoints"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"--compare {path}: not a bench_learning --json file ({exc})")

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    from sqlalchemy import func, select

    from app import migrate
    from app.db import dispose_engine, session_factory, session_scope
    from app.kb.importer import import_paths
    from app.models import Article, Conversation, Intent, Message, TrainingExample, new_id
    from app.nlp.bert import configure_threads
    from app.nlp.pipeline.data import read_labelled_csv
    from app.review.service import ReviewError, known_intents, teach_intent

    configure_threads()  # training and the BERT route use every core

    train = list(zip(*read_labelled_csv(DATA / "train.csv"), strict=True))
    test = list(zip(*read_labelled_csv(DATA / "test.csv"), strict=True))
    oos = read_labelled_csv(OOS_TEST)[0]
    rng = random.Random(args.seed)
    stream = list(train)
    rng.shuffle(stream)
    if args.limit is not None:
        stream = stream[: args.limit]
    if args.test_limit is not None and args.test_limit < len(test):
        test = [
            test[i]
            for i in sorted(random.Random(args.seed).sample(range(len(test)), args.test_limit))
        ]

    config = {
        "data": str(DATA),
        "kb": str(KB_DIR.relative_to(ROOT)),
        "oos_test": str(OOS_TEST.relative_to(ROOT)),
        "every": None if args.every_reviews else args.every,
        "every_reviews": args.every_reviews,
        "limit": args.limit,
        "seed": args.seed,
        "n_train": len(train),
        "n_replayed": len(stream),
        "n_test": len(test),
        "test_limit": args.test_limit,
        "n_oos_test": len(oos),
        "fine_tune_epochs": 0,
        "supervised_automation": args.supervised_automation,
        "spot_check_share": args.spot_check_share,
    }
    rows: list[dict] = []

    with tempfile.TemporaryDirectory(prefix="tierdesk-learning-") as work:
        url = f"sqlite:///{Path(work) / 'learning.db'}"
        migrate.upgrade(url)
        with session_scope(url) as session:
            report = import_paths(session, [KB_DIR])
        print(
            f"imported {report.created} articles from {KB_DIR.relative_to(ROOT)}/",
            file=sys.stderr,
        )
        session = session_factory(url)()
        try:
            # The starting point really is the KB alone: no intents, no examples.
            for model in (Intent, TrainingExample):
                if session.scalar(select(func.count()).select_from(model)):
                    raise SystemExit(f"the new database already holds {model.__tablename__} rows")
            known = set(known_intents(session))
            missing = sorted({c for _, c in train + test} - known)
            if missing:
                raise SystemExit(
                    f"BANKING77 categories without a KB article (the reviewer could not teach "
                    f"them): {', '.join(missing[:10])}"
                )
            config["n_articles"] = session.scalar(select(func.count()).select_from(Article))

            def checkpoint(index: int, replayed: int, reviews: int, checks: int, window: dict):
                router, seconds, info = retrain(session, args.seed, args.answered_target)
                taught = session.scalar(select(func.count()).select_from(TrainingExample))
                result = evaluate(router, test, oos, f"checkpoint {index}")
                rows.append(
                    {
                        "checkpoint": index,
                        "questions": replayed,
                        "reviews": reviews,
                        "spot_checks": checks,
                        "examples_taught": taught,
                        **result,
                        "retrain_seconds": round(seconds, 2),
                        "replay_window": window,
                        "training": info,
                    }
                )
                write_json(args.json, config, rows)
                plot(
                    rows,
                    args.plot,
                    args.supervised_automation,
                    run_label(config),
                    others,
                )
                tqdm.write(
                    f"checkpoint {index}: {replayed} replayed, {reviews} reviews, automation "
                    f"{result['automation']:.2%}, coverage {result['coverage']:.2%}, answered "
                    f"accuracy {result['answered_accuracy']:.2%}, retrain {seconds:.1f}s",
                    file=sys.stderr,
                )
                return router

            def record(text: str, decision) -> None:
                """The turn as the chat service stores it: the customer's message and the bot's
                turn replying to it (what training reads as recent traffic)."""
                conversation = Conversation(id=new_id(), client_key="bench")
                customer = Message(
                    id=new_id(),
                    conversation_id=conversation.id,
                    seq=0,
                    role="customer",
                    text=text,
                    route=decision.route,
                    intent=decision.intent,
                )
                bot = Message(
                    id=new_id(),
                    conversation_id=conversation.id,
                    seq=1,
                    role="bot",
                    in_reply_to=customer.id,
                    status="pending_review" if decision.escalate else "answered",
                    text="",
                    article_slug=decision.article.slug if decision.article else None,
                    confidence=float(decision.confidence),
                    route=decision.route,
                    intent=decision.intent,
                )
                session.add_all([conversation, customer, bot])

            def teach(text: str, category: str, share: float | None) -> None:
                try:
                    teach_intent(session, text, category, sample_share=share)
                except ReviewError as exc:  # e.g. a text clean_text refuses
                    session.rollback()
                    window["teach_errors"] += 1
                    tqdm.write(f"not taught: {text[:60]!r}: {exc}", file=sys.stderr)

            def fresh_window() -> dict:
                return {
                    "questions": 0,
                    "escalated": 0,
                    "spot_checked": 0,
                    "answered_right": 0,
                    "teach_errors": 0,
                }

            router = checkpoint(0, 0, 0, 0, {})
            reviews = checks = 0
            checker = random.Random(f"audit-{args.seed}")  # its own stream: same replay order
            window = fresh_window()
            bar = tqdm(stream, desc="replay", unit="q", file=sys.stderr)
            for i, (text, category) in enumerate(bar, start=1):
                decision = router.route(text)
                record(text, decision)
                window["questions"] += 1
                if decision.escalate:
                    reviews += 1
                    window["escalated"] += 1
                    teach(text, category, None)
                else:
                    window["answered_right"] += (
                        decision.article is not None and decision.article.intent == category
                    )
                    if args.spot_check_share and checker.random() < args.spot_check_share:
                        reviews += 1
                        checks += 1
                        window["spot_checked"] += 1
                        teach(text, category, args.spot_check_share)
                bar.set_postfix(reviews=reviews)
                if args.every_reviews:
                    due = window["escalated"] + window["spot_checked"] >= args.every_reviews
                else:
                    due = i % args.every == 0
                if due or i == len(stream):
                    session.commit()
                    q = window["questions"]
                    window["automation"] = round(window["answered_right"] / q, 4)
                    window["escalation_rate"] = round(window["escalated"] / q, 4)
                    router = checkpoint(len(rows), i, reviews, checks, window)
                    window = fresh_window()
            bar.close()
        finally:
            session.close()
            dispose_engine(url)

    cadence = (
        f"a retrain per {args.every_reviews:,} reviews"
        if args.every_reviews
        else f"retrain every {args.every:,}"
    )
    print(
        f"### Learning curve on BANKING77 (demo KB, {len(stream):,} TRAIN questions replayed, "
        f"{cadence}, {len(test):,} TEST queries)\n"
    )
    print(format_table(rows))
    print(json.dumps({"written": [str(args.json), str(args.plot)]}))


if __name__ == "__main__":
    main()
