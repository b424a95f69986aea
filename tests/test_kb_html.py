"""HTML pages (a folder of them, mixed with Markdown), FAQ pages (HTML and Markdown, one article
per question) and Zendesk Help Center exports as sources: real files, the real importer and the
CLI runner."""

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


@pytest.mark.parametrize(
    "title",
    [
        "Reset your PIN – Acme Help Centre",
        "Acme Help Centre | Reset your PIN",
        "reset your pin :: Acme",
        "Reset your PIN",
    ],
)
def test_a_title_that_carries_the_sites_name_gives_way_to_the_pages_h1(
    db_url, write_kb_file, title
):
    """A saved page's <title> names the site too; the content's <h1> is the article's own,
    and the longest of several that the title is made of (not the site's logo)."""
    path = write_kb_file(
        "pin.html",
        f"<html><head><title>{title}</title></head><body><div class=logo><h1>Acme</h1></div>"
        "<h1>Reset your PIN</h1><p>Open <b>Security</b> in the app.</p></body></html>",
    )
    run_import(db_url, [path])
    (pin,) = articles(db_url).values()
    assert (pin.slug, pin.title) == ("reset-your-pin", "Reset your PIN")
    assert pin.body == "<h1>Acme</h1>\n<p>Open <b>Security</b> in the app.</p>"


@pytest.mark.parametrize(
    ("head", "h1", "title"),
    [
        # the <h1> is not a part of the <title>: the <title> stays, the <h1> is body text
        ("<title>Billing FAQ</title>", "<h1>Paying your bill</h1>", "Billing FAQ"),
        # words of the title, not a part joined by a separator
        ("<title>Cards and card limits</title>", "<h1>Card limits</h1>", "Cards and card limits"),
        # no <h1>: the site's name, as the page declares it, is taken off
        (
            '<title>Refund times | Acme Help</title><meta property="og:site_name" '
            'content="Acme  Help">',
            "",
            "Refund times",
        ),
        (
            '<meta name="application-name" content="Acme"><title>Acme - Refund times</title>',
            "",
            "Refund times",
        ),
        # the title that is only the site's name stays as it is
        ('<title>Acme</title><meta property="og:site_name" content="Acme">', "", "Acme"),
    ],
)
def test_a_title_is_only_shortened_to_a_part_joined_by_a_separator(
    db_url, write_kb_file, head, h1, title
):
    path = write_kb_file(
        "page.html", f"<html><head>{head}</head><body>{h1}<p>Refunds take 5 days.</p></body></html>"
    )
    run_import(db_url, [path])
    (page,) = articles(db_url).values()
    assert page.title == title
    assert page.body == (f"{h1}\n" if h1 else "") + "<p>Refunds take 5 days.</p>"


def test_pages_that_only_list_links_to_other_pages_are_skipped_with_a_warning(
    db_url, write_kb_file
):
    """A help centre's home and section pages point to answers without giving one; as
    articles their link names (the other articles' titles) would draw questions away."""
    section = write_kb_file(
        "site/cards/index.html",
        "<html><head><title>Cards – Acme</title></head><body><nav><a href='/'>Home</a></nav>"
        "<main><h1>Cards</h1><p>3 articles</p><ul><li><a href='pin.html'>Reset your PIN</a>"
        "<li><a href='limits.html'>Card limits</a><li><a href='lost.html'>Lost or stolen "
        "cards</a></ul></main></body></html>",
    )
    index = write_kb_file(
        "site/index.md",
        "# Help\n\n- [Cards](cards/index.html)\n- [Transfers and payments](transfers.md)\n",
    )
    pin = write_kb_file(
        "site/cards/pin.html",
        "<html><head><title>Reset your PIN – Acme</title></head><body><main><h1>Reset your PIN"
        "</h1><p>Open <a href='/app'>the app</a>, then <a href='/security'>Security</a>, and "
        "choose a new PIN of four digits.</p><p>Related: <a href='limits.html'>Card limits</a>"
        "</p></main></body></html>",
    )
    report = run_import(db_url, [section.parent.parent])
    assert report.warnings == [
        f"{section}:1: a page of links to other pages (3 links, 81% of its text), not an "
        "answer: skipped",
        f"{index}:1: a page of links to other pages (2 links, 100% of its text), not an "
        "answer: skipped",
    ]
    assert list(articles(db_url)) == ["reset-your-pin"]
    assert str(pin) == articles(db_url)["reset-your-pin"].source


def test_a_page_mostly_one_link_to_another_imported_page_is_skipped(db_url, write_kb_file):
    """A section of one article: one link, which only the import can tell leads to another
    of its pages; an answer that is one link to a document, or to a page not imported,
    stays."""

    def page(title: str, main: str) -> str:
        return f"<html><head><title>{title}</title></head><body><main>{main}</main></body></html>"

    # the section and its one article have the same title: the article keeps its slug
    section = write_kb_file(
        "site/fees/index.html", page("Fees", "<ul><li><a href='charges.html'>Our fees</a></ul>")
    )
    write_kb_file("site/fees/charges.html", page("Fees", "<p>Some cost 1 EUR.</p>"))
    write_kb_file(
        "site/fees/prices.html", page("Price list", "<p><a href='prices.pdf'>Price list</a></p>")
    )
    write_kb_file(
        "site/fees/old.html", page("Old fees", "<p><a href='../archive/fees.html'>Fees</a></p>")
    )
    report = run_import(db_url, [section.parent.parent])
    assert report.warnings == [
        f"{section}:1: a page of links to other imported pages (1 link, 100% of its text), not "
        "an answer: skipped"
    ]
    assert sorted(articles(db_url)) == ["fees", "old-fees", "price-list"]


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


@pytest.mark.parametrize(
    ("page", "body"),
    [
        # role="main" marks the content as <main> does
        (
            "<div id=app><div class=menu><p>Cards</p><p>Loans</p></div><div role=main>"
            "<p>Transfers in euros are free.</p></div></div>",
            "<p>Transfers in euros are free.</p>",
        ),
        # without either, an <article>, else the element with the id main-content
        (
            "<div id=content><p>Created by Dana, last modified today</p><div id=main-content>"
            "<p>Transfers in euros are free.</p></div><p>Attachments: fees.pdf</p></div>",
            "<p>Transfers in euros are free.</p>",
        ),
        (
            "<div id=main-content><p>Sidebar</p><article><p>Transfers in euros are free.</p>"
            "</article></div>",
            "<p>Transfers in euros are free.</p>",
        ),
    ],
)
def test_the_content_is_the_element_the_page_marks_as_its_main_one(
    db_url, write_kb_file, page, body
):
    path = write_kb_file(
        "fees.html", f"<html><head><title>Fees</title></head><body>{page}</body></html>"
    )
    run_import(db_url, [path])
    assert articles(db_url)["fees"].body == body


