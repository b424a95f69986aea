"""Links between imported files lead to the articles' pages (app/kb/cross_links.py): a help
centre saved as Markdown and HTML files, imported for real, then served by the real app."""

from __future__ import annotations

from collections import Counter

import pytest
from fixtures_kb import articles, run_import, snapshot

from app.kb.cross_links import rewrite_links
from app.kb.faq_pages import heading_id

FAQ_PAGE = """<html><head><title>FAQ</title></head><body>
<h2 id="pay">How do I pay?</h2><p>By card. See <a href="../fees.md">the fees</a>.</p>
<h2 id="cancel">How do I cancel?</h2><p>In the settings.</p>
<h2 id="refund">Can I get a refund?</h2><p>Yes: <a href="../billing/refunds.md">refunds</a>.</p>
</body></html>
"""


def _site(write_kb_file):
    write_kb_file(
        "site/fees.md",
        '---\ntitle: Fees\n---\nSee [refunds](billing/refunds.md "Refunds"), [the policy][r],'
        " [cancelling](help/faq.html#cancel), [our site](https://example.com/fees) and"
        " [old notes](notes.md).\n\n[r]: <billing/refunds.md>\n",
    )
    write_kb_file(
        "site/billing/refunds.md",
        "---\ntitle: Refunds\n---\nBack to [the fees](../fees.md#top), or "
        '<a href="../help/faq.html">the FAQ</a>.\n',
    )
    write_kb_file("site/help/faq.html", FAQ_PAGE)
    return write_kb_file("site/help/faq.html", FAQ_PAGE).parent.parent


def test_links_between_imported_files_lead_to_the_articles_pages(db_url, write_kb_file, client):
    site = _site(write_kb_file)
    report = run_import(db_url, [site])
    assert report.created == 5
    stored = articles(db_url)
    fees = stored["fees"].body
    assert '[refunds](/kb/refunds "Refunds")' in fees  # Markdown, title kept
    assert "[r]: /kb/refunds" in fees  # a reference definition in angle brackets
    assert "[cancelling](/kb/how-do-i-cancel)" in fees  # the FAQ page's question by fragment
    assert "[our site](https://example.com/fees)" in fees  # another site: as written
    assert "[old notes](notes.md)" in fees  # not in the import: as written
    refunds = stored["refunds"].body
    assert "[the fees](/kb/fees)" in refunds  # a fragment of a one-article file: its page
    assert 'href="../help/faq.html"' in refunds  # three articles, no fragment: as written
    assert 'See <a href="/kb/fees"' in stored["how-do-i-pay"].body  # HTML to Markdown
    assert '<a href="/kb/refunds"' in stored["can-i-get-a-refund"].body
    # the rendered article and the page a link leads to
    assert '<a href="/kb/refunds" rel="noopener noreferrer nofollow">the policy</a>' in (
        stored["fees"].body_html
    )
    page = client.get("/kb/how-do-i-cancel")
    assert page.status_code == 200 and "In the settings." in page.get_data(as_text=True)


def test_reimporting_a_linked_site_changes_nothing(db_url, write_kb_file):
    site = _site(write_kb_file)
    run_import(db_url, [site])
    before = snapshot(db_url)
    report = run_import(db_url, [site])
    assert (report.created, report.updated, report.unchanged) == (0, 0, 5)
    assert snapshot(db_url) == before


