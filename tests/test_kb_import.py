"""``import_paths`` on real databases: every format, bad input, idempotence, replace, dry run,
export round trip. Tests marked with ``any_db_url`` run on SQLite and on PostgreSQL."""

from __future__ import annotations

import io
import json

import pytest
from fixtures_kb import articles, rejected, run_import, snapshot
from sqlalchemy import select, update

from app import migrate
from app.db import session_scope
from app.kb.exporter import write_articles
from app.kb.records import MAX_TITLE, ArticleRecord, InvalidArticle
from app.kb.slugs import free_slug
from app.kb.store import upsert_article
from app.models import Article
from app.review.service import teach_article, teach_question
from app.state import KB_REVISION, get_revision


def revision(url) -> int:
    with session_scope(url) as session:
        return get_revision(session, KB_REVISION)


CSV_TEXT = (
    "title,answer,category,tags,questions,slug\n"
    'Where is my card?,"Cards arrive in **5 days**.\nTrack them in the app.",card_arrival,'
    "cards|delivery,My card has not come|How long is delivery?,\n"
    "Reset PIN,Use the app.,change_pin,,,pin-reset\n"
)


# ----------------------------------------------------------------------------- formats


def test_csv_import_creates_articles_with_rendered_html(db_url, write_kb_file):
    path = write_kb_file("faq.csv", CSV_TEXT)
    report = run_import(db_url, [path])
    assert (report.created, report.updated, report.unchanged, report.rejected) == (2, 0, 0, 0)
    stored = articles(db_url)
    card = stored["where-is-my-card"]
    assert card.body == "Cards arrive in **5 days**.\nTrack them in the app."
    assert "<strong>5 days</strong>" in card.body_html
    assert card.tags == ["cards", "delivery"]
    assert card.questions == ["My card has not come", "How long is delivery?"]
    assert card.category == "card_arrival" and card.published and card.version == 1
    assert card.source == str(path)
    assert stored["pin-reset"].title == "Reset PIN"


def test_json_list_and_jsonl(db_url, write_kb_file):
    json_path = write_kb_file(
        "a.json",
        json.dumps(
            [
                {"title": "Card fees", "body": "Cards are free.", "tags": ["fees"]},
                {"title": "ATM limits", "answer": "500 EUR a day.", "questions": "Cash limit?"},
            ],
            indent=2,
        ),
    )
    jsonl_path = write_kb_file(
        "b.jsonl",
        '{"title": "Freeze a card", "body": "Tap Freeze.", "published": false}\n\n'
        '{"slug": "exchange-rates", "title": "Exchange rates", "body": "We use the daily rate."}\n',
    )
    report = run_import(db_url, [json_path, jsonl_path])
    assert report.created == 4
    stored = articles(db_url)
    assert stored["atm-limits"].body == "500 EUR a day."
    assert stored["atm-limits"].questions == ["Cash limit?"]
    assert stored["card-fees"].tags == ["fees"]
    assert stored["freeze-a-card"].published is False
    assert stored["exchange-rates"].title == "Exchange rates"


def test_markdown_folder_is_read_recursively(db_url, write_kb_file, tmp_path):
    write_kb_file(
        "kb/cards/card-arrival.md",
        "---\ntitle: Where is my new card?\nslug: card-arrival\ncategory: card_arrival\n"
        "tags: [cards, delivery]\nquestions:\n  - My card has not come\n  - Card still missing\n"
        "---\nCards arrive within *5 working days*.\n",
    )
    write_kb_file("kb/top-up.md", "# Topping up by card\n\nAdd money with any debit card.\n")
    write_kb_file("kb/README.md", "This folder holds the articles.\n")
    write_kb_file("kb/.drafts/secret.md", "---\ntitle: Draft\n---\nNot yet.\n")
    report = run_import(db_url, [tmp_path / "kb_input" / "kb"])
    assert report.created == 2
    stored = articles(db_url)
    assert stored["card-arrival"].questions == ["My card has not come", "Card still missing"]
    assert stored["card-arrival"].tags == ["cards", "delivery"]
    assert "<em>5 working days</em>" in stored["card-arrival"].body_html
    top_up = stored["topping-up-by-card"]
    assert top_up.title == "Topping up by card"
    assert top_up.body == "Add money with any debit card."