@pytest.mark.parametrize(
    "where",
    [
        '<link rel="canonical" href="https://help.example.com/billing/refunds">',
        '<meta property="og:url" content="https://help.example.com/billing/refunds">',
        '<base href="https://help.example.com/billing/"><link rel="canonical" href="/x">',
    ],
)
def test_a_saved_page_that_says_where_it_was_published_keeps_working_links(
    db_url, write_kb_file, where
):
    """Relative links and images of a saved page resolve against its published address, in
    a page and in an FAQ page's JSON-LD answers; a page that does not say keeps only names."""
    faq = {
        "@context": "https://schema.org",
        "@type": "FAQPage",
        "mainEntity": [
            {
                "@type": "Question",
                "name": f"How do I {verb}?",
                "acceptedAnswer": {"@type": "Answer", "text": f'See <a href="{verb}">this</a>.'},
            }
            for verb in ("pay", "cancel", "upgrade")
        ],
    }
    page = write_kb_file(
        "refunds.html",
        f"<html><head><title>Refunds</title>{where}</head><body><main><p>Fill in the "
        '<a href="form">refund form</a>:</p><p><img src="img/form.png" alt="The refund form">'
        "</p></main></body></html>",
    )
    faq_page = write_kb_file(
        "faq.html",
        f"<html><head><title>FAQ</title>{where}<script type='application/ld+json'>"
        f"{json.dumps(faq)}</script></head><body></body></html>",
    )
    bare = write_kb_file(
        "bare.html",
        '<html><head><title>Bare</title></head><body><p>See <a href="form">the form</a> '
        '<img src="img/form.png" alt="(screenshot)">.</p></body></html>',
    )
    run_import(db_url, [page, faq_page, bare])
    stored = articles(db_url)
    rel = 'rel="noopener noreferrer nofollow"'
    assert stored["refunds"].body == (
        f'<p>Fill in the <a href="https://help.example.com/billing/form" {rel}>refund form</a>:'
        f'</p>\n<p><a href="https://help.example.com/billing/img/form.png" {rel}>The refund '
        "form</a></p>"
    )
    assert stored["how-do-i-cancel"].body == (
        f'<p>See <a href="https://help.example.com/billing/cancel" {rel}>this</a>.</p>'
    )
    assert stored["bare"].body == f'<p>See <a href="form" {rel}>the form</a> (screenshot).</p>'


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


REQUEST_FORM = """<html><head><title>Submit a request – Acme Help</title></head><body>
<header><a href="/">Acme Help</a></header>
<main role="main"><nav class="sub-nav"><a href="/">Acme Help</a> › Submit a request</nav>
<h1>Submit a request</h1>
<div id="main-content" class="form">
<form id="new_request" action="/requests" method="post">
<input type="hidden" name="utf8" value="✓">
<div class="form-field"><label for="email">Your email address</label>
<input type="text" name="request[email]" id="email"></div>
<div class="form-field"><label for="subject">Subject</label>
<input type="text" name="request[subject]" id="subject"></div>
<div class="form-field"><label for="description">Description</label>
<textarea name="request[description]" id="description"></textarea>
<p>Please enter the details of your request. A member of our support staff will respond as
soon as possible.</p></div>
<div class="form-field"><label for="files">Attachments</label>
<input type="file" multiple id="files"><span>Add file or drop files here</span></div>
<footer><input type="submit" value="Submit"></footer>
</form></div></main></body></html>"""

SIGN_IN = """<html><head><title>Sign in to Acme Help</title></head><body><main>
<h1>Sign in to Acme Help</h1><form action="/access/login" method="post">
<label>Email <input type="email" name="user[email]"></label>
<label>Password <input type="password" name="user[password]"></label>
<label><input type="checkbox" name="remember"> Stay signed in</label>
<input type="submit" value="Sign in"></form>
<p><a href="/password/reset">Forgot my password</a></p>
<p>New to Acme Help? <a href="/registration">Sign up</a></p>
<p>Have you emailed us? <a href="/password/new">Get a password</a></p></main></body></html>"""

CONTACT = """<html><head><title>Contact us</title></head><body><main><h1>Contact us</h1>
<p>Call us on 0800 123 456 from 8am to 8pm, Monday to Saturday, or write to Acme Bank,
1 High Street, Leeds LS1 4AP. Lost your card? Freeze it in the app at once.</p>
<form action="/contact"><label>Name <input name="name"></label>
<label>Message <textarea name="message"></textarea></label><button>Send</button></form>
</main></body></html>"""

WEBFORMS = """<html><head><title>Opening hours</title></head><body><form id="form1">
<div class="top"><label>Search <input type="text" name="q"></label></div>
<div><p>Our branches are open from 9am to 5pm on weekdays and from 9am to 1pm on Saturdays.</p>
</div></form></body></html>"""


def test_a_form_to_fill_in_is_skipped_with_a_warning_and_a_page_with_one_kept(
    db_url, write_kb_file
):
    """A saved help centre's "Submit a request" and sign-in pages are forms for the reader to
    fill, not answers; a contact page that answers before its form, and a page one form wraps
    whole around a search box, are read."""
    request = write_kb_file("site/requests/new.html", REQUEST_FORM)
    sign_in = write_kb_file("site/signin.html", SIGN_IN)
    write_kb_file("site/contact.html", CONTACT)
    write_kb_file("site/hours.html", WEBFORMS)
    report = run_import(db_url, [request.parent.parent])
    assert report.warnings == [
        f"{request}:1: a form to fill in (4 fields, 100% of its text), not an answer: skipped",
        f"{sign_in}:1: a sign-in form (2 fields, 28% of its text), not an answer: skipped",
    ]
    stored = articles(db_url)
    assert sorted(stored) == ["contact-us", "opening-hours"]
    assert "0800 123 456" in stored["contact-us"].body
    assert stored["opening-hours"].body.endswith("from 9am to 1pm on Saturdays.</p>")


def _notion_page(title: str, properties: str, body: str) -> str:
    """A page of a Notion database as Notion's HTML export writes it."""
    return (
        f"<html><head><meta charset='utf-8'/><title>{title}</title><style>body {{}}</style>"
        f"</head><body><article id='a1' class='page sans'><header><div class='page-header-icon'>"
        f"<span class='icon'>💳</span></div><h1 class='page-title'>{title}</h1>"
        f"<p class='page-description'></p><table class='properties'><tbody>{properties}"
        "<tr class='property-row property-row-created_time'><th><span class='icon "
        "property-icon'><svg viewBox='0 0 16 16'><path d='M1'></path></svg></span>Created</th>"
        "<td><time>@November 2, 2026 9:14 AM</time></td></tr></tbody></table></header>"
        f"<div class='page-body'>{body}</div></article></body></html>"
    )


def _property(name: str, kind: str, *values: str) -> str:
    spans = "".join(
        f"<span class='{'status' if kind == 'status' else 'selected'}-value "
        f"select-value-color-blue'>{v}</span>"
        for v in values
    )
    return (
        f"<tr class='property-row property-row-{kind}'><th><span class='icon property-icon'>"
        f"<svg viewBox='0 0 16 16'></svg></span>{name}</th><td>{spans}</td></tr>"
    )


