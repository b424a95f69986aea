"""Benchmark: import 100,000 generated articles with `tierdesk kb import`, as a user would.

Generates a JSONL file of varied Markdown articles in a temporary folder, migrates a fresh
SQLite database, then runs the real CLI in a child process and reports its wall time and peak
resident memory (ru_maxrss of the child), for a first import (all created) and a second one
(all unchanged). Targets from issue 2: at most 60 s and 1 GiB for the first import.

    .venv/bin/python bench/bench_import.py [--articles N] [--repeats R]

Writes bench/out/import.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "import.json"
TARGET_SECONDS = 60.0
TARGET_MIB = 1024.0

WORDS = (
    "card account transfer payment balance fee limit statement refund app branch cash "
    "online secure verify identity pin contactless abroad currency exchange rate deposit "
    "withdraw savings interest overdraft direct debit standing order freeze unlock support"
).split()


def _sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 16))
    if rng.random() < 0.3:
        i = rng.randrange(len(words))
        words[i] = f"**{words[i]}**"
    if rng.random() < 0.15:
        words.append("[in the app](https://example.com/help)")
    return " ".join(words).capitalize() + "."


def _article(n: int, rng: random.Random) -> dict:
    body = " ".join(_sentence(rng) for _ in range(rng.randint(2, 6)))
    if rng.random() < 0.3:
        body += "\n\n" + "\n".join(f"- {_sentence(rng)}" for _ in range(3))
    return {
        "title": f"{' '.join(rng.choices(WORDS, k=5)).capitalize()} question {n}",
        "body": body,
        "category": rng.choice(WORDS) + "_" + rng.choice(WORDS),
        "tags": rng.sample(WORDS, 3),
        "questions": [_sentence(rng) for _ in range(3)],
    }


def generate(path: Path, count: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for n in range(count):
            out.write(json.dumps(_article(n, rng)) + "\n")
    return path.stat().st_size


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str], env: dict) -> dict:
    """Wall and CPU seconds, peak RSS (MiB) and last output line of ``tierdesk ARGS``, run in a
    fresh process exactly as the command line runs it."""
    code = "import sys; from app.cli import main; sys.exit(main())"
    cpu_before = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"tierdesk {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return {
        "seconds": seconds,
        "cpu_seconds": _children_cpu() - cpu_before,
        # ru_maxrss of RUSAGE_CHILDREN is the largest child so far (KiB on Linux).
        "peak_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "summary": proc.stdout.strip().splitlines()[-1],
    }


def run_once(count: int, folder: Path, data: Path) -> dict:
    db = folder / f"bench-{time.time_ns()}.db"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db}", "TIERDESK_LOAD_MODELS": "0"}
    env.pop("REDIS_URL", None)
    _run(["db", "upgrade"], env)
    first = _run(["kb", "import", str(data)], env)
    second = _run(["kb", "import", str(data)], env)
    assert first["summary"].startswith(f"{count} created"), first["summary"]
    assert second["summary"].startswith(f"0 created, 0 updated, {count} unchanged"), second
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return {"first": first, "second": second}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tierdesk-bench-") as tmp:
        folder = Path(tmp)
        data = folder / "articles.jsonl"
        size = generate(data, args.articles)
        runs = [run_once(args.articles, folder, data) for _ in range(args.repeats)]

    # Peak RSS is a maximum over all children so far, so the max over runs is the honest figure.
    def median(run: str, key: str) -> float:
        return round(statistics.median(r[run][key] for r in runs), 2)

    result = {
        "articles": args.articles,
        "input_mib": round(size / 2**20, 1),
        "repeats": args.repeats,
        "first_import_seconds_median": median("first", "seconds"),
        "first_import_cpu_seconds_median": median("first", "cpu_seconds"),
        "reimport_seconds_median": median("second", "seconds"),
        "reimport_cpu_seconds_median": median("second", "cpu_seconds"),
        "peak_rss_mib": round(max(r["first"]["peak_mib"] for r in runs), 1),
        "target_seconds": TARGET_SECONDS,
        "target_mib": TARGET_MIB,
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "runs": runs,
    }
    result["articles_per_second"] = round(args.articles / result["first_import_seconds_median"])
    result["meets_targets"] = (
        result["first_import_seconds_median"] <= TARGET_SECONDS
        and result["peak_rss_mib"] <= TARGET_MIB
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"#### KB import, {args.articles:,} articles ({result['input_mib']} MiB JSONL, SQLite)\n")
    print("| measure | value | target |")
    print("| --- | --- | --- |")
    print(
        f"| first import (all created), median of {args.repeats} | "
        f"{result['first_import_seconds_median']} s | <= {TARGET_SECONDS:.0f} s |"
    )
    print(f"| CPU time of that import | {result['first_import_cpu_seconds_median']} s | |")
    print(f"| re-import (all unchanged) | {result['reimport_seconds_median']} s | |")
    print(
        f"| peak RSS of the import process | {result['peak_rss_mib']} MiB | <= {TARGET_MIB:.0f} MiB |"
    )
    print(f"| throughput | {result['articles_per_second']:,} articles/s | |")
    print(f"\nMachine: {os.cpu_count()} cores, 1-min load average {result['load_average_1min']}.")


if __name__ == "__main__":
    main()