def test_qna_tsv_groups_alternate_questions_and_reads_metadata(db_url, write_kb_file):
    path = write_kb_file(
        "qna.tsv",
        "Question\tAnswer\tSource\tMetadata\tQnaId\n"
        "How do I close my account?\tGo to Settings > Close account.\tfaq.html\t"
        "category:terminate_account|product:current\t7\n"
        "What are your opening hours?\tThe app works 24/7.\tfaq.html\t\t8\n"
        "Can I delete my account?\tGo to Settings > Close account.\tfaq.html\t\t7\n",
    )
    report = run_import(db_url, [path])
    assert report.created == 2
    closing = articles(db_url)["how-do-i-close-my-account"]
    assert closing.questions == ["Can I delete my account?"]
    assert closing.category == "terminate_account"
    assert closing.tags == ["product:current"]
    assert closing.source == "faq.html"


def test_html_answers_are_sanitised_before_storage(db_url, write_kb_file):
    path = write_kb_file(
        "html.jsonl",
        json.dumps(
            {
                "title": "Phishing",
                "body": '<p onclick="x()">Never share your PIN.</p><script>steal()</script>'
                '<a href="javascript:alert(1)">report</a> <a href="https://bank.example">ok</a>',
            }
        )
        + "\n",
    )
    run_import(db_url, [path])
    article = articles(db_url)["phishing"]
    for stored in (article.body, article.body_html):
        assert "script" not in stored and "steal" not in stored
        assert "onclick" not in stored and "javascript:" not in stored
    assert "Never share your PIN." in article.body_html
    assert 'href="https://bank.example"' in article.body_html


# ----------------------------------------------------------------------------- encodings


def test_bom_crlf_and_quoted_newlines(db_url, write_kb_file):
    content = (
        "\ufefftitle,body\r\n"
        '"Multi line","first line\r\nsecond line\r\nthird line"\r\n'
        "Plain,one line\r\n"
    )
    path = write_kb_file("bom.csv", content.encode("utf-8"))
    report = run_import(db_url, [path])
    assert report.created == 2
    assert articles(db_url)["multi-line"].body == "first line\nsecond line\nthird line"


def test_line_numbers_are_physical_lines_after_quoted_newlines(db_url, write_kb_file):
    path = write_kb_file(
        "lines.csv",
        'title,body\r\nOne,"a\r\nb\r\nc"\r\n\r\nTwo,\r\nThree,ok\r\n',
    )
    assert rejected(db_url, [path]) == [f"{path}:6: body is empty"]


def test_non_utf8_bytes_name_file_and_line(db_url, write_kb_file):
    path = write_kb_file("latin1.csv", "title,body\nCafé,ok\nThé,fine\n".encode("latin-1"))
    problems = rejected(db_url, [path])
    assert problems == [
        f"{path}:2: not valid UTF-8 (byte 0xE9 at column 4); save the file as UTF-8",
        f"{path}:3: not valid UTF-8 (byte 0xE9 at column 3); save the file as UTF-8",
    ]


def test_utf16_files_get_a_clear_error(db_url, write_kb_file):
    path = write_kb_file("utf16.csv", "title,body\nA,b\n".encode("utf-16"))
    assert rejected(db_url, [path]) == [f"{path}:1: file is UTF-16 encoded; save it as UTF-8"]


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.csv", "", "file is empty"),
        ("header.csv", "title,body\n", "no records after the header row"),
        ("empty.jsonl", "\n\n", "file is empty"),
        ("empty.json", "  ", "file is empty"),
        ("list.json", "[]", "the list is empty"),
        ("empty.md", "\n", "file is empty"),
        ("empty.tsv", "", "file is empty"),
    ],
)
def test_empty_files_are_rejected(db_url, write_kb_file, name, content, reason):
    path = write_kb_file(name, content)
    assert rejected(db_url, [path]) == [f"{path}:1: {reason}"]


# ----------------------------------------------------------------------------- invalid records


def test_every_problem_is_reported_and_nothing_written(db_url, write_kb_file):
    csv_path = write_kb_file(
        "bad.csv",
        "title,body,slug\n"
        "Good one,fine,good-one\n"
        f"{'T' * (MAX_TITLE + 1)},long title,\n"
        ",no title,\n"
        "Bad slug,x,Bad Slug\n"
        "Good two,fine,good-one\n"
        "Too,many,fields,here\n",
    )
    json_path = write_kb_file(
        "bad.json",
        '[\n  {"title": "Fine", "body": "ok"},\n  {"title": true, "body": [1]},\n  "nope"\n]',
    )
    problems = rejected(db_url, [csv_path, json_path])
    assert problems == [
        f"{csv_path}:3: title is {MAX_TITLE + 1} characters; the limit is {MAX_TITLE}",
        f"{csv_path}:4: title is empty",
        f"{csv_path}:5: slug 'Bad Slug' is not lowercase ASCII kebab-case (try 'bad-slug')",
        f"{csv_path}:6: duplicate slug 'good-one'; first used at {csv_path}:2",
        f"{csv_path}:7: 4 fields but the header has 3 (an unquoted ',' or quote inside a value?)",
        f"{json_path}:3: title must be text, not bool",
        f"{json_path}:3: body must be text, not list",
        f"{json_path}:4: expected an object, found str",
    ]
    assert articles(db_url) == {}


