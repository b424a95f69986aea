"""One row per question (QnA Maker style) in TSV, CSV, JSON and JSONL: rows sharing an answer
become one article, questions under two answers and derived-slug collisions are warnings, real
errors still reject the whole import. The QnA exports as vendors ship them: QnA Maker's JSON
download, Azure AI Language question answering project exports, and the Excel (.xlsx) sheets of
both. Real files, the real importer and the CLI runner."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import openpyxl
import pytest
from fixtures_kb import articles, rejected, run_import, snapshot
from openpyxl.styles import Font

from app.cli import main
from app.kb.importer import ImportRejected

DATA = Path(__file__).parent / "data" / "kb"


@pytest.fixture
def chitchat(tmp_path) -> Path:
    """Microsoft's chit-chat shape: Question, Answer, Source, Metadata; CRLF; no QnaId."""
    path = tmp_path / "qna_chitchat_tierdesk.tsv"
    shutil.copy(DATA / "chitchat.tsv", path)
    return path


def good_morning_warning(path: Path) -> str:
    return (
        f"{path}:7: question 'Good morning' is also listed at {path}:2, under another answer; "
        "both articles keep it"
    )


# ----------------------------------------------------------------------------- grouping


def test_chitchat_tsv_rows_sharing_an_answer_become_one_article(db_url, chitchat):
    report = run_import(db_url, [chitchat])
    assert (report.created, report.rejected, report.problems) == (3, 0, [])
    stored = articles(db_url)
    assert sorted(stored) == ["bye", "good-morning", "hello"]
    morning = stored["good-morning"]
    assert morning.title == "Good morning"
    # File order, including line 13 that comes after the other answers' rows.
    assert morning.questions == ["Morning", "Good morning to you", "Top of the morning"]
    assert morning.body == "Morning! How can I help?"
    assert morning.tags == ["editorial:chitchat"]
    assert morning.source == "qna_chitchat_tierdesk"
    # 'hello' on line 12 repeats the title 'Hello' (case aside), so it is not added again.
    assert stored["hello"].questions == ["Hi", "Good morning", "Hey"]
    assert stored["bye"].questions == ["Goodbye", "See you later"]


def test_a_question_under_two_answers_is_kept_on_both_with_a_warning(db_url, chitchat):
    report = run_import(db_url, [chitchat])
    assert report.warnings == [good_morning_warning(chitchat)]
    assert report.problems == []
    stored = articles(db_url)
    assert stored["good-morning"].title == "Good morning"
    assert "Good morning" in stored["hello"].questions


def test_reimporting_the_same_tsv_changes_nothing(db_url, chitchat):
    run_import(db_url, [chitchat])
    before = snapshot(db_url)
    again = run_import(db_url, [chitchat])
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)
    assert again.revision is None
    assert again.warnings == [good_morning_warning(chitchat)]
    assert snapshot(db_url) == before


def test_an_answer_with_hundreds_of_questions_is_one_article(db_url, write_kb_file):
    # Microsoft's shipped chit-chat sets list up to 400 questions under one answer.
    rows = "".join(
        f"Are you bored {i}?\tNever.\tqna_chitchat\teditorial:chitchat\n" for i in range(400)
    )
    path = write_kb_file("big.tsv", "Question\tAnswer\tSource\tMetadata\n" + rows)
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (1, [])
    (article,) = articles(db_url).values()
    assert article.title == "Are you bored 0?"
    assert len(article.questions) == 399


def test_more_questions_than_an_article_holds_are_named(db_url, write_kb_file):
    rows = "".join(f"Question {i}?\tAn answer.\n" for i in range(1_002))
    path = write_kb_file("huge.tsv", "Question\tAnswer\n" + rows)
    assert rejected(db_url, [path]) == [f"{path}:2: 1001 questions; the limit is 1000"]


def test_different_metadata_keeps_rows_apart(db_url, write_kb_file):
    path = write_kb_file(
        "meta.tsv",
        "Question\tAnswer\tMetadata\n"
        "Where is my card?\tCards arrive in 5 days.\tcategory:card_arrival\n"
        "Card not here\tCards arrive in 5 days.\tcategory:card_arrival\n"
        "Card delivery time\tCards arrive in 5 days.\tcategory:card_delivery\n"
        "How long does delivery take?\tCards arrive in 5 days.\tcategory:card_delivery|x:y\n",
    )
    report = run_import(db_url, [path])
    assert report.created == 3
    stored = articles(db_url)
    assert stored["where-is-my-card"].questions == ["Card not here"]
    assert stored["where-is-my-card"].category == "card_arrival"
    assert stored["card-delivery-time"].questions == []
    assert stored["how-long-does-delivery-take"].tags == ["x:y"]


def test_csv_with_question_and_answer_columns_groups_the_same_way(db_url, write_kb_file):
    path = write_kb_file(
        "faq.csv",
        "question,answer,category,metadata\n"
        "How do I freeze my card?,Tap Freeze in the app.,card_freeze,product:gold\n"
        "Can I block my card?,Tap Freeze in the app.,card_freeze,product:gold\n"
        "Can I block my card?,Call us on 0800 123.,card_freeze,product:gold\n"
        "Freeze card,Tap Freeze in the app.,other,\n"
        "Can I  block my CARD?,Tap Freeze in the app.,card_freeze,product:gold\n",
    )
    report = run_import(db_url, [path])
    assert report.created == 3
    stored = articles(db_url)
    freeze = stored["how-do-i-freeze-my-card"]
    assert freeze.questions == ["Can I block my card?"]
    assert freeze.category == "card_freeze"
    assert freeze.tags == ["product:gold"]
    assert freeze.source == str(path)
    assert stored["can-i-block-my-card"].body == "Call us on 0800 123."
    assert stored["freeze-card"].category == "other"
    assert report.warnings == [
        f"{path}:4: question 'Can I block my card?' is also listed at {path}:3, under another "
        "answer; both articles keep it"
    ]


