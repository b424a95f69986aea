"""One row per question (QnA Maker style) in TSV, CSV, JSON and JSONL: rows sharing an answer
become one article, questions under two answers and derived-slug collisions are warnings, real
errors still reject the whole import. Real files, the real importer and the CLI runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixtures_kb import articles, run_import, snapshot

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
        ("cols.tsv", "Q\tAnswer\nA\tb\n", "1: missing required column(s) question; found Q, Answer"),
        ("meta.jsonl", '{"question": "A", "answer": "b", "metadata": 3}\n',
         "1: metadata must be 'key:value|key:value' text or an object, not int"),
    ],
)  # fmt: skip
def test_question_answer_mistakes_are_named(db_url, write_kb_file, name, content, expected):
    path = write_kb_file(name, content)
    with pytest.raises(ImportRejected) as info:
        run_import(db_url, [path])
    assert info.value.report.problems == [f"{path}:{expected}"]


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
    with pytest.raises(ImportRejected) as info:
        run_import(db_url, [path])
    assert info.value.report.problems == [
        f"{path}:3: duplicate slug 'same'; first used at {path}:2"
    ]


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
