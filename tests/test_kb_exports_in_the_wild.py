"""Files as content owners have them, not as a format's specification writes them: TSVs whose
values start with a quote, trailing empty cells, blank lines above the header, classic Mac line
endings, a file name in another encoding, two JSON documents in one file, Zendesk articles
outside their export object, QnA items in a bare list, Kendra's CSV header, Yoast SEO's FAQ
JSON-LD and Bootstrap accordions. Real files and the real importer."""

from __future__ import annotations

import json
import os

import pytest
from fixtures_kb import articles, rejected, run_import

from app.cli import main

# ----------------------------------------------------------------------------- delimited files


def test_a_tsv_answer_starting_with_a_quote_neither_fails_nor_swallows_rows(db_url, write_kb_file):
    # Tools that write QnA TSVs join values with tabs and quote nothing.
    path = write_kb_file(
        "qna.tsv",
        "Question\tAnswer\n"
        'What is "Pro"?\t"Pro" is our paid plan.\n'
        'Can I pay yearly?\t"Yearly" saves 10%, see\n'
        'Is there a free plan?\tYes, up to 3 users."\n',
    )
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (3, [])
    bodies = {a.title: a.body for a in articles(db_url).values()}
    assert bodies == {
        'What is "Pro"?': '"Pro" is our paid plan.',
        "Can I pay yearly?": '"Yearly" saves 10%, see',
        "Is there a free plan?": 'Yes, up to 3 users."',
    }


def test_a_spreadsheet_s_quoted_tsv_keeps_its_line_breaks(db_url, write_kb_file):
    path = write_kb_file(
        "excel.tsv",
        'Question\tAnswer\nHow do I pay?\t"By card.\nOr by ""transfer""."\nWhat is Pro?\tPaid.\n',
    )
    run_import(db_url, [path])
    bodies = {a.title: a.body for a in articles(db_url).values()}
    assert bodies == {"How do I pay?": 'By card.\nOr by "transfer".', "What is Pro?": "Paid."}


@pytest.mark.parametrize(
    "content",
    [
        "title,body,,\nHow do I pay?,By card.,,\nWhat is Pro?,Paid.,\n",  # empty cells
        "\n\n,,\ntitle,body\nHow do I pay?,By card.\nWhat is Pro?,Paid.\n",  # blank lines above
        'title,body\rHow do I pay?,By card.\rWhat is Pro?,"Paid,\rmonthly."\r',  # CR only
    ],
    ids=["trailing-empty-cells", "blank-lines-above-the-header", "classic-mac-line-endings"],
)
def test_harmless_csv_quirks_import(db_url, write_kb_file, content):
    path = write_kb_file("faq.csv", content)
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (2, [])
    titles = sorted(a.title for a in articles(db_url).values())
    assert titles == ["How do I pay?", "What is Pro?"]


def test_a_value_beyond_the_header_is_still_an_error(db_url, write_kb_file):
    path = write_kb_file("faq.csv", "title,body\nHow do I pay?,By card.,extra\n")
    assert rejected(db_url, [path]) == [
        f"{path}:2: 3 fields but the header has 2 (an unquoted ',' or quote inside a value?)"
    ]


def test_kendra_csv_header_names_its_columns_with_underscores(db_url, write_kb_file):
    path = write_kb_file(
        "kendra.csv",
        "_question,_answer,_source_uri,_category\nHow do I pay?,By card.,https://x/pay,billing\n",
    )
    report = run_import(db_url, [path])
    assert report.notes == []
    (article,) = articles(db_url).values()
    assert (article.title, article.body, article.source, article.category) == (
        "How do I pay?",
        "By card.",
        "https://x/pay",
        "billing",
    )


def test_description_is_the_body_where_there_is_no_body_column(db_url, write_kb_file):
    path = write_kb_file("faq.csv", "title,description\nHow do I pay?,By card.\n")
    report = run_import(db_url, [path])
    assert report.notes == []
    (article,) = articles(db_url).values()
    assert article.body == "By card."


def test_help_desk_exports_name_title_and_body_their_own_way(db_url, write_kb_file):
    # ServiceNow's knowledge list exported as CSV, and a help desk's "subject" and "text"
    servicenow = write_kb_file(
        "kb_knowledge.csv",
        "Number,Short description,Article body,Category\n"
        'KB0010001,Reset your password,"<p>Use <b>Forgot password</b>.</p>",Accounts\n',
    )
    desk = write_kb_file("articles.json", '[{"subject": "Opening hours", "text": "8 to 20."}]')
    report = run_import(db_url, [servicenow, desk])
    assert (report.created, report.problems) == (2, [])
    stored = {a.title: (a.body, a.category) for a in articles(db_url).values()}
    assert stored == {
        "Reset your password": ("<p>Use <b>Forgot password</b>.</p>", "Accounts"),
        "Opening hours": ("8 to 20.", None),
    }


