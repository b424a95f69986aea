"""HTML pages (a folder of them, mixed with Markdown) and Zendesk Help Center exports as
sources: real files, the real importer and the CLI runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixtures_kb import articles, rejected, run_import, snapshot

from app.cli import main
from app.kb.sanitize import clean_source

DATA = Path(__file__).parent / "data" / "kb"


@pytest.fixture
def site(tmp_path) -> Path:
    """A saved help site: two HTML pages, a Markdown file, an _partials/ folder."""
    folder = tmp_path / "help_site"
    shutil.copytree(DATA / "help_site", folder)
    return folder


@pytest.fixture
def zendesk(tmp_path) -> Path:
    path = tmp_path / "articles.json"
    shutil.copy(DATA / "zendesk_articles.json", path)
    return path


# ----------------------------------------------------------------------------- HTML pages


def test_html_folder_mixed_with_markdown_is_read_recursively(db_url, site):
    report = run_import(db_url, [site])
    assert (report.created, report.problems, report.warnings) == (3, [], [])
    stored = articles(db_url)
    assert sorted(stored) == ["card-limits", "reset-your-pin", "topping-up-by-card"]
    assert stored["reset-your-pin"].source == str(site / "cards" / "reset-pin.html")


def test_page_title_body_and_meta(db_url, site):
    run_import(db_url, [site])
    pin = articles(db_url)["reset-your-pin"]
    assert pin.title == "Reset your PIN"  # from <title>
    assert pin.category == "change_pin"
    assert pin.tags == ["security", "pin"]
    assert pin.body.startswith(
        "<p>Open the app, choose <strong>Security</strong> and then <em>Change PIN</em>.</p>"
    )
    assert "<li>Enter your current PIN</li>" in pin.body  # implied </li>
    assert '<a href="https://bank.example/pin"' in pin.body_html
    # The <h1> repeating the title is not repeated; header, nav, aside and footer are dropped.
    for gone in ("<h1>", "Acme Help Centre", "Transfers", "Related: card limits", "Privacy"):
        assert gone not in pin.body, gone
    # Scripts, styles and event handlers are removed, content and all.
    for stored in (pin.body, pin.body_html):
        for gone in ("script", "track(", "injected", "color:", "onclick", "steal"):
            assert gone not in stored, gone


def test_title_from_the_first_h1_when_there_is_no_title_element(db_url, site):
    run_import(db_url, [site])
    limits = articles(db_url)["card-limits"]
    assert limits.title == "Card limits"
    assert limits.category is None and limits.tags == []
    assert "Card limits" not in limits.body
    # Code keeps its blank line and indentation through the Markdown renderer.
    assert "<pre><code>daily:   500 EUR\n\nmonthly: 5000 EUR\n</code></pre>" in limits.body_html
    assert limits.body_html.startswith("<p>You can take out 500 EUR a day.</p>")


def test_main_is_preferred_to_article_and_body(db_url, write_kb_file):
    path = write_kb_file(
        "page.html",
        "<html><head><title>Fees</title></head><body><p>Cookie banner</p><article>"
        "<p>Teaser</p></article><main>Transfers in euros are <b>free</b>.<div>Others cost "
        "0.5%.</div></main></body></html>",
    )
    run_import(db_url, [path])
    fees = articles(db_url)["fees"]
    assert fees.body == "<p>Transfers in euros are <b>free</b>.</p>\n<p>Others cost 0.5%.</p>"
    assert fees.body_html == fees.body


def test_a_page_inside_a_form_keeps_its_content_not_its_controls(db_url, write_kb_file):
    path = write_kb_file(
        "webforms.aspx.html",
        '<html><head><title>Opening hours</title></head><body><form id="form1">'
        '<div id="content"><p>We are open 24/7.</p><p>Was this helpful? <button>Yes</button>'
        '<input type="submit" value="No"></p></div></form></body></html>',
    )
    run_import(db_url, [path])
    hours = articles(db_url)["opening-hours"]
    assert hours.body == "<p>We are open 24/7.</p>\n<p>Was this helpful?</p>"


def test_page_without_title_or_h1_rejects_the_import(db_url, site):
    broken = site / "cards" / "broken.html"
    broken.write_text("<html><body><h2>Just a section</h2><p>No title here.</p></body></html>")
    assert rejected(db_url, [site]) == [
        f"{broken}:1: no <title> and no <h1> to take the article's title from"
    ]
    assert articles(db_url) == {}


def test_reimporting_html_pages_changes_nothing(db_url, site):
    run_import(db_url, [site])
    before = snapshot(db_url)
    again = run_import(db_url, [site])
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)
    assert snapshot(db_url) == before
    for article in articles(db_url).values():
        assert clean_source(article.body) == article.body


def test_folder_without_markdown_or_html_is_reported(db_url, tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    assert rejected(db_url, [folder]) == [
        f"{folder}:1: folder has no Markdown (.md) or HTML (.html) files"
    ]


# ----------------------------------------------------------------------------- Zendesk


def test_zendesk_export_maps_the_article_fields(db_url, zendesk):
    report = run_import(db_url, [zendesk])
    assert (report.created, report.problems) == (3, [])
    stored = articles(db_url)
    order = stored["how-do-i-order-a-new-card"]
    assert order.title == "How do I order a new card?"
    assert order.body == (
        "<p>Go to <strong>Cards</strong> and tap <em>Order card</em>.</p>\n"
        "<p>It arrives within 5 working days.</p>"
    )
    assert order.source == (
        "https://acme.zendesk.com/hc/en-us/articles/360001001-How-do-I-order-a-new-card"
    )
    assert order.category == "section-360000101"
    assert order.tags == ["cards", "ordering"]
    assert order.published is True
    draft = stored["upcoming-card-designs"]
    assert draft.published is False and draft.tags == []


def test_zendesk_bodies_are_sanitised(db_url, zendesk):
    run_import(db_url, [zendesk])
    phishing = articles(db_url)["spotting-phishing-messages"]
    assert phishing.published is True  # no draft key
    assert phishing.body.startswith("<p>We never ask for your PIN.</p>")
    for stored in (phishing.body, phishing.body_html):
        for gone in ("script", "steal", "onclick", "javascript:", "callout"):
            assert gone not in stored, gone
    assert 'href="https://acme.example/report"' in phishing.body_html


def test_zendesk_errors_name_the_article_and_reject_everything(db_url, write_kb_file):
    export = {
        "articles": [
            {"id": 1, "title": "Fine", "body": "<p>ok</p>", "section_id": 5},
            {"id": 2, "title": "", "body": None, "label_names": 3},
            {"title": "Odd", "body": "<p>x</p>", "draft": "yes", "section_id": [1]},
        ],
        "next_page": None,
    }
    path = write_kb_file("export.json", json.dumps(export))  # one line, as the API sends it
    assert rejected(db_url, [path]) == [
        f"{path}:1: articles[1] (id 2): tags must be a list or a '|'-separated text",
        f"{path}:1: articles[2]: section_id must be a number",
        f"{path}:1: articles[2]: draft must be true or false",
    ]
    assert articles(db_url) == {}
    export["articles"][1]["label_names"] = ["cards"]
    path.write_text(json.dumps(export))
    assert rejected(db_url, [path])[:2] == [
        f"{path}:1: articles[1] (id 2): title is empty",
        f"{path}:1: articles[1] (id 2): body is empty",
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"count": 0}', "1: expected a JSON list of article objects ('[' ...) or an export: "
         "an object with 'articles' (Zendesk), 'qnaDocuments' (QnA Maker) or 'assets' "
         "(question answering)"),
        ('{\n  "articles": {"id": 1}\n}', "2: 'articles' must be a list"),
        ('{"articles": []}', "1: the list is empty"),
        ('{"articles": [\n  "text"\n]}', "2: articles[0]: expected an object, found str"),
        ('{"articles": [{"title": "A", "body": "b"}] "x": 1}',
         "1: expected ',' or '}' in the object"),
    ],
)  # fmt: skip
def test_malformed_zendesk_exports(db_url, write_kb_file, content, expected):
    path = write_kb_file("bad.json", content)
    assert rejected(db_url, [path]) == [f"{path}:{expected}"]


def test_zendesk_article_lines_are_physical_lines(db_url, zendesk):
    text = zendesk.read_text().replace('"title": "Upcoming card designs"', '"title": " "')
    zendesk.write_text(text)
    line = 1 + text[: text.index('"id": 360001002')].count("\n") - 1  # the object's '{'
    assert rejected(db_url, [zendesk]) == [
        f"{zendesk}:{line}: articles[1] (id 360001002): title is empty"
    ]


def test_cli_imports_a_zendesk_export_and_a_site_together(runner, db_url, zendesk, site):
    result = runner.invoke(main, ["kb", "import", str(zendesk), str(site)])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.strip() == "6 created, 0 updated, 0 unchanged, 0 unpublished, 0 rejected"
    again = runner.invoke(main, ["kb", "import", str(zendesk), str(site)])
    assert again.stdout.strip() == "0 created, 0 updated, 6 unchanged, 0 unpublished, 0 rejected"