def test_derived_duplicate_slugs_across_files_get_a_suffix_and_a_warning(db_url, write_kb_file):
    first = write_kb_file("one.csv", "title,body\nCard fees?,a\n")
    second = write_kb_file("two.jsonl", '{"title": "Card fees!", "body": "b"}\n')
    report = run_import(db_url, [first, second])
    assert (report.created, report.problems) == (2, [])
    assert report.warnings == [
        f"{second}:1: slug 'card-fees' (derived from the title) is already used at {first}:2; "
        "this article gets 'card-fees-2'"
    ]
    stored = articles(db_url)
    assert (stored["card-fees"].body, stored["card-fees-2"].body) == ("a", "b")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("cols.csv", "name,notes\nA,b\n", "1: missing required column(s) title, body; found "
         "name, notes (a title column may also be named question, Q, query, FAQ or prompt; a "
         "body column answer, A, response, reply, content or description)"),
        ("semi.csv", "title;body\nA;b\n", "1: missing required column(s) title, body; found "
         "title;body (is the file separated by something other than ',' ?)".replace(" ?", "?")),
        ("quote.csv", 'title,body\nA,"never closed\nB,c\n', "2: a quoted value starting in this "
         "record is never closed (missing '\"')"),
        ("bad.jsonl", '{"title": "A", "body": "b"}\n{"title": \n', "2: invalid JSON: Expecting "
         "value (column 11)"),
        ("fm.md", "---\ntitle: A\nbody: [unclosed\n---\nText\n", "3: invalid YAML front matter: "),
        ("open.md", "---\ntitle: A\nText\n", "1: front matter opened with '---' is never closed"),
        ("notes.log", "hello", "1: unsupported file type"),
        ("meta.tsv", "Question\tAnswer\tMetadata\nQ?\tA.\tjustaword\n", "2: metadata item "
         "'justaword' is not key:value"),
    ],
)  # fmt: skip
def test_malformed_files(db_url, write_kb_file, name, content, expected):
    path = write_kb_file(name, content)
    problems = rejected(db_url, [path])
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}:{expected}"), problems


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("deep.json", "[" * 100_000),
        ("deep.html", "<title>Deep</title>" + "<div>" * 5_000 + "text"),
    ],
)
def test_files_nested_too_deeply_are_a_problem_not_a_crash(db_url, write_kb_file, name, content):
    path = write_kb_file(name, content)
    assert rejected(db_url, [path]) == [
        f"{path}:1: nested too deeply to read (unclosed tags or brackets?)"
    ]


def test_missing_path_is_reported(db_url, tmp_path):
    missing = tmp_path / "nowhere.csv"
    assert rejected(db_url, [missing]) == [f"{missing}:1: no such file or folder"]


def test_nul_characters_are_rejected(db_url, write_kb_file):
    path = write_kb_file("nul.jsonl", json.dumps({"title": "A", "body": "b\u0000c"}) + "\n")
    assert rejected(db_url, [path]) == [f"{path}:1: body contains a NUL (\\x00) character"]


# ----------------------------------------------------------------------------- database behaviour


def test_importing_twice_changes_nothing_the_second_time(any_db_url, write_kb_file):
    path = write_kb_file("faq.csv", CSV_TEXT)
    first = run_import(any_db_url, [path])
    assert (first.created, first.updated) == (2, 0)
    assert first.revision == revision(any_db_url) == 1
    before = snapshot(any_db_url)
    second = run_import(any_db_url, [path])
    assert (second.created, second.updated, second.unchanged) == (0, 0, 2)
    assert second.revision is None
    assert snapshot(any_db_url) == before


def test_changed_rows_are_updated_and_versioned(any_db_url, write_kb_file):
    path = write_kb_file("faq.csv", CSV_TEXT)
    run_import(any_db_url, [path])
    edited = write_kb_file("faq.csv", CSV_TEXT.replace("Use the app.", "Use the **app**."))
    report = run_import(any_db_url, [edited])
    assert (report.created, report.updated, report.unchanged) == (0, 1, 1)
    stored = articles(any_db_url)
    assert stored["pin-reset"].version == 2
    assert "<strong>app</strong>" in stored["pin-reset"].body_html
    assert stored["where-is-my-card"].version == 1
    assert revision(any_db_url) == 2


