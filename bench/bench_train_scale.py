"""Benchmark: ``tierdesk train`` on knowledge bases without intent data, small to large.

For each size N, generates N help-centre articles (title and a Markdown body of one to three
paragraphs; no categories, no alternate questions, no intents), imports them into a fresh
SQLite database with the real ``tierdesk kb import``, then runs the real ``tierdesk train`` in a
child process and reports its wall time, CPU time and peak resident memory (ru_maxrss of the
child), with the tiers it chose and how it held queries out. The default sizes cover each way
of holding out (``app/nlp/pipeline/splits.py``): up to 1,000 texts, 10 folds drawn three times;
under 6,000, 10 folds; from 6,000, one split. Targets (issue 12): 100,000 articles in at most
15 minutes and 4 GiB; every size within the same memory.

Then what the KB's size costs at query time: another child loads the trained engine as a
server worker does (one torch thread; no answer cache, no admission control, as ``tierdesk
ask``) and answers 200 questions worded like the titles of random articles, after 20 to warm
up; reported are the load time and the median time of ``Engine.answer``.

    .venv/bin/python bench/bench_train_scale.py [--articles 100 1000 5000 100000]

Writes bench/out/train_scale.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
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
    """Wall s, CPU s and peak RSS MiB of one child command, from its own rusage (``wait4``:
    RUSAGE_CHILDREN would give the largest of every child so far)."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        child = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read().decode("utf-8", "replace")
    if child.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{output}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output


PROBE_QUESTIONS = 200
PROBE_WARMUP = 20
PROBE_MARK = "probe: "  # the child's result line, apart from its log lines


def _questions(titles: list[str], rng: random.Random) -> list[str]:
    """Questions worded like random articles' titles ("how can i rename a backup invoice?")."""
    picked = rng.choices(titles, k=PROBE_WARMUP + PROBE_QUESTIONS)
    return [t.split(" (")[0].replace("How do I", "how can i") + "?" for t in picked]


def probe(questions_file: Path) -> None:
    """In a child process of ``measure``: load the trained engine and time its answers; prints
    one JSON line."""
    import statistics

    from app import create_app
    from app.nlp.ask import engine_config
    from app.nlp.bert import configure_threads
    from app.nlp.engine import Engine

    configure_threads(1)  # a server worker's setting (app/forking.py)
    with create_app({"LOAD_MODELS": False}).app_context() as ctx:  # loaded below, timed
        engine = Engine(engine_config(ctx.app.config))
    started = time.perf_counter()
    engine.load()
    load_seconds = time.perf_counter() - started
    if not engine.ready:
        sys.exit(f"the trained engine is not ready: {engine.not_ready_reason}")
    questions = questions_file.read_text(encoding="utf-8").splitlines()
    routes: dict[str, int] = {}
    times = []
    for n, question in enumerate(questions):
        started = time.perf_counter()
        decision = engine.answer(question)
        if n >= PROBE_WARMUP:
            times.append((time.perf_counter() - started) * 1000.0)
            routes[str(decision.route)] = routes.get(str(decision.route), 0) + 1
    engine.close()
    print(
        PROBE_MARK
        + json.dumps(
            {
                "load_seconds": round(load_seconds, 1),
                "answer_ms_p50": round(statistics.median(times), 2),
                "answer_ms_p90": round(statistics.quantiles(times, n=10)[-1], 2),
                "routes": routes,
            }
        )
    )


def measure(articles: int, seed: int) -> dict:
    """Import and train ``articles`` generated articles; wall, CPU and peak memory of training,
    then the trained engine's load time and answer latency."""
    tierdesk = str(Path(sys.executable).parent / "tierdesk")
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="tierdesk-scale-") as tmp:
        work = Path(tmp)
        kb = work / "kb.jsonl"
        titles = []
        with kb.open("w", encoding="utf-8") as fh:
            for n in range(articles):
                article = _article(n, rng)
                titles.append(article["title"])
                fh.write(json.dumps(article) + "\n")
        questions = work / "questions.txt"
        questions.write_text("\n".join(_questions(titles, rng)) + "\n", encoding="utf-8")
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
        *_, probed = _run([sys.executable, __file__, "--probe", str(questions)], env)
        marked = [line for line in probed.splitlines() if line.startswith(PROBE_MARK)]
        serving = json.loads(marked[-1].removeprefix(PROBE_MARK))
    return {
        "articles": articles,
        "import_seconds": round(import_wall, 1),
        "train_seconds": round(wall, 1),
        "train_cpu_seconds": round(cpu, 1),
        "train_peak_rss_mib": round(rss, 1),
        "serving": serving,
        "held_out": manifest.get("metrics", {}).get("held_out"),
        "tiers_active": manifest.get("tiers_active"),
        "train_output": output.strip().splitlines(),
    }


def _held_out(result: dict) -> str:
    """How training held queries out: "10 folds x 3", "10 folds" or "one split"."""
    held = result.get("held_out") or {}
    if held.get("mode") != "folds":
        return "one split"
    folds, repeats = held.get("folds", 0), held.get("repeats", 1)
    per_draw = folds // max(repeats, 1)
    return f"{per_draw} folds" + (f" x {repeats}" if repeats > 1 else "")


def cpu_description() -> str:
    """The CPU the figures come from: the KB's embedding pass, most of the time at scale, is
    compute-bound, and the same code and KB have taken 3.5 times as long on one 2-core machine
    as on another (``docs/benchmarks.md``)."""
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags":
                flags = set(value.split())
    except OSError:
        pass
    vector = next((f for f in ("avx512_vnni", "avx512f", "avx2") if f in flags), "")
    label = {"avx512_vnni": "AVX-512 VNNI", "avx512f": "AVX-512", "avx2": "AVX2 only"}
    return f"{model}, {os.cpu_count()} cores" + (f", {label[vector]}" if vector else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, nargs="+", default=[100, 1_000, 5_000, 100_000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)  # measure's child
    args = parser.parse_args()
    if args.probe:
        probe(args.probe)
        return
    cpu = cpu_description()
    results = []
    for articles in args.articles:
        # training is silent (--quiet) and takes up to half an hour at 100,000 articles
        print(f"{articles:,} articles: importing and training ...", file=sys.stderr, flush=True)
        results.append(measure(articles, args.seed))
        print(
            f"{articles:,} articles: {results[-1]['train_seconds']:.0f} s, "
            f"{results[-1]['train_peak_rss_mib']:,.0f} MiB",
            file=sys.stderr,
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "targets": {"seconds": TARGET_SECONDS, "mib": TARGET_MIB},
                "cpu": cpu,
                "runs": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(
        "| articles (no intents) | held out | `tierdesk train` | CPU | peak RSS | import "
        "| engine load | answer p50 |\n"
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    for r in results:
        print(
            f"| {r['articles']:,} | {_held_out(r)} | {r['train_seconds']:,.0f} s "
            f"| {r['train_cpu_seconds']:,.0f} s | {r['train_peak_rss_mib']:,.0f} MiB "
            f"| {r['import_seconds']:.0f} s | {r['serving']['load_seconds']:.0f} s "
            f"| {r['serving']['answer_ms_p50']:.1f} ms |"
        )
    print(
        f"\nOn {cpu}. Targets: 100,000 articles in <= {TARGET_SECONDS} s and <= {TARGET_MIB:,} MiB."
    )


if __name__ == "__main__":
    main()