def test_json_and_jsonl_accept_question_and_answer_keys(db_url, write_kb_file):
    json_path = write_kb_file(
        "qna.json",
        json.dumps(
            [
                {"question": "What are your opening hours?", "answer": "We are open 24/7."},
                {"question": "When are you open?", "answer": "We are open 24/7."},
                {"title": "Opening hours", "body": "We are open 24/7."},
            ],
            indent=2,
        ),
    )
    jsonl_path = write_kb_file(
        "qna.jsonl",
        '{"question": "Is there a fee?", "answer": "No.", "questions": ["Any charges?"]}\n'
        '{"question": "Do you charge?", "answer": "No.", "questions": "Any charges?|Costs?"}\n',
    )
    report = run_import(db_url, [json_path, jsonl_path])
    assert report.created == 3  # the title/body object is an article of its own
    stored = articles(db_url)
    assert stored["what-are-your-opening-hours"].questions == ["When are you open?"]
    assert stored["opening-hours"].questions == []
    assert stored["is-there-a-fee"].questions == ["Any charges?", "Do you charge?", "Costs?"]


def test_qnaid_groups_rows_in_csv_too(db_url, write_kb_file):
    path = write_kb_file(
        "ids.csv",
        "question,answer,qnaid\nClose my account,Settings > Close.,7\nDelete account,"
        "Settings > Close.,7\nOther,Settings > Close.,8\n",
    )
    report = run_import(db_url, [path])
    assert report.created == 2
    stored = articles(db_url)
    assert stored["close-my-account"].questions == ["Delete account"]
    assert stored["other"].questions == []


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("both.csv", "title,question,body\nA,B,c\n",
         "1: column(s) title/question appear more than once; keep one"),
        ("both.jsonl", '{"title": "A", "question": "B", "body": "c"}\n',
         "1: has both 'title' and 'question'; keep one"),
        ("cols.tsv", "Qn\tAnswer\nA\tb\n", "1: missing required column(s) question; found "
         "Qn, Answer (a question column may also be named title, Q, query, FAQ or prompt)"),
        ("meta.jsonl", '{"question": "A", "answer": "b", "metadata": 3}\n',
         "1: metadata must be 'key:value|key:value' text, an object or a list of name/value "
         "pairs, not int"),
    ],
)  # fmt: skip
def test_question_answer_mistakes_are_named(db_url, write_kb_file, name, content, expected):
    path = write_kb_file(name, content)
    assert rejected(db_url, [path]) == [f"{path}:{expected}"]


# ----------------------------------------------------------------------------- slugs


def test_derived_slug_collisions_get_suffixes_in_file_order(db_url, write_kb_file):
    path = write_kb_file(
        "fees.csv",
        "title,body,slug\n"
        "Card fees?,Free.,\n"
        "Card fees!,Also free.,\n"
        "Fees for cards,Card fees are listed here.,card-fees\n"
        "More fees,Transfer fees.,card-fees-2\n",
    )
    report = run_import(db_url, [path])
    assert report.created == 4
    stored = articles(db_url)
    # Explicit slugs keep theirs; derived ones take the first free suffix, in file order.
    assert stored["card-fees"].title == "Fees for cards"
    assert stored["card-fees-2"].title == "More fees"
    assert stored["card-fees-3"].title == "Card fees?"
    assert stored["card-fees-4"].title == "Card fees!"
    taken = f"slug 'card-fees' (derived from the title) is already used at {path}:4"
    assert report.warnings == [
        f"{path}:2: {taken}; this article gets 'card-fees-3'",
        f"{path}:3: {taken}; this article gets 'card-fees-4'",
    ]
    again = run_import(db_url, [path])
    assert (again.created, again.updated, again.unchanged) == (0, 0, 4)


def test_the_same_title_under_two_answers_gets_a_suffixed_slug(db_url, write_kb_file):
    path = write_kb_file(
        "dup.tsv",
        "Question\tAnswer\nHow are you?\tGreat, thanks!\nHow are you?\tBusy, but fine.\n",
    )
    report = run_import(db_url, [path])
    stored = articles(db_url)
    assert stored["how-are-you"].body == "Great, thanks!"
    assert stored["how-are-you-2"].body == "Busy, but fine."
    assert report.warnings == [
        f"{path}:3: slug 'how-are-you' (derived from the title) is already used at {path}:2; "
        "this article gets 'how-are-you-2'",
        f"{path}:3: question 'How are you?' is also listed at {path}:2, under another answer; "
        "both articles keep it",
    ]


def test_explicit_slugs_that_collide_are_still_an_error(db_url, write_kb_file):
    path = write_kb_file(
        "slugs.tsv",
        "Question\tAnswer\tMetadata\nA?\tOne.\tslug:same\nB?\tTwo.\tslug:same\n",
    )
    assert rejected(db_url, [path]) == [f"{path}:3: duplicate slug 'same'; first used at {path}:2"]


# ----------------------------------------------------------------------------- all or nothing