def test_a_notion_pages_properties_give_its_tags_category_and_state(db_url, write_kb_file):
    live = write_kb_file(
        "Help Centre/Card limits 5f1e.html",
        _notion_page(
            "Card limits",
            _property("Tags", "multi_select", "cards", "limits")
            + _property("Category", "select", "Cards")
            + _property("Status", "status", "Published"),
            "<p>You can spend 5,000 EUR a day.</p>",
        ),
    )
    write_kb_file(
        "Help Centre/Card fees 77aa.html",
        _notion_page(
            "Card fees",
            _property("Status", "status", "Draft"),
            "<p>Payments in euros are free.</p>",
        ),
    )
    run_import(db_url, [live.parent])
    stored = articles(db_url)
    limits = stored["card-limits"]
    assert (limits.tags, limits.category, limits.published) == (["cards", "limits"], "Cards", True)
    assert limits.body == "<p>You can spend 5,000 EUR a day.</p>"  # no properties in the body
    assert stored["card-fees"].published is False
    # a state that is none (a workflow's "In review") is named, as in any other format
    review = write_kb_file(
        "review/Card travel 91c0.html",
        _notion_page(
            "Card travel", _property("Status", "status", "In review"), "<p>Cards work abroad.</p>"
        ),
    )
    assert rejected(db_url, [review]) == [
        f"{review}:1: status 'In review' is not an article state (published, live, draft, "
        "archived, hidden...); give a published column of true or false"
    ]


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
        f"{folder}:1: folder has no Markdown (.md), HTML (.html), Word (.docx) or PDF (.pdf) files"
    ]


def test_pages_saved_without_an_extension_are_read_by_their_first_bytes(db_url, tmp_path):
    """A site mirrored without ``--adjust-extension`` names its pages without ``.html``."""
    folder = tmp_path / "mirror"
    (folder / "articles").mkdir(parents=True)
    page = folder / "articles" / "42-reset-your-pin"
    page.write_bytes(
        b"\xef\xbb\xbf<!-- saved by wget -->\n<!DOCTYPE html><html><head><title>Reset your "
        b"PIN</title></head><body><p>Open Security in the app.</p></body></html>"
    )
    # a variant of the page under a query, a stylesheet and a text file: none is an article
    (folder / "articles" / "42-reset-your-pin?sort=votes").write_bytes(page.read_bytes())
    (folder / "site").write_text("body { color: red }")
    (folder / "LICENSE").write_text("All rights reserved.")
    report = run_import(db_url, [folder])
    assert (report.created, report.problems, report.warnings) == (1, [], [])
    assert articles(db_url)["reset-your-pin"].source == str(page)
    # named on its own, the page is read too; a text file without an extension is refused
    assert rejected(db_url, [page, folder / "LICENSE"]) == [
        f"{folder / 'LICENSE'}:1: unsupported file type (use .csv, .docx, .htm, .html, .json, "
        ".jsonl, .markdown, .md, .mdx, .ndjson, .pdf, .qna, .tsv, .txt, .xlsx, .zip or a folder)"
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


def test_zendesk_media_become_links_and_relative_addresses_resolve_on_the_article_page(
    db_url, write_kb_file
):
    """A screenshot, a video embed or an image-only article keeps what it shows as a link
    (the widget shows no media inline); relative addresses resolve against ``html_url``."""
    page = "https://help.example.com/hc/en-us/articles/11-Find-us"
    export = {
        "articles": [
            {
                "id": 11,
                "title": "Where is your office?",
                "html_url": page,
                "body": '<p>Follow the map:</p><p><img src="/hc/article_attachments/7/map.png" '
                'alt="Map to our office"></p><p>See <a href="/hc/en-us/articles/12">parking'
                ' <img src="https://cdn.example.com/p.svg" alt="(P)"></a>.</p>',
            },
            {
                "id": 12,
                "title": "Video tour",
                "html_url": "https://help.example.com/hc/en-us/articles/12",
                "body": '<iframe src="https://www.youtube.com/embed/abc" title="A tour of the '
                'app"></iframe><iframe src="https://player.vimeo.com/video/1"></iframe>'
                '<video controls><source src="https://cdn.example.com/t.mp4">Your browser '
                "cannot play this.</video>",
            },
            {
                "id": 13,
                "title": "Next year's designs",
                "body": None,
                "draft": True,
                "html_url": "https://help.example.com/hc/en-us/articles/13",
            },
        ]
    }
    path = write_kb_file("export.json", json.dumps(export, indent=1))
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (2, [])
    lines = json.dumps(export, indent=1).split("\n")
    line = next(i for i, text in enumerate(lines) if '"id": 13,' in text)  # the '{' above it
    assert report.warnings == [
        f"{path}:{line}: articles[2] (id 13): a draft without a body; not imported"
    ]
    stored = articles(db_url)
    assert set(stored) == {"where-is-your-office", "video-tour"}
    rel = 'rel="noopener noreferrer nofollow"'
    assert stored["where-is-your-office"].body == (
        "<p>Follow the map:</p>\n"
        f'<p><a href="https://help.example.com/hc/article_attachments/7/map.png" {rel}>Map to '
        "our office</a></p>\n"
        f'<p>See <a href="https://help.example.com/hc/en-us/articles/12" {rel}>parking (P)</a>.</p>'
    )
    assert stored["video-tour"].body == (  # each embed a paragraph
        f'<p><a href="https://www.youtube.com/embed/abc" {rel}>A tour of the app</a></p>\n'
        f'<p><a href="https://player.vimeo.com/video/1" {rel}>Embedded content from '
        "player.vimeo.com</a></p>\n"
        f'<p><a href="https://cdn.example.com/t.mp4" {rel}>Video</a></p>'
    )
    assert "<a href" in stored["video-tour"].body_html and "cannot play" not in (
        stored["video-tour"].body_html
    )


def test_a_body_of_markup_without_text_is_an_error_and_a_published_empty_article_too(
    db_url, write_kb_file
):
    export = {
        "articles": [
            {"id": 1, "title": "Logo", "body": '<p><img src="data:image/png;base64,AAAA"></p>'},
            {"id": 2, "title": "Blank", "body": "<p>&nbsp;</p>", "draft": False},
            {"id": 3, "title": "Empty", "body": None},
        ]
    }
    path = write_kb_file("export.json", json.dumps(export))
    assert rejected(db_url, [path]) == [
        f"{path}:1: articles[0] (id 1): body has no text, only markup",
        f"{path}:1: articles[1] (id 2): body has no text, only markup",
        f"{path}:1: articles[2] (id 3): body is empty",
    ]
    assert articles(db_url) == {}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"count": 0}', "1: expected a JSON list of article objects ('[' ...) or an export: "
         "an object with 'articles' (Zendesk), 'qnaDocuments' (QnA Maker), 'assets' "
         "(question answering), 'FaqDocuments' (Amazon Kendra) or 'qna' (QnABot on AWS)"),
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


