"""PDF documents as a source (app/kb/pdf_documents.py): files written by a PDF library the way
word processors lay documents out (a title, headings in larger or bold type, running feet with
page numbers, lists, words broken over lines), and a web page printed by Chromium, imported for
real."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fixtures_kb import articles, rejected, run_import

NEW_PAGE = ("page", 0, "")


def pdf(path: Path, *blocks: tuple[str, float, str], title: str | None = None, foot: str = ""):
    """A PDF of ``blocks`` (style: "" or "B", size in points, text; ``NEW_PAGE`` starts a page),
    each a paragraph in Helvetica at 1.3 times its size between lines and a gap after it, with
    ``foot`` ("{page}" its number) at the foot of every page and ``title`` as its property."""
    from fpdf import FPDF

    class Document(FPDF):
        def footer(self) -> None:
            if foot:
                self.set_y(-15)
                self.set_font("Helvetica", "", 8)
                self.cell(0, 10, foot.format(page=self.page_no()), align="C")

    document = Document()
    if title:
        document.set_title(title)
    document.add_page()
    for style, size, text in blocks:
        if style == "page":
            document.add_page()
            continue
        document.set_font("Helvetica", style, size)
        line_height = size * 1.3 * 25.4 / 72  # millimetres
        document.multi_cell(0, line_height, text, new_x="LMARGIN", new_y="NEXT")
        document.ln(line_height * 0.6)
    document.output(str(path))
    return path


def _words(topic: str, count: int) -> str:
    return " ".join(f"{topic}{n % 7}" for n in range(count)) + "."


def test_a_pdf_manual_gives_an_article_per_section(db_url, tmp_path):
    """A manual saved as PDF: its title paragraph and property, a table of contents, chapters
    and sections in larger bold type, a foot with the page number on every page; its sections
    are the articles, as a Word manual's are."""
    path = pdf(
        tmp_path / "handbook.pdf",
        ("", 24, "Northwind card handbook"),
        ("B", 16, "Contents"),
        ("", 11, "Card limits ..................... 1\nLost cards ..................... 2"),
        ("", 11, _words("intro", 60)),
        (
            "B",
            16,
            "Cards: ordering, activating, freezing and replacing them, at home and abroad",
        ),  # over two lines
        ("", 11, _words("chapter", 40)),
        ("B", 13, "Card limits"),
        ("", 11, _words("limit", 350)),
        ("B", 13, "Lost cards"),
        (
            "",
            11,
            "If you lose your card, freeze it in the app. You keep all the infor-\nmation "
            "about it, and you can:",
        ),
        ("", 11, "- order a new card under Cards,\n- or call us on 0800 123 456."),
        ("", 11, _words("lost", 280)),
        ("B", 16, "Transfers"),
        ("B", 13, "Fees"),
        ("", 11, _words("fee", 350)),
        title="Northwind card handbook",
        foot="Northwind Bank - page {page} of 4",
    )
    report = run_import(db_url, [path])
    assert report.notes == [f"{path}:1: document in sections: 5 sections read as 5 articles"]
    stored = articles(db_url)
    assert sorted((a.title, a.body.split(" ")[0]) for a in stored.values()) == [
        ("Card limits", "<p>limit0"),
        (
            "Cards: ordering, activating, freezing and replacing them, at home and abroad",
            "<p>chapter0",
        ),
        ("Fees", "<p>fee0"),
        ("Lost cards", "<p>If"),
        ("Northwind card handbook", "<p>intro0"),
    ]
    lost = stored["lost-cards"].body
    assert "all the information about it" in lost  # the broken word joined again
    assert "<ul>\n<li>order a new card under Cards,</li>\n<li>or call us on" in lost
    everything = " ".join(a.body for a in stored.values())
    assert "Northwind Bank" not in everything and "handbook</" not in everything
    assert "...." not in everything and "contents" not in stored
    # its last paragraph goes on over the page break, the foot and page number left out
    assert lost.count("<p>") == 2 and lost.endswith("lost6.</p>")


