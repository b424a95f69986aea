"""Word documents (.docx) as a source (app/kb/word_documents.py): files laid out as Word writes
them (its parts, namespaces, revision ids, bookmarks, proofing marks, a German Word's style
ids), imported for real."""

from __future__ import annotations

import zipfile
from pathlib import Path

from fixtures_kb import articles, rejected, run_import

NS = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
    'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'mc:Ignorable="w14"'
)
XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
CONTENT_TYPES = (
    XML + '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships'
    '+xml"/><Default Extension="xml" ContentType="application/xml"/><Override '
    'PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.'
    'wordprocessingml.document.main+xml"/></Types>'
)
PACKAGE_RELS = (
    XML + '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
)
# A German Word's styles: ids in German, names in English as Word writes built-in ones; a
# heading found by its name, another by its outline level.
STYLES = (
    XML + f"<w:styles {NS}>"
    '<w:style w:type="paragraph" w:default="1" w:styleId="Standard"><w:name w:val="Normal"/>'
    "</w:style>"
    '<w:style w:type="paragraph" w:styleId="Titel"><w:name w:val="Title"/></w:style>'
    '<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/>'
    '<w:pPr><w:outlineLvl w:val="0"/></w:pPr><w:rPr><w:b/><w:bCs/></w:rPr></w:style>'
    '<w:style w:type="paragraph" w:styleId="berschrift2"><w:name w:val="heading 2"/>'
    "</w:style>"
    '<w:style w:type="paragraph" w:styleId="berschrift3"><w:name w:val="heading 3"/>'
    "</w:style>"
    # a style of the document's own that Word's outline shows at level 2
    '<w:style w:type="paragraph" w:customStyle="1" w:styleId="Frage"><w:name w:val="Frage"/>'
    '<w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>'
    '<w:style w:type="paragraph" w:styleId="Listenabsatz"><w:name w:val="List Paragraph"/>'
    "</w:style>"
    # list styles that carry their numbering, as Word's templates define them
    '<w:style w:type="paragraph" w:styleId="Aufzhlungszeichen"><w:name w:val="List Bullet"/>'
    '<w:basedOn w:val="Standard"/><w:pPr><w:numPr><w:numId w:val="1"/></w:numPr></w:pPr>'
    "</w:style>"
    '<w:style w:type="paragraph" w:styleId="Aufzhlungszeichen2"><w:name w:val="List Bullet 2"/>'
    '<w:pPr><w:numPr><w:numId w:val="1"/></w:numPr></w:pPr></w:style>'
    '<w:style w:type="paragraph" w:styleId="MeineListe"><w:name w:val="My list"/>'
    '<w:basedOn w:val="Aufzhlungszeichen"/></w:style>'
    '<w:style w:type="character" w:styleId="Fett"><w:name w:val="Strong"/>'
    "<w:rPr><w:b/><w:bCs/></w:rPr></w:style></w:styles>"
)
NUMBERING = (
    XML + f"<w:numbering {NS}>"
    '<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/></w:lvl></w:abstractNum>'
    '<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="decimal"/></w:lvl>'
    "</w:abstractNum>"
    '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
    '<w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num></w:numbering>'
)
DOCUMENT_RELS = (
    XML + '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/styles" Target="styles.xml"/>'
    '<Relationship Id="rId8" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/hyperlink" Target="https://northwind.example/app" TargetMode="External"/>'
    "</Relationships>"
)


def core(title: str) -> str:
    return (
        XML + '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/'
        'metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<dc:title>{title}</dc:title><dc:creator>Dana Whitlock</dc:creator>"
        "</cp:coreProperties>"
    )


def p(*runs: str, style: str | None = None, num: tuple[int, int] | None = None) -> str:
    """A paragraph as Word writes one: revision ids, its properties, then its runs."""
    props = f'<w:pStyle w:val="{style}"/>' if style else ""
    if num:
        props += f'<w:numPr><w:ilvl w:val="{num[1]}"/><w:numId w:val="{num[0]}"/></w:numPr>'
    props = f"<w:pPr>{props}</w:pPr>" if props else ""
    revision = 'w14:paraId="1A2B3C4D" w:rsidR="00A1" w:rsidRDefault="00A1"'
    return f"<w:p {revision}>{props}{''.join(runs)}</w:p>"


def r(text: str, *marks: str) -> str:
    props = "".join(f"<w:{m}/>" for m in marks)
    props = f"<w:rPr>{props}<w:bCs/></w:rPr>" if props else ""
    return f'<w:r w:rsidRPr="00C3">{props}<w:t xml:space="preserve">{text}</w:t></w:r>'