# ----------------------------------------------------------------------------- FAQ pages


def page(content: str, head: str = "") -> str:
    """A help-centre page: title, category and keywords in the head, ``content`` in <main>."""
    return (
        "<!doctype html>\n<html><head><title>Help centre FAQ</title>\n"
        '<meta name="category" content="cards">\n<meta name="keywords" content="faq, cards">\n'
        f"{head}</head>\n<body><header><h2>Is this the menu?</h2></header>\n<main>\n"
        f"<h1>Frequently asked questions</h1>\n{content}\n</main></body></html>\n"
    )


def json_ld(data: object) -> str:
    """A JSON-LD script as sites write it ('</' escaped so it cannot end the script)."""
    text = json.dumps(data, indent=2).replace("</", "<\\/")
    return f'<script type="application/ld+json">\n{text}\n</script>\n'


def line_of(path: Path, needle: str) -> int:
    text = path.read_text()
    return 1 + text[: text.index(needle)].count("\n")


def faq_note(path: Path, count: int) -> str:
    return f"{path}:1: FAQ page: {count} questions read as {count} articles"


QUESTIONS_LD = [
    {
        "@type": "Question",
        "name": "How do I <b>freeze</b>\n my card?",
        "url": "https://bank.example/faq#freeze",
        "acceptedAnswer": {
            "@type": "Answer",
            "text": "<p>Tap <strong>Freeze</strong>.</p><script>steal()</script>",
        },
    },
    {
        "@type": "Question",
        "name": "Can I pay abroad?",
        "acceptedAnswer": {"@type": "Answer", "text": "Yes, in 150 countries."},
    },
    {
        "@type": "Question",
        "name": "Is there a fee?",
        "acceptedAnswer": [{"@type": "Answer", "text": '<p onclick="x()">No, <i>never</i>.</p>'}],
    },
]
FAQ_LD = {"@context": "https://schema.org", "@type": "FAQPage", "mainEntity": QUESTIONS_LD}
# What the page shows; with JSON-LD the questions come from the JSON-LD alone.
SHOWN = "<h2>Shown question one?</h2><p>a</p><h2>Two?</h2><p>b</p><h2>Three?</h2><p>c</p>"
LD_SLUGS = ["can-i-pay-abroad", "how-do-i-freeze-my-card", "is-there-a-fee"]


def test_faq_page_json_ld_gives_one_article_per_question(db_url, write_kb_file):
    path = write_kb_file("faq.html", page(SHOWN, head=json_ld(FAQ_LD)))
    report = run_import(db_url, [path])
    assert (report.created, report.problems, report.warnings) == (3, [], [])
    assert report.notes == [faq_note(path, 3)]
    stored = articles(db_url)
    assert sorted(stored) == LD_SLUGS
    freeze = stored["how-do-i-freeze-my-card"]
    assert freeze.title == "How do I freeze my card?"  # HTML stripped, whitespace collapsed
    assert freeze.body == "<p>Tap <strong>Freeze</strong>.</p>"
    assert freeze.source == f"{path}#freeze"  # the fragment of the question's url
    assert (freeze.category, freeze.tags) == ("cards", ["faq", "cards"])
    for stored_text in (freeze.body, freeze.body_html):
        assert "script" not in stored_text and "steal" not in stored_text
    abroad = stored["can-i-pay-abroad"]
    assert (abroad.body, abroad.source, abroad.category) == (
        "<p>Yes, in 150 countries.</p>",
        str(path),
        "cards",
    )
    assert stored["is-there-a-fee"].body == "<p>No, <i>never</i>.</p>"  # no onclick


@pytest.mark.parametrize(
    "data",
    [
        # A @graph, and the FAQPage typed with a list (a WebPage that is also an FAQPage).
        {
            "@context": "https://schema.org",
            "@graph": [
                {"@type": "Organization", "name": "Acme Bank"},
                {"@type": ["WebPage", "FAQPage"], "mainEntity": QUESTIONS_LD},
            ],
        },
        # A list of objects, the type spelled as a schema.org URL.
        [
            {"@type": "BreadcrumbList"},
            {"@type": "https://schema.org/FAQPage", "mainEntity": QUESTIONS_LD},
        ],
    ],
    ids=["graph-and-type-list", "list"],
)
def test_faq_page_json_ld_in_a_graph_or_a_list(db_url, write_kb_file, data):
    path = write_kb_file("faq.html", page(SHOWN, head=json_ld(data)))
    report = run_import(db_url, [path])
    assert report.notes == [faq_note(path, 3)]
    stored = articles(db_url)
    assert sorted(stored) == LD_SLUGS
    assert stored["can-i-pay-abroad"].body == "<p>Yes, in 150 countries.</p>"


HEADINGS_PAGE = """<p>Welcome! This introduction is not an article.</p>
<h2 id="cost">What does the card cost?</h2>
<p>Nothing.</p>
<h3>Premium</h3>
<p>5 EUR a month.</p>
<h2>Where can I use it?</h2>
<p>Everywhere <a href="https://bank.example/map">on the map</a>.</p>
<script>track()</script>
<h2>Contact us</h2>
<p>Call 0800 123.</p>
<h2>How do I close my account?</h2>
Write to us.
<footer><p>Cookie settings</p></footer>"""


def test_question_headings_split_a_page(db_url, write_kb_file):
    path = write_kb_file("faq.html", page(HEADINGS_PAGE))
    report = run_import(db_url, [path])
    assert (report.created, report.problems, report.warnings) == (3, [], [])
    # The introduction and what "Contact us" heads are in no answer: a note says what and where.
    welcome, call = line_of(path, "<p>Welcome!"), line_of(path, "<p>Call 0800")
    assert report.notes == [
        faq_note(path, 3),
        f"{path}:{welcome}: FAQ page: 10 words of text outside any question left out "
        f"(lines {welcome} and {call})",
    ]
    stored = articles(db_url)
    assert sorted(stored) == [
        "how-do-i-close-my-account",
        "what-does-the-card-cost",
        "where-can-i-use-it",
    ]
    cost = stored["what-does-the-card-cost"]
    assert cost.title == "What does the card cost?"
    # A deeper heading is part of the answer.
    assert cost.body == "<p>Nothing.</p>\n<h3>Premium</h3>\n<p>5 EUR a month.</p>"
    assert (cost.source, cost.category, cost.tags) == (f"{path}#cost", "cards", ["faq", "cards"])
    use = stored["where-can-i-use-it"]
    # A heading of the same level without '?' ends the answer; scripts never survive.
    assert use.body == (
        '<p>Everywhere <a href="https://bank.example/map" rel="noopener noreferrer nofollow">'
        "on the map</a>.</p>"
    )
    assert use.source == str(path)
    assert stored["how-do-i-close-my-account"].body == "<p>Write to us.</p>"
    everything = " ".join(a.body + a.body_html for a in stored.values())
    for gone in ("Welcome", "Call 0800", "Contact us", "track", "Cookie", "menu"):
        assert gone not in everything, gone