def test_a_pdf_faq_of_bold_questions_gives_an_article_per_question(db_url, tmp_path):
    """Questions in bold at the size of the text, as people write an FAQ without heading
    styles; an answer's bold warning ending as a sentence stays in the answer."""
    path = pdf(
        tmp_path / "card-faq.pdf",
        ("B", 18, "Card questions"),
        ("", 11, "Answers to what customers ask us most about their cards."),
        ("B", 11, "How do I freeze my card?"),
        ("", 11, "Open the app, tap Cards and then Freeze."),
        ("B", 11, "Never share your PIN with anyone."),
        ("B", 11, "Can I use my card abroad?"),
        ("", 11, "Yes, in every country that takes Mastercard."),
        NEW_PAGE,
        ("B", 11, "What does a replacement cost?"),
        ("", 11, "Nothing: replacements are free."),
    )
    run_import(db_url, [path])
    stored = articles(db_url)
    assert sorted(stored) == [
        "can-i-use-my-card-abroad",
        "how-do-i-freeze-my-card",
        "what-does-a-replacement-cost",
    ]
    assert stored["how-do-i-freeze-my-card"].body == (
        "<p>Open the app, tap Cards and then Freeze.</p>\n<p><b>Never share your PIN with "
        "anyone.</b></p>"
    )
    assert stored["what-does-a-replacement-cost"].source == f"{path}"


def test_a_pdfs_title_without_a_title_property(db_url, tmp_path):
    """The first page's paragraph in the largest type no other has, else the file's name; a
    title property that is a file name, as Word writes one, is none."""
    guide = pdf(
        tmp_path / "guide.pdf",
        ("", 20, "Paying abroad"),
        ("", 11, "Cards work in every country."),
        title="Microsoft Word - guide.docx",
    )
    plain = pdf(tmp_path / "card-fees.pdf", ("", 11, "Cards are free."), ("", 11, "Always."))
    run_import(db_url, [guide, plain])
    assert {a.title: a.body for a in articles(db_url).values()} == {
        "Paying abroad": "<p>Cards work in every country.</p>",
        "card-fees": "<p>Cards are free.</p>\n<p>Always.</p>",
    }


def test_a_message_names_the_page(db_url, tmp_path):
    """Each page is a line of the page read, so a message's line is the PDF's page."""
    path = pdf(
        tmp_path / "faq.pdf",
        ("B", 11, "How do I freeze my card?"),
        ("", 11, "Open the app and tap Freeze."),
        ("B", 11, "Can I use my card abroad?"),
        ("", 11, "Yes."),
        NEW_PAGE,
        ("B", 11, "What does a replacement cost?"),
    )
    assert rejected(db_url, [path]) == [
        f"{path}:2: question 'What does a replacement cost?' has no answer"
    ]


def form_page_pdf(path: Path, paragraphs: list[str], box: str = "0 0 612 792", text: str = ""):
    """A one-page PDF whose page draws one form (an XObject, of ``box``) holding
    ``paragraphs``, as some PDF printers write every page, and ``text`` on the page itself;
    written object by object."""
    lines = "\n".join(f"({line}) Tj T* T*" for line in paragraphs)
    form = f"BT /F1 11 Tf 14 TL 72 700 Td\n{lines}\nET".encode()
    own = f"BT /F1 11 Tf 72 400 Td ({text}) Tj ET " if text else ""
    content = f"{own}q 1 0 0 1 0 0 cm /Fm1 Do Q".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << "
        b"/Fm1 5 0 R >> /Font << /F1 6 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
        b"<< /Type /XObject /Subtype /Form /BBox [%s] /Resources << /Font << /F1 6 0 R >> >> "
        b"/Length %d >>\nstream\n%s\nendstream" % (box.encode(), len(form), form),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return path


def test_a_page_drawn_as_one_form_is_read(db_url, tmp_path):
    """Text inside a form that covers the page is the page's text, not a scanned page's; the
    labels of a small one (a chart's) are not."""
    path = form_page_pdf(tmp_path / "fees.pdf", ["Cards are free.", "Cash costs 1%."])
    chart = form_page_pdf(
        tmp_path / "chart.pdf", ["Jan", "Feb"], box="60 600 260 720", text="Fees fell in May."
    )
    assert run_import(db_url, [path, chart]).warnings == []
    assert {a.title: a.body for a in articles(db_url).values()} == {
        "fees": "<p>Cards are free.</p>\n<p>Cash costs 1%.</p>",
        "chart": "<p>Fees fell in May.</p>",
    }