def test_an_error_beside_grouped_rows_still_rejects_everything(db_url, chitchat, write_kb_file):
    run_import(db_url, [write_kb_file("base.csv", "title,body\nExisting,Stays as it is.\n")])
    before = snapshot(db_url)
    with chitchat.open("a", newline="") as out:
        out.write("Thanks\t\tqna_chitchat_tierdesk\teditorial:chitchat\r\n")  # line 14
        out.write("\tSee you soon.\tqna_chitchat_tierdesk\teditorial:chitchat\r\n")  # line 15
    with pytest.raises(ImportRejected) as info:
        run_import(db_url, [chitchat], replace=True)
    report = info.value.report
    assert report.problems == [f"{chitchat}:14: body is empty", f"{chitchat}:15: title is empty"]
    assert report.rejected == 2
    assert report.warnings == [good_morning_warning(chitchat)]  # said, but not why it failed
    assert snapshot(db_url) == before


# ----------------------------------------------------------------------------- CLI


def test_cli_prints_warnings_on_stderr_and_succeeds(runner, db_url, chitchat):
    result = runner.invoke(main, ["kb", "import", str(chitchat)])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"warning: {good_morning_warning(chitchat)}"]
    assert result.stdout.strip() == "3 created, 0 updated, 0 unchanged, 0 unpublished, 0 rejected"
    again = runner.invoke(main, ["kb", "import", str(chitchat)])
    assert again.stdout.strip() == "0 created, 0 updated, 3 unchanged, 0 unpublished, 0 rejected"


def test_cli_dry_run_prints_warnings_and_writes_nothing(runner, db_url, chitchat):
    result = runner.invoke(main, ["kb", "import", "--dry-run", str(chitchat)])
    assert result.exit_code == 0, result.output
    assert f"warning: {good_morning_warning(chitchat)}" in result.stderr.splitlines()
    assert result.stdout.splitlines()[:3] == [
        "would create    good-morning",
        "would create    hello",
        "would create    bye",
    ]
    assert articles(db_url) == {}


# ----------------------------------------------------------------------------- QnA Maker JSON


def qna_maker_download() -> dict:
    """What QnA Maker's "Download knowledgebase" API returns, suggestions and prompts included."""
    return {
        "qnaDocuments": [
            {
                "id": 1,
                "answer": "Cards arrive within **5 working days**.",
                "source": "Editorial",
                "questions": [
                    "Where is my new card?",
                    "My card has not come yet",
                    "How long does card delivery take?",
                ],
                "metadata": [
                    {"name": "category", "value": "card_arrival"},
                    {"name": "product", "value": "gold"},
                    {"name": "tags", "value": "cards, delivery"},
                ],
                "alternateQuestions": [],
                "alternateQuestionClusters": [
                    {
                        "clusterHead": "card still not here",
                        "totalAutoSuggestedCount": 3,
                        "totalUserSuggestedCount": 1,
                        "alternateQuestionList": [
                            {
                                "question": "card still not here",
                                "autoSuggestedCount": 3,
                                "userSuggestedCount": 1,
                            }
                        ],
                    }
                ],
                "context": {
                    "isContextOnly": False,
                    "prompts": [{"displayOrder": 0, "qnaId": 2, "displayText": "Reset my PIN"}],
                },
                "lastUpdatedTimestamp": "2022-07-26T09:31:57.418+00:00",
                "isDocumentText": False,
                "extractionConfidence": -1.0,
            },
            {
                "id": 2,
                "answer": "Open the app, choose *Security*, then *Change PIN*.",
                "source": "https://bank.example/help/pin",
                "questions": ["How do I reset my PIN?"],
                "metadata": [
                    {"name": "intent", "value": "change_pin"},
                    {"name": "slug", "value": "pin-reset"},
                ],
                "alternateQuestions": ["pin forgotten what now"],
                "context": {"isContextOnly": True, "prompts": []},
                "parentQnaIds": [1],
                "lastUpdatedTimestamp": "2022-07-26T09:31:57.418+00:00",
            },
            {
                "id": 3,
                "answer": "Hello!",
                "source": "qna_chitchat_friendly.tsv",
                "questions": ["Hi", "Hello", "  ", "hi", "Hey"],
                "metadata": [{"name": "editorial", "value": "chitchat"}],
            },
        ]
    }


def item_line(text: str, item_id: int) -> int:
    """The line of the '{' that opens the item whose first key is ``"id": item_id``."""
    return text[: text.index(f'"id": {item_id},')].count("\n")


def test_qna_maker_json_download_gives_one_article_per_document(db_url, write_kb_file):
    path = write_kb_file("kb.json", json.dumps(qna_maker_download(), indent=2))
    report = run_import(db_url, [path])
    assert (report.created, report.problems, report.notes, report.warnings) == (3, [], [], [])
    stored = articles(db_url)
    assert sorted(stored) == ["hi", "pin-reset", "where-is-my-new-card"]
    card = stored["where-is-my-new-card"]
    assert card.title == "Where is my new card?"
    assert card.body == "Cards arrive within **5 working days**."
    # Only "questions" are questions: active-learning suggestions and prompts are not.
    assert card.questions == ["My card has not come yet", "How long does card delivery take?"]
    assert card.category == "card_arrival"
    assert card.tags == ["product:gold", "cards", "delivery"]
    assert card.source == "Editorial"
    pin = stored["pin-reset"]
    assert (pin.title, pin.category, pin.questions) == ("How do I reset my PIN?", "change_pin", [])
    assert pin.source == "https://bank.example/help/pin"
    hi = stored["hi"]
    assert hi.questions == ["Hello", "Hey"]  # blank and case-only repeats dropped
    assert hi.tags == ["editorial:chitchat"]
    again = run_import(db_url, [path])
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)


