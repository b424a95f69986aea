"""Stage 8, refit: the models that serve, trained on all the data with the hyper-parameters
the held-out folds chose.

FastText is retrained with the chosen grid cell and the BERT head on every example; the
encoder stays the one fine-tuned on the fit part (a second fine-tune on all the data doubles
the training time for no held-out gain) or the shared frozen one. Both tiers index the whole
KB. With a given validation set nothing is refit: the first fold's models serve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.nlp.intent import FastTextIntent
from app.nlp.pipeline.data import TrainingData
from app.nlp.pipeline.fit import BertFit, FastTextFit
from app.nlp.pipeline.kb import kb_entries
from app.nlp.pipeline.splits import HeldOutPlan

if TYPE_CHECKING:
    from app.nlp.bert import BertTier


@dataclass(frozen=True)
class ServingModels:
    fasttext: FastTextIntent | None  # None when the data are too thin for an intent tier
    bert: BertTier


def refit(
    data: TrainingData,
    plan: HeldOutPlan,
    fasttext: FastTextFit,
    bert: BertFit,
    *,
    bert_path: str | Path | None,
    quantize: bool,
    seed: int,
    progress: bool,
    step: Callable[[str], None],
) -> ServingModels:
    from app.nlp.bert import BertTier

    entries = kb_entries(data.articles)
    first = bert.models[0]
    if not plan.refit:
        return ServingModels(fasttext.models[0], _serving(first.with_kb(entries)))
    ft = None
    if fasttext.active:
        ft = FastTextIntent.train(data.texts, data.labels, seed=seed, **fasttext.params)
        ft.metrics = fasttext.metrics
    step("fasttext (all data)")
    head = BertTier.train(
        data.texts,
        data.labels,
        [],
        bert_path=bert_path,
        quantize=quantize,
        progress=progress,
        seed=seed,
        encoder=bert.encoder if plan.shared_encoder else first.training_encoder,
        vectors=bert.vectors,
    )
    step("bert (all data)")
    return ServingModels(ft, _serving(head.with_kb(entries, reuse_from=first)))


def _serving(bert: BertTier) -> BertTier:
    bert.training_encoder = None  # the fp32 copy is only needed while training
    return bert