def test_text_outside_the_answers_of_many_topics_is_noted_once(db_url, write_kb_file):
    """Each topic's introduction is text in no answer: one note counts its words and names
    the first five lines, then how many more."""
    topics = ["Cards", "Transfers", "Savings", "Loans", "Travel", "Fees", "Security"]
    main = "".join(
        f"<h2>{topic}</h2>\n<p>All about {topic.lower()}.</p>\n<h3>Is {topic.lower()} free?</h3>"
        f"\n<p>Yes.</p>\n"
        for topic in topics
    )
    path = write_kb_file("faq.html", f"<html><head><title>FAQ</title></head><body>\n{main}")
    report = run_import(db_url, [path])
    assert report.created == 7
    lines = [line_of(path, f"<p>All about {topic.lower()}.") for topic in topics]
    assert report.notes == [
        faq_note(path, 7),
        f"{path}:{lines[0]}: FAQ page: 21 words of text outside any question left out "
        f"(lines {', '.join(map(str, lines[:5]))} and 2 more)",
    ]


def test_a_page_mostly_of_topic_headings_is_not_split_at_its_few_questions(db_url, write_kb_file):
    """Split at its 3 questions, a guide's 4 topic sections would be dropped."""
    sections = ["Card limits", "How do I freeze a card?", "Travel", "Why was I charged?"]
    sections += ["Fees", "Can I pay contactless?", "Statements"]
    main = "".join(f"<h2>{t}</h2><p>About {t.lower()}.</p>" for t in sections)
    path = write_kb_file(
        "guide.html", f"<html><head><title>Card guide</title></head><body><main>{main}</main>"
    )
    run_import(db_url, [path])
    (guide,) = articles(db_url).values()
    assert guide.title == "Card guide" and "About statements." in guide.body


def test_question_and_answer_marks_are_taken_off(db_url, write_kb_file):
    page = write_kb_file(
        "faq.html",
        "<html><head><title>FAQ</title></head><body><main><h1>FAQ</h1>"
        "<h2>Q: How do I reset my PIN?</h2><p><strong>A:</strong> Open the app.</p>"
        "<h2>Q2. What are my limits?</h2><p>A. 5,000 EUR a day.</p>"
        "<h2>Can I pay contactless?</h2><p>A: yes, as written.</p></main></body></html>",
    )
    markdown = write_kb_file(
        "more.md",
        "# More\n\n## Q: Where is my card?\n\n**A:** On its way.\n\n"
        "## Question 2: Is it free?\n\nAnswer: Yes.\n\n## Q: Can I freeze it?\n\nA list of "
        "steps follows.\n",
    )
    run_import(db_url, [page, markdown])
    assert {a.title: a.body for a in articles(db_url).values()} == {
        "How do I reset my PIN?": "<p>Open the app.</p>",
        "What are my limits?": "<p>5,000 EUR a day.</p>",
        # without a question's mark, an answer's is its own text
        "Can I pay contactless?": "<p>A: yes, as written.</p>",
        "Where is my card?": "On its way.",
        "Is it free?": "Yes.",
        "Can I freeze it?": "A list of steps follows.",
    }


def test_broken_json_ld_falls_back_to_the_question_headings(db_url, write_kb_file):
    broken = (
        '<script type="application/ld+json">\n{"@type": "FAQPage",\n "mainEntity": [}\n</script>\n'
    )
    path = write_kb_file("faq.html", page(HEADINGS_PAGE, head=broken))
    report = run_import(db_url, [path])
    line = line_of(path, ' "mainEntity": [}')
    welcome, call = line_of(path, "<p>Welcome!"), line_of(path, "<p>Call 0800")
    assert report.notes == [
        f"{path}:{line}: ignoring FAQPage JSON-LD, not valid JSON: Expecting value (column 17)",
        faq_note(path, 3),
        f"{path}:{welcome}: FAQ page: 10 words of text outside any question left out "
        f"(lines {welcome} and {call})",
    ]
    assert report.created == 3 and "where-can-i-use-it" in articles(db_url)


def test_question_headings_at_h3_under_topic_headings(db_url, write_kb_file):
    """h2s name the topics (no '?'), so the questions are the h3s, each in its own <div>;
    the same question under two topics gets a slug suffix and a warning."""
    content = """<section id="cards"><h2>Cards</h2>
<div class="faq-item"><h3 id="late">How long does it take?</h3><p>5 days.</p></div>
<div class="faq-item"><h3>Can I pick a design?</h3><ul><li>Blue</li><li>Gold</li></ul></div>
</section>
<section><h2>Transfers</h2>
<p>Transfers in euros are free.</p>
<div class="faq-item"><h3><a name="slow"></a>How long does it take?</h3><p>One working day.</p>
</div></section>"""
    path = write_kb_file("faq.html", page(content))
    report = run_import(db_url, [path])
    first, second = line_of(path, '<h3 id="late">'), line_of(path, '<h3><a name="slow">')
    assert report.warnings == [
        f"{path}:{second}: slug 'how-long-does-it-take' (derived from the title) is already "
        f"used at {path}:{first}; this article gets 'how-long-does-it-take-2'",
        f"{path}:{second}: question 'How long does it take?' is also listed at {path}:{first}, "
        "under another answer; both articles keep it",
    ]
    stored = articles(db_url)
    slugs = ["can-i-pick-a-design", "how-long-does-it-take", "how-long-does-it-take-2"]
    assert sorted(stored) == slugs
    assert stored["how-long-does-it-take"].body == "<p>5 days.</p>"
    assert stored["how-long-does-it-take"].source == f"{path}#late"
    assert stored["how-long-does-it-take-2"].body == "<p>One working day.</p>"
    assert stored["how-long-does-it-take-2"].source == f"{path}#slow"
    # The next topic heading ends the answer before it.
    assert stored["can-i-pick-a-design"].body == "<ul>\n<li>Blue</li>\n<li>Gold</li></ul>"