def test_qna_maker_documents_without_questions_or_answer_are_named(db_url, write_kb_file):
    run_import(db_url, [write_kb_file("base.csv", "title,body\nExisting,Stays as it is.\n")])
    before = snapshot(db_url)
    download = qna_maker_download()
    documents = download["qnaDocuments"]
    documents[0]["questions"] = []
    documents[1]["answer"] = "  "
    documents[2]["metadata"] = [{"value": "chitchat"}]
    documents.append({"id": 4, "answer": "Yes.", "questions": "Is it free?"})
    text = json.dumps(download, indent=2)
    path = write_kb_file("kb.json", text)
    with pytest.raises(ImportRejected) as info:
        run_import(db_url, [path], replace=True)
    line = {n: item_line(text, n) for n in (1, 2, 3, 4)}
    assert info.value.report.problems == [
        f"{path}:{line[1]}: qnaDocuments[0] (id 1): has no questions",
        f"{path}:{line[2]}: qnaDocuments[1] (id 2): has no answer",
        f"{path}:{line[3]}: qnaDocuments[2] (id 3): metadata item {{'value': 'chitchat'}} is "
        "not a name/value pair",
        f"{path}:{line[4]}: qnaDocuments[3] (id 4): questions must be a list of texts",
    ]
    assert snapshot(db_url) == before


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"qnaDocuments": {"id": 1}}', "1: 'qnaDocuments' must be a list"),
        ('{"qnaDocuments": []}', "1: the list is empty"),
        ('{"qnaDocuments": [\n  7\n]}', "2: qnaDocuments[0]: expected an object, found int"),
        ('{"qnaDocuments": [{"answer": "A.", "questions": ["Q?"]}',
         "1: expected ',' or ']' after an object"),
        ('{"qnaDocuments": [{"answer": "A." "questions": ["Q?"]}]}',
         "1: invalid JSON: Expecting ',' delimiter (column 35)"),
        ('{"assets": [1]}', "1: 'assets' must be an object"),
        ('{"metadata": {},\n "assets": {"synonyms": []}}', "2: 'assets' has no 'qnas' list"),
        ('{"Assets": {"Qnas": "none"}}', "1: 'Qnas' must be a list"),
        ('{"assets": {"qnas": [{"id": 9, "answer": 5, "questions": ["Q?"]}]}}',
         "1: qnas[0] (id 9): answer must be text, not int"),
    ],
)  # fmt: skip
def test_malformed_qna_json_exports(db_url, write_kb_file, content, expected):
    path = write_kb_file("bad.json", content)
    assert rejected(db_url, [path]) == [f"{path}:{expected}"]


# ----------------------------------------------------------------------------- question answering


def question_answering_export() -> dict:
    """An Azure AI Language custom question answering project export (camelCase keys)."""
    return {
        "metadata": {"projectName": "bank-faq", "language": "en", "multilingualResource": False},
        "assets": {
            "synonyms": [{"alterations": ["pin", "pin code"]}],
            "qnas": [
                {
                    "id": 1,
                    "answer": "Cards arrive within 5 working days.",
                    "source": "bank-faq.docx",
                    "sourceDisplayName": "Bank FAQ",
                    "questions": ["Where is my new card?", "My card has not come yet"],
                    "metadata": {"category": "card_arrival", "product": "gold"},
                    "dialog": {
                        "isContextOnly": False,
                        "prompts": [{"displayOrder": 0, "qnaId": 2, "displayText": "PIN"}],
                    },
                    "activeLearningSuggestions": [
                        {
                            "clusterHead": "card late",
                            "suggestedQuestions": [
                                {
                                    "question": "card late",
                                    "autoSuggestedCount": 2,
                                    "userSuggestedCount": 0,
                                }
                            ],
                        }
                    ],
                    "lastUpdatedDateTime": "2023-05-02T10:00:00Z",
                },
                {
                    "id": 2,
                    "answer": "Open the app, choose Security, then Change PIN.",
                    "source": "Editorial",
                    "questions": ["How do I reset my PIN?"],
                    "metadata": {"slug": "pin-reset", "tags": "security, pin"},
                    "dialog": {"isContextOnly": True, "prompts": []},
                    "activeLearningSuggestions": [],
                    "lastUpdatedDateTime": "2023-05-02T10:00:00Z",
                },
            ],
        },
    }


def pascal_case(value: object) -> object:
    """The same export with every key PascalCase, as some of the service's exports spell them."""
    if isinstance(value, dict):
        return {k[:1].upper() + k[1:]: pascal_case(v) for k, v in value.items()}
    if isinstance(value, list):
        return [pascal_case(v) for v in value]
    return value


@pytest.mark.parametrize("spell", [lambda export: export, pascal_case], ids=["camel", "pascal"])
def test_question_answering_export_in_either_key_case(db_url, write_kb_file, spell):
    path = write_kb_file("project.json", json.dumps(spell(question_answering_export()), indent=2))
    report = run_import(db_url, [path])
    assert (report.created, report.problems, report.notes, report.warnings) == (2, [], [], [])
    stored = articles(db_url)
    assert sorted(stored) == ["pin-reset", "where-is-my-new-card"]
    card = stored["where-is-my-new-card"]
    assert card.title == "Where is my new card?"
    assert card.body == "Cards arrive within 5 working days."
    assert card.questions == ["My card has not come yet"]  # not the suggestion "card late"
    assert (card.category, card.tags) == ("card_arrival", ["product:gold"])
    assert card.source == "bank-faq.docx"
    pin = stored["pin-reset"]
    assert (pin.title, pin.category, pin.tags) == (
        "How do I reset my PIN?",
        None,
        ["security", "pin"],
    )
    assert pin.source == "Editorial"


