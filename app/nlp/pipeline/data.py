"""Stage 1, data: what training learns from, read from the database or a labelled CSV.

``TrainingData`` holds the labelled texts (intent examples of every origin, article titles and
alternate questions), the published articles as training sees them (``KbArticle``), the
declared tiers, the development out-of-scope queries and the recent live questions the bot
routed (``traffic``, on which ``traffic.py`` chooses ``tau_review``). Errors are
``TrainingError`` with the file and line when a file is at fault.
"""

from __future__ import annotations

import hashlib
import json
import random
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.vocab import LABEL_ALIASES, Verdict, is_out_of_scope_category

GENERATED_NEGATIVES = 60
# The most recent customer questions the bot routed that training reads (``recent_traffic``).
TRAFFIC_MAX = 5000


class TrainingError(RuntimeError):
    """Training cannot start or finish; the message says why in the user's terms."""


@dataclass
class KbArticle:
    """A published article as training sees it (its intent is its category, or its slug)."""

    slug: str
    title: str
    questions: list[str]
    body: str
    intent: str


@dataclass
class TrainingData:
    texts: list[str]
    labels: list[str]
    articles: list[KbArticle]
    declared_tiers: dict[str, str] = field(default_factory=dict)
    oos_texts: list[str] = field(default_factory=list)
    # Recent customer questions the bot routed, newest first (not training data: never hashed).
    traffic: list[str] = field(default_factory=list)
    # How many of ``texts`` are intent examples (imported or taught); the rest are the KB's own
    # titles and alternate questions.
    n_examples: int = 0
    # Each text's weight in the calibrators' fit (empty: every text 1): a spot-checked answer
    # stands for 1/share answered questions nobody reviewed (``example_weight``).
    weights: list[float] = field(default_factory=list)
    # The out-of-scope rows of the data itself (a training or validation CSV's ``oos``
    # category; in the app, answered questions a spot check found nothing in the KB answers),
    # also in ``oos_texts``: the data's owner says they are out of scope, so no intent claims
    # them (``splits.claimed_negatives`` applies to the development guesses), and the tuner
    # escalates 95% of them apart from the other negatives (``thresholds.escalated_share``).
    oos_labelled: list[str] = field(default_factory=list)

    def weight_of(self) -> list[float]:
        """Every text's calibration weight, in the order of ``texts``."""
        return list(self.weights) if self.weights else [1.0] * len(self.texts)

    def data_hash(self) -> str:
        digest = hashlib.sha256()
        weights = self.weight_of()
        for text, label, weight in sorted(zip(self.texts, self.labels, weights, strict=True)):
            # a weight of 1 adds nothing, so data without spot checks hashes as it always did
            extra = "" if weight == 1.0 else f"\t{weight:.6g}"
            digest.update(f"{label}\t{text}{extra}\n".encode())
        for a in sorted(self.articles, key=lambda a: a.slug):
            digest.update(json.dumps([a.slug, a.title, a.questions, a.intent]).encode())
        for name, tier in sorted(self.declared_tiers.items()):
            digest.update(f"{name}={tier}\n".encode())
        for text in sorted(self.oos_labelled):  # none: data hashes as it did before them
            digest.update(f"out of scope\t{text}\n".encode())
        return digest.hexdigest()


def split_out_of_scope(
    texts: Sequence[str], labels: Sequence[str]
) -> tuple[list[str], list[str], list[str]]:
    """(in-scope texts, their labels, out-of-scope texts) of labelled rows."""
    kept_texts: list[str] = []
    kept_labels: list[str] = []
    oos: list[str] = []
    for text, label in zip(texts, labels, strict=True):
        if is_out_of_scope_category(label):
            oos.append(text)
        else:
            kept_texts.append(text)
            kept_labels.append(label)
    return kept_texts, kept_labels, oos


