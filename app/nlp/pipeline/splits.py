"""Stage 2, splits: which texts are held out, against models and indexes that never saw them.

Under FOLD_TEXTS_MAX labelled texts, FOLDS folds in which every text is held out once (a plain
FAQ of 40 titles gives 40 held-out queries, not 6), drawn REPEATS times up to REPEAT_TEXTS_MAX
texts (120 held-out queries then, each text asked of three different fold models); from it
on, one stratified split (15%, at most HELD_OUT_MAX; one-text intents sampled too, so a KB
without intent data still has held-out queries). ``tierdesk tune --val`` gives the held-out
set instead (mode ``given``). Each fold also gets its share of the out-of-scope negatives
(development queries and generated nonsense), which are never right; a negative that is one
of the labelled texts (a chit-chat KB lists "Are you a robot?" as its own question) is not one,
and neither is one the data's intents claim (``claimed_negatives``: a general assistant's data
answers "Will it rain this weekend?"), unless the data itself labels it out of scope.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from app.nlp.intent import stratified_split
from app.nlp.normalize import tokenize
from app.nlp.pipeline.data import TrainingData, TrainingError, generated_negatives

VAL_FRACTION = 0.15
# Under this many labelled texts every text is held out once (FOLDS folds); from it on, one
# stratified split (the encoder fine-tune needs held-out data it never saw, one pass only).
FOLD_TEXTS_MAX = 6000
# Ten folds: each fold's models see 90% of the data, closer to the served models that see it
# all, so held-out answers understate live ones less (docs/cold_start.md: five folds take
# ~0.7x the time and escalate more).
FOLDS = 10
# Up to this many labelled texts the folds are drawn REPEATS times (each text held out once per
# repeat, by models of a different fold draw): on a small FAQ one unlucky draw decides which
# few answers sit at the top of the held-out curve, and so where tau_review lands.
REPEAT_TEXTS_MAX = 1000
REPEATS = 3
# A split holds out at most this many texts (a large KB: more would only cost time).
HELD_OUT_MAX = 3000
# An intent's own spread (claimed_negatives) is measured on at most this many of its texts.
SPREAD_SAMPLE = 300

Truth = str | frozenset | None  # an intent, every intent a text is listed under, None: none


@dataclass(frozen=True)
class Fold:
    """Indexes into ``HeldOutPlan.texts``: what the fold's models fit on, what they answer."""

    fit: list[int]
    held: list[int]


@dataclass(frozen=True)
class HeldOutPlan:
    """How held-out signal is made. ``texts``/``labels`` are the training data (then, in mode
    ``given``, the validation set); ``truth`` is each text's intent or intents."""

    mode: str  # "folds" | "split" | "given"
    texts: list[str]
    labels: list[str]
    truth: list[Truth]
    folds: list[Fold]
    negatives: list[str]
    refit: bool  # retrain on all the data for serving (not when the held-out set was given)
    # Negatives left out because a labelled text is the same question (``in_scope_negatives``).
    negatives_labelled: int = 0
    # Each text's weight in the calibrators' fit (empty: every text 1; ``TrainingData.weights``).
    weights: list[float] = field(default_factory=list)
    # Negatives no intent claims (``claimed_negatives``): the generated nonsense, and those the
    # data itself labels out of scope (``TrainingData.oos_labelled``).
    fixed_negatives: frozenset[str] = frozenset()

    @property
    def shared_encoder(self) -> bool:
        """Folds share one frozen encoder and one embedding pass (no fine-tune per fold)."""
        return self.mode == "folds"

    def queries(self, number: int) -> tuple[list[str], list[Truth], int]:
        """Fold ``number``'s held-out queries (its texts, then its negatives), their truth and
        how many are in scope."""
        fold = self.folds[number]
        mine = self.negatives[number :: len(self.folds)]
        queries = [*(self.texts[i] for i in fold.held), *mine]
        truth = [*(self.truth[i] for i in fold.held), *[None] * len(mine)]
        return queries, truth, len(fold.held)

    def held_texts(self, number: int) -> set[str]:
        """Fold ``number``'s held-out texts: what its models and indexes must not contain."""
        return {self.texts[i] for i in self.folds[number].held}

    def held_out_texts(self) -> list[str]:
        """The text of every in-scope held-out query, fold after fold."""
        return [self.texts[i] for fold in self.folds for i in fold.held]

    def held_labels(self) -> list[str]:
        """The label of every in-scope held-out query, fold after fold."""
        return [self.labels[i] for fold in self.folds for i in fold.held]

    def held_weights(self) -> list[float]:
        """The calibration weight of every in-scope held-out query, fold after fold."""
        if not self.weights:
            return [1.0] * sum(len(fold.held) for fold in self.folds)
        return [self.weights[i] for fold in self.folds for i in fold.held]