def test_question_answering_items_are_named_by_position_and_id(db_url, write_kb_file):
    export = pascal_case(question_answering_export())
    export["Assets"]["Qnas"][1]["Questions"] = None
    text = json.dumps(export, indent=2)
    path = write_kb_file("project.json", text)
    with pytest.raises(ImportRejected) as info:
        run_import(db_url, [path])
    line = text[: text.index('"Id": 2,')].count("\n")
    assert info.value.report.problems == [f"{path}:{line}: Qnas[1] (id 2): has no questions"]
    assert articles(db_url) == {}


# ----------------------------------------------------------------------------- XLSX

# The columns of a Language Studio export to Excel.
QNA_COLUMNS = ["Question", "Answer", "Source", "Metadata", "SuggestedQuestions", "IsContextOnly",
               "Prompts", "QnaId", "SourceDisplayName"]  # fmt: skip


def write_xlsx(path: Path, rows: list[list], *, title: str = "Sheet1") -> Path:
    """A workbook whose first sheet holds ``rows`` from row 1 (None leaves a cell empty)."""
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = title
    for number, row in enumerate(rows, 1):
        for column, value in enumerate(row, 1):
            if value is not None:
                sheet.cell(row=number, column=column, value=value)
    workbook.save(path)
    return path


def add_empty_rows(path: Path, count: int) -> None:
    """Rows after the last one whose cells exist but hold nothing (formatted, or spaces)."""
    workbook = openpyxl.load_workbook(path)
    sheet = workbook.worksheets[0]
    last = sheet.max_row
    for number in range(last + 1, last + count + 1):
        sheet.cell(row=number, column=1).font = Font(bold=True)
        sheet.cell(row=number, column=2, value="  ")
    workbook.save(path)


def test_qna_xlsx_export_groups_rows_like_the_tsv(db_url, tmp_path):
    card = "Cards arrive within 5 working days."
    path = write_xlsx(
        tmp_path / "qna_export.xlsx",
        [
            QNA_COLUMNS,
            ["Where is my new card?", card, "Editorial", "category:card_arrival|product:gold",
             "[]", False, "[]", 1, "Bank FAQ"],
            ["My card has not come yet", card, "Editorial", "category:card_arrival|product:gold",
             '["card late"]', False, "[]", 1, "Bank FAQ"],
            ["How do I reset my PIN?", "Open the app.\nThen choose *Change PIN*.", "Editorial",
             "intent:change_pin|slug:pin-reset", "[]", True,
             '[{"displayOrder":0,"qnaId":1,"displayText":"Card"}]', 2, None],
            ["Hi", "Hello!", "qna_chitchat_friendly.tsv", "editorial:chitchat"],
            ["Hello", "Hello!", "qna_chitchat_friendly.tsv", "editorial:chitchat"],
        ],
    )  # fmt: skip
    add_empty_rows(path, 3)
    report = run_import(db_url, [path])
    # The multi-turn columns and SourceDisplayName are ignored without a note.
    assert (report.created, report.problems, report.notes, report.warnings) == (3, [], [], [])
    stored = articles(db_url)
    assert sorted(stored) == ["hi", "pin-reset", "where-is-my-new-card"]
    new_card = stored["where-is-my-new-card"]
    assert (new_card.title, new_card.body) == ("Where is my new card?", card)
    assert new_card.questions == ["My card has not come yet"]
    assert (new_card.category, new_card.tags) == ("card_arrival", ["product:gold"])
    assert new_card.source == "Editorial"
    pin = stored["pin-reset"]
    assert (pin.title, pin.category) == ("How do I reset my PIN?", "change_pin")
    assert pin.body == "Open the app.\nThen choose *Change PIN*."
    assert stored["hi"].questions == ["Hello"]
    assert stored["hi"].tags == ["editorial:chitchat"]
    again = run_import(db_url, [path])
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)


def test_xlsx_with_title_and_body_is_read_like_a_csv(db_url, tmp_path):
    path = write_xlsx(
        tmp_path / "faq.xlsx",
        [
            ["title", "body", "category", "tags", "questions", "published", "Owner"],
            ["ATM limits", "500 EUR a day.", "atm", "cash|limits", "Cash limit?|Daily limit?",
             True, "ops"],
            ["Cash withdrawal limit", "500 EUR a day.", "atm", None, None, False],
            ["Card fees", 0, None, None, None, None],
        ],
    )  # fmt: skip
    report = run_import(db_url, [path])
    assert report.created == 3  # the same body under two titles stays two articles
    assert report.notes == [f"{path}:1: ignoring unknown column(s) Owner"]
    stored = articles(db_url)
    atm = stored["atm-limits"]
    assert (atm.body, atm.category, atm.tags) == ("500 EUR a day.", "atm", ["cash", "limits"])
    assert atm.questions == ["Cash limit?", "Daily limit?"]
    assert atm.published is True
    assert stored["cash-withdrawal-limit"].published is False
    assert stored["card-fees"].body == "0"
    assert atm.source == str(path)