def read_labelled_csv(
    path: str | Path, *, category_required: bool = True
) -> tuple[list[str], list[str]]:
    """``text,category`` rows (``intent`` or ``label`` for ``category``, any case, UTF-8 with or
    without BOM), read as ``tierdesk intents import`` reads them; errors name ``file:line``.
    Without ``category_required`` (a file of out-of-scope queries) the ``category`` column may
    be absent or empty."""
    from app.kb.textfiles import Problems, csv_rows

    path = Path(path)
    if not path.is_file():
        raise TrainingError(f"{path}: cannot read: no such file")
    problems = Problems()
    required = ("text", "category") if category_required else ("text",)
    texts: list[str] = []
    labels: list[str] = []
    for row in csv_rows(path, str(path), problems, aliases=LABEL_ALIASES, required=required):
        text = (row.values.get("text") or "").strip()
        label = (row.values.get("category") or "").strip()
        if not text or (category_required and not label):
            problems.add(str(path), row.line, "empty text or category")
            continue
        texts.append(text)
        labels.append(label)
    if problems:
        shown = problems.messages[:5]
        more = len(problems.messages) - len(shown)
        raise TrainingError("\n".join(shown) + (f"\n... and {more} more" if more else ""))
    return texts, labels


def category_title(category: str) -> str:
    return category.replace("_", " ").replace("-", " ").strip().capitalize()


def articles_from_categories(
    texts: Sequence[str],
    labels: Sequence[str],
    questions_per_article: int | None = None,
    seed: int = 0,
) -> list[KbArticle]:
    """One article per category (the eval KB): title from the name, training texts as its
    alternate questions (all of them, or a sample of ``questions_per_article``)."""
    by_label: dict[str, list[str]] = {}
    for text, label in zip(texts, labels, strict=True):
        by_label.setdefault(label, []).append(text)
    rng = random.Random(seed)
    articles = []
    for label in sorted(by_label):
        questions = list(dict.fromkeys(by_label[label]))
        if questions_per_article is not None and len(questions) > questions_per_article:
            questions = rng.sample(questions, questions_per_article)
        articles.append(
            KbArticle(
                slug=label, title=category_title(label), questions=questions, body="", intent=label
            )
        )
    return articles


def generated_negatives(n: int = GENERATED_NEGATIVES, seed: int = 0) -> list[str]:
    """Nonsense no KB can answer: keyboard mash and random letters (domain-free negatives)."""
    rng = random.Random(seed)
    rows = ["qwertyuiop", "asdfghjkl", "zxcvbnm", "lorem ipsum dolor sit amet", "?????", "..."]
    while len(rows) < n:
        words = [
            "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
            for _ in range(rng.randint(1, 6))
        ]
        rows.append(" ".join(words))
    return rows[:n]


def read_oos_dev(intents_dir: str | Path | None) -> list[str]:
    """Development out-of-scope queries (never the test file)."""
    if not intents_dir:
        return []
    path = Path(intents_dir) / "out_of_scope" / "dev.csv"
    if not path.is_file():
        return []
    texts, _ = read_labelled_csv(path)
    return texts


def data_from_db(session, intents_dir: str | Path | None = None) -> TrainingData:
    """Intents, training examples of every origin and published articles from the database.
    Examples of an out-of-scope category (a data set's ``oos`` rows) are the data's own
    out-of-scope queries, never an intent.

    An article without a category is its own intent (named after its slug), trained on its
    title and alternate questions; articles with a category add theirs to that intent. The
    examples of an intent that has exactly one article are matched as that article's questions
    too (``with_examples_as_questions``).
    """
    from sqlalchemy import select

    from app.models import Article, Intent, TrainingExample

    pairs: dict[tuple[str, str], float] = {}
    imported_oos: list[str] = []
    for text, intent, share in session.execute(
        select(TrainingExample.text, TrainingExample.intent, TrainingExample.sample_share).order_by(
            TrainingExample.id
        )
    ):
        if text and text.strip() and intent and is_out_of_scope_category(intent):
            imported_oos.append(text.strip())
        elif text and text.strip() and intent:
            key = (text.strip(), intent)
            # the same question twice (spacing aside): the smaller weight
            pairs[key] = min(pairs.get(key, float("inf")), example_weight(share))
    n_examples = len(pairs)
    articles: list[KbArticle] = []
    for art in session.scalars(
        select(Article).where(Article.published.is_(True)).order_by(Article.slug)
    ):
        intent = art.category or art.slug
        questions = [q for q in (art.questions or []) if isinstance(q, str) and q.strip()]
        articles.append(KbArticle(art.slug, art.title, questions, art.body or "", intent))
        for text in [art.title, *questions]:
            pairs[(text.strip(), intent)] = 1.0  # the KB's own text: not a sample of traffic
    declared = {
        i.name: i.tier for i in session.scalars(select(Intent)) if i.tier_source == "declared"
    }
    texts = [t for t, _ in pairs]
    labels = [lab for _, lab in pairs]
    weights = list(pairs.values())
    articles = with_examples_as_questions(articles, texts, labels)
    # the data's own out-of-scope queries: a data set's rows (`tierdesk intents import`) and the
    # answered questions a spot check found out of scope
    own_oos = list(dict.fromkeys([*imported_oos, *judged_out_of_scope(session)]))
    return TrainingData(
        texts,
        labels,
        articles,
        declared,
        [*read_oos_dev(intents_dir), *own_oos],
        recent_traffic(session),
        n_examples,
        weights if any(w != 1.0 for w in weights) else [],
        oos_labelled=own_oos,
    )