def test_pdfs_that_cannot_be_read_are_refused_with_what_to_do(db_url, tmp_path):
    """A PDF locked by a password or cut short is an error, and nothing is imported; a scanned
    one, with no text, is skipped with a warning."""
    from fpdf import FPDF

    locked = FPDF()
    locked.set_encryption(owner_password="owner", user_password="secret")
    locked.add_page()
    locked.set_font("Helvetica", "", 11)
    locked.cell(0, 10, "How do I freeze my card?")
    locked.output(str(tmp_path / "locked.pdf"))
    cut = tmp_path / "cut.pdf"
    cut.write_bytes((tmp_path / "locked.pdf").read_bytes()[:200])
    good = pdf(tmp_path / "good.pdf", ("", 11, "Cards are free."), title="Card fees")
    assert rejected(db_url, [good, tmp_path / "locked.pdf", cut]) == [
        f"{tmp_path / 'locked.pdf'}:1: a PDF protected by a password: save a copy without one "
        "(print it to PDF, or remove the password in the program that made it) and import that",
        f"{cut}:1: not a PDF, or a damaged one (Unexpected EOF)",
    ]
    assert articles(db_url) == {}

    scanned = FPDF()
    scanned.add_page()
    scanned.rect(20, 20, 170, 250, style="F")  # a page that is a picture: no text
    scanned.output(str(tmp_path / "scanned.pdf"))
    report = run_import(db_url, [good, tmp_path / "scanned.pdf"])
    assert report.warnings == [
        f"{tmp_path / 'scanned.pdf'}:1: a PDF with no text, only pictures of its pages (a scanned "
        "document): run it through text recognition (OCR) first, or import the document it was "
        "made from: skipped"
    ]
    assert [a.title for a in articles(db_url).values()] == ["Card fees"]


def test_links_to_web_and_mail_addresses_are_kept(db_url, tmp_path):
    from fpdf import FPDF

    document = FPDF()
    document.add_page()
    document.set_font("Helvetica", "B", 20)
    document.multi_cell(0, 10, "Refunds", new_x="LMARGIN", new_y="NEXT")
    document.set_font("Helvetica", "", 11)
    inside = document.add_link(page=1)  # a link within the document: not an address
    for text, link in [
        ("Fill in ", None),
        ("the refund form", "https://help.example/refund?x=1&y=2"),
        (" or our " + "longer words " * 12, None),  # the next link goes on over a line break
        ("the printable claim form for refunds sent by post", "https://help.example/claim"),
        (" within 30 days, or write to ", None),
        ("refunds@example.com", "mailto:refunds@example.com"),
        (". See also ", None),
        ("the form on my disk", "file:///C:/Users/ann/form.pdf"),  # leads nowhere for readers
        (" and ", None),
        ("the top of this page", inside),
        (".", None),
    ]:
        document.write(11 * 1.3 * 25.4 / 72, text, link=link or "")  # 1.3 lines, in mm
    path = tmp_path / "refunds.pdf"
    document.output(str(path))
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert article.title == "Refunds"
    rel = 'rel="noopener noreferrer nofollow"'  # as the allow-list writes every link
    assert article.body == (
        f'<p>Fill in <a href="https://help.example/refund?x=1&y=2" {rel}>the refund form</a> '
        f"or our {'longer words ' * 12}"
        f'<a href="https://help.example/claim" {rel}>the printable claim form for refunds sent by '
        "post</a> within 30 days, or write to "
        f'<a href="mailto:refunds@example.com" {rel}>refunds@example.com</a>. '
        "See also the form on my disk and the top of this page.</p>"
    )