def test_details_accordions_are_one_article_each(db_url, write_kb_file):
    content = """<p>Tap a question.</p>
<details id="lost"><summary>I lost my card</summary><p>Freeze it in the app.</p>
<details><summary>And if I find it?</summary>Unfreeze it.</details></details>
<details><summary><strong>Delivery</strong></summary>Cards arrive in 5 days.<script>x()</script>
</details>
<details><summary>Is it contactless?</summary><p>Yes.</p><p>Up to 50 EUR.</p></details>
<p>Still stuck? Write to us.</p>"""
    path = write_kb_file("faq.html", page(content))
    report = run_import(db_url, [path])
    tap, stuck = line_of(path, "<p>Tap a question."), line_of(path, "<p>Still stuck?")
    left_out = (
        f"{path}:{tap}: FAQ page: 8 words of text outside any question left out "
        f"(lines {tap} and {stuck})"
    )
    assert (report.created, report.problems, report.notes) == (3, [], [faq_note(path, 3), left_out])
    stored = articles(db_url)
    assert sorted(stored) == ["delivery", "i-lost-my-card", "is-it-contactless"]
    lost = stored["i-lost-my-card"]
    assert lost.source == f"{path}#lost"
    # A <details> inside an answer is part of it.
    assert (
        lost.body == "<p>Freeze it in the app.</p>\n<p>And if I find it?</p>\n<p>Unfreeze it.</p>"
    )
    delivery = stored["delivery"]  # at least 3: summaries need not be questions
    assert delivery.body == "<p>Cards arrive in 5 days.</p>" and "x()" not in delivery.body_html
    assert stored["is-it-contactless"].body == "<p>Yes.</p>\n<p>Up to 50 EUR.</p>"
    assert stored["is-it-contactless"].category == "cards"


def test_an_article_with_two_accordions_stays_one_article(db_url, write_kb_file):
    content = (
        "<h1>Returns</h1><p>Send the parcel back with the label.</p>\n"
        "<details><summary>Can I get a refund?</summary>Within 14 days.</details>\n"
        "<details><summary>Who pays the return?</summary>We do.</details>"
    )
    path = write_kb_file("returns.html", page(content))
    report = run_import(db_url, [path])
    assert report.notes == []
    (article,) = articles(db_url).values()
    for text in ("Send the parcel back", "Within 14 days.", "We do."):
        assert text in article.body


def test_definition_list_of_questions(db_url, write_kb_file):
    content = """<dl>
<dt id="hours">When are you open?<dt>What are your opening hours?
<dd>Every day.<dd>Even on holidays.
<div><dt>Do you have branches?</dt><dd>No, we are online only.</dd></div>
<dt>Glossary</dt><dd>Not a question, not an article.</dd>
<dt>Can I call you?</dt><dd><p>Yes: <a href="tel:0800123">0800 123</a>.</p></dd>
</dl>"""
    path = write_kb_file("faq.html", page(content))
    report = run_import(db_url, [path])
    glossary = line_of(path, "<dt>Glossary")  # a term that is not a question, and its text
    assert report.notes == [
        f"{path}:1: FAQ page: 4 questions read as 3 articles",
        f"{path}:{glossary}: FAQ page: 7 words of text outside any question left out "
        f"(line {glossary})",
    ]
    stored = articles(db_url)
    assert sorted(stored) == ["can-i-call-you", "do-you-have-branches", "when-are-you-open"]
    hours = stored["when-are-you-open"]
    # <dt>s in a row share the <dd>s after them; each <dd> is a paragraph of its own.
    assert hours.questions == ["What are your opening hours?"]
    assert hours.body == "<p>Every day.</p>\n<p>Even on holidays.</p>"
    assert hours.source == f"{path}#hours"
    assert stored["do-you-have-branches"].body == "<p>No, we are online only.</p>"
    assert stored["can-i-call-you"].body == (
        '<p>Yes: <a href="tel:0800123" rel="noopener noreferrer nofollow">0800 123</a>.</p>'
    )


def test_questions_written_as_bold_or_marked_paragraphs(db_url, write_kb_file):
    """FAQs written without heading styles: a question in bold, or marked "Q:", is a paragraph
    of its own; each starts an article, a topic heading ends one, and the intro is none."""
    content = """<p>Answers to what customers ask most.</p>
<h2>Delivery</h2>
<p><strong>Do you ship abroad?</strong></p>
<p>Yes, to 30 countries.</p>
<p id="cost"> <b>How much is delivery?</b> </p>
<p>Free over 50 EUR.</p><ul><li>Otherwise 4 EUR.</li></ul>
<h2>Returns</h2>
<p>Q: Can I return an order?</p>
<p>A: Within 30 days.</p>
<p>Q3. Who pays for returns?</p>
<p>We do. <strong>Why would you pay?</strong> You should not.</p>"""
    path = write_kb_file("faq.html", page(content))
    report = run_import(db_url, [path])
    intro = line_of(path, "<p>Answers to")
    assert report.notes == [
        faq_note(path, 4),
        f"{path}:{intro}: FAQ page: 6 words of text outside any question left out (line {intro})",
    ]
    stored = articles(db_url)
    assert {a.title: a.body for a in stored.values()} == {
        "Do you ship abroad?": "<p>Yes, to 30 countries.</p>",
        "How much is delivery?": "<p>Free over 50 EUR.</p>\n<ul>\n<li>Otherwise 4 EUR.</li></ul>",
        "Can I return an order?": "<p>Within 30 days.</p>",
        "Who pays for returns?": (
            "<p>We do. <strong>Why would you pay?</strong> You should not.</p>"
        ),
    }
    assert stored["how-much-is-delivery"].source == f"{path}#cost"
    # two bold questions in an article are its text, and so are bold questions outnumbered by
    # the page's headings
    two = write_kb_file(
        "two.html",
        page("<p><b>Why verify?</b></p><p>The law.</p><p><b>How long?</b></p><p>A day.</p>"),
    )
    topics = write_kb_file(
        "topics.html",
        page(
            "".join(
                f"<h2>{topic}</h2><p><b>Is {topic.lower()} free?</b></p><p>Yes.</p>"
                for topic in ("Cards", "Transfers", "Savings")
            )
            + "<h2>Fees</h2><p>None.</p>"
        ),
    )
    assert run_import(db_url, [two, topics]).created == 2


def test_a_manual_on_one_web_page_gives_an_article_per_section(db_url, write_kb_file):
    """A handbook of 3,000 words or more on one page (a Word manual saved as a web page) is
    read by its sections, as a Word document is; a long help-centre article stays one."""

    def words(topic: str, count: int) -> str:
        return " ".join(f"{topic}{n % 7}" for n in range(count)) + "."

    def handbook(title: str, sections: int, each: int) -> str:
        body = "".join(
            f'<h2 id="s{n}">Section {n}</h2><p>{words(f"w{n}x", each)}</p>' for n in range(sections)
        )
        return (
            f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
            f"<p>{words('intro', 40)}</p>{body}</main></body></html>"
        )

    manual = write_kb_file("handbook.htm", handbook("Card handbook", 8, 400))
    report = run_import(db_url, [manual])
    assert report.notes == [f"{manual}:1: document in sections: 9 sections read as 9 articles"]
    stored = articles(db_url)
    assert stored["section-3"].body.startswith("<p>w3x0 w3x1")
    assert stored["section-3"].source == f"{manual}#s3"
    assert stored["card-handbook"].body.startswith("<p>intro0")
    article = write_kb_file("article.html", handbook("Card guide", 4, 500))  # 2,041 words
    assert run_import(db_url, [article]).notes == []
    assert "<h2>Section 3</h2>" in articles(db_url)["card-guide"].body