def judged_out_of_scope(session) -> list[str]:
    """Answered questions a reviewer's spot check found nothing in the knowledge base answers
    (verdict wrong, no intent): the near misses the bot answers, as stored (masked), oldest
    first, each once. One since taught as an intent's example is not held out as a negative
    (``splits.in_scope_negatives``)."""
    from sqlalchemy import select

    from app.models import Message, SpotCheck

    rows = session.execute(
        select(Message.text)
        .join(SpotCheck, SpotCheck.message_id == Message.id)
        .where(SpotCheck.verdict == Verdict.WRONG, SpotCheck.correct_intent.is_(None))
        .order_by(SpotCheck.judged_at, SpotCheck.id)
    ).scalars()
    return list(dict.fromkeys(t.strip() for t in rows if t and t.strip()))


def example_weight(sample_share: float | None) -> float:
    """A taught example's weight in calibration: 1/share for a spot-checked answer (one of
    every 1/share answered questions was checked), 1 for everything else."""
    if sample_share is None or not 0.0 < sample_share < 1.0:
        return 1.0
    return 1.0 / sample_share


def recent_traffic(session, limit: int = TRAFFIC_MAX) -> list[str]:
    """The customer messages the bot routed (those a bot turn replies to with a route), newest
    first, as stored (masked): what the bot is asked, reviewed or not."""
    from sqlalchemy import select

    from app.models import Message

    replies = session.execute(
        select(Message.in_reply_to)
        .where(Message.role == "bot", Message.route.is_not(None), Message.in_reply_to.is_not(None))
        .order_by(Message.created_at.desc(), Message.id.desc())
        .limit(limit)
    ).scalars()
    order = list(dict.fromkeys(replies))
    texts: dict[str, str] = {}
    for start in range(0, len(order), 500):
        chunk = order[start : start + 500]
        for mid, text in session.execute(
            select(Message.id, Message.text).where(
                Message.id.in_(chunk), Message.role == "customer"
            )
        ):
            if text and text.strip():
                texts[mid] = text.strip()
    return [texts[mid] for mid in order if mid in texts]


def with_examples_as_questions(
    articles: Sequence[KbArticle], texts: Sequence[str], labels: Sequence[str]
) -> list[KbArticle]:
    """Articles whose intent is theirs alone also get that intent's examples as questions.

    BM25 and BERT match a query against an article's texts; an example a reviewer taught for
    an intent answered by one article is one more way of asking for that article, and is
    matched from the next training on, even before the intent classifier has enough data.
    """
    owners = Counter(a.intent for a in articles)
    extra: dict[str, list[str]] = {}
    for text, label in zip(texts, labels, strict=True):
        if owners.get(label) == 1:
            extra.setdefault(label, []).append(text)
    out = []
    for a in articles:
        more = [t for t in extra.get(a.intent, []) if t != a.title]
        questions = list(dict.fromkeys([*a.questions, *more]))
        out.append(KbArticle(a.slug, a.title, questions, a.body, a.intent))
    return out
