"""Asking the trained bot a list of questions: what a content owner runs before going live.

``tierdesk ask QUESTIONS`` routes each question through what a server would load (the models
serving now and the published knowledge base), with review on as in the chat API, and reports
how many the bot answers and how many it hands to a person, and why. Given the answer each
question expects, it also reports how many answers are right (answered accuracy), the
automation rate (answered and right over all questions that have an answer) and the share of
out-of-scope questions escalated. Nothing is stored: no conversation, no review item, no cached
answer, and no rate limit applies.

QUESTIONS is a CSV with a ``text`` column (else the first of ``question``, ``query``,
``message``) and an optional ``expected`` column (else the first other of ``question``,
``article``, ``slug``, ``category``, ``intent``, ``label``: a ``text,question`` file asks the
text and expects the FAQ question):
an article's slug, title or one of its questions, or a category (any of its articles is right);
empty, or an out-of-scope category (``oos``), for a question the bot should hand to a person.
A file of another extension is one question per line.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.kb.textfiles import Problems, csv_rows, decoded_lines
from app.nlp.person_request import asks_for_human
from app.vocab import Reason, is_out_of_scope_category

TEXT_NAMES = ("text", "question", "query", "message")
EXPECTED_NAMES = ("expected", "question", "article", "slug", "category", "intent", "label")
MAX_SHOWN = 10


class AskError(ValueError):
    """The questions file cannot be read; the message names ``file:line``."""


@dataclass
class Question:
    line: int
    text: str
    expected: str | None = None  # as written; None: the file says nothing
    right_slugs: frozenset[str] | None = None  # None: not known; empty: out of scope


@dataclass
class Asked:
    question: Question
    status: str  # answered | escalated
    slug: str | None
    confidence: float | None
    reason: str | None
    route: str | None
    right: bool | None  # None: no expectation (or out of scope)


@dataclass
class AskReport:
    asked: list[Asked] = field(default_factory=list)
    version: str | None = None
    answered_target: float | None = None
    tau_review: float | None = None

    def summary(self) -> dict:
        answered = [a for a in self.asked if a.status == "answered"]
        reasons = Counter(a.reason for a in self.asked if a.status != "answered")
        known = [a for a in self.asked if a.question.right_slugs]
        known_answered = [a for a in known if a.status == "answered"]
        right = sum(1 for a in known_answered if a.right)
        oos = [a for a in self.asked if a.question.right_slugs == frozenset()]
        oos_escalated = sum(1 for a in oos if a.status != "answered")
        return {
            "questions": len(self.asked),
            "answered": len(answered),
            "escalated": len(self.asked) - len(answered),
            "escalation_reasons": dict(reasons.most_common()),
            "with_expected_answer": len(known),
            "expected_answered": len(known_answered),
            "expected_right": right,
            "answered_accuracy": right / len(known_answered) if known_answered else None,
            "coverage": len(known_answered) / len(known) if known else None,
            "automation": right / len(known) if known else None,
            "out_of_scope": len(oos),
            "out_of_scope_escalated": oos_escalated / len(oos) if oos else None,
            "model_version": self.version,
            "answered_target": self.answered_target,
            "tau_review": self.tau_review,
        }


def read_questions(path: str | Path) -> list[Question]:
    """The questions of ``path`` (module docstring); raises ``AskError`` naming file:line."""
    path = Path(path)
    display = str(path)
    if not path.is_file():
        raise AskError(f"{display}: no such file")
    problems = Problems()
    questions: list[Question] = []
    if path.suffix.lower() == ".csv":
        rows = csv_rows(
            path,
            display,
            problems,
            aliases=question_columns,
            required=("text",),
            known=("text", "expected"),
        )
        for row in rows:
            text = " ".join((row.values.get("text") or "").split())
            if not text:
                problems.add(display, row.line, "text is empty")
                continue
            expected = row.values.get("expected")  # None: the file has no such column
            questions.append(
                Question(row.line, text, None if expected is None else expected.strip())
            )
    else:
        for number, line in enumerate(decoded_lines(path, display, problems, lambda _n: None), 1):
            text = " ".join(line.split())
            if text:
                questions.append(Question(number, text))
        if not questions and not problems:
            problems.add(display, 1, "no questions in the file")
    if problems:
        raise AskError(_problem_text(problems))
    return questions


def question_columns(header: list[str]) -> list[str | None]:
    """Which header cell is the question asked (``text``) and which the answer expected."""
    keys = [cell.strip().lower() for cell in header]
    names: list[str | None] = [None] * len(keys)
    for role, candidates in (("text", TEXT_NAMES), ("expected", EXPECTED_NAMES)):
        for candidate in candidates:
            free = [i for i, k in enumerate(keys) if k == candidate and names[i] is None]
            if free:
                names[free[0]] = role
                break
    return names


def _problem_text(problems: Problems) -> str:
    shown = problems.messages[:10]
    more = len(problems.messages) - len(shown)
    return "\n".join(shown) + (f"\n... and {more} more" if more else "")


def _key(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def resolve_expected(questions: Iterable[Question], articles: Iterable) -> None:
    """Set each question's ``right_slugs`` from its ``expected``: the article whose slug, title
    or question it is, else every article of the category it names, else out of scope when it
    is empty or an out-of-scope category. Raises ``AskError`` for one that names nothing."""
    by_text: dict[str, str] = {}
    by_category: dict[str, set[str]] = {}
    for article in articles:
        by_text.setdefault(_key(article.slug), article.slug)
        for text in [article.title, *(article.questions or [])]:
            by_text.setdefault(_key(text), article.slug)
        if article.intent:
            by_category.setdefault(_key(article.intent), set()).add(article.slug)
    problems = []
    for question in questions:
        expected = question.expected
        if expected is None:
            continue
        if not expected or is_out_of_scope_category(expected):
            question.right_slugs = frozenset()
        elif _key(expected) in by_text:
            question.right_slugs = frozenset({by_text[_key(expected)]})
        elif _key(expected) in by_category:
            question.right_slugs = frozenset(by_category[_key(expected)])
        else:
            problems.append(question)
    if problems:
        lines = [
            f"line {q.line}: expected {q.expected!r} is no published article's slug, title or "
            "question, nor a category"
            for q in problems[:10]
        ]
        more = len(problems) - len(lines)
        raise AskError("\n".join(lines) + (f"\n... and {more} more" if more else ""))


def ask(engine, questions: list[Question], progress: bool = False) -> AskReport:
    """Route every question through ``engine`` (loaded) as the chat API does, storing
    nothing."""
    from tqdm import tqdm

    router = engine.router
    thresholds = router.m.thresholds if router is not None else None
    report = AskReport(
        version=engine.model_version,
        answered_target=thresholds.provenance.get("answered_target") if thresholds else None,
        tau_review=thresholds.tau_review if thresholds else None,
    )
    bar = tqdm(questions, disable=not progress, leave=False, mininterval=0.5, unit="question")
    for question in bar:
        if asks_for_human(question.text):
            report.asked.append(
                Asked(question, "escalated", None, None, Reason.ASKED_FOR_HUMAN, None, None)
            )
            continue
        decision = engine.answer(question.text)
        slug = decision.article.slug if decision.article is not None else None
        if decision.escalate or slug is None:
            reason = decision.escalation_reason or (
                Reason.NO_ANSWER if slug is None else Reason.BELOW_THRESHOLD
            )
            status = "escalated"
        else:
            reason, status = None, "answered"
        right = None
        if question.right_slugs and status == "answered":
            right = slug in question.right_slugs
        report.asked.append(
            Asked(
                question,
                status,
                slug,
                float(decision.confidence),
                str(reason) if reason else None,
                str(decision.route),
                right,
            )
        )
    return report


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def format_report(report: AskReport) -> str:
    s = report.summary()
    n = s["questions"]
    lines = [
        f"{n} questions: {s['answered']} answered ({_percent(s['answered'] / max(n, 1))}), "
        f"{s['escalated']} to a person"
        + (
            " ("
            + ", ".join(f"{reason} {count}" for reason, count in s["escalation_reasons"].items())
            + ")"
            if s["escalated"]
            else ""
        )
    ]
    if s["with_expected_answer"]:
        lines.append(
            f"with an expected answer: {s['with_expected_answer']}; answered "
            f"{s['expected_answered']} (coverage {_percent(s['coverage'])}), right "
            f"{s['expected_right']}: answered accuracy {_percent(s['answered_accuracy'])}, "
            f"automation {_percent(s['automation'])}"
        )
    if s["out_of_scope"]:
        lines.append(
            f"out of scope: {s['out_of_scope']}; escalated {_percent(s['out_of_scope_escalated'])}"
        )
    if s["answered_target"] is not None:
        lines.append(
            f"model version {s['model_version']}: answered target "
            f"{_percent(s['answered_target'])}, tau_review {s['tau_review']:.3f}"
        )
    wrong = [a for a in report.asked if a.right is False]
    oos_answered = [
        a for a in report.asked if a.question.right_slugs == frozenset() and a.status == "answered"
    ]
    for title, items in (("wrong answers", wrong), ("out of scope, answered", oos_answered)):
        if items:
            lines.append(f"{title} ({len(items)}; the first {min(len(items), MAX_SHOWN)}):")
            for a in items[:MAX_SHOWN]:
                expected = f" expected {a.question.expected!r}," if a.question.expected else ""
                lines.append(
                    f"  line {a.question.line}: {a.question.text!r}:{expected} answered "
                    f"{a.slug} (confidence {a.confidence:.3f})"
                )
    return "\n".join(lines)


def write_outcomes(report: AskReport, path: str | Path) -> None:
    """One CSV row per question: what it was, what the bot did, and whether that was right."""
    columns = ["line", "text", "expected", "status", "article", "confidence", "reason", "route"]
    with Path(path).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([*columns, "right"])
        for a in report.asked:
            writer.writerow(
                [
                    a.question.line,
                    a.question.text,
                    a.question.expected or "",
                    a.status,
                    a.slug or "",
                    "" if a.confidence is None else f"{a.confidence:.4f}",
                    a.reason or "",
                    a.route or "",
                    "" if a.right is None else str(a.right).lower(),
                ]
            )


def engine_config(config: Mapping) -> dict:
    """The app's configuration for an engine that answers a list of questions: no answer
    cache (each question is routed), no admission control (BERT always runs where the router
    wants it: answers, not load, are what is asked)."""
    return {**config, "ANSWER_CACHE_SIZE": 0, "BERT_ADMISSION": False}
