"""Bot Framework ``.qna`` files (QnA Maker's text format, as ``bf qnamaker:convert`` writes a
knowledge base): one article per pair, filters read as metadata, what is not stored said in a
note, and every mistake named by line with nothing written. Real files, the real importer and
the CLI runner."""

from __future__ import annotations

import pytest
from fixtures_kb import articles, rejected, run_import, snapshot

from app.cli import main

FENCE = "```"

# As the Bot Framework CLI writes a QnA Maker knowledge base: a model description line, each
# pair's source and id, the questions, filters, a fenced Markdown answer, follow-up prompts.
CONVERTED = f"""> # QnA pairs

> !# @kb.name = tierdesk bank

> !# @qna.pair.source = https://bank.example/help/pin

<a id = "1"></a>

## ? How do I reset my PIN?
- I forgot my PIN
- i forgot my pin
- Can I change my card PIN?

**Filters:**
- category = change_pin
- product=gold

{FENCE}markdown
Open the app and choose **Security**:

- *Change PIN* if you know it
- *Forgotten PIN* if you do not
{FENCE}

**Prompts:**
- [Card delivery](#2)

> !# @qna.pair.source = Editorial

<a id = "2"></a>

## ? Where is my new card?

{FENCE}
Cards arrive within 5 working days.
{FENCE}

[Help centre](https://bank.example/help)
"""


def test_a_converted_knowledge_base_gives_one_article_per_pair(db_url, write_kb_file):
    path = write_kb_file("bank.qna", CONVERTED)
    report = run_import(db_url, [path])
    assert (report.created, report.problems, report.warnings) == (2, [], [])
    assert report.notes == [
        f"{path}:25: follow-up prompts are not stored",
        f"{path}:38: the reference to 'https://bank.example/help' is not followed; import what "
        "it points to by itself",
    ]
    stored = articles(db_url)
    assert sorted(stored) == ["how-do-i-reset-my-pin", "where-is-my-new-card"]
    pin = stored["how-do-i-reset-my-pin"]
    assert pin.title == "How do I reset my PIN?"
    # A case-only repeat is dropped; the answer's own list is answer, not questions.
    assert pin.questions == ["I forgot my PIN", "Can I change my card PIN?"]
    assert pin.body == (
        "Open the app and choose **Security**:\n\n"
        "- *Change PIN* if you know it\n- *Forgotten PIN* if you do not"
    )
    assert (pin.category, pin.tags) == ("change_pin", ["product:gold"])
    assert pin.source == "https://bank.example/help/pin"
    card = stored["where-is-my-new-card"]
    assert (card.questions, card.body, card.source) == (
        [],
        "Cards arrive within 5 working days.",
        "Editorial",
    )
    again = run_import(db_url, [path])
    assert (again.created, again.updated, again.unchanged) == (0, 0, 2)


def test_indented_pairs_and_a_pair_without_a_source(db_url, write_kb_file):
    """Older examples of the format indent the answer; a pair with no source directive takes
    the file as its source, as every other format does."""
    text = f"# ?store hours\n- opening times\n\t{FENCE}\n\tMost stores open at 9.\n\n\t  - not on Sundays\n\t{FENCE}\n"
    path = write_kb_file("stores.qna", text)
    report = run_import(db_url, [path])
    assert (report.created, report.problems, report.notes) == (1, [], [])
    (article,) = articles(db_url).values()
    assert (article.title, article.questions) == ("store hours", ["opening times"])
    assert article.body == "Most stores open at 9.\n\n  - not on Sundays"
    assert article.source == str(path)


def test_an_empty_variation_line_is_skipped(db_url, write_kb_file):
    path = write_kb_file(
        "hours.qna", f"# ? Opening hours\n-\n- \n- When are you open?\n{FENCE}\n9 to 5.\n{FENCE}\n"
    )
    report = run_import(db_url, [path])
    assert (report.created, report.problems) == (1, [])
    (article,) = articles(db_url).values()
    assert article.questions == ["When are you open?"]


def test_a_question_under_two_answers_is_warned_of_at_its_own_line(db_url, write_kb_file):
    text = (
        f"# ? Hello\n- Good morning\n{FENCE}\nHello!\n{FENCE}\n\n"
        f"# ? Good morning\n- Morning\n{FENCE}\nGood morning to you.\n{FENCE}\n"
    )
    path = write_kb_file("chitchat.qna", text)
    report = run_import(db_url, [path])
    assert report.created == 2
    assert report.warnings == [
        f"{path}:7: question 'Good morning' is also listed at {path}:2, under another answer; "
        "both articles keep it"
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (f"# ? Where is my card?\n{FENCE}\nOn its way.\n", "2: the answer's fence (```) is never closed"),
        (f"# ? Where is my card?\n- Card late\n\n# ? Hi\n{FENCE}\nHello\n{FENCE}\n",
         "1: the question has no answer (a fenced ``` block after its questions and filters)"),
        (f"# ? Where is my card?\nIt is late\n{FENCE}\nOn its way.\n{FENCE}\n",
         "2: expected '# ? question', '- variation', '**Filters:**', a fenced answer (```) or a "
         "'>' comment, found 'It is late'"),
        (f"# ? Where is my card?\n**Filters:**\n- category\n{FENCE}\nOn its way.\n{FENCE}\n",
         "3: a filter must be 'name = value', found 'category'"),
        (f"- Card late\n# ? Where is my card?\n{FENCE}\nOn its way.\n{FENCE}\n",
         "1: '- Card late' belongs to no question (variations follow their '# ? question', "
         "filters a '**Filters:**' line)"),
        (f"# Greeting\n- hi\n# ? Where is my card?\n{FENCE}\nOn its way.\n{FENCE}\n",
         "1: a heading that is not a question: '# Greeting' (a pair starts with '# ? question'; "
         ".lu intents belong in a .lu file)"),
        (f"{FENCE}\nOrphan answer\n{FENCE}\n",
         "1: an answer before any question ('# ? question' comes first)"),
        (f"# ? Where is my card?\n{FENCE}\nOn its way.\n{FENCE}\n{FENCE}\nAgain\n{FENCE}\n",
         "5: a second answer for the question on line 1"),
        (f"# ? Where is my card?\n{FENCE}\n   \n{FENCE}\n",
         "2: the answer to the question on line 1 is empty"),
        (f"# ?\n{FENCE}\nOn its way.\n{FENCE}\n", "1: a question heading ('# ?') without a question"),
        ("", "1: file is empty"),
    ],
)  # fmt: skip
def test_mistakes_are_named_by_line_and_nothing_is_written(
    db_url, write_kb_file, content, expected
):
    run_import(db_url, [write_kb_file("base.csv", "title,body\nExisting,Stays as it is.\n")])
    before = snapshot(db_url)
    good = f"# ? Fine question\n{FENCE}\nA fine answer.\n{FENCE}\n\n"
    path = write_kb_file("broken.qna", content)
    other = write_kb_file("good.qna", good)
    assert rejected(db_url, [other, path]) == [f"{path}:{expected}"]
    assert snapshot(db_url) == before


def test_cli_imports_a_qna_file(runner, db_url, write_kb_file):
    path = write_kb_file("bank.qna", CONVERTED)
    result = runner.invoke(main, ["kb", "import", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "2 created, 0 updated, 0 unchanged, 0 unpublished, 0 rejected"
    assert f"{path}:25: follow-up prompts are not stored" in result.stderr
