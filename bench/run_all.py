"""Run every benchmark in bench/ and collect their tables.

Each ``bench/bench_*.py`` script prints one or more Markdown tables and writes its raw figures
to ``bench/out/<name>.json``. This runner executes them one after another (never in parallel:
the machine has two cores and the figures would interfere), then, with ``--update-tables``,
writes the tables each one printed into its own block of ``docs/benchmarks.md``:

    <!-- bench:eval (2026-12-07, Python 3.11.7) -->
    | strategy | ... |
    <!-- /bench:eval -->

Only the lines between a block's markers are replaced, and only for the benchmarks that ran, so
the prose around the tables (written by people) and other benchmarks' tables stay as they are.
A benchmark without a block yet gets one, under its own heading, at the end of the file.

    python bench/run_all.py                 # all benchmarks
    python bench/run_all.py eval bm25       # only bench_eval.py and bench_bm25.py
    python bench/run_all.py --update-tables
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
TABLES = ROOT / "docs" / "benchmarks.md"
# Only the tables inside each benchmark's block of docs/benchmarks.md are generated; the prose
# there and the README's summary of targets are written by people.
BANKING77 = os.environ.get("TIERDESK_BANKING77", str(ROOT.parent / "shared" / "data" / "banking77"))
# Scripts run again with other arguments after their default run (another data set).
EXTRA_RUNS = {
    "bench_eval.py": [
        ["--data", "bench/datasets/telco_intents", "--name", "eval_telco"],
        ["--data", "bench/datasets/assistant_intents", "--name", "eval_assistant"],
        # the three as one 148-intent set of many domains, CLINC150's shape and size
        ["--data", BANKING77, "--data", "bench/datasets/telco_intents"]
        + ["--data", "bench/datasets/assistant_intents", "--name", "eval_multi"],
    ],
}


def discover(names: list[str]) -> list[Path]:
    scripts = sorted(BENCH_DIR.glob("bench_*.py"))
    if names:
        wanted = {f"bench_{n}.py" if not n.startswith("bench_") else n for n in names}
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            sys.exit(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        scripts = [s for s in scripts if s.name in wanted]
    return scripts


def run(script: Path, args: list[str]) -> tuple[int, list[str], float]:
    """Run one script, echoing its output, and return (exit code, table lines, seconds)."""
    print(f"\n=== {' '.join([script.name, *args])} ===", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script), *args], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    tables: list[str] = []
    in_table = False
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        line = line.rstrip("\n")
        keep = line.startswith("|") or line.startswith("#### ")
        if keep and not in_table and tables:
            tables.append("")  # tables printed apart stay apart
        if keep:
            tables.append(line)
        in_table = keep
    code = proc.wait()
    return code, tables, time.perf_counter() - start


def _block(name: str) -> re.Pattern[str]:
    """A benchmark's block: its start marker (with or without a stamp), the lines, its end."""
    name = re.escape(name)
    return re.compile(rf"<!-- bench:{name}(?: [^>]*)? -->\n(.*?)<!-- /bench:{name} -->", re.S)


def update_tables(sections: dict[str, list[str]], path: Path = TABLES, stamp: str = "") -> None:
    """Write each section's tables into its block of ``path``, adding the blocks it lacks."""
    text = path.read_text()
    stamp = stamp or (
        f"{datetime.now(UTC).strftime('%Y-%m-%d')}, Python {platform.python_version()}"
    )
    added = []
    for name, tables in sections.items():
        block = "\n".join(
            [f"<!-- bench:{name} ({stamp}) -->", "", *tables, "", f"<!-- /bench:{name} -->"]
        )
        found = _block(name).search(text)
        if found:
            text = text[: found.start()] + block + text[found.end() :]
        else:
            text = text.rstrip("\n") + f"\n\n### {name}\n\n{block}\n"
            added.append(name)
    path.write_text(text if text.endswith("\n") else text + "\n")
    print(
        f"{path.name}: tables of {len(sections)} benchmark(s) updated"
        + (f", new block(s) at the end: {', '.join(added)}" if added else "")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--update-tables", action="store_true")
    args = parser.parse_args()
    (BENCH_DIR / "out").mkdir(exist_ok=True)
    sections: dict[str, list[str]] = {}
    failed = []
    for script in discover(args.names):
        for extra in [[], *EXTRA_RUNS.get(script.name, [])]:
            code, tables, seconds = run(script, extra)
            label = " ".join([script.name, *extra])
            print(f"--- {label}: exit {code} in {seconds:.0f} s", flush=True)
            if code != 0:
                failed.append(label)
            elif tables:
                name = script.stem.removeprefix("bench_")
                sections[extra[-1] if extra else name] = tables
    if args.update_tables and sections:
        update_tables(sections)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