MARKDOWN_FAQ = """---
category: card_help
tags: [cards, faq]
slug: card-faq
taught_questions: [card help]
---
# Card FAQ

Everything about cards. Not an article.

## Ordering

### How do I order a card? {#order}

Tap **Order**.

```sh
# not a heading: code
### nor this?
```

### Can I choose the PIN?
You can, in the app.

## Fees

Prices change every year.

### Is the card free?

Yes.
"""


def test_markdown_questions_in_bold_or_marked_lines(db_url, write_kb_file):
    """A Markdown FAQ without headings for its questions: a line in bold or marked "Q:" that
    starts a paragraph is a question, answered by what follows up to the next or a heading."""
    path = write_kb_file(
        "faq.md",
        "# Shop FAQ\n\nWhat customers ask.\n\n## Delivery\n\n**Do you ship abroad?**\n"
        "Yes, to 30 countries.\n\n__How much is delivery?__\n\nFree over 50 EUR.\n\n"
        "```\nmd\n\n**Not a question in code?**\n```\n\n## Returns\n\nQ: Can I return an order?\n"
        "A: Within 30 days,\n**which we pay for?**\n\nSee **our policy?** first.\n",
    )
    report = run_import(db_url, [path])
    assert report.notes == [
        faq_note(path, 3),
        f"{path}:3: FAQ page: 3 words of text outside any question left out (line 3)",
    ]
    assert {a.title: a.body.strip() for a in articles(db_url).values()} == {
        "Do you ship abroad?": "Yes, to 30 countries.",
        "How much is delivery?": "Free over 50 EUR.\n\n```\nmd\n\n**Not a question in code?**\n```",
        "Can I return an order?": (
            "Within 30 days,\n**which we pay for?**\n\nSee **our policy?** first."
        ),
    }
    # bold questions outnumbered by the page's topic headings are its text
    topics = write_kb_file(
        "guide.md",
        "# Guide\n\n"
        + "".join(f"## {t}\n\n**Is {t} free?**\n\nYes.\n\n" for t in ("Cards", "Pay", "Save"))
        + "## Fees\n\nNone.\n",
    )
    assert run_import(db_url, [topics]).created == 1


def test_a_markdown_manual_gives_an_article_per_section(db_url, write_kb_file):
    """A handbook of 3,000 words or more in one Markdown file is read by its sections, with
    its front matter's category and tags on each, a section's {#id} in its source, and its
    line in messages; a shorter guide stays one article."""

    def words(topic: str, count: int) -> str:
        return " ".join(f"{topic}{n % 7}" for n in range(count)) + "."

    sections = "".join(f"## Section {n} {{#s{n}}}\n\n{words(f'w{n}x', 400)}\n\n" for n in range(8))
    manual = write_kb_file(
        "handbook.md",
        f"---\ncategory: cards\ntags: [manual]\n---\n# Card handbook\n\n{words('intro', 40)}\n\n"
        "```\n## Not a section\n```\n\n"
        f"{sections}## Empty\n\n## Last\n\n",
    )
    report = run_import(db_url, [manual])
    assert report.notes == [f"{manual}:1: document in sections: 9 sections read as 9 articles"]
    assert report.problems == []  # "Empty" and "Last" have no text and are left out
    stored = articles(db_url)
    assert sorted(stored) == ["card-handbook"] + [f"section-{n}" for n in range(8)]
    three = stored["section-3"]
    assert three.body.startswith("w3x0 w3x1") and three.source == f"{manual}#s3"
    assert (three.category, three.tags) == ("cards", ["manual"])
    assert "## Not a section" in stored["card-handbook"].body
    parts = "".join(f"## Part {n}\n\n{words('p', 300)}\n\n" for n in range(4))
    guide = write_kb_file("guide.md", f"# Card guide\n\n{parts}")  # 1,200 words
    assert run_import(db_url, [guide]).notes == []
    # a message names the section's heading line
    long_title = write_kb_file(
        "long.md", manual.read_text().replace("## Section 7 {#s7}", "## " + "x" * 501)
    )
    line = long_title.read_text().split("\n").index("## " + "x" * 501) + 1
    assert rejected(db_url, [long_title]) == [
        f"{long_title}:{line}: title is 501 characters; the limit is 500"
    ]


def test_markdown_faq_gives_one_article_per_question(db_url, write_kb_file):
    path = write_kb_file("cards.md", MARKDOWN_FAQ)
    report = run_import(db_url, [path])
    assert (report.created, report.problems, report.warnings) == (3, [], [])
    assert report.notes == [
        f"{path}:1: ignoring front matter slug, taught_questions: each question is an article",
        faq_note(path, 3),
        # the page's introduction and the text under a topic heading (the lines of the file)
        f"{path}:9: FAQ page: 10 words of text outside any question left out (lines 9 and 27)",
    ]
    stored = articles(db_url)
    assert sorted(stored) == ["can-i-choose-the-pin", "how-do-i-order-a-card", "is-the-card-free"]
    order = stored["how-do-i-order-a-card"]
    assert order.title == "How do I order a card?"
    assert order.body == "Tap **Order**.\n\n```sh\n# not a heading: code\n### nor this?\n```"
    assert order.source == f"{path}#order"  # from '{#order}'
    assert (order.category, order.tags) == ("card_help", ["cards", "faq"])
    pin = stored["can-i-choose-the-pin"]
    # without its own id, a question has the one its text gives it where the page is published
    assert (pin.body, pin.source, pin.category) == (
        "You can, in the app.",
        f"{path}#can-i-choose-the-pin",
        "card_help",
    )
    # The '## Fees' topic heading ends the answer before it.
    assert stored["is-the-card-free"].body == "Yes."
    assert "Prices" not in " ".join(a.body for a in stored.values())


def test_pages_that_are_not_faq_pages_stay_one_article(db_url, write_kb_file, site):
    """Two question headings are not enough, nor two details of which one is no question; a
    broken JSON-LD that is no FAQPage is ignored without a note."""
    html = write_kb_file(
        "about.html",
        page(
            "<p>We are a bank.</p><h2>Why us?</h2><p>Fair fees.</p><h2>Where are we?</h2>"
            "<p>Berlin.</p><details><summary>Awards?</summary>Three.</details>"
            "<details><summary>Press</summary>Kit.</details>",
            head='<script type="application/ld+json">{"@type": "Organization",</script>',
        ),
    )
    markdown = write_kb_file(
        "limits.md", "# Limits\n\n## Why a limit?\n\nSafety.\n\n## Can I raise it?\n\nYes.\n"
    )
    report = run_import(db_url, [html, markdown, site])
    assert (report.created, report.notes, report.warnings) == (5, [], [])
    stored = articles(db_url)
    assert stored["help-centre-faq"].body == (
        "<h1>Frequently asked questions</h1>\n<p>We are a bank.</p>\n<h2>Why us?</h2>\n"
        "<p>Fair fees.</p>\n<h2>Where are we?</h2>\n<p>Berlin.</p>\n<p>Awards?</p>\n"
        "<p>Three.</p>\n<p>Press</p>\n<p>Kit.</p>"
    )
    assert stored["limits"].body == "## Why a limit?\n\nSafety.\n\n## Can I raise it?\n\nYes."