def test_an_articles_web_source_is_where_its_relative_links_lead(db_url, write_kb_file):
    """A source at a web address is where the article was published: its relative links
    resolve there, and a new address is a change; without one they keep only their text."""
    text = (
        "title,body,source\n"
        "Refunds,See [the form](../forms/refund).,https://help.acme.example/billing/refunds\n"
        "Fees,See [the form](../forms/refund).,fees.md\n"
    )
    run_import(db_url, [write_kb_file("faq.csv", text)])
    stored = articles(db_url)
    assert 'href="https://help.acme.example/forms/refund"' in stored["refunds"].body_html
    assert stored["fees"].body_html == "<p>See the form.</p>"
    moved = text.replace("help.acme.example/billing/", "acme.example/help/billing/")
    moved = moved.replace("fees.md", "other/fees.md")
    report = run_import(db_url, [write_kb_file("faq.csv", moved)])
    assert (report.updated, report.unchanged) == (1, 1)  # a file path's change is no change
    assert 'href="https://acme.example/help/forms/refund"' in articles(db_url)["refunds"].body_html


def test_rejected_import_leaves_the_database_exactly_as_it_was(any_db_url, write_kb_file):
    run_import(any_db_url, [write_kb_file("faq.csv", CSV_TEXT)])
    before = snapshot(any_db_url)
    bad = write_kb_file("bad.csv", CSV_TEXT.replace("Use the app.", "Changed.") + "No body,\n")
    assert rejected(any_db_url, [bad], replace=True) == [f"{bad}:5: body is empty"]
    assert snapshot(any_db_url) == before


def test_a_taught_question_and_a_reviewers_article_outlive_imports(any_db_url, write_kb_file):
    """On both databases: what the console taught stays through an import of the same article
    and through --replace (the console's flow itself: tests/test_console_flow.py)."""
    full = write_kb_file("full.csv", CSV_TEXT)
    run_import(any_db_url, [full])
    with session_scope(any_db_url) as session:
        teach_question(session, "pin  forgotten", "pin-reset")
        teach_article(
            session, title="Freeze a card", body="Tap Freeze.", category=None, question="freeze?"
        )
    pins = write_kb_file(
        "pins.csv",
        CSV_TEXT.split("\n", 1)[0] + "\nReset PIN,Use the app today.,change_pin,,,pin-reset\n",
    )
    report = run_import(any_db_url, [pins], replace=True)
    assert (report.updated, report.unpublished) == (1, 1)  # where-is-my-card goes
    stored = articles(any_db_url)
    assert stored["pin-reset"].questions[-1] == "pin forgotten"
    assert stored["pin-reset"].taught_questions == ["pin forgotten"]
    assert stored["freeze-a-card"].published is True


def test_taught_questions_move_with_an_export_to_another_instance(db_url, write_kb_file, tmp_path):
    """An export imported elsewhere (staging to production, a restore) keeps which questions
    reviewers taught, so a later import of the help centre there keeps them too."""
    full = write_kb_file("full.csv", CSV_TEXT)
    run_import(db_url, [full])
    with session_scope(db_url) as session:
        teach_question(session, "pin forgotten", "pin-reset")
        out = io.StringIO()
        write_articles(session, out)
    exported = write_kb_file("export.jsonl", out.getvalue())
    assert '"taught_questions": ["pin forgotten"]' in out.getvalue()
    other = f"sqlite:///{tmp_path / 'other.db'}"
    migrate.upgrade(other)
    assert run_import(other, [exported]).created == 2
    assert articles(other)["pin-reset"].taught_questions == ["pin forgotten"]
    run_import(other, [full])  # the help centre, which does not list it
    assert articles(other)["pin-reset"].questions == ["pin forgotten"]
    # The help centre again at home: nothing to change. An instance holding the article
    # without knowing which question was taught learns it from an export.
    assert run_import(db_url, [full]).unchanged == 2
    with session_scope(db_url) as session:
        session.execute(update(Article).values(taught_questions=[]))
    assert run_import(db_url, [exported]).updated == 1
    assert articles(db_url)["pin-reset"].taught_questions == ["pin forgotten"]
    # A taught question is a question, listed among them or not.
    only = write_kb_file(
        "only.jsonl", '{"title": "Fees", "body": "None.", "taught_questions": ["cost?"]}\n'
    )
    run_import(db_url, [only])
    assert (articles(db_url)["fees"].questions, articles(db_url)["fees"].taught_questions) == (
        ["cost?"],
        ["cost?"],
    )


