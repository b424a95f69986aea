"""Shadow mode's cost to the customer: chat latency with and without a shadow version.

A fresh SQLite database with the demo intents and knowledge base, ``tierdesk train`` (encoder
not fine-tuned, to keep the run short), the version registered as active and a copy of it
(another ``tau_review``) as the second version. The app answers ``POST /api/v1/chat`` through
the Flask test client, one torch thread as a server worker has, answer cache off (every
question reaches the router), BANKING77 TEST questions as the traffic. Rounds alternate
``without`` (no shadow) and ``with`` (the copy as shadow on 100% of questions, the worst
case), so drift of the machine hits both; reported: p50 and p99 of each and their ratios,
plus how many questions the shadow compared or dropped (its queue is bounded).

    python bench/bench_shadow.py [--rounds 4] [--per-round 150]

Writes bench/out/shadow.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out"
BANKING77 = Path(
    os.environ.get("TIERDESK_BANKING77", ROOT.parent / "shared" / "data" / "banking77")
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--per-round", type=int, default=150)
    args = parser.parse_args()

    import redis

    from app import create_app, migrate
    from app.db import session_scope
    from app.kb.importer import import_paths
    from app.kb.intents import load_intent_definitions
    from app.nlp import registry
    from app.nlp.bert import configure_threads
    from app.nlp.store import current_version
    from app.nlp.training import read_labelled_csv, train_models
    from app.services import ENGINE_KEY
    from app.vocab import ModelStatus

    sys.path.insert(0, str(ROOT / "tests"))
    from fixtures_lifecycle import make_strict_copy

    questions = read_labelled_csv(BANKING77 / "test.csv")[0]
    work = Path(tempfile.mkdtemp(prefix="tierdesk-bench-shadow-"))
    url = f"sqlite:///{work / 'bench.db'}"
    migrate.upgrade(url)
    with session_scope(url) as session:
        load_intent_definitions(session, ROOT / "intents")
    with session_scope(url) as session:
        import_paths(session, [ROOT / "knowledge_base"])
    config = {
        "SQLALCHEMY_DATABASE_URI": url,
        "MODELS_DIR": work / "models",
        "INTENTS_DIR": ROOT / "intents",
        "BERT_PATH": None,
        "BERT_QUANTIZE": True,
        "BERT_FINETUNE_EPOCHS": 0,
    }
    started = time.perf_counter()
    train_models(config, progress=False)
    train_s = time.perf_counter() - started
    v1 = current_version(work / "models")
    v2 = make_strict_copy(work / "models", v1, v1 + "-shadow", tau_review=0.95)
    with session_scope(url) as session:
        registry.register(session, work / "models", v2)

    client = redis.Redis.from_url(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), decode_responses=True
    )
    app = create_app(
        {
            **config,
            "TESTING": True,
            "REDIS_CLIENT": client,
            "REDIS_PREFIX": f"bench-shadow:{os.getpid()}:",
            "VAR_DIR": work / "var",
            "KB_DIR": ROOT / "knowledge_base",
            "LOAD_MODELS": True,
            "SECRET_KEY": "bench",
            "RATE_LIMIT": "off",
            "ANSWER_CACHE_SIZE": 0,
        }
    )
    engine = app.extensions[ENGINE_KEY]
    configure_threads(1)
    chat = app.test_client()

    def set_shadow(on: bool) -> None:
        with session_scope(url) as session:
            if on == (registry.get(session, v2).status == ModelStatus.SHADOW):
                pass
            elif on:
                registry.promote(session, v2, to=ModelStatus.SHADOW, share=1.0)
            else:
                registry.retire(session, v2, reason="bench round")
        engine.check_for_updates(wait=True)

    latencies: dict[str, list[float]] = {"without": [], "with": []}
    asked = 0
    for _ in range(3):  # warm-up
        chat.post("/api/v1/chat", json={"message": questions[0]})
    for round_no in range(args.rounds):
        for mode in ("without", "with") if round_no % 2 == 0 else ("with", "without"):
            set_shadow(mode == "with")
            for _ in range(args.per_round):
                question = questions[asked % len(questions)]
                asked += 1
                start = time.perf_counter()
                response = chat.post("/api/v1/chat", json={"message": question})
                latencies[mode].append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200, response.get_data(as_text=True)
            if mode == "with" and engine._shadow is not None:
                engine._shadow.drain(120)  # the next round starts from an idle machine
    runner = engine._shadow
    report = {
        "train_seconds": round(train_s),
        "per_mode": args.rounds * args.per_round,
        "shadow": {
            "offered": runner.offered if runner else 0,
            "compared": runner.done if runner else 0,
            "dropped": runner.dropped if runner else 0,
        },
    }
    for mode, values in latencies.items():
        arr = np.asarray(values)
        report[mode] = {
            "p50_ms": round(float(np.percentile(arr, 50)), 3),
            "p99_ms": round(float(np.percentile(arr, 99)), 3),
            "mean_ms": round(float(arr.mean()), 3),
        }
    report["ratio_p50"] = round(report["with"]["p50_ms"] / report["without"]["p50_ms"], 3)
    report["ratio_p99"] = round(report["with"]["p99_ms"] / report["without"]["p99_ms"], 3)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "shadow.json").write_text(json.dumps(report, indent=2))
    engine.close()

    print("#### Shadow mode: chat latency with and without a shadow version (100% sampled)")
    print()
    print("| | p50 ms | p99 ms | mean ms |")
    print("|---|---|---|---|")
    for mode in ("without", "with"):
        r = report[mode]
        print(f"| {mode} shadow | {r['p50_ms']} | {r['p99_ms']} | {r['mean_ms']} |")
    print(f"| ratio | {report['ratio_p50']}x | {report['ratio_p99']}x | |")
    print()
    s = report["shadow"]
    print(
        f"{report['per_mode']} requests per mode; the shadow compared {s['compared']} of "
        f"{s['offered']} questions offered, dropped {s['dropped']} (queue full)."
    )


if __name__ == "__main__":
    main()
