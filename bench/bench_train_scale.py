"""Benchmark: ``tierdesk train`` on a large knowledge base without intent data.

Generates N help-centre articles (title and a Markdown body of one to three paragraphs; no
categories, no alternate questions, no intents), imports them into a fresh SQLite database with
the real ``tierdesk kb import``, then runs the real ``tierdesk train`` in a child process and
reports its wall time, CPU time and peak resident memory (ru_maxrss of the child), with the
tiers it chose. Targets (issue 12): 100,000 articles in at most 15 minutes and 4 GiB.

    .venv/bin/python bench/bench_train_scale.py [--articles 100000]

Writes bench/out/train_scale.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "train_scale.json"
TARGET_SECONDS = 15 * 60
TARGET_MIB = 4096

TOPICS = (
    "invoice refund subscription password login workspace project export import report "
    "dashboard notification calendar reminder upload attachment folder permission admin "
    "guest invite billing plan upgrade downgrade mobile desktop sync offline backup restore "
    "integration webhook token security audit language timezone template archive label"
).split()
VERBS = "change reset open close find share delete recover move rename enable disable".split()


def _sentence(rng: random.Random) -> str:
    words = rng.choices(TOPICS, k=rng.randint(8, 14))
    return (" ".join(words) + ".").capitalize()


def _article(n: int, rng: random.Random) -> dict:
    """A title naming a task, and a body whose first sentence says how (so a held-out title
    can be found through the body, as in a real help centre)."""
    paragraphs = [
        " ".join(_sentence(rng) for _ in range(rng.randint(2, 4))) for _ in range(rng.randint(1, 3))
    ]
    verb, topic = rng.choice(VERBS), " ".join(rng.sample(TOPICS, 2))
    paragraphs[0] = f"To {verb} a {topic}, open its settings. " + paragraphs[0]
    return {
        "slug": f"article-{n}",
        "title": f"How do I {verb} a {topic} ({n})?",
        "body": "\n\n".join(paragraphs),
    }


def _run(cmd: list[str], env: dict) -> tuple[float, float, float, str]:
    """Wall s, CPU s and peak RSS MiB of one child command (its own rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stdout}\n{result.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024, result.stdout + result.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tierdesk = str(Path(sys.executable).parent / "tierdesk")
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="tierdesk-scale-") as tmp:
        work = Path(tmp)
        kb = work / "kb.jsonl"
        with kb.open("w", encoding="utf-8") as fh:
            for n in range(args.articles):
                fh.write(json.dumps(_article(n, rng)) + "\n")
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{work / 'scale.db'}",
            "TIERDESK_MODELS_DIR": str(work / "models"),
            "TIERDESK_VAR_DIR": str(work / "var"),
            "TIERDESK_INTENTS_DIR": str(work / "no-intents"),
            "SECRET_KEY": "bench",
        }
        _run([tierdesk, "db", "upgrade"], env)
        import_wall, _, _, _ = _run([tierdesk, "kb", "import", str(kb)], env)
        wall, cpu, rss, output = _run([tierdesk, "train", "--quiet"], env)
        manifest = json.loads(
            (next((work / "models" / "versions").iterdir()) / "manifest.json").read_text()
        )
    result = {
        "articles": args.articles,
        "import_seconds": round(import_wall, 1),
        "train_seconds": round(wall, 1),
        "train_cpu_seconds": round(cpu, 1),
        "train_peak_rss_mib": round(rss, 1),
        "targets": {"seconds": TARGET_SECONDS, "mib": TARGET_MIB},
        "tiers_active": manifest.get("tiers_active"),
        "held_out": manifest.get("metrics", {}).get("held_out"),
        "train_output": output.strip().splitlines(),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print("\n".join(result["train_output"]), file=sys.stderr)
    print("| measure | value | target |\n| --- | --- | --- |")
    print(f"| `tierdesk train`, {args.articles:,} articles without intents | {wall:.0f} s "
          f"(CPU {cpu:.0f} s) | <= {TARGET_SECONDS} s |")  # fmt: skip
    print(f"| peak RSS of `tierdesk train` | {rss:,.0f} MiB | <= {TARGET_MIB} MiB |")
    print(f"| import before it | {import_wall:.0f} s | |")


if __name__ == "__main__":
    main()
