"""Plain text files as a source (app/kb/text_documents.py): an FAQ typed in an editor, a note
pasted from an e-mail, and the formats we do not read, imported for real."""

from __future__ import annotations

import pytest
from fixtures_kb import articles, rejected, run_import

FAQ = """Northwind card FAQ

How do I order a card?
Open the app and tap Cards, then Order. It arrives
within five working days.

Can I pay abroad?
Yes, in every country that takes Visa. Withdrawals cost:
- 2% on the Standard card,
  at least 1 EUR,
- nothing on Premium.

What if my card is stolen?

Freeze it in the app and write to help@northwind.example or
see https://northwind.example/stolen.

Steps to close an account
=========================

1. Empty it.
2. Tap Close.
"""


def test_a_text_faq_gives_an_article_per_question(db_url, write_kb_file):
    path = write_kb_file("faq.txt", FAQ)
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (3, [])
    # The steps under a heading that is not a question are in no answer: the note says so.
    assert report.notes == [
        f"{path}:1: FAQ page: 3 questions read as 3 articles",
        f"{path}:21: FAQ page: 4 words of text outside any question left out (line 21)",
    ]
    rel = 'rel="noopener noreferrer nofollow"'
    bodies = {a.title: a.body for a in articles(db_url).values()}
    assert bodies == {
        # an editor's wrapped lines are one paragraph
        "How do I order a card?": "<p>Open the app and tap Cards, then Order. It arrives within "
        "five working days.</p>",
        "Can I pay abroad?": "<p>Yes, in every country that takes Visa. Withdrawals cost:</p>\n"
        "<ul>\n<li>2% on the Standard card, at least 1 EUR,</li>\n"
        "<li>nothing on Premium.</li></ul>",
        # the answer after a blank line; addresses become links; a heading ends the answer
        "What if my card is stolen?": "<p>Freeze it in the app and write to "
        f'<a href="mailto:help@northwind.example" {rel}>help@northwind.example</a> or see '
        f'<a href="https://northwind.example/stolen" {rel}>https://northwind.example/stolen</a>.'
        "</p>",
    }


def test_headings_in_capitals_or_marked_with_hashes_end_the_answer_above(db_url, write_kb_file):
    path = write_kb_file(
        "faq.txt",
        "# Northwind help\n\nCARDS:\n\nHow do I order a card?\nTap Cards, then Order.\n\n"
        "Can I pay abroad?\nYes, with Visa.\n\nPLEASE NOTE:\n\nNot in Narnia.\n\n"
        "ACCOUNT:\n\nHow do I close it?\nTap Close.\n\n"
        "## Fees ##\n\nIs it free?\nYes.\n\nUSE ATMS ONLY IN DAYLIGHT.\n",
    )
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (4, [])
    stored = {a.title: a for a in articles(db_url).values()}
    # a heading ends the answer above it: neither ACCOUNT: nor Fees is part of an answer
    assert {title: a.body for title, a in stored.items()} == {
        "How do I order a card?": "<p>Tap Cards, then Order.</p>",
        # a label introduces the paragraph below it: both stay in the answer
        "Can I pay abroad?": "<p>Yes, with Visa.</p>\n<p>PLEASE NOTE:</p>\n<p>Not in Narnia.</p>",
        "How do I close it?": "<p>Tap Close.</p>",
        # a line in capitals that ends as a sentence does is text, not a heading
        "Is it free?": "<p>Yes.</p>\n<p>USE ATMS ONLY IN DAYLIGHT.</p>",
    }
    assert report.notes == [f"{path}:1: FAQ page: 4 questions read as 4 articles"]
    # a first line that is a heading titles the page by its text, without its marks
    single = write_kb_file("note.txt", "# Refund times #\n\nRefunds take five days.\n")
    run_import(db_url, [single])
    assert "Refund times" in {a.title for a in articles(db_url).values()}


def test_a_text_that_is_no_faq_is_one_article(db_url, write_kb_file):
    titled = write_kb_file(
        "steps.txt",
        "Closing an account\n\nYou can close it in the app.\nIt takes a day.\n\n"
        "1. Empty it.\n2. Tap Close.\n",
    )
    untitled = write_kb_file("refund-times.txt", "Refunds take five days. Ask us for more.\n")
    report = run_import(db_url, [titled, untitled])
    assert report.problems == []
    stored = {a.title: a.body for a in articles(db_url).values()}
    assert stored == {
        "Closing an account": "<p>You can close it in the app. It takes a day.</p>\n<ol>\n"
        "<li>Empty it.</li>\n<li>Tap Close.</li></ol>",
        # a first line that is a sentence is text: the file names the article
        "refund-times": "<p>Refunds take five days. Ask us for more.</p>",
    }


def test_a_question_without_an_answer_is_named_on_its_line(db_url, write_kb_file):
    path = write_kb_file("faq.txt", "FAQ\n\nOne?\nYes.\n\nTwo?\nNo.\n\nThree?\nMaybe.\n\n\nFour?\n")
    assert rejected(db_url, [path]) == [f"{path}:13: question 'Four?' has no answer"]


def test_text_files_in_a_folder_are_not_imported(db_url, write_kb_file):
    # a saved site holds robots.txt and licences beside its pages: only files named are read
    page = write_kb_file("site/fees.md", "---\ntitle: Fees\n---\nNone.\n")
    write_kb_file("site/robots.txt", "User-agent: *\nDisallow: /admin\n")
    report = run_import(db_url, [page.parent])
    assert report.created == 1
    assert [a.title for a in articles(db_url).values()] == ["Fees"]


@pytest.mark.parametrize(
    ("name", "what", "instead"),
    [
        ("faq.xls", "an Excel 97-2003 workbook", "save it as .xlsx or .csv (File > Save As)"),
        ("faq.ods", "an OpenDocument spreadsheet", "save it as .xlsx or .csv (File > Save As)"),
        ("faq.odt", "an OpenDocument text", "save it as .docx or .pdf (File > Save As, or Export)"),
        ("faq.rtf", "a rich text document", "save it as .docx or .pdf (File > Save As, or Export)"),
        (
            "exported_agent_Help.blob",
            "a Dialogflow CX agent exported as a blob",
            "export it again as a JSON package (Agent settings > Export, Format: JSON package)",
        ),
    ],
)
def test_formats_not_read_say_what_to_save_them_as(db_url, write_kb_file, name, what, instead):
    path = write_kb_file(name, b"\xd0\xcf\x11\xe0")
    assert rejected(db_url, [path]) == [f"{path}:1: {what}: {instead} and import that"]