def plan_held_out(
    data: TrainingData,
    *,
    validation: tuple[list[str], list[str]] | None,
    val_fraction: float,
    seed: int,
    refit: bool = True,
) -> HeldOutPlan:
    """The held-out plan for ``data`` (``validation``: a given labelled set, never refit)."""
    if validation is None:
        mode, pairs = held_out_folds(data.labels, val_fraction=val_fraction, seed=seed)
        texts, labels = list(data.texts), list(data.labels)
        weights = list(data.weights)
    else:
        mode = "given"
        texts = [*data.texts, *validation[0]]
        labels = [*data.labels, *validation[1]]
        weights = [*data.weights, *[1.0] * len(validation[0])] if data.weights else []
        pairs = [(list(range(len(data.texts))), list(range(len(data.texts), len(texts))))]
        refit = False
    if not pairs or not any(held for _, held in pairs):
        raise TrainingError(
            f"too few texts to hold any out for tuning: {len(data.texts)} (titles, alternate "
            "questions and intent examples); import at least one more article, or add an "
            "alternate question or a taught example"
        )
    generated = generated_negatives(seed=seed)
    candidates = list(dict.fromkeys([*data.oos_texts, *generated]))
    labelled = in_scope_negatives(candidates, texts)
    return HeldOutPlan(
        mode=mode,
        texts=texts,
        labels=labels,
        truth=held_out_truth(texts, labels),
        folds=[Fold(fit, held) for fit, held in pairs],
        negatives=[t for t in candidates if t not in labelled],
        refit=refit,
        negatives_labelled=len(labelled),
        weights=weights,
        fixed_negatives=frozenset([*generated, *data.oos_labelled]),
    )


def _question_key(text: str) -> str:
    """A question's words, lower-cased, without punctuation: "Make me laugh!" = "make me laugh"."""
    return " ".join(tokenize(text, stem_words=False, drop_stopwords=False))


def in_scope_negatives(negatives: Sequence[str], texts: Sequence[str]) -> set[str]:
    """The out-of-scope negatives that are the same question as a labelled text (the same
    words, case and punctuation aside). The default negatives are a guess at what a support
    bot is not asked; a KB that lists one of them as its own question (a chit-chat export
    answers "Are you a robot?" and "hi") says otherwise, and held out as never right it would
    make the tuner escalate the KB's own answers."""
    keys = {_question_key(t) for t in texts}
    return {t for t in negatives if (key := _question_key(t)) and key in keys}


def held_out_folds(
    labels: Sequence[str], *, val_fraction: float, seed: int
) -> tuple[str, list[tuple[list[int], list[int]]]]:
    """``("split", [(fit, held)])`` or ``("folds", [...])`` (module docstring)."""
    n = len(labels)
    if n >= FOLD_TEXTS_MAX:
        fit, held = stratified_split(labels, val_fraction, seed)
        if len(held) > HELD_OUT_MAX:  # a large KB: a sample is enough to tune on
            rng = random.Random(seed)
            keep = set(rng.sample(held, HELD_OUT_MAX))
            fit = sorted([*fit, *(i for i in held if i not in keep)])
            held = sorted(keep)
        counts = Counter(labels)
        singles = [i for i in fit if counts[labels[i]] == 1]
        room = max(0, HELD_OUT_MAX - len(held))
        take = min(room, int(round(len(singles) * val_fraction)))
        if take:
            extra = set(random.Random(seed).sample(singles, take))
            fit = [i for i in fit if i not in extra]
            held = sorted([*held, *extra])
        return "split", [(fit, held)]
    k = min(FOLDS, n)
    rng = random.Random(seed)
    pairs = []
    for _ in range(fold_repeats(n)):
        order = list(range(n))
        rng.shuffle(order)
        folds = [sorted(order[i::k]) for i in range(k)]
        pairs += [
            (sorted(set(order) - set(fold)), fold) for fold in folds if fold and len(fold) < n
        ]
    return "folds", pairs


def fold_repeats(n: int) -> int:
    """How many fold draws ``n`` labelled texts get (REPEATS for a small set, else one)."""
    return REPEATS if n <= REPEAT_TEXTS_MAX else 1


def held_out_truth(texts: Sequence[str], labels: Sequence[str]) -> list[Truth]:
    """Each held-out text's intent, or every intent it is listed under when there are several
    (a question a KB lists under two answers, like a QnA export's "Good morning")."""
    intents: dict[str, set[str]] = {}
    for text, label in zip(texts, labels, strict=True):
        intents.setdefault(text, set()).add(label)
    return [
        label if len(intents[text]) == 1 else frozenset(intents[text])
        for text, label in zip(texts, labels, strict=True)
    ]


def claimed_negatives(
    vectors: np.ndarray, memory: np.ndarray, memory_labels: np.ndarray
) -> np.ndarray:
    """Which development negatives (rows of ``vectors``, normalised embeddings) one of the
    data's intents claims: as close to one of the intent's texts (``memory``, labelled by
    ``memory_labels``) as its texts typically are to each other, that is, at least the median
    over the intent's texts of the similarity to their nearest other text of the intent.

    The default negatives are a guess at what a support bot is not asked; a general
    assistant's data answers "Will it rain this weekend?" and "Play some jazz music". Held out
    as never right, such negatives made the tuner escalate whole intents to keep 95% of the
    negatives escalated. Near misses stay: on BANKING77 "How do I delete my Facebook account?"
    is 0.85 from its nearest `terminate_account` text (frozen encoder), where that intent's
    texts are a median of 0.90 from their nearest. Intents with fewer than 3 texts (a plain
    FAQ's titles) have no spread and claim nothing.
    """
    claimed = np.zeros(len(vectors), dtype=bool)
    if not len(vectors) or not len(memory):
        return claimed
    labels = np.asarray(memory_labels)
    for label in np.unique(labels):
        members = memory[labels == label]
        if len(members) < 3:
            continue
        sample = members[:SPREAD_SAMPLE]
        within = sample @ sample.T
        np.fill_diagonal(within, -np.inf)
        spread = float(np.median(within.max(axis=1)))
        claimed |= (vectors @ members.T).max(axis=1) >= spread
    return claimed