EMPTY_LD = {
    "@type": "FAQPage",
    "mainEntity": [
        {"name": "One?", "acceptedAnswer": {"text": "1"}},
        {"name": "Two?", "acceptedAnswer": {"text": "<p>\n</p>"}},
    ],
}
EMPTY_ANSWERS = {
    "heading": (
        "faq.html",
        page("<h2>One?</h2><p>1</p>\n<h2>Two?</h2>\n<h2>Three?</h2><p>3</p>"),
        "<h2>Two?</h2>",
        "question 'Two?' has no answer",
    ),
    "summary": (
        "faq.html",
        page(
            "<details><summary>One?</summary>1</details>\n"
            "<details>\n  <summary>Two?</summary>\n  <p> </p><script>x()</script></details>\n"
            "<details><summary>Three?</summary>3</details>"
        ),
        "<summary>Two?",
        "question 'Two?' has no answer",
    ),
    "json-ld": (
        "faq.html",
        page("", head=json_ld(EMPTY_LD)),
        '"name": "Two?"',
        "FAQPage question 2: question 'Two?' has no answer",
    ),
    "markdown": (
        "faq.md",
        "---\ncategory: x\n---\n## One?\n1\n## Two?\n\n## Three?\n3\n",
        "## Two?",
        "question 'Two?' has no answer",
    ),
    # the import lines an MDX page loses do not move the lines named
    "mdx": (
        "faq.mdx",
        "---\ncategory: x\n---\nimport A from 'a';\nimport {\n  B,\n} from 'b';\n"
        ":::tip\n## One?\n1\n## Two?\n\n## Three?\n3\n",
        "## Two?",
        "question 'Two?' has no answer",
    ),
}


@pytest.mark.parametrize("case", sorted(EMPTY_ANSWERS))
def test_an_empty_answer_is_an_error_on_the_questions_line(db_url, write_kb_file, case):
    name, content, needle, reason = EMPTY_ANSWERS[case]
    path = write_kb_file(name, content)
    assert rejected(db_url, [path]) == [f"{path}:{line_of(path, needle)}: {reason}"]
    assert articles(db_url) == {}


def test_cli_notes_a_split_page_and_reimports_it_unchanged(runner, db_url, write_kb_file):
    path = write_kb_file("faq.html", page(HEADINGS_PAGE))
    result = runner.invoke(main, ["kb", "import", str(path)])
    assert result.exit_code == 0, result.output
    welcome, call = line_of(path, "<p>Welcome!"), line_of(path, "<p>Call 0800")
    assert result.stderr.splitlines() == [
        f"note: {faq_note(path, 3)}",
        f"note: {path}:{welcome}: FAQ page: 10 words of text outside any question left out "
        f"(lines {welcome} and {call})",
    ]
    assert result.stdout.strip() == "3 created, 0 updated, 0 unchanged, 0 unpublished, 0 rejected"
    again = runner.invoke(main, ["kb", "import", str(path)])
    assert again.stdout.strip() == "0 created, 0 updated, 3 unchanged, 0 unpublished, 0 rejected"
    for article in articles(db_url).values():
        assert clean_source(article.body) == article.body


# ----------------------------------------------------------------------------- encodings


@pytest.mark.parametrize(
    "declaration",
    [
        '<meta charset="windows-1252">',
        '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">',
    ],
)
def test_a_page_in_the_encoding_its_meta_declares_is_read_in_it(db_url, write_kb_file, declaration):
    # An older help centre's pages saved as they were served: not UTF-8, and saying so.
    page = (
        f"<html><head>{declaration}<title>Frais à l’étranger</title></head>"
        "<body><p>Les retraits coûtent 2 € – sauf en zone euro.</p></body></html>"
    )
    path = write_kb_file("frais.html", page.encode("cp1252"))
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert article.title == "Frais à l’étranger"
    assert article.body == "<p>Les retraits coûtent 2 € – sauf en zone euro.</p>"


def test_an_xhtml_page_declaring_its_encoding_in_the_xml_declaration(db_url, write_kb_file):
    page = (
        '<?xml version="1.0" encoding="iso-8859-15"?>\n<html><head><title>Öffnungszeiten'
        "</title></head><body><p>Wir sind rund um die Uhr für Sie da.</p></body></html>"
    )
    run_import(db_url, [write_kb_file("zeiten.xhtml.html", page.encode("iso-8859-15"))])
    (article,) = articles(db_url).values()
    assert (article.title, article.body) == (
        "Öffnungszeiten",
        "<p>Wir sind rund um die Uhr für Sie da.</p>",
    )


def test_a_page_whose_bytes_are_utf8_is_read_as_utf8_whatever_it_declares(db_url, write_kb_file):
    # A template kept its old declaration after the site moved to UTF-8: the bytes decide.
    page = '<html><head><meta charset="iso-8859-1"><title>Café</title></head><body>Ouvert.</body>'
    run_import(db_url, [write_kb_file("cafe.html", page.encode("utf-8"))])
    assert [a.title for a in articles(db_url).values()] == ["Café"]


def test_undeclared_or_unknown_encodings_still_reject_the_import(db_url, write_kb_file):
    plain = write_kb_file("plain.html", "<title>Café</title><p>Ouvert.</p>".encode("cp1252"))
    unknown = write_kb_file(
        "odd.html", '<meta charset="x-klingon"><title>Café</title><p>Ouvert.</p>'.encode("cp1252")
    )
    utf8_claimed = write_kb_file(
        "claimed.html", '<meta charset="utf-8"><title>Café</title><p>Ouvert.</p>'.encode("cp1252")
    )
    problems = rejected(db_url, [plain, unknown, utf8_claimed])
    assert problems == [
        f"{plain}:1: not valid UTF-8 (byte 0xE9 at column 11); save the file as UTF-8",
        f"{unknown}:1: declares charset 'x-klingon', which is not known; save it as UTF-8",
        f"{utf8_claimed}:1: not valid UTF-8 (byte 0xE9 at column 33); save the file as UTF-8",
    ]
    assert articles(db_url) == {}
    # A Markdown file declares nothing: the same bytes are an error there too.
    markdown = write_kb_file("cafe.md", '# Café\n<meta charset="cp1252">\nOuvert.'.encode("cp1252"))
    assert rejected(db_url, [markdown]) == [
        f"{markdown}:1: not valid UTF-8 (byte 0xE9 at column 6); save the file as UTF-8"
    ]