def test_xlsx_errors_name_the_sheet_row_and_nothing_is_written(db_url, tmp_path, write_kb_file):
    run_import(db_url, [write_kb_file("base.csv", "title,body\nExisting,Stays as it is.\n")])
    before = snapshot(db_url)
    path = write_xlsx(
        tmp_path / "bad.xlsx",
        [
            [],  # row 1 empty: the header is the first row with a value
            ["Question", "Answer", "Metadata"],
            ["Is there a fee?", "No."],
            [],
            ["Where is my card?", None, "category:cards"],
            ["Can I pay by card?", "Yes.", "justaword"],
            ["Do you open on Sundays?", "No.", None, "stray note"],
        ],
    )
    with pytest.raises(ImportRejected) as info:
        run_import(db_url, [path], replace=True)
    assert info.value.report.problems == [
        f"{path}:6: metadata item 'justaword' is not key:value",
        f"{path}:7: a value in column D, which has no header",
        f"{path}:5: body is empty",
    ]
    assert snapshot(db_url) == before


def test_xlsx_reads_the_first_sheet_and_every_row(db_url, tmp_path):
    """Not the sheet that was active on saving; and all rows even where the stored dimension
    says only A1 (openpyxl's read-only mode would otherwise stop there)."""
    path = tmp_path / "two_sheets.xlsx"
    workbook = openpyxl.Workbook()
    first = workbook.active
    first.append(["Question", "Answer"])
    first.append(["Is there a fee?", "No."])
    first.append(["Can I pay by card?", "Yes."])
    notes = workbook.create_sheet("Notes")
    notes.append(["title", "body"])
    notes.append(["Not this", "Not this sheet."])
    workbook.active = 1
    workbook.save(path)
    with zipfile.ZipFile(path) as source:
        parts = {info.filename: source.read(info) for info in source.infolist()}
    sheet_xml = parts["xl/worksheets/sheet1.xml"].decode()
    sheet_xml = re.sub(r'<dimension ref="[^"]*"', '<dimension ref="A1"', sheet_xml)
    parts["xl/worksheets/sheet1.xml"] = sheet_xml.encode()
    with zipfile.ZipFile(path, "w") as target:
        for name, data in parts.items():
            target.writestr(name, data)
    report = run_import(db_url, [path])
    assert report.created == 2
    assert sorted(articles(db_url)) == ["can-i-pay-by-card", "is-there-a-fee"]


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], "1: the first sheet ('Sheet1') is empty"),
        ([["Question", "Answer"]], "1: no records after the header row"),
        ([["Question", "Source"], ["Q?", "x"]],
         "1: missing required column(s) answer; found Question, Source (an answer column body, "
         "A, response, reply or content)"),
        ([[], [], ["title", "Category"], ["A", "b"]],
         "3: missing required column(s) body; found title, Category (a body column answer, A, "
         "response, reply, content or description)"),
        ([["Question", "question", "Answer"], ["A?", "B?", "c"]],
         "1: column(s) Question/question appear more than once; keep one"),
    ],
)  # fmt: skip
def test_malformed_sheets(db_url, tmp_path, rows, expected):
    path = write_xlsx(tmp_path / "sheet.xlsx", rows)
    assert rejected(db_url, [path]) == [f"{path}:{expected}"]


def zip_without_workbook() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("hello.txt", "hi")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"Question\tAnswer\nQ?\tA.\n", "not a valid Excel workbook (.xlsx): File is not a zip file"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504),  # an old .xls renamed
         "not a valid Excel workbook (.xlsx): File is not a zip file"),
        (zip_without_workbook(), "not a valid Excel workbook (.xlsx): There is no item named "
         "'[Content_Types].xml' in the archive"),
        (b"", "file is empty"),
    ],
    ids=["text", "xls", "zip", "empty"],
)  # fmt: skip
def test_files_that_are_not_workbooks_are_a_clear_error(db_url, write_kb_file, content, expected):
    path = write_kb_file("export.xlsx", content)
    assert rejected(db_url, [path]) == [f"{path}:1: {expected}"]


def test_tsv_source_display_name_is_ignored_without_a_note(db_url, write_kb_file):
    path = write_kb_file(
        "export.tsv",
        "\t".join(QNA_COLUMNS) + "\n"
        "Is there a fee?\tNo.\tEditorial\t\t[]\tfalse\t[]\t1\tBank FAQ\n"
        "Any charges?\tNo.\tEditorial\t\t[]\tfalse\t[]\t1\tBank FAQ\n",
    )
    report = run_import(db_url, [path])
    assert (report.created, report.notes) == (1, [])
    assert articles(db_url)["is-there-a-fee"].questions == ["Any charges?"]