def docx(path: Path, *blocks: str, title: str = "") -> Path:
    body = "".join(blocks) + '<w:sectPr><w:pgSz w:w="11906" w:h="16838"/></w:sectPr>'
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", CONTENT_TYPES)
        archive.writestr("_rels/.rels", PACKAGE_RELS)
        archive.writestr(
            "word/document.xml", f"{XML}<w:document {NS}><w:body>{body}</w:body></w:document>"
        )
        archive.writestr("word/styles.xml", STYLES)
        archive.writestr("word/numbering.xml", NUMBERING)
        archive.writestr("word/_rels/document.xml.rels", DOCUMENT_RELS)
        archive.writestr("docProps/core.xml", core(title))
    return path


def faq(path: Path) -> Path:
    return docx(
        path,
        p(r("Northwind card FAQ"), style="Titel"),
        p(r("Answers to what our customers ask about their cards.")),
        p(
            '<w:bookmarkStart w:id="0" w:name="_Toc1"/>',
            r("How do I reset my PIN?"),
            '<w:bookmarkEnd w:id="0"/>',
            style="berschrift2",
        ),
        p(
            r("Open "),
            f'<w:hyperlink r:id="rId8" w:history="1">{r("the app", "b")}</w:hyperlink>',
            r(", then choose "),
            '<w:proofErr w:type="spellStart"/>',
            r("Security", "b"),
            '<w:proofErr w:type="spellEnd"/>',
            r(":"),
        ),
        p(r("Change PIN"), style="Listenabsatz", num=(2, 0)),
        p(r("Enter the new PIN twice"), style="Listenabsatz", num=(2, 0)),
        p(),
        p(r("What are my card limits?"), style="berschrift2"),
        p(r("Per day:")),
        p(r("Payments"), num=(1, 0)),
        p(r("5,000 EUR online"), num=(1, 1)),
        p(r("Cash"), num=(1, 0)),
        "<w:tbl><w:tblPr/><w:tr><w:tc><w:p>"
        + r("Cash")
        + "</w:p></w:tc><w:tc><w:p>"
        + r("500 EUR")
        + "</w:p></w:tc></w:tr></w:tbl>",
        p(r("Can I pay contactless?"), style="Frage"),
        p(
            r("Yes, up to "),
            '<w:del w:id="3" w:author="Dana"><w:r><w:delText>25 EUR</w:delText></w:r></w:del>',
            '<w:ins w:id="4" w:author="Dana">' + r("50 EUR") + "</w:ins>",
            r(" a payment."),
        ),
        title="Cards FAQ (draft 3)",
    )


def test_a_word_faq_gives_an_article_per_question_with_its_formatting(db_url, tmp_path):
    path = faq(tmp_path / "Card FAQ.docx")
    report = run_import(db_url, [path])
    assert (report.problems, report.created) == ([], 3)
    stored = articles(db_url)
    assert sorted(a.title for a in stored.values()) == [
        "Can I pay contactless?",
        "How do I reset my PIN?",
        "What are my card limits?",
    ]
    pin = stored["how-do-i-reset-my-pin"]
    assert pin.body == (
        '<p>Open <a href="https://northwind.example/app" rel="noopener noreferrer nofollow">'
        "<b>the app</b></a>, then choose <b>Security</b>:</p>\n"
        "<ol>\n<li>Change PIN</li>\n<li>Enter the new PIN twice</li></ol>"
    )
    assert pin.source == str(path)
    # bullets nested by their level, then a table
    assert stored["what-are-my-card-limits"].body == (
        "<p>Per day:</p>\n<ul>\n<li>Payments\n<ul>\n<li>5,000 EUR online</li></ul></li>\n"
        "<li>Cash</li></ul>\n<table>\n<tbody><tr>\n<td>Cash</td>\n<td>500 EUR</td></tr></tbody>"
        "</table>"
    )
    # a tracked change: the inserted text, not the deleted
    assert stored["can-i-pay-contactless"].body == "<p>Yes, up to 50 EUR a payment.</p>"


def test_questions_in_bold_split_a_document_without_heading_styles(db_url, tmp_path):
    path = docx(
        tmp_path / "faq.docx",
        p(r("How do I reset my PIN?", "b")),
        p(r("Open the app and choose Security.")),
        p(r("Never tell anyone your PIN.", "b")),  # a warning, not a heading
        p(r("We will never ask for it.")),
        p(r("What are my card limits?", "b")),
        p(r("5,000 EUR a day.")),
        p(r("Can I pay contactless?", "b")),
        p(r("Yes, up to "), r("50 EUR", "b"), r(" a payment.")),
    )
    run_import(db_url, [path])
    stored = articles(db_url)
    assert sorted(stored) == [
        "can-i-pay-contactless",
        "how-do-i-reset-my-pin",
        "what-are-my-card-limits",
    ]
    # a paragraph only partly bold is text, and so is one in bold ending as a sentence
    assert stored["can-i-pay-contactless"].body == "<p>Yes, up to <b>50 EUR</b> a payment.</p>"
    assert stored["how-do-i-reset-my-pin"].body == (
        "<p>Open the app and choose Security.</p>\n<p><b>Never tell anyone your PIN.</b></p>\n"
        "<p>We will never ask for it.</p>"
    )