def test_a_salesforce_knowledge_export(db_url, write_kb_file):
    """Salesforce Knowledge articles as Data Loader exports them: the answer in a custom field
    (``ANSWER__C``), the state in ``PUBLISHSTATUS`` (Online, Draft, Archived)."""
    path = write_kb_file(
        "knowledge__kav.csv",
        '"ID","TITLE","URLNAME","SUMMARY","ANSWER__C","PUBLISHSTATUS","LANGUAGE"\n'
        '"ka01","How do I reset my password?","Reset-Password","Reset it.",'
        '"<p>Open <b>Sign in</b>.</p>","Online","en_US"\n'
        '"ka02","Which cards do you accept?","Cards","Visa.","<p>Visa.</p>","Draft","en_US"\n'
        '"ka03","Can I change my plan?","Plan","Yes.","<p>Yes.</p>","Archived","en_US"\n',
    )
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (3, [])
    assert report.notes == [f"{path}:1: ignoring unknown column(s) ID, URLNAME, SUMMARY, LANGUAGE"]
    stored = {a.title: (a.body, a.published) for a in articles(db_url).values()}
    assert stored == {
        "How do I reset my password?": ("<p>Open <b>Sign in</b>.</p>", True),
        "Which cards do you accept?": ("<p>Visa.</p>", False),
        "Can I change my plan?": ("<p>Yes.</p>", False),
    }


@pytest.mark.parametrize(
    ("name", "content"),
    [
        # a public mental-health FAQ's header: plural names, our "questions" among them
        ("faq.csv", "Question_ID,Questions,Answers\n1,How do I pay?,By card.\n"
                    "2,Can I get a refund?,Within 30 days.\n"),
        ("faq.csv", "Q,A\nHow do I pay?,By card.\nCan I get a refund?,Within 30 days.\n"),
        ("faq.csv", "id,query,response\n1,How do I pay?,By card.\n"
                    "2,Can I get a refund?,Within 30 days.\n"),
        ("faq.tsv", "FAQ\tReply\nHow do I pay?\tBy card.\nCan I get a refund?\tWithin 30 days.\n"),
        # a fine-tuning file
        ("faq.jsonl", '{"prompt": "How do I pay?", "completion": "By card."}\n'
                      '{"prompt": "Can I get a refund?", "completion": "Within 30 days."}\n'),
    ],
    ids=["questions-answers", "q-a", "query-response", "faq-reply-tsv", "prompt-completion"],
)  # fmt: skip
def test_plain_faq_data_sets_name_their_two_columns_in_many_ways(
    db_url, write_kb_file, name, content
):
    path = write_kb_file(name, content)
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (2, [])
    stored = {a.title: (a.body, a.questions) for a in articles(db_url).values()}
    assert stored == {
        "How do I pay?": ("By card.", []),
        "Can I get a refund?": ("Within 30 days.", []),
    }


def test_rows_under_another_question_name_group_as_question_rows(db_url, write_kb_file):
    # a query log answered by canned responses: rows sharing one are one article, and a cell
    # of questions gives its first as the title where the file has no title column
    log = write_kb_file(
        "log.csv",
        "query,response\nHow do I pay?,By card.\nCan I pay with a card?,By card.\n"
        "Refunds?,Within 30 days.\n",
    )
    cells = write_kb_file(
        "cells.csv", "Questions,Answers\nWhere is my parcel?|Track my parcel,Ask us.\n"
    )
    report = run_import(db_url, [log, cells])
    assert report.problems == []
    stored = {a.title: (a.body, a.questions) for a in articles(db_url).values()}
    assert stored == {
        "How do I pay?": ("By card.", ["Can I pay with a card?"]),
        "Refunds?": ("Within 30 days.", []),
        "Where is my parcel?": ("Ask us.", ["Track my parcel"]),
    }


def test_our_column_wins_over_another_question_or_answer_name(db_url, write_kb_file):
    path = write_kb_file(
        "faq.csv", "title,body,query,response\nHow do I pay?,By card.,pay?,Cash.\n"
    )
    report = run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert (article.title, article.body) == ("How do I pay?", "By card.")
    assert f"{path}:1: ignoring unknown column(s) query, response" in report.notes


def test_a_file_name_in_another_encoding_imports(db_url, tmp_path):
    folder = tmp_path / "unzipped"
    folder.mkdir()
    name = os.fsdecode(b"faq_caf\xe9.csv")  # Latin-1 bytes from an old zip
    path = folder / name
    path.write_text("title,body\nHow do I pay?,By card.\n", encoding="utf-8")
    report = run_import(db_url, [folder / name])
    assert report.created == 1
    (article,) = articles(db_url).values()
    assert article.source == f"{folder}/faq_caf\ufffd.csv"


# ----------------------------------------------------------------------------- JSON