def test_cli_imports_a_qna_maker_download_and_rejects_a_broken_workbook(
    runner, db_url, write_kb_file
):
    kb = write_kb_file("kb.json", json.dumps(qna_maker_download(), indent=2))
    result = runner.invoke(main, ["kb", "import", str(kb)])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.strip() == "3 created, 0 updated, 0 unchanged, 0 unpublished, 0 rejected"
    before = snapshot(db_url)
    broken = write_kb_file("broken.xlsx", b"PK\x03\x04 not really a zip")
    result = runner.invoke(main, ["kb", "import", str(broken)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.splitlines()[0].startswith(
        f"{broken}:1: not a valid Excel workbook (.xlsx): "
    )
    assert snapshot(db_url) == before


# ----------------------------------------------------------------------------- FAQ alternates


def test_faq_alternate_question_columns_under_their_usual_names(db_url, tmp_path):
    csv_path = tmp_path / "faq.csv"
    csv_path.write_text(
        "Question,Answer,Alternate Questions\n"
        '"How do I export a board?","Open the board menu and choose Export.",'
        '"export my board\ndownload a board as csv|save board to a file"\n',
        encoding="utf-8",
    )
    json_path = tmp_path / "faq.json"
    json_path.write_text(
        json.dumps(
            [
                {
                    "question": "Can I undo a deletion?",
                    "answer": "Deleted cards stay in the bin for 30 days.",
                    "paraphrases": ["restore a deleted card", "get back a card I removed"],
                }
            ]
        ),
        encoding="utf-8",
    )
    report = run_import(db_url, [csv_path, json_path])
    assert (report.created, report.rejected, report.notes) == (2, 0, [])
    stored = articles(db_url)
    assert stored["how-do-i-export-a-board"].questions == [
        "export my board",
        "download a board as csv",
        "save board to a file",
    ]
    assert stored["can-i-undo-a-deletion"].questions == [
        "restore a deleted card",
        "get back a card I removed",
    ]


def test_alternate_questions_spread_over_numbered_columns_are_read_together(db_url, tmp_path):
    csv_path = tmp_path / "faq.csv"
    csv_path.write_text(
        "question,answer,alt_question_1,Alternate question 2,Paraphrase3\n"
        "How do I export a board?,Open the board menu and choose Export.,export my board,,"
        "download a board|save board to a file\n",
        encoding="utf-8",
    )
    numbered = tmp_path / "numbered.csv"
    numbered.write_text(
        "Question 1,Question 2,Question 3,Answer\n"
        "Can I undo a deletion?,restore a deleted card,get back a card I removed,"
        "Deleted cards stay in the bin for 30 days.\n",
        encoding="utf-8",
    )
    json_path = tmp_path / "faq.json"
    json_path.write_text(
        json.dumps(
            [
                {
                    "question": "How do I invite a guest?",
                    "answer": "Open Share and enter their e-mail.",
                    "alternateQuestion1": "add someone from outside",
                    "similar_questions": ["share a board with a client"],
                }
            ]
        ),
        encoding="utf-8",
    )
    # other tools' names for them: Dialogflow's training phrases, Lex's and LUIS's utterances
    named = tmp_path / "named.csv"
    named.write_text(
        "Question,Answer,Paraphrased questions,Training phrases,Sample utterances,Utterance 4\n"
        "Where is my invoice?,Invoices are under Billing.,find my invoice,invoice location,"
        "get last month's bill,download receipt\n",
        encoding="utf-8",
    )
    report = run_import(db_url, [csv_path, numbered, json_path, named])
    assert (report.created, report.rejected, report.notes) == (4, 0, [])
    stored = articles(db_url)
    assert stored["where-is-my-invoice"].questions == [
        "find my invoice",
        "invoice location",
        "get last month's bill",
        "download receipt",
    ]
    assert stored["how-do-i-export-a-board"].questions == [
        "export my board",
        "download a board",
        "save board to a file",
    ]
    # without a title column the lowest numbered question is the title
    assert stored["can-i-undo-a-deletion"].title == "Can I undo a deletion?"
    assert stored["can-i-undo-a-deletion"].questions == [
        "restore a deleted card",
        "get back a card I removed",
    ]
    assert stored["how-do-i-invite-a-guest"].questions == [
        "add someone from outside",
        "share a board with a client",
    ]


def test_two_title_columns_are_one_too_many(db_url, tmp_path):
    path = tmp_path / "faq.csv"
    path.write_text("question,title,answer,alternates\nq,t,a,b\n", encoding="utf-8")
    assert rejected(db_url, [path]) == [
        f"{path}:1: column(s) question/title appear more than once; keep one"
    ]
    json_path = tmp_path / "faq.json"
    json_path.write_text(json.dumps([{"Answer": "a", "body": "b", "title": "t"}]))
    assert rejected(db_url, [json_path]) == [
        f"{json_path}:1: has both 'Answer' and 'body'; keep one"
    ]


def test_alternate_questions_written_as_a_list_or_with_semicolons(db_url, tmp_path):
    # a data frame's list column saved to CSV (Python's repr), JSON in a cell, and "a; b"
    path = tmp_path / "faq.csv"
    path.write_text(
        "question,answer,alternate_questions\n"
        "How do I export a board?,Open the board menu.,\"['export my board', \"\"what's the csv"
        ' export""]"\n'
        'Can I undo a deletion?,Cards stay in the bin.,"[""restore a card"", ""undo delete""]"\n'
        "How do I invite a guest?,Open Share.,add someone from outside; share with a client\n"
        "Where is the bin?,In the board menu.,[not a list]\n",
        encoding="utf-8",
    )
    report = run_import(db_url, [path])
    assert (report.created, report.rejected) == (4, 0)
    stored = articles(db_url)
    assert stored["how-do-i-export-a-board"].questions == [
        "export my board",
        "what's the csv export",
    ]
    assert stored["can-i-undo-a-deletion"].questions == ["restore a card", "undo delete"]
    assert stored["how-do-i-invite-a-guest"].questions == [
        "add someone from outside",
        "share with a client",
    ]
    assert stored["where-is-the-bin"].questions == ["[not a list]"]


# ----------------------------------------------------------------------------- other vendors


def test_faq_csv_without_a_header_row_as_dialogflow_and_kendra_take_it(db_url, tmp_path):
    path = tmp_path / "faq.csv"
    path.write_text(
        "How do I reset my password?,Use the reset link on the sign-in page.\n"
        'Can I pay by card?,"Yes, every major card."\n'
        "I forgot my password,Use the reset link on the sign-in page.\n",
        encoding="utf-8",
    )
    report = run_import(db_url, [path])
    assert (report.created, report.rejected) == (2, 0)
    assert report.notes == [f"{path}:1: no header row; columns read as question, answer"]
    stored = articles(db_url)
    # question rows: the two sharing an answer are one article, as in a QnA export
    assert stored["how-do-i-reset-my-password"].questions == ["I forgot my password"]
    assert stored["can-i-pay-by-card"].body == "Yes, every major card."


def test_a_misspelt_header_is_still_a_missing_column_not_data(db_url, tmp_path):
    path = tmp_path / "faq.csv"
    path.write_text("Questoin,Answre\nHow do I pay?,By card or bank transfer.\n", encoding="utf-8")
    assert rejected(db_url, [path]) == [
        f"{path}:1: missing required column(s) title, body; found Questoin, Answre (a title "
        "column may also be named question, Q, query, FAQ or prompt; a body column answer, A, "
        "response, reply, content or description)"
    ]


def test_amazon_kendra_faq_json(db_url, tmp_path):
    path = tmp_path / "kendra.json"
    path.write_text(
        json.dumps(
            {
                "SchemaVersion": 1,
                "FaqDocuments": [
                    {
                        "Question": "How do I track a parcel?",
                        "Answer": "Enter the tracking number on the Track page.",
                        "Attributes": {
                            "_source_uri": "https://example.com/help/track",
                            "_category": "delivery",
                            "team": "ops",
                        },
                    },
                    {
                        "Question": "Where is my parcel?",
                        "Answer": "Enter the tracking number on the Track page.",
                        "Attributes": {
                            "_source_uri": "https://example.com/help/track",
                            "_category": "delivery",
                            "team": "ops",
                        },
                    },
                    {"Question": "Do you ship abroad?", "Answer": "To 30 countries."},
                ],
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    report = run_import(db_url, [path])
    assert (report.created, report.rejected, report.problems) == (2, 0, [])
    stored = articles(db_url)
    track = stored["how-do-i-track-a-parcel"]
    assert (track.source, track.category) == ("https://example.com/help/track", "delivery")
    assert track.questions == ["Where is my parcel?"]
    assert stored["do-you-ship-abroad"].body == "To 30 countries."
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"FaqDocuments": [{"Question": "q?", "Answer": "a", "Attributes": 3}]})
    )
    assert rejected(db_url, [bad]) == [f"{bad}:1: FaqDocuments[0]: Attributes must be an object"]


def test_json_object_holding_one_list_of_faq_objects(db_url, tmp_path):
    path = tmp_path / "faq.json"
    path.write_text(
        '{"version": 2, "faqs": [\n'
        ' {"question": "How do I pay?", "answer": "By card.", "alternates": ["payment options"]},\n'
        ' {"question": "Where is my parcel?", "answer": "Track it online."}\n'
        "]}",
        encoding="utf-8",
    )
    report = run_import(db_url, [path])
    assert (report.created, report.rejected) == (2, 0)
    assert report.notes == [f"{path}:1: 'faqs' read as a list of article objects"]
    assert articles(db_url)["how-do-i-pay"].questions == ["payment options"]
    # errors keep the item's line and index
    bad = tmp_path / "bad.json"
    bad.write_text('{"faqs": [\n {"question": "a?", "answer": "b"},\n {"question": "c?"}\n]}')
    assert rejected(db_url, [bad]) == [f"{bad}:3: faqs[1]: body is empty"]
    # two lists of objects: which holds the articles is not guessed
    two = tmp_path / "two.json"
    two.write_text('{"a": [{"question": "q?", "answer": "x y"}], "b": [{"n": 1}]}')
    assert rejected(db_url, [two])[0].startswith(f"{two}:1: expected a JSON list of article")


def test_other_help_desks_column_names_where_ours_are_absent(db_url, tmp_path):
    hubspot = tmp_path / "hubspot.csv"
    hubspot.write_text(
        "Category,Article title,Article subtitle,Article body,Keywords,Article URL\n"
        "Billing,How do I change my plan?,Plans,<p>Open <b>Billing</b> and pick a plan.</p>,"
        "plans|billing,https://help.example.com/plan\n",
        encoding="utf-8",
    )
    both = tmp_path / "both.csv"
    both.write_text(
        "title,body,source,url\nWhere is the bin?,In the board menu.,kb/bin.md,https://x.example\n",
        encoding="utf-8",
    )
    report = run_import(db_url, [hubspot, both])
    assert report.rejected == 0
    stored = articles(db_url)
    plan = stored["how-do-i-change-my-plan"]
    assert (plan.category, plan.tags, plan.source) == (
        "Billing",
        ["plans", "billing"],
        "https://help.example.com/plan",
    )
    assert "Billing" in plan.body
    # where the file has our column, the other name is not read in its place
    assert stored["where-is-the-bin"].source == "kb/bin.md"
    assert f"{both}:1: ignoring unknown column(s) url" in report.notes
    assert f"{hubspot}:1: ignoring unknown column(s) Article subtitle" in report.notes


def test_rows_of_one_qnaid_with_other_metadata_are_warned_of(db_url, write_kb_file):
    path = write_kb_file(
        "qna.tsv",
        "Question\tAnswer\tMetadata\tQnaId\n"
        "How to pay?\tCard.\tcategory:billing\t1\n"
        "Pay how?\tCard.\tcategory:payments\t1\n"
        "Paying?\tCard.\tcategory:billing\t1\n",
    )
    report = run_import(db_url, [path])
    assert report.warnings == [
        f"{path}:3: QnaId 1 has other category than on line 2; the article keeps line 2's"
    ]
    (article,) = articles(db_url).values()
    assert (article.category, article.questions) == ("billing", ["Pay how?", "Paying?"])
