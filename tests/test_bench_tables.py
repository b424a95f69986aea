"""bench/run_all.py --update-tables: each benchmark's tables go into its own block of the
benchmarks page; the prose around them and other benchmarks' blocks are kept."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("run_all", _ROOT / "bench" / "run_all.py")
run_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_all)

PAGE = """# Benchmarks

## Routing

Prose a person wrote about routing.

<!-- bench:eval (2026-01-01, Python 3.11.0) -->
| old | table |
|---|---|
| 1 | 2 |
<!-- /bench:eval -->

More prose, after the table.

<!-- bench:eval_telco -->
| telco | old |
|---|---|
<!-- /bench:eval_telco -->

Closing words.
"""


def test_only_the_blocks_of_benchmarks_that_ran_are_rewritten(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE)
    new = ["| new | table |", "|---|---|", "| a \\1 b | 3 |"]
    run_all.update_tables({"eval": new}, path=page, stamp="2026-12-07, Python 3.11.7")
    text = page.read_text()
    block = re.search(r"<!-- bench:eval \(([^)]*)\) -->\n(.*?)<!-- /bench:eval -->", text, re.S)
    assert block.group(1) == "2026-12-07, Python 3.11.7"
    assert block.group(2).strip().splitlines() == new  # a backslash is kept as written
    assert "| old | table |" not in text
    # the prose and the telco block, whose benchmark did not run, are untouched
    for kept in (
        "Prose a person wrote about routing.",
        "More prose, after the table.",
        "| telco | old |",
        "Closing words.",
    ):
        assert text.count(kept) == 1
    assert text.index("Prose a person") < text.index("| new | table |") < text.index("More prose")


def test_a_prefix_of_another_name_does_not_match_its_block(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE)
    run_all.update_tables({"eval_telco": ["| telco | new |"]}, path=page, stamp="s")
    text = page.read_text()
    assert "| old | table |" in text  # the eval block is not eval_telco's
    assert "| telco | old |" not in text
    assert "<!-- bench:eval_telco (s) -->\n\n| telco | new |\n\n<!-- /bench:eval_telco -->" in text


def test_a_benchmark_without_a_block_gets_one_at_the_end(tmp_path):
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE)
    run_all.update_tables({"pii": ["#### PII", "| x |", "|---|"]}, path=page, stamp="s")
    text = page.read_text()
    assert text.startswith(PAGE.rstrip("\n"))
    assert text.endswith(
        "### pii\n\n<!-- bench:pii (s) -->\n\n#### PII\n| x |\n|---|\n\n<!-- /bench:pii -->\n"
    )
    # run again: the block is found and replaced, not added twice
    run_all.update_tables({"pii": ["| y |"]}, path=page, stamp="t")
    text = page.read_text()
    assert text.count("<!-- bench:pii") == 1 and "| y |" in text and "| x |" not in text


def test_the_benchmarks_page_has_a_block_for_each_table_benchmark():
    text = (_ROOT / "docs" / "benchmarks.md").read_text()
    for name in (
        "eval",
        "eval_telco",
        "eval_assistant",
        "eval_multi",
        "faq",
        "learning",
        "train_scale",
        "passages",
        "import",
        "load",
        "bm25",
        "bert",
    ):
        assert run_all._block(name).search(text), name