def _page(*ids: int, more: bool = True) -> dict:
    """One page of Zendesk's paginated articles API."""
    articles = [
        {"id": i, "title": f"Question {i}?", "body": f"<p>Answer {i}.</p>", "section_id": 7}
        for i in ids
    ]
    return {"articles": articles, "next_page": "https://x/articles.json?page=2" if more else None}


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("appended.json", "\n".join),  # curl >> appending each page's answer
        ("pages.json", lambda pages: json.dumps([json.loads(p) for p in pages], indent=1)),
        ("pages.jsonl", lambda pages: "\n".join(pages) + "\n"),
    ],
)
def test_pages_of_an_export_are_read_in_turn_and_an_overlap_once(
    db_url, write_kb_file, name, layout
):
    """Zendesk's API answers 30 to 100 articles a page: pages saved one after another, as a
    JSON list or as JSONL are one export. An article on two pages (the help centre changed
    while they were fetched) is read once, with a warning; the last page may be empty."""
    pages = [json.dumps(_page(1, 2)), json.dumps(_page(2, 3)), json.dumps(_page(more=False))]
    path = write_kb_file(name, layout(pages))
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (3, [])
    assert sorted(articles(db_url)) == ["question-1", "question-2", "question-3"]
    (warning,) = report.warnings
    assert "(id 2): the same record as at " in warning and warning.endswith("; read once")
    assert warning.startswith(f"{path}:")


def test_the_same_zendesk_article_in_two_locales_is_two_translations(db_url, write_kb_file):
    english, german = _page(5), _page(5)
    english["articles"][0]["locale"] = "en-us"
    german["articles"][0].update(locale="de", title="Frage 5?", body="<p>Antwort 5.</p>")
    path = write_kb_file("both.json", json.dumps(english) + json.dumps(german))
    report = run_import(db_url, [path])
    assert (report.created, report.warnings) == (2, [])


def test_an_export_whose_pages_hold_nothing_is_an_error(db_url, write_kb_file):
    empty = json.dumps(_page(more=False))
    for name, text in [
        ("appended.json", empty + "\n" + empty),
        ("pages.json", f"[{empty}, {empty}]"),
        ("pages.jsonl", empty + "\n"),
    ]:
        path = write_kb_file(name, text)
        problems = rejected(db_url, [path])
        assert problems in (
            [f"{path}:1: the list is empty"],
            [f"{path}:1: the export's pages hold no records"],
        ), problems


def test_json_after_an_export_that_is_not_another_page_is_an_error(db_url, write_kb_file):
    page = json.dumps({"articles": [{"title": "How do I pay?", "body": "<p>By card.</p>"}]})
    for after in ('["not", "a", "page"]', '{"count": 3, "faqs": [{"title": "A", "body": "a"}]}'):
        path = write_kb_file("zendesk.json", page + "\n" + after + "\n")
        assert rejected(db_url, [path]) == [
            f"{path}:2: more JSON after the end of the first document (two exports in one "
            "file?); give each its own file, or join their lists"
        ]
    lists = write_kb_file("lists.json", '[{"title": "A", "body": "a"}]\n[{"title": "B"}]\n')
    assert rejected(db_url, [lists])[0].startswith(f"{lists}:2: more JSON after")
    assert articles(db_url) == {}


ZENDESK_ARTICLE = {
    "id": 42,
    "html_url": "https://help.example/hc/articles/42",
    "title": "Reset your password",
    "body": "<p>Open <b>Settings</b>.</p><script>x()</script>",
    "section_id": 360001,
    "label_names": ["account"],
    "draft": True,
}


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_zendesk_articles_outside_their_export_object_are_read_as_zendesk_s(
    db_url, write_kb_file, suffix
):
    content = (
        json.dumps([ZENDESK_ARTICLE]) if suffix == ".json" else json.dumps(ZENDESK_ARTICLE) + "\n"
    )
    path = write_kb_file(f"articles{suffix}", content)
    report = run_import(db_url, [path])
    assert report.created == 1
    (article,) = articles(db_url).values()
    assert article.published is False  # draft
    assert article.category == "section-360001"
    assert article.source == "https://help.example/hc/articles/42"
    assert article.tags == ["account"]
    assert "x()" not in article.body and "Settings" in article.body


def test_qna_items_in_a_bare_list_use_their_first_question_as_title(db_url, write_kb_file):
    items = [{"id": 1, "answer": "Card.", "questions": ["How to pay?", "Pay how?"]}]
    path = write_kb_file("qna.json", json.dumps(items))
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert (article.title, article.questions, article.body) == (
        "How to pay?",
        ["Pay how?"],
        "Card.",
    )


def test_a_list_of_answers_is_the_body_s_paragraphs(db_url, write_kb_file):
    items = [{"question": "How do I pay?", "answers": ["By card.", "Or by bank transfer."]}]
    path = write_kb_file("faq.json", json.dumps(items))
    assert run_import(db_url, [path]).problems == []
    (article,) = articles(db_url).values()
    assert (article.title, article.body) == ("How do I pay?", "By card.\n\nOr by bank transfer.")