def test_a_file_imported_alone_later_links_to_the_files_of_earlier_imports(db_url, write_kb_file):
    site = _site(write_kb_file)
    run_import(db_url, [site])
    refunds = write_kb_file(
        "site/billing/refunds.md",
        "---\ntitle: Refunds\n---\nSee [the fees](../fees.md), [paying](../help/faq.html#pay) "
        "and [new notes](notes.md).\n",
    )
    notes = write_kb_file(
        "site/billing/notes.md", "---\ntitle: Notes\n---\nBack to [r](refunds.md)."
    )
    report = run_import(db_url, [refunds, notes])
    assert (report.created, report.updated) == (1, 1)
    stored = articles(db_url)
    assert stored["refunds"].body == (
        "See [the fees](/kb/fees), [paying](/kb/how-do-i-pay) and [new notes](/kb/notes)."
    )
    assert stored["notes"].body == "Back to [r](/kb/refunds)."
    # with --replace the earlier files' articles are unpublished: nothing to lead to
    run_import(db_url, [refunds], replace=True)
    assert "[the fees](../fees.md)" in articles(db_url)["refunds"].body


def test_a_link_to_a_markdown_faq_question_by_its_heading_s_id_leads_to_its_article(
    db_url, write_kb_file
):
    # GitHub, GitLab and Docusaurus give a heading the id of its text: a link to another
    # file's question uses it, and a second heading of the same text gets "-1"
    faq = write_kb_file(
        "docs/faq.md",
        "# Card FAQ\n\n## Can I pay abroad?\n\nYes, in 150 countries.\n\n"
        "## What does it cost?\n\nNothing.\n\n## Premium\n\n## What does it cost?\n\n"
        "2 EUR a month.\n\n## Can I pay abroad? {#premium-abroad}\n\nEverywhere.\n",
    )
    guide = write_kb_file(
        "docs/travel.md",
        "---\ntitle: Travel\n---\nSee [abroad](faq.md#can-i-pay-abroad), "
        "[costs](faq.md#what-does-it-cost) and [premium](faq.md#what-does-it-cost-1).\n",
    )
    report = run_import(db_url, [faq, guide])
    assert report.problems == []
    stored = articles(db_url)
    sources = {a.source.rsplit("/", 1)[-1]: slug for slug, a in stored.items()}
    assert sources == {
        "faq.md#can-i-pay-abroad": "can-i-pay-abroad",
        "faq.md#what-does-it-cost": "what-does-it-cost",
        "faq.md#what-does-it-cost-1": "what-does-it-cost-2",
        "faq.md#premium-abroad": "can-i-pay-abroad-2",
        "travel.md": "travel",
    }
    assert stored["travel"].body == (
        "See [abroad](/kb/can-i-pay-abroad), [costs](/kb/what-does-it-cost) and "
        "[premium](/kb/what-does-it-cost-2)."
    )


@pytest.mark.parametrize(
    ("headings", "ids"),
    [
        (["Can I pay abroad?", "Can I pay abroad?", "Can I pay abroad?"],
         ["can-i-pay-abroad", "can-i-pay-abroad-1", "can-i-pay-abroad-2"]),
        (["What is [Pro](https://x.example/pro)?", "Fees <em>in</em> `2025`"],
         ["what-is-pro", "fees-in-2025"]),
        (["Café & Crème — prices", "my_var and 🚀 rockets", "???"],
         ["café--crème--prices", "my_var-and--rockets", None]),
    ],
)  # fmt: skip
def test_heading_ids_are_the_ones_published_markdown_gets(headings, ids):
    seen: Counter[str] = Counter()
    assert [heading_id(text, seen) for text in headings] == ids


def test_rewrite_links_reads_every_link_form_and_leaves_the_rest():
    body = (
        "[a](x.md) [b]( <y z.md> 'T') [c](v.md)\n"
        "  [ref]: x.md\n"
        '<a href="x.md">h</a> <a HREF=\'w.md\'>w</a> <a href="x.md#frag">f</a>'
    )
    targets = {"x.md": "/kb/x", "y z.md": "/kb/y", "x.md#frag": "/kb/f"}
    assert rewrite_links(body, targets.get) == (
        "[a](/kb/x) [b]( /kb/y 'T') [c](v.md)\n"
        "  [ref]: /kb/x\n"
        '<a href="/kb/x">h</a> <a HREF=\'w.md\'>w</a> <a href="/kb/f">f</a>'
    )
