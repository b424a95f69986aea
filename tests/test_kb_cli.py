"""``tierdesk kb import|export`` through the real command group, as a content owner runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.cli import main
from app.config import PROJECT_ROOT
from app.db import dispose_engine, get_engine, session_scope
from app.models import Article, SystemState


def sqlite_file(url: str) -> Path:
    return Path(url.split("///", 1)[1])


def database_bytes(url: str) -> bytes:
    """The SQLite file's bytes once every connection is closed (which checkpoints the WAL).

    Connecting once first puts the file in WAL mode as the app always does, so the header's
    journal-mode bytes cannot differ between a freshly migrated file and a used one.
    """
    with get_engine(url).connect():
        pass
    dispose_engine(url)
    path = sqlite_file(url)
    assert not Path(f"{path}-wal").exists()
    return path.read_bytes()


def csv_rows(count: int, bad_row: int | None = None) -> str:
    lines = ["title,body,category,tags,questions"]
    for n in range(1, count + 1):
        body = "" if n == bad_row else f'"Answer {n}, with a comma.\nAnd a second line."'
        lines.append(f"Question number {n},{body},topic_{n % 7},tag{n % 3}|common,Alt {n}?")
    return "\n".join(lines) + "\n"


def article_count(url: str) -> int:
    with session_scope(url) as session:
        return session.scalar(select(func.count()).select_from(Article))


def test_thousand_row_csv_with_one_bad_row_changes_nothing(runner, db_url, tmp_path):
    """Acceptance: exit 1, the bad line named, the database byte-for-byte unchanged."""
    good = tmp_path / "good.csv"
    good.write_text(csv_rows(20))
    assert runner.invoke(main, ["kb", "import", str(good)]).exit_code == 0
    before = database_bytes(db_url)

    bad = tmp_path / "articles.csv"
    bad.write_text(csv_rows(1000, bad_row=637))
    result = runner.invoke(main, ["kb", "import", str(bad)])

    assert result.exit_code == 1
    # Each good record spans two physical lines (a quoted newline), the bad one only one.
    bad_line = 2 + 2 * (637 - 1)
    assert f"{bad}:{bad_line}: body is empty" in result.stderr.splitlines()
    assert "1 rejected; import rejected, nothing was changed" in result.stderr
    assert result.stdout == ""
    assert database_bytes(db_url) == before
    assert article_count(db_url) == 20


def test_same_file_twice_reports_nothing_created_or_updated(runner, db_url, tmp_path):
    path = tmp_path / "articles.csv"
    path.write_text(csv_rows(1000))
    first = runner.invoke(main, ["kb", "import", str(path)])
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == "1000 created, 0 updated, 0 unchanged, 0 unpublished, 0 rejected"
    second = runner.invoke(main, ["kb", "import", str(path)])
    assert second.exit_code == 0
    assert second.stdout.strip() == (
        "0 created, 0 updated, 1000 unchanged, 0 unpublished, 0 rejected"
    )


def test_dry_run_lists_changes_and_writes_nothing(runner, db_url, tmp_path):
    path = tmp_path / "articles.csv"
    path.write_text(csv_rows(3))
    before = database_bytes(db_url)
    result = runner.invoke(main, ["kb", "import", "--dry-run", str(path)])
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "would create    question-number-1",
        "would create    question-number-2",
        "would create    question-number-3",
        "3 created, 0 updated, 0 unchanged, 0 unpublished, 0 rejected "
        "(dry run: nothing was written)",
    ]
    assert database_bytes(db_url) == before


def test_replace_flag_unpublishes_missing_articles(runner, db_url, tmp_path):
    full, part = tmp_path / "full.csv", tmp_path / "part.csv"
    full.write_text(csv_rows(5))
    part.write_text(csv_rows(3))
    runner.invoke(main, ["kb", "import", str(full)])
    result = runner.invoke(main, ["kb", "import", "--replace", str(part)])
    assert result.stdout.strip() == "0 created, 0 updated, 3 unchanged, 2 unpublished, 0 rejected"
    with session_scope(db_url) as session:
        hidden = session.scalars(select(Article.slug).where(Article.published.is_(False))).all()
    assert sorted(hidden) == ["question-number-4", "question-number-5"]


def test_export_writes_jsonl_that_reimports_with_zero_changes(runner, db_url, tmp_path):
    source = tmp_path / "articles.csv"
    source.write_text(csv_rows(50))
    runner.invoke(main, ["kb", "import", str(source)])
    runner.invoke(main, ["kb", "import", "--replace", str(tmp_path / "articles.csv")])
    out = tmp_path / "exports" / "kb.jsonl"
    result = runner.invoke(main, ["kb", "export", str(out)])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"exported 50 articles to {out}"
    first = json.loads(out.read_text().splitlines()[0])
    assert set(first) == {
        "slug", "title", "body", "category", "tags", "questions", "taught_questions", "source",
        "published",
    }  # fmt: skip
    again = runner.invoke(main, ["kb", "import", str(out)])
    assert again.stdout.strip() == "0 created, 0 updated, 50 unchanged, 0 unpublished, 0 rejected"
    stdout = runner.invoke(main, ["kb", "export", "-"])
    assert stdout.stdout == out.read_text()


def test_large_imports_show_progress_on_stderr(runner, db_url, tmp_path):
    path = tmp_path / "big.jsonl"
    body = "A helpful answer about cards and transfers. " * 25
    with path.open("w") as out:
        for n in range(1200):
            out.write(json.dumps({"title": f"Article {n}", "body": body}) + "\n")
    assert path.stat().st_size > 1024 * 1024
    result = runner.invoke(main, ["kb", "import", str(path)])
    assert result.exit_code == 0
    assert "reading" in result.stderr and "writing" in result.stderr
    assert result.stdout.strip().startswith("1200 created")


def test_invalid_input_prints_every_problem(runner, db_url, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("title,body\n,no title\nFine,ok\nNo body,\n")
    missing = tmp_path / "missing.json"
    result = runner.invoke(main, ["kb", "import", str(path), str(missing)])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[:3] == [
        f"{missing}:1: no such file or folder",
        f"{path}:2: title is empty",
        f"{path}:4: body is empty",
    ]
    assert article_count(db_url) == 0


def _demo_markdown_files() -> list[Path]:
    folder = PROJECT_ROOT / "knowledge_base"
    return [p for p in folder.rglob("*.md") if p.name.lower() != "readme.md"]


def test_the_demo_knowledge_base_and_intents_import_cleanly(runner, db_url):
    files = _demo_markdown_files()
    if not files or not list((PROJECT_ROOT / "intents").glob("*.yaml")):
        pytest.skip("the demo knowledge_base/ or intents/ is still empty")
    kb = runner.invoke(main, ["kb", "import", str(PROJECT_ROOT / "knowledge_base")])
    assert kb.exit_code == 0, kb.stderr
    assert kb.stdout.strip().startswith(f"{len(files)} created, 0 updated")
    intents = runner.invoke(main, ["intents", "load", str(PROJECT_ROOT / "intents")])
    assert intents.exit_code == 0, intents.stderr
    listed = [line.split() for line in runner.invoke(main, ["intents", "list"]).stdout.splitlines()]
    declared = {name for name, _tier, _count in listed}
    assert all(tier in ("simple", "complex") for _name, tier, _count in listed)
    with session_scope(db_url) as session:
        for article in session.scalars(select(Article)):
            assert article.body_html and article.title
            assert len(article.questions) >= 3, article.slug
            assert article.category in declared, (article.slug, article.category)
    again = runner.invoke(main, ["kb", "import", str(PROJECT_ROOT / "knowledge_base")])
    assert again.stdout.strip().startswith(f"0 created, 0 updated, {len(files)} unchanged")


def test_database_errors_are_reported_without_a_traceback(runner, app, tmp_path):
    """A database without the schema: one line that names the cure (not "try again")."""
    app.config["SQLALCHEMY_DATABASE_URI"] = f"sqlite:///{tmp_path / 'unmigrated.db'}"
    path = tmp_path / "articles.csv"
    path.write_text(csv_rows(2))
    result = runner.invoke(main, ["kb", "import", str(path)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "database error: no such table: articles; nothing was changed: the database has no "
        "tierdesk schema or an old one, run `tierdesk db upgrade` (or `tierdesk init`) first"
    )
    dispose_engine(app.config["SQLALCHEMY_DATABASE_URI"])


def test_thousand_row_csv_with_one_bad_row_on_postgresql(runner, app, pg_url, tmp_path):
    """The acceptance test on PostgreSQL: every row and the KB revision stay as they were."""
    app.config["SQLALCHEMY_DATABASE_URI"] = pg_url
    good = tmp_path / "good.csv"
    good.write_text(csv_rows(20))
    assert runner.invoke(main, ["kb", "import", str(good)]).exit_code == 0

    def rows() -> list[tuple]:
        with session_scope(pg_url) as session:
            articles = session.execute(select(Article.__table__).order_by(Article.id)).all()
            state = session.execute(select(SystemState.__table__)).all()
        return [tuple(r) for r in [*articles, *state]]

    before = rows()
    bad = tmp_path / "articles.csv"
    bad.write_text(csv_rows(1000, bad_row=1000))
    result = runner.invoke(main, ["kb", "import", "--replace", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:{2 + 2 * 999}: body is empty" in result.stderr.splitlines()
    assert rows() == before


def test_unknown_columns_are_named_so_typos_are_not_silent(runner, db_url, tmp_path):
    path = tmp_path / "typo.csv"
    path.write_text("Title,Body,Questoins\nCard fees,Free.,What does a card cost?\n")
    result = runner.invoke(main, ["kb", "import", str(path)])
    assert result.exit_code == 0
    assert result.stderr.strip() == f"note: {path}:1: ignoring unknown column(s) Questoins"
    assert result.stdout.strip().startswith("1 created")