def test_numbered_questions_with_their_marks(db_url, tmp_path):
    """Questions numbered by Word and marked "Q:", answers marked "A:" (the marks go)."""
    path = docx(
        tmp_path / "faq.docx",
        p(r("Q: How do I reset my PIN?", "b"), num=(2, 0)),
        p(r("A:", "b"), r(" Open the app and choose Security.")),
        p(r("Q: What are my card limits?", "b"), num=(2, 0)),
        p(r("A: 5,000 EUR a day.")),
        p(r("Q: Can I pay contactless?", "b"), num=(2, 0)),
        p(r("A: Yes.")),
    )
    run_import(db_url, [path])
    stored = articles(db_url)
    assert {a.title: a.body for a in stored.values()} == {
        "How do I reset my PIN?": "<p>Open the app and choose Security.</p>",
        "What are my card limits?": "<p>5,000 EUR a day.</p>",
        "Can I pay contactless?": "<p>Yes.</p>",
    }


def test_questions_marked_in_plain_paragraphs(db_url, tmp_path):
    """Questions typed as "Q:" paragraphs in the text's own style, no bold and no numbering."""
    path = docx(
        tmp_path / "faq.docx",
        p(r("Our most asked questions.")),
        p(r("Q: How do I reset my PIN?")),
        p(r("A: Open the app and choose Security.")),
        p(r("Q: What are my card limits?")),
        p(r("A: 5,000 EUR a day.")),
        p(r("Q: Can I pay contactless?")),
        p(r("A: Yes.")),
    )
    run_import(db_url, [path])
    assert {a.title: a.body for a in articles(db_url).values()} == {
        "How do I reset my PIN?": "<p>Open the app and choose Security.</p>",
        "What are my card limits?": "<p>5,000 EUR a day.</p>",
        "Can I pay contactless?": "<p>Yes.</p>",
    }


def test_a_guide_is_one_article_titled_by_its_title_property_else_its_name(db_url, tmp_path):
    guide = docx(
        tmp_path / "guide.docx",
        p(r("Travelling abroad"), style="berschrift1"),
        p(r("Cards work in 150 countries. Tell us nothing before you go.")),
        title="Using your card abroad",
    )
    untitled = docx(
        tmp_path / "opening_hours.docx", p(r("Branches are open from 9am to 5pm on weekdays."))
    )
    run_import(db_url, [guide, untitled])
    stored = articles(db_url)
    assert stored["using-your-card-abroad"].body == (
        "<h1>Travelling abroad</h1>\n<p>Cards work in 150 countries. Tell us nothing before you "
        "go.</p>"
    )
    assert stored["opening-hours"].body == "<p>Branches are open from 9am to 5pm on weekdays.</p>"


def _words(topic: str, count: int) -> str:
    return " ".join(f"{topic}{n % 7}" for n in range(count)) + "."


def test_a_long_document_in_sections_gives_an_article_per_section(db_url, tmp_path):
    """A manual: its sections at the shallowest level with 3 or more headings are articles,
    a deeper heading stays in its section, a chapter heading above them ends one and its own
    text is an article too, and the opening text is an article of the document's title."""
    path = docx(
        tmp_path / "handbook.docx",
        p(r("Northwind card handbook"), style="Titel"),
        p(r(_words("intro", 60))),
        p(r("Cards"), style="berschrift1"),
        p(r(_words("chapter", 40))),
        p(r("Card limits"), style="berschrift2"),
        p(r(_words("limit", 300))),
        p(r("Lost cards"), style="berschrift2"),
        p(r(_words("lost", 300))),
        p(r("Abroad"), style="berschrift3"),
        p(r(_words("abroad", 100))),
        p(r("Transfers"), style="berschrift1"),
        p(r("Fees"), style="berschrift2"),
        p(r(_words("fee", 300))),
        p(r("Coming soon"), style="berschrift2"),
    )
    report = run_import(db_url, [path])
    # the opening, a chapter's own text and 3 sections; "Transfers" goes straight into its
    # first section and "Coming soon" has no text
    assert report.notes == [f"{path}:1: document in sections: 5 sections read as 5 articles"]
    stored = articles(db_url)
    assert sorted((a.title, a.body.split(" ")[0]) for a in stored.values()) == [
        ("Card limits", "<p>limit0"),
        ("Cards", "<p>chapter0"),
        ("Fees", "<p>fee0"),
        ("Lost cards", "<p>lost0"),
        ("Northwind card handbook", "<p>intro0"),
    ]
    assert "<h3>Abroad</h3>" in stored["lost-cards"].body
    assert "limit0" not in stored["cards"].body
    # the same document short of the length stays one article
    short = docx(
        tmp_path / "short.docx",
        p(r("Card basics"), style="Titel"),
        *(p(r(t), style="berschrift2") for t in ("Limits", "Lost cards", "Fees")),
        p(r("Short.")),
    )
    run_import(db_url, [short])
    assert "<h2>Lost cards</h2>" in articles(db_url)["card-basics"].body