def test_a_chatbot_intents_file_gives_an_article_per_intent(db_url, write_kb_file):
    # the intents.json of many chatbot tutorials: patterns, responses and a tag
    intents = {
        "intents": [
            {"tag": "payments", "patterns": ["How do I pay?", "Payment methods"],
             "responses": ["By card.", "Cards and transfers work."], "context": [""]},
            {"tag": "refunds", "patterns": ["Can I get a refund?"], "responses": ["Yes."]},
        ]
    }  # fmt: skip
    path = write_kb_file("intents.json", json.dumps(intents))
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (2, [])
    stored = {a.title: (a.questions, a.body, a.tags) for a in articles(db_url).values()}
    assert stored == {
        "How do I pay?": (
            ["Payment methods"],
            "By card.\n\nCards and transfers work.",
            ["payments"],
        ),
        "Can I get a refund?": ([], "Yes.", ["refunds"]),
    }


def test_a_botpress_qna_export_gives_one_article_per_item(db_url, write_kb_file):
    def item(id_, questions, answers, contexts=("global",), enabled=True, **more):
        data = {
            "action": "text",
            "contexts": list(contexts),
            "enabled": enabled,
            "questions": questions,
            "answers": answers,
            "redirectFlow": "",
            **more,
        }
        return {"id": id_, "data": data}  # fmt: skip

    items = [
        item("pay_1a", {"en": ["How do I pay?", "payment methods"], "fr": ["Comment payer ?"]},
             {"en": ["By card or transfer.", "Card or transfer."], "fr": ["Par carte."]}),
        item("refund_2b", {"fr": ["Remboursement ?"]}, {"fr": ["Sous 30 jours."]},
             contexts=["billing"], enabled=False),
        item("sales_3c", {"en": ["talk to sales"]}, {"en": []}, redirectFlow="sales.flow.json"),
    ]  # fmt: skip
    path = write_kb_file("qna_export.json", json.dumps(items, indent=1))
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (2, [])
    assert report.warnings == [
        f"{path}:52: [2] (id sales_3c): no answer in 'en' (a redirect to a flow?): skipped"
    ]
    stored = {
        a.title: (a.questions, a.body, a.category, a.published) for a in articles(db_url).values()
    }
    assert stored == {
        # English first, the first answer of the ones Botpress picks from
        "How do I pay?": (["payment methods"], "By card or transfer.", None, True),
        # else the item's language; its context and state
        "Remboursement ?": ([], "Sous 30 jours.", "billing", False),
    }


def test_a_watson_assistant_skill_gives_an_article_per_intent_its_dialog_answers(
    db_url, write_kb_file
):
    def text(*variants):
        return {"response_type": "text", "values": [{"text": v} for v in variants]}

    skill = {
        "name": "Customer Care",
        "language": "en",
        "intents": [
            {"intent": "Store_Hours", "examples": [{"text": "When are you open?"},
                                                   {"text": "store hours"},
                                                   {"text": "When are you  OPEN?"}]},
            {"intent": "Appointments", "examples": [{"text": "book an appointment"}]},
            {"intent": "Greetings", "examples": [{"text": "hello"}]},
        ],
        "dialog_nodes": [
            {"conditions": "welcome", "output": {"generic": [text("Hello, how can I help?")]}},
            {"conditions": "#Store_Hours", "output": {"generic": [
                text("We are open 8 to 20.", "8-20 daily."),
                {"response_type": "option", "title": "More?", "options": []},
                text("Closed on holidays."),
            ]}},
            {"conditions": "#Appointments", "next_step": {"behavior": "jump_to"}},
            {"conditions": "#Greetings", "output": {"text": {"values": ["Hi! Ask away."]}}},
            {"conditions": "anything_else", "output": {"generic": [text("Say again?")]}},
        ],
    }  # fmt: skip
    path = write_kb_file("skill-Customer-Care.json", json.dumps(skill))
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (2, [])
    assert report.notes == [
        f"{path}:1: Watson Assistant skill: 1 intent without a dialog node answering it in text "
        "left out"
    ]
    stored = {slug: (a.title, a.questions, a.body) for slug, a in articles(db_url).items()}
    assert stored == {
        "store-hours": (
            "When are you open?",
            ["store hours"],
            "We are open 8 to 20.\n\nClosed on holidays.",
        ),
        "greetings": ("hello", [], "Hi! Ask away."),  # the older output format
    }


def test_a_qnabot_on_aws_export_gives_one_article_per_item(db_url, write_kb_file):
    export = {
        "qna": [
            {
                "qid": "Billing.001",
                "type": "qna",
                "q": ["How do I pay?", "What payment methods do you take?"],
                "a": "By card.",
                "alt": {"markdown": "By **card**.", "ssml": "<speak>By card.</speak>"},
                "t": "billing",
                "r": {"title": "", "imageUrl": ""},
            },
            {"qid": "Ship.001", "q": ["Do you ship abroad?"], "a": "EU only."},
            {"qid": "Empty.001", "q": [], "a": "Nothing asks this."},
        ]
    }
    text = json.dumps(export, indent=2)
    path = write_kb_file("qnabot.json", text)
    # the item's line is that of its opening brace, the one before its first key
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "Empty.001" in row) - 1
    assert rejected(db_url, [path]) == [
        f"{path}:{line}: qna[2] (qid Empty.001): has no questions ('q')"
    ]
    export["qna"].pop()
    path.write_text(json.dumps(export, indent=2), encoding="utf-8")
    report = run_import(db_url, [path])
    assert (report.created, report.notes) == (2, [])
    stored = {a.title: a for a in articles(db_url).values()}
    pay = stored["How do I pay?"]
    assert (pay.body, pay.questions, pay.category) == (
        "By **card**.",
        ["What payment methods do you take?"],
        "billing",
    )
    assert stored["Do you ship abroad?"].body == "EU only."


