"""Stages 3 and 4, fit FastText and fit BERT: one model of each per held-out fold, on the
fold's fit part only.

FastText chooses its grid cell on the first fold and reuses it on the others; beyond
FASTTEXT_MAX_LABELS intents, or when every intent has one text, it is not trained at all.
Each fold's FastText model is asked that fold's held-out queries as soon as it is trained and
then let go (a model holds its hashed n-gram table, 40-80 MiB, and a small KB has 30 folds):
only its answers go on to the replay. The BERT tier fine-tunes its encoder only with a split
and enough data (``finetune.should_fine_tune``); with folds, one frozen encoder embeds every
text once and each fold fits its head on its rows. Each fold's BERT tier indexes the KB
*without* that fold's held-out texts, titles included (they would leak the answer); texts
embedded for one fold are not embedded again for the next, and the fold tiers share the
encoder's int8 copy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.nlp.intent import FastTextIntent
from app.nlp.pipeline.data import TrainingData
from app.nlp.pipeline.kb import kb_entries
from app.nlp.pipeline.splits import HeldOutPlan
from app.nlp.router import TOP_K
from app.nlp.types import Tier, TierResult

if TYPE_CHECKING:
    from app.nlp.bert import BertTier, Encoder

# Beyond this many intents FastText is not trained (a softmax over 100,000 one-example
# articles costs minutes and learns nothing the KB matching does not know).
FASTTEXT_MAX_LABELS = 5000


@dataclass(frozen=True)
class FastTextFit:
    """What the intent tier of every fold answered, and why the tier is on or off."""

    active: bool
    reason: str
    # per fold, FastText's view of each of the fold's held-out queries (``plan.queries``);
    # empty views when the tier is off
    results: list[list[TierResult]]
    # per fold, the model, kept only where it serves (the first fold's, when the plan refits
    # nothing) or when ``fit_fasttext`` was asked to keep them; None otherwise
    models: list[FastTextIntent | None]
    params: dict | None  # the grid cell chosen on the first fold
    metrics: dict | None  # that choice's figures (FastTextIntent.select)


@dataclass(frozen=True)
class BertFit:
    """The BERT tier of every fold, each indexed on the KB without the fold's held-out texts;
    with folds, the frozen encoder they share and its embeddings of ``HeldOutPlan.texts``."""

    models: list[BertTier]
    encoder: Encoder | None
    vectors: np.ndarray | None

    def release_training_encoders(self) -> None:
        """Drop the fp32 encoder copies, only needed while training (memory)."""
        for model in self.models:
            model.training_encoder = None


def fasttext_plan(labels: Sequence[str]) -> tuple[bool, str]:
    """Whether FastText is trained, and why, in the user's terms.

    Not when every intent has a single text (a plain FAQ's titles): a held-out text then
    takes its intent's only example out of its fold's FastText, which can never be right on a
    held-out query, so the tuner could never show the simple route keeps answers right, and
    the blend gives FastText no weight. Training it would cost a model per fold for nothing
    (minutes on a few thousand articles: a softmax over one label per article)."""
    counts = Counter(labels)
    median = float(np.median(list(counts.values()))) if counts else 0.0
    if len(counts) > FASTTEXT_MAX_LABELS:
        return False, (
            f"{len(counts)} intents (more than {FASTTEXT_MAX_LABELS}) with a median of "
            f"{median:g} examples each; BM25 and BERT match the KB directly"
        )
    if counts and max(counts.values()) < 2:
        return False, (
            f"{len(counts)} intents of one text each: held out, none could be learnt from the "
            "others; BM25 and BERT match the KB directly until an intent has two texts (an "
            "alternate question or a taught example)"
        )
    return True, f"trained on {len(labels)} examples of {len(counts)} intents (median {median:g})"


def intent_results(fasttext: Tier | None, queries: Sequence[str]) -> list[TierResult]:
    """FastText's view of each query (an empty one when there is no intent tier)."""
    if fasttext is None:
        return [TierResult(tier="fasttext") for _ in queries]
    return [fasttext.run(q, k=TOP_K) for q in queries]


def fit_fasttext(
    data: TrainingData,
    plan: HeldOutPlan,
    *,
    seed: int,
    note: Callable[[str], None],
    keep_models: bool = False,
) -> FastTextFit:
    """One FastText model per fold (grid chosen on the first), asked the fold's held-out
    queries; ``note`` reports progress. ``keep_models``: keep every fold's model (to route
    with it again), not only the one that serves."""
    active, reason = fasttext_plan(data.labels)
    if not active:
        results = [intent_results(None, plan.queries(n)[0]) for n in range(len(plan.folds))]
        return FastTextFit(False, reason, results, [None] * len(plan.folds), None, None)
    results: list[list[TierResult]] = []
    models: list[FastTextIntent | None] = []
    params = metrics = None
    for number, fold in enumerate(plan.folds):
        fit_texts = [plan.texts[i] for i in fold.fit]
        fit_labels = [plan.labels[i] for i in fold.fit]
        if params is None:
            held_texts = [plan.texts[i] for i in fold.held]
            held_labels = [plan.labels[i] for i in fold.held]
            model = FastTextIntent.select(
                fit_texts, fit_labels, held_texts, held_labels, seed=seed, progress=note
            )
            params, metrics = model.metrics["chosen"], model.metrics
        else:
            model = FastTextIntent.train(fit_texts, fit_labels, seed=seed, **params)
        results.append(intent_results(model, plan.queries(number)[0]))
        serves = number == 0 and not plan.refit
        models.append(model if keep_models or serves else None)
        del model
    return FastTextFit(True, reason, results, models, params, metrics)


def fit_bert(
    data: TrainingData,
    plan: HeldOutPlan,
    *,
    bert_path: str | Path | None,
    quantize: bool,
    seed: int,
    fine_tune_epochs: int,
    progress: bool,
    step: Callable[[str], None],
) -> BertFit:
    """One BERT tier per fold; ``step`` is called after each."""
    from app.nlp.bert import BertTier, Encoder, resolve_bert_path

    encoder = vectors = None
    if plan.shared_encoder:
        encoder = Encoder(resolve_bert_path(bert_path), quantize=False)
        vectors = encoder.encode(plan.texts, progress=progress)
    embedded: dict[str, np.ndarray] = {}
    models = []
    for number, fold in enumerate(plan.folds):
        bert = BertTier.train(
            [plan.texts[i] for i in fold.fit],
            [plan.labels[i] for i in fold.fit],
            [],
            bert_path=bert_path,
            quantize=quantize,
            progress=progress and not plan.shared_encoder,
            seed=seed,
            fine_tune_epochs=0 if plan.shared_encoder else fine_tune_epochs,
            encoder=encoder,
            vectors=None if vectors is None else vectors[fold.fit],
        )
        bert.set_kb(kb_entries(data.articles, plan.held_texts(number)), known=embedded)
        embedded.update(bert.kb_vectors)
        models.append(bert)
        step(f"bert, fold {number + 1}/{len(plan.folds)}" if len(plan.folds) > 1 else "bert")
    return BertFit(models, encoder, vectors)