def test_a_manual_of_long_chapters_is_read_by_its_sections(db_url, tmp_path):
    """Chapters of 750 words are manuals of their own: their 9 sections are the articles;
    chapters of 400 words are the articles."""
    blocks = []
    for chapter in ("Cards", "Transfers", "Account"):
        blocks.append(p(r(chapter), style="berschrift1"))
        for section in range(3):
            blocks += [p(r(f"{chapter} {section}"), style="berschrift2")]
            blocks += [p(r(_words(chapter.lower(), 250)))]
    run_import(db_url, [docx(tmp_path / "manual.docx", *blocks)])
    assert len(articles(db_url)) == 9
    short = []
    for chapter in ("Fees", "Savings", "Loans"):  # one section of 400 words each
        short += [p(r(chapter), style="berschrift1"), p(r(f"{chapter} 0"), style="berschrift2")]
        short += [p(r(_words(chapter.lower(), 400)))]
    run_import(db_url, [docx(tmp_path / "short" / "manual.docx", *short)])
    assert {"fees", "savings", "loans"} <= set(articles(db_url))
    assert "<h2>Fees 0</h2>" in articles(db_url)["fees"].body


def test_lists_and_emphasis_given_by_styles(db_url, tmp_path):
    """List styles carry their numbering (``List Bullet``, ``List Bullet 2`` one deeper, a
    style based on one); a character style's bold (``Strong``) is kept, a heading style's is
    its look."""
    strong = '<w:r><w:rPr><w:rStyle w:val="Fett"/></w:rPr><w:t>at once</w:t></w:r>'
    path = docx(
        tmp_path / "lost.docx",
        p(r("Lost cards"), style="berschrift1"),
        p(r("Freeze the card "), strong, r(":")),
        p(r("in the app"), style="Aufzhlungszeichen"),
        p(r("under Cards"), style="Aufzhlungszeichen2"),
        p(r("or by phone"), style="MeineListe"),
        title="Lost or stolen cards",
    )
    run_import(db_url, [path])
    assert articles(db_url)["lost-or-stolen-cards"].body == (
        "<h1>Lost cards</h1>\n<p>Freeze the card <b>at once</b>:</p>\n<ul>\n<li>in the app\n"
        "<ul>\n<li>under Cards</li></ul></li>\n<li>or by phone</li></ul>"
    )


def test_word_documents_in_a_folder_or_an_archive_and_files_that_are_none(db_url, tmp_path):
    folder = tmp_path / "kb"
    faq(folder / "cards" / "faq.docx")
    (folder / "cards" / "notes.md").write_text("# Notes\n\nCards are free.\n")
    assert run_import(db_url, [folder]).created == 4
    zipped = tmp_path / "kb.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.write(folder / "cards" / "faq.docx", "kb/cards/faq.docx")
    # the same questions from another file are the same articles
    assert run_import(db_url, [zipped]).unchanged == 3

    broken = tmp_path / "broken.docx"
    broken.write_bytes(b"not a zip at all")
    other_zip = tmp_path / "other.docx"
    with zipfile.ZipFile(other_zip, "w") as archive:
        archive.writestr("content.xml", "<x/>")
    old = tmp_path / "old.doc"
    old.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1")
    assert rejected(db_url, [broken, other_zip, old]) == [
        f"{old}:1: a Word 97-2003 document: save it as .docx (Word or LibreOffice: Save As) and "
        "import that",
        f"{broken}:1: not a Word document (.docx), or a damaged one",
        f"{other_zip}:1: a zip without word/document.xml: not a Word document",
    ]


def test_a_word_document_whose_text_is_damaged_is_named(db_url, tmp_path):
    from test_kb_archives import _damaged

    path = _damaged(tmp_path / "faq.docx", "word/document.xml", "<w:document/>" * 100)
    assert rejected(db_url, [path]) == [
        f"{path}:1: a damaged Word document: Error -3 while decompressing data: invalid block type"
    ]