def test_unknown_json_keys_are_noted_once_per_file(db_url, write_kb_file):
    objects = [{"title": f"T{i}", "body": "b", "catgory": "x"} for i in range(3)]
    path = write_kb_file("typo.json", json.dumps(objects, indent=1))
    report = run_import(db_url, [path])
    assert report.notes == [f"{path}:2: ignoring unknown key(s) catgory"]


# ----------------------------------------------------------------------------- FAQ pages

YOAST = """<!doctype html><html><head><title>FAQ</title>
<script type="application/ld+json">{"@context": "https://schema.org", "@graph": [
 {"@type": ["WebPage", "FAQPage"], "@id": "https://x/faq/",
  "mainEntity": [{"@id": "https://x/faq/#q1"}, {"@id": "https://x/faq/#q2"},
                 {"@id": "https://x/faq/#q3"}]},
 {"@type": "Question", "@id": "https://x/faq/#q1", "name": "How do I pay?",
  "acceptedAnswer": {"@type": "Answer", "text": "By card."}},
 {"@type": "Question", "@id": "https://x/faq/#q2", "name": "Do you ship abroad?",
  "acceptedAnswer": {"@type": "Answer", "text": "EU only."}},
 {"@type": "Question", "@id": "https://x/faq/#q3", "name": "Can I return it?",
  "acceptedAnswer": {"@type": "Answer", "text": "Within 30 days."}}]}</script>
</head><body><main><p>FAQ</p></main></body></html>
"""

BOOTSTRAP = """<!doctype html><html><head><title>FAQ</title></head><body><main>
<form><button type="submit">Subscribe</button></form>
<div class="accordion">
 <div class="accordion-item">
  <h2 class="accordion-header" id="q1"><button class="accordion-button">How do I pay?</button></h2>
  <div class="accordion-collapse"><div class="accordion-body">By card.</div></div>
 </div>
 <div class="accordion-item">
  <h2 class="accordion-header" id="q2"><button class="accordion-button">Do you ship abroad?</button>
  </h2>
  <div class="accordion-collapse"><div class="accordion-body">EU only.</div></div>
 </div>
 <div class="accordion-item">
  <h2 class="accordion-header" id="q3"><button class="accordion-button">Can I return it?</button></h2>
  <div class="accordion-collapse"><div class="accordion-body">Within 30 days.</div></div>
 </div>
</div></main></body></html>
"""


@pytest.mark.parametrize("page", [YOAST, BOOTSTRAP], ids=["yoast-json-ld", "bootstrap-accordion"])
def test_faq_pages_as_wordpress_and_bootstrap_write_them(db_url, write_kb_file, page):
    path = write_kb_file("faq.html", page)
    report = run_import(db_url, [path])
    assert report.created == 3
    bodies = {a.title: a.body for a in articles(db_url).values()}
    assert bodies == {
        "How do I pay?": "<p>By card.</p>",
        "Do you ship abroad?": "<p>EU only.</p>",
        "Can I return it?": "<p>Within 30 days.</p>",
    }
    assert all("Subscribe" not in body for body in bodies.values())


# ----------------------------------------------------------------------------- intents


def test_intents_import_names_what_it_cannot_read(runner, db_url, tmp_path):
    folder = tmp_path / "intents.csv"
    folder.mkdir()
    sheet = tmp_path / "intents.xlsx"
    sheet.write_bytes(b"PK\x03\x04")
    for path, reason in (
        (folder, "is a folder; give the CSV file (columns text,category)"),
        (sheet, "is a spreadsheet; save it as CSV (columns text,category)"),
    ):
        result = runner.invoke(main, ["intents", "import", str(path)])
        assert result.exit_code == 1
        assert result.stderr.splitlines()[0] == f"{path}:1: {reason}"