def test_a_table_with_borders_is_a_table(db_url, tmp_path):
    """A fee table as a PDF library draws it: bordered cells, a bold header row, a cell of two
    lines centred on its row beside cells of one; the text around it stays paragraphs."""
    from fpdf import FPDF

    document = FPDF()
    document.add_page()
    document.set_font("Helvetica", "B", 20)
    document.multi_cell(0, 10, "Card fees", new_x="LMARGIN", new_y="NEXT")
    document.set_font("Helvetica", "", 11)
    document.multi_cell(0, 5, "Our cards cost the following.", new_x="LMARGIN", new_y="NEXT")
    document.ln(3)
    rows = [
        ("Card", "Monthly fee", "Withdrawals abroad"),
        ("Standard", "free", "2% per withdrawal, at least 1 EUR"),
        ("Premium", "", "free"),
        ("Metal", "12 EUR", "free, and travel insurance included for the whole family"),
    ]
    with document.table(col_widths=(30, 30, 60)) as table:
        for cells in rows:
            row = table.row()
            for text in cells:
                row.cell(text)
    document.ln(3)
    document.multi_cell(0, 5, "Fees are listed without VAT.", new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "fees.pdf"
    document.output(str(path))
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert article.title == "Card fees"
    body = article.body
    assert body.startswith("<p>Our cards cost the following.</p>\n<table>")
    assert body.endswith("</table>\n<p>Fees are listed without VAT.</p>")
    cells = [
        re.findall(r"<(t[hd])>(.*?)</t[hd]>", row)
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]
    assert cells == [
        [("th", "<b>Card</b>"), ("th", "<b>Monthly fee</b>"), ("th", "<b>Withdrawals abroad</b>")],
        *([("td", text) for text in row] for row in rows[1:]),
    ]


@pytest.mark.parametrize(
    "placed",
    [
        # a row in other columns right below (pdfminer joined two close cells above it)
        [(20, 50, "Standard"), (38, 50, "free"), (100, 50, "2% a withdrawal"),
         (20, 57, "Premium"), (100, 57, "free"), (20, 64, "Metal"), (60, 64, "12 EUR"),
         (100, 64, "free")],
        # a sentence across the columns between two rows
        [(20, 50, "Standard"), (100, 50, "free"),
         (20, 57, "Both cards can be ordered in the app, and arrive in five days."),
         (20, 64, "Metal"), (100, 64, "12 EUR")],
    ],
    ids=["rows-in-other-columns", "a-sentence-between-rows"],
)  # fmt: skip
def test_rows_not_understood_as_one_table_stay_text(db_url, tmp_path, placed):
    from fpdf import FPDF

    document = FPDF()
    document.add_page()
    document.set_font("Helvetica", "B", 20)
    document.multi_cell(0, 10, "Cards", new_x="LMARGIN", new_y="NEXT")
    document.set_font("Helvetica", "", 11)
    for x, y, text in placed:
        document.text(x, y, text)
    path = tmp_path / "cards.pdf"
    document.output(str(path))
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert "<table" not in article.body
    words = re.sub(r"<[^>]+>", " ", article.body).split()
    assert sorted(words) == sorted(" ".join(text for _, _, text in placed).split())  # all kept


def test_two_tables_in_the_same_columns_with_text_between_are_two_tables(db_url, tmp_path):
    from fpdf import FPDF

    document = FPDF()
    document.add_page()
    document.set_font("Helvetica", "B", 20)
    document.multi_cell(0, 10, "Card limits", new_x="LMARGIN", new_y="NEXT")
    document.set_font("Helvetica", "", 11)
    for caption, rows in (
        ("In shops:", [("Standard", "2,000 EUR"), ("Metal", "10,000 EUR")]),
        (
            "At cash machines, each day, in any country of the world:",
            [("Standard", "500 EUR"), ("Metal", "2,000 EUR")],
        ),
    ):
        document.multi_cell(0, 5, caption, new_x="LMARGIN", new_y="NEXT")
        document.ln(2)
        with document.table(col_widths=(40, 40), width=80, align="LEFT") as table:
            for cells in rows:
                row = table.row()
                for text in cells:
                    row.cell(text)
        document.ln(4)
    path = tmp_path / "limits.pdf"
    document.output(str(path))
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    body = article.body
    assert body.count("<table>") == 2
    assert body.index("In shops:") < body.index("2,000 EUR") < body.index("At cash machines")
    assert body.index("At cash machines") < body.index("500 EUR")


def test_two_columns_of_text_are_not_a_table(db_url, tmp_path):
    from fpdf import FPDF

    document = FPDF()
    document.add_page()
    document.set_font("Helvetica", "B", 20)
    document.multi_cell(0, 10, "Travelling with your card", new_x="LMARGIN", new_y="NEXT")
    document.set_font("Helvetica", "", 11)
    top = document.get_y()
    left = "Your card works in every country that takes Visa. " * 6
    right = "Tell us before you travel so that we do not block a payment abroad. " * 5
    for x, text in ((10, left), (110, right)):
        document.set_xy(x, top)
        document.multi_cell(90, 5, text.strip(), new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "travel.pdf"
    document.output(str(path))
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert "<table" not in article.body
    # read column after column, as running text
    assert " ".join(re.sub(r"<[^>]+>", " ", article.body).split()) == f"{left}{right}".strip()


@pytest.mark.browser
def test_a_web_faq_printed_to_pdf_by_a_browser(db_url, tmp_path, browser):
    """A help centre's FAQ page saved as PDF by Chromium, with the date, title, address and
    page numbers it prints in the margins: one article per question, with its bold words and
    its list, and none of what the browser printed around the page."""
    answers = {
        f"How do I {verb} my card?": f"<p>Open <b>Cards</b> and tap <b>{verb.title()}</b>. "
        + "It takes effect at once, in the app and for payments in shops and online. " * 6
        + "</p>"
        for verb in ("freeze", "unfreeze", "replace", "cancel", "activate", "rename")
    }
    answers["How do I cancel my card?"] += (
        '<p>Or fill in <a href="https://northwind.example/forms/cancel">the <b>cancellation</b> '
        'form</a>; <a href="#top">back to the top</a>.</p>'
    )
    answers["What does each card cost?"] = (
        "<table><tr><th>Card</th><th>Monthly fee</th><th>Withdrawals abroad</th></tr>"
        "<tr><td>Standard</td><td>free</td><td>2% per withdrawal, at least 1 EUR</td></tr>"
        "<tr><td>Metal</td><td>12 EUR</td><td>free</td></tr></table>"
    )
    answers["Which cards can I order?"] = (
        "<p>You can order:</p><ul><li>a physical card, free;</li><li>a virtual card, "
        "free;</li><li>a metal card, for £50.</li></ul>"
    )
    page = browser.new_page()
    page.set_content(
        "<!doctype html><html><head><title>Card questions – Northwind Help Centre</title>"
        "<style>table{border-collapse:collapse} td,th{border:1px solid #999;padding:6px}</style>"
        "</head><body><header>Northwind Help Centre</header><main><h1>Card questions</h1>"
        + "".join(f"<h2>{q}</h2>{a}" for q, a in answers.items())
        + "</main></body></html>"
    )
    path = tmp_path / "Card questions.pdf"
    page.pdf(
        path=str(path),
        display_header_footer=True,
        header_template='<div style="font-size:8px"><span class="date"></span> '
        '<span class="title"></span></div>',
        footer_template='<div style="font-size:8px"><span class="url"></span> '
        '<span class="pageNumber"></span>/<span class="totalPages"></span></div>',
        margin={"top": "60px", "bottom": "60px"},
    )
    page.close()
    report = run_import(db_url, [path])
    # What the page's <header> printed above the <h1> is in no answer.
    assert report.notes == [
        f"{path}:1: FAQ page: 8 questions read as 8 articles",
        f"{path}:1: FAQ page: 3 words of text outside any question left out (line 1)",
    ]
    stored = articles(db_url)
    assert sorted(a.title for a in stored.values()) == sorted(answers)
    freeze = stored["how-do-i-freeze-my-card"].body
    assert freeze.startswith("<p>Open <b>Cards</b> and tap <b>Freeze</b>. It takes effect")
    assert stored["which-cards-can-i-order"].body == (
        "<p>You can order:</p>\n<ul>\n<li>a physical card, free;</li>\n<li>a virtual card, "
        "free;</li>\n<li>a metal card, for £50.</li></ul>"
    )
    assert stored["how-do-i-cancel-my-card"].body.endswith(
        '<p>Or fill in <a href="https://northwind.example/forms/cancel" rel="noopener noreferrer '
        'nofollow">the <b>cancellation</b> form</a>; back to the top.</p>'
    )
    # its cells, which pdfminer reads as one line where they stand close, apart at the borders
    fees = stored["what-does-each-card-cost"].body
    cells = [
        re.findall(r"<t[hd]>(.*?)</t[hd]>", row)
        for row in re.findall(r"<tr>(.*?)</tr>", fees, re.S)
    ]
    assert cells == [
        ["<b>Card</b>", "<b>Monthly fee</b>", "<b>Withdrawals abroad</b>"],
        ["Standard", "free", "2% per withdrawal, at least 1 EUR"],
        ["Metal", "12 EUR", "free"],
    ]
    everything = " ".join(a.body for a in stored.values())
    assert "Northwind Help Centre" not in everything and "about:blank" not in everything
    assert "/2" not in everything  # the page numbers