def test_replace_unpublishes_absent_articles_and_reimport_republishes(any_db_url, write_kb_file):
    full = write_kb_file("full.csv", CSV_TEXT)
    run_import(any_db_url, [full])
    partial = write_kb_file(
        "partial.csv", "title,body,slug,category\nReset PIN,Use the app.,pin-reset,change_pin\n"
    )
    report = run_import(any_db_url, [partial], replace=True)
    assert (report.unchanged, report.unpublished) == (1, 1)
    assert ("unpublish", "where-is-my-card") in report.changes
    stored = articles(any_db_url)
    assert stored["where-is-my-card"].published is False
    assert stored["where-is-my-card"].version == 2
    assert stored["pin-reset"].published is True
    without_replace = run_import(any_db_url, [partial])
    assert without_replace.unpublished == 0
    again = run_import(any_db_url, [full])
    assert (again.updated, again.unchanged) == (1, 1)
    assert articles(any_db_url)["where-is-my-card"].published is True


def test_dry_run_reports_changes_and_writes_nothing(any_db_url, write_kb_file):
    run_import(any_db_url, [write_kb_file("faq.csv", CSV_TEXT)])
    before = snapshot(any_db_url)
    edited = write_kb_file(
        "edited.csv",
        CSV_TEXT.replace("Use the app.", "Use the website.") + "New article,Brand new.,\n",
    )
    report = run_import(any_db_url, [edited], dry_run=True, replace=True)
    assert (report.created, report.updated, report.unchanged) == (1, 1, 1)
    assert sorted(report.changes) == [("create", "new-article"), ("update", "pin-reset")]
    assert "dry run" in report.summary()
    assert snapshot(any_db_url) == before


def test_export_then_import_changes_nothing(any_db_url, write_kb_file, tmp_path):
    run_import(any_db_url, [write_kb_file("faq.csv", CSV_TEXT)])
    run_import(
        any_db_url,
        [
            write_kb_file(
                "more.jsonl",
                json.dumps(
                    {"title": "Hidden", "body": "<b onclick=x>Draft</b> & more", "published": False}
                )
                + "\n",
            )
        ],
    )
    out = io.StringIO()
    with session_scope(any_db_url) as session:
        assert write_articles(session, out) == 3
    exported = write_kb_file("export.jsonl", out.getvalue())
    before = snapshot(any_db_url)
    report = run_import(any_db_url, [exported])
    assert (report.created, report.updated, report.unchanged) == (0, 0, 3)
    assert snapshot(any_db_url) == before


# ----------------------------------------------------------------------------- single upserts


def test_upsert_article_creates_updates_and_detects_unchanged(any_db_url):
    record = ArticleRecord(title="Card limits", body="500 EUR a day.", tags=("cards",))
    with session_scope(any_db_url) as session:
        assert upsert_article(session, record) == "created"
        assert upsert_article(session, record) == "unchanged"
        changed = ArticleRecord(title="Card limits", body="1000 EUR a day.")
        assert upsert_article(session, changed) == "updated"
        article = session.scalar(select(Article).where(Article.slug == "card-limits"))
        assert article.version == 2 and article.body == "1000 EUR a day."
        assert free_slug(session, "Card limits") == "card-limits-2"
        with pytest.raises(InvalidArticle):
            upsert_article(session, ArticleRecord(title="", body=""))


def test_a_file_named_twice_is_read_once(db_url, write_kb_file, tmp_path):
    path = write_kb_file("faq.csv", CSV_TEXT)
    folder_file = write_kb_file("kb/a.md", "# Title\n\nBody.\n")
    report = run_import(db_url, [path, path, folder_file.parent, folder_file])
    assert (report.created, report.rejected) == (3, 0)


def test_shared_loaded_kb_fixture_imports_the_sample_articles(loaded_kb, db_url):
    stored = articles(db_url)
    assert sorted(stored) == sorted(loaded_kb)
    assert all(a.body_html.startswith("<p>") and len(a.questions) == 2 for a in stored.values())
    assert revision(db_url) == 1


def test_a_thousand_articles_twice_on_every_backend(any_db_url, write_kb_file):
    """Big enough to take the bulk path (executemany batches, statistics refresh)."""
    lines = [
        json.dumps({"title": f"Question {n}", "body": f"Answer **{n}**.", "tags": [f"t{n % 5}"]})
        for n in range(1000)
    ]
    path = write_kb_file("many.jsonl", "\n".join(lines) + "\n")
    first = run_import(any_db_url, [path])
    assert (first.created, first.unchanged) == (1000, 0)
    second = run_import(any_db_url, [path])
    assert (second.created, second.updated, second.unchanged) == (0, 0, 1000)
    assert articles(any_db_url)["question-999"].body_html == "<p>Answer <strong>999</strong>.</p>"