def test_intent_labels_exported_as_numbers_are_noted(runner, db_url, tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\nhi there,0\nwhat is my balance,1\n", encoding="utf-8")
    result = runner.invoke(main, ["intents", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{path}:1: every category is a number" in result.output


@pytest.mark.parametrize(
    "content",
    [
        "How do I pay?\n=============\n\nBy card.\n",  # a setext heading
        '+++\ntitle = "How do I pay?"\ncategory = "billing"\n+++\nBy card.\n',  # Hugo's TOML
    ],
    ids=["setext-heading", "toml-front-matter"],
)
def test_markdown_titles_as_other_tools_write_them(db_url, write_kb_file, content):
    path = write_kb_file("pay.md", content)
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert (article.title, article.body.strip()) == ("How do I pay?", "By card.")
    assert article.category == ("billing" if content.startswith("+++") else None)


def test_a_docusaurus_docs_folder_imports(db_url, write_kb_file):
    """Docusaurus front matter gives the page's path on the site as ``slug`` (``/`` for the
    home page), and ``.mdx`` pages start with JavaScript imports."""
    write_kb_file(
        "docs/intro.md", "---\nslug: /\nsidebar_position: 1\n---\n# Welcome\n\nStart here.\n"
    )
    refunds = write_kb_file(
        "docs/billing/refunds.mdx",
        "---\nid: refunds\ntitle: Refunds\nslug: /billing/refunds\n---\n"
        "import Tabs from '@theme/Tabs';\nimport {\n  TabItem,\n} from '@theme/TabItem';\n\n"
        "<Tabs><TabItem value='app'>In the app, open **Payments**.</TabItem></Tabs>\n\n"
        "```js\nimport refund from 'acme';\n```\n",
    )
    report = run_import(db_url, [refunds.parent.parent])
    assert (report.created, report.problems) == (2, [])
    stored = articles(db_url)
    assert sorted(stored) == ["billing-refunds", "welcome"]
    body = stored["billing-refunds"].body
    assert "@theme" not in body and "TabItem," not in body
    assert "In the app, open **Payments**." in body
    assert "import refund from 'acme';" in stored["billing-refunds"].body_html  # code stays
    assert stored["welcome"].body.strip() == "Start here."


def test_admonitions_as_docusaurus_and_mkdocs_write_them_lose_their_fences(db_url, write_kb_file):
    path = write_kb_file(
        "cards.md",
        "# Cards\n\n:::tip Good to know\nCards arrive in **5 days**.\n:::\n\n"
        '!!! warning "Heads up"\n    Cards expire after 3 years.\n\n    ```\n    renew --now\n'
        "    ```\n\n??? note\n    Folded away.\n\nAfter.\n\n```\n:::tip in code\n```\n",
    )
    run_import(db_url, [path])
    html = articles(db_url)["cards"].body_html
    assert html == (
        "<p><strong>Good to know</strong>\nCards arrive in <strong>5 days</strong>.</p>\n"
        "<p><strong>Heads up</strong>\nCards expire after 3 years.</p>\n"
        "<pre><code>renew --now\n</code></pre>\n"
        "<p><strong>Note</strong>\nFolded away.</p>\n<p>After.</p>\n"
        "<pre><code>:::tip in code\n</code></pre>"
    )


def test_template_tags_alone_on_a_line_go_and_what_they_wrap_stays(db_url, write_kb_file):
    path = write_kb_file(
        "fees.md",
        '# Fees\n\n{% hint style="info" %}\nTransfers are **free**.\n{% endhint %}\n\n'
        '{{< notice tip >}}\nPay by card.\n{{< /notice >}}\n{{% include "x" %}}\n\n'
        "Price: {{ site.price }} a month.\n\n```\n{% raw %}\n```\n",
    )
    run_import(db_url, [path])
    assert articles(db_url)["fees"].body_html == (
        "<p>Transfers are <strong>free</strong>.</p>\n<p>Pay by card.</p>\n"
        "<p>Price: {{ site.price }} a month.</p>\n<pre><code>{% raw %}\n</code></pre>"
    )


def test_broken_toml_front_matter_is_named(db_url, write_kb_file):
    path = write_kb_file("pay.md", '+++\ntitle = "How do I pay?\n+++\nBy card.\n')
    (problem,) = rejected(db_url, [path])
    assert problem.startswith(f"{path}:1: invalid TOML front matter:")


def test_qna_tsv_answers_get_their_escaped_line_breaks_back(db_url, write_kb_file):
    path = write_kb_file(
        "qna.tsv",
        "Question\tAnswer\tSource\tMetadata\n"
        "How do I pay?\t**By card.**\\n\\nOr by transfer.\tEditorial\t\n",
    )
    run_import(db_url, [path])
    (article,) = articles(db_url).values()
    assert article.body == "**By card.**\n\nOr by transfer."
    assert "<strong>By card.</strong></p>\n<p>Or by transfer." in article.body_html


# ----------------------------------------------------------------------------- drafts


def test_help_desk_status_and_draft_flags_keep_drafts_unpublished(db_url, write_kb_file):
    csv_path = write_kb_file(
        "export.csv",
        "title,body,status\nLive one,a,Published\nDraft one,b,draft\nOld one,c,Archived\n",
    )
    json_path = write_kb_file(
        "export.json",
        json.dumps(
            [
                {"title": "Json draft", "body": "d", "draft": True},
                {"title": "Json live", "body": "e", "draft": "false"},
            ]
        ),  # fmt: skip
    )
    md_path = write_kb_file("hugo.md", "---\ntitle: Hugo draft\ndraft: true\n---\nf\n")
    report = run_import(db_url, [csv_path, json_path, md_path])
    assert report.notes == []
    published = {a.title: a.published for a in articles(db_url).values()}
    assert published == {
        "Live one": True,
        "Draft one": False,
        "Old one": False,
        "Json draft": False,
        "Json live": True,
        "Hugo draft": False,
    }


def test_intercom_and_help_scout_article_states(db_url, write_kb_file):
    # Intercom's articles API lists {"type": "list", "data": [...]} with a "state"; Help Scout
    # writes a status of "notpublished".
    intercom = write_kb_file(
        "intercom.json",
        json.dumps(
            {
                "type": "list",
                "data": [
                    {
                        "type": "article",
                        "title": "Live",
                        "body": "<p>a</p>",
                        "state": "published",
                        "url": "https://help.example/live",
                    },
                    {
                        "type": "article",
                        "title": "Draft",
                        "body": "<p>b</p>",
                        "state": "draft",
                        "url": None,
                    },
                ],
                "total_count": 2,
                "pages": {"type": "pages", "page": 1, "total_pages": 1},
            }
        ),  # fmt: skip
    )
    report = run_import(db_url, [intercom])
    assert report.problems == []
    stored = articles(db_url)
    assert {a.title: (a.published, a.source) for a in stored.values()} == {
        "Live": (True, "https://help.example/live"),
        "Draft": (False, str(intercom)),
    }
    help_scout = write_kb_file("docs.csv", "title,body,status\nHidden,c,notpublished\n")
    run_import(db_url, [help_scout])
    assert articles(db_url)["hidden"].published is False


@pytest.mark.parametrize("status", ["pending review", "2"])
def test_a_status_that_is_no_article_state_is_named(db_url, write_kb_file, status):
    # Freshdesk numbers its states (1 draft, 2 published): a number is not guessed at.
    path = write_kb_file("export.csv", f"title,body,status\nA,a,{status}\n")
    assert rejected(db_url, [path]) == [
        f"{path}:2: status {status!r} is not an article state (published, live, draft, "
        "archived, hidden...); give a published column of true or false"
    ]


FRESHDESK_ARTICLE = {
    "id": 5000123,
    "type": 1,
    "category_id": 5000010,
    "folder_id": 5000020,
    "hierarchy": [
        {"level": 0, "type": "category", "data": {"id": 5000010, "name": "Billing"}},
        {"level": 1, "type": "folder", "data": {"id": 5000020, "name": "Refunds"}},
    ],
    "thumbs_up": 3,
    "hits": 120,
    "seo_data": {"meta_title": "Refund times"},
    "title": "How long does a refund take?",
    "description": "<p>Refunds reach your card within <b>5 working days</b>.</p>",
    "description_text": "Refunds reach your card within 5 working days.",
    "status": 2,
    "tags": ["refunds", "billing"],
    "created_at": "2026-01-02T10:00:00Z",
}


def test_freshdesk_articles_as_its_api_returns_them(db_url, write_kb_file):
    """A Freshdesk (or Freshservice) folder's articles saved from its API: a bare list, or
    under an ``articles`` key; its numbered states are Freshdesk's own (1 draft, 2
    published)."""
    draft = {**FRESHDESK_ARTICLE, "id": 5000124, "title": "Partial refunds", "status": 1}
    empty = {**draft, "id": 5000125, "title": "Not started", "description": "<p></p>"}
    empty["description_text"] = ""
    path = write_kb_file("freshdesk.json", json.dumps([FRESHDESK_ARTICLE, draft, empty], indent=1))
    report = run_import(db_url, [path])
    assert report.problems == []
    assert report.warnings == [f"{path}:78: [2] (id 5000125): a draft without a body; not imported"]
    stored = articles(db_url)
    refund = stored["how-long-does-a-refund-take"]
    assert refund.body == "<p>Refunds reach your card within <b>5 working days</b>.</p>"
    assert (refund.category, refund.tags, refund.published) == (
        "folder-5000020",
        ["refunds", "billing"],
        True,
    )
    assert stored["partial-refunds"].published is False
    # under "articles", as a script saving the API's pages may keep them
    wrapped = write_kb_file("wrapped.json", json.dumps({"articles": [FRESHDESK_ARTICLE]}))
    assert run_import(db_url, [wrapped]).unchanged == 1
    odd = write_kb_file("odd.json", json.dumps([{**FRESHDESK_ARTICLE, "status": 3}]))
    assert rejected(db_url, [odd]) == [
        f"{odd}:1: [0] (id 5000123): status 3 is neither 1 (draft) nor 2 (published)"
    ]


def test_comma_separated_tags_are_several_tags(db_url, write_kb_file):
    csv_path = write_kb_file(
        "faq.csv", 'title,body,tags\nHow do I pay?,By card.,"billing, cards"\n'
    )
    md_path = write_kb_file(
        "ship.md", "---\ntitle: Do you ship?\ntags: shipping, abroad\n---\nEU.\n"
    )
    run_import(db_url, [csv_path, md_path])
    tags = {a.title: a.tags for a in articles(db_url).values()}
    assert tags == {"How do I pay?": ["billing", "cards"], "Do you ship?": ["shipping", "abroad"]}


def test_json_numbers_that_are_no_number_are_named(db_url, write_kb_file):
    path = write_kb_file("faq.json", '[{"title": "How do I pay?", "body": NaN}]')
    assert rejected(db_url, [path]) == [f"{path}:1: body must be text, not the number nan"]


def test_a_markdown_heading_repeating_the_front_matter_title_is_not_kept(db_url, write_kb_file):
    repeated = write_kb_file(
        "pay.md", "---\ntitle: How do I pay?\n---\n# How do I pay?\n\nBy card.\n"
    )
    other = write_kb_file("ship.md", "---\ntitle: Shipping\n---\n# Where we ship\n\nEU only.\n")
    run_import(db_url, [repeated, other])
    bodies = {a.title: a.body.strip() for a in articles(db_url).values()}
    assert bodies == {"How do I pay?": "By card.", "Shipping": "# Where we ship\n\nEU only."}


def test_a_json_integer_too_long_for_python_is_read_not_a_traceback(db_url, write_kb_file):
    # Python refuses to convert integers of over 4,300 digits; json.loads raised ValueError.
    huge = "9" * 5000
    listed = write_kb_file("faq.json", f'[{{"title": "How do I pay?", "body": {huge}}}]')
    lines = write_kb_file("faq.jsonl", f'{{"title": "Do you ship?", "body": "EU.", "n": {huge}}}\n')
    zendesk = write_kb_file(
        "zendesk.json",
        f'{{"count": {huge}, "articles": [{{"id": {huge}, "title": "Refunds", '
        '"body": "<p>Within 14 days.</p>", "html_url": "https://help.example/refunds"}]}',
    )
    report = run_import(db_url, [listed, lines, zendesk])
    assert report.problems == []
    bodies = {a.title: a.body for a in articles(db_url).values()}
    assert bodies == {
        "How do I pay?": huge,
        "Do you ship?": "EU.",
        "Refunds": "<p>Within 14 days.</p>",
    }


@pytest.mark.parametrize(
    "front_matter", ["---\ntitle: {n}\n---\n", "+++\ntitle = {n}\n+++\n"], ids=["yaml", "toml"]
)
def test_front_matter_with_an_integer_too_long_for_python_is_named(
    db_url, write_kb_file, front_matter
):
    path = write_kb_file("pay.md", front_matter.format(n="9" * 5000) + "By card.\n")
    kind = "YAML" if front_matter.startswith("---") else "TOML"
    assert rejected(db_url, [path]) == [
        f"{path}:2: {kind} front matter: a number of over 4,300 digits; "
        "put it in quotes to make it text"
    ]


NOTION_ID = "1f3a9c2be4d84a7f9e0b5c6d7e8f9a0b"


def test_a_notion_markdown_pages_properties_give_its_tags_category_and_state(db_url, write_kb_file):
    """Notion's Markdown export writes a database page's properties as lines under its title;
    they give tags, category and state, as its HTML export's table does, and stay out of the
    body. The same lines in a file not named by Notion are the page's text."""
    limits = write_kb_file(
        f"Help Centre/Card limits {NOTION_ID}.md",
        "# Card limits\n\nTags: cards, limits\nCategory: Cards\nStatus: Published\n"
        "Created: November 2, 2026 9:14 AM\n\nYou can spend 5,000 EUR a day.\n",
    )
    write_kb_file(
        f"Help Centre/Card fees {NOTION_ID[::-1]}.md",
        "# Card fees\n\nStatus: Draft\n\nPayments in euros are free.\n",
    )
    write_kb_file(
        "Help Centre/Refunds.md", "# Refunds\n\nStatus: delayed this week.\n\nWithin 14 days.\n"
    )
    write_kb_file(  # a paragraph whose first line reads as a property is text
        f"Help Centre/Fees abroad {NOTION_ID[1:]}a.md",
        "# Fees abroad\n\nTopic: fees abroad are shown\nbefore you pay.\n",
    )
    run_import(db_url, [limits.parent])
    stored = articles(db_url)
    card = stored["card-limits"]
    assert (card.tags, card.category, card.published) == (["cards", "limits"], "Cards", True)
    assert card.body.strip() == "You can spend 5,000 EUR a day."
    assert stored["card-fees"].published is False
    assert stored["refunds"].body.strip() == "Status: delayed this week.\n\nWithin 14 days."
    abroad = stored["fees-abroad"]
    assert (abroad.category, abroad.body.strip()[:6]) == (None, "Topic:")
    # a state that is none is named on its line, as in any other format
    review = write_kb_file(
        f"review/Card travel {NOTION_ID}.md", "# Card travel\n\nStatus: In review\n\nAbroad too.\n"
    )
    assert rejected(db_url, [review]) == [
        f"{review}:1: status 'In review' is not an article state (published, live, draft, "
        "archived, hidden...); give a published column of true or false"
    ]
