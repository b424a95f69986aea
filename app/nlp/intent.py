"""The intent tier: a FastText supervised classifier with comparable (softmax) probabilities.

Softmax loss rather than hierarchical softmax or one-vs-all: the router compares the top-1
probability and the top-1/top-2 margin against thresholds, which only makes sense when the
probabilities of one query sum to one. Character n-grams (``minn``/``maxn``) absorb typos,
word bigrams keep short phrases ("top up" versus "top").

Predictions go through ``model.f.predict`` because fasttext-wheel's ``model.predict`` calls
``np.array(..., copy=False)``, which NumPy 2 rejects.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import fasttext

from app.nlp.normalize import normalize
from app.nlp.types import TierResult

LABEL_PREFIX = "__label__"
MODEL_FILE = "fasttext.bin"
META_FILE = "fasttext.json"

# Punctuation becomes its own token, so "card?" and "card" share a word vector.
_PUNCT_RE = re.compile(r"([^\w\s'])")
_SPACES_RE = re.compile(r"\s+")


def fasttext_input(text: str) -> str:
    """The text FastText sees: normalised, punctuation split off, one line."""
    text = _PUNCT_RE.sub(r" \1 ", normalize(text))
    return _SPACES_RE.sub(" ", text).strip()


@dataclass
class FastTextParams:
    """Training hyper-parameters; ``train_tuned`` picks epoch/lr/dim on a held-out split."""

    epoch: int = 40
    lr: float = 0.5
    dim: int = 100
    word_ngrams: int = 2
    minn: int = 3
    maxn: int = 5
    bucket: int = 200_000
    min_count: int = 1
    seed: int = 0

    def fasttext_kwargs(self) -> dict:
        return {
            "epoch": self.epoch,
            "lr": self.lr,
            "dim": self.dim,
            "wordNgrams": self.word_ngrams,
            "minn": self.minn,
            "maxn": self.maxn,
            "bucket": self.bucket,
            "minCount": self.min_count,
            "loss": "softmax",
            # One thread makes the result depend on the seed only (fasttext's Hogwild
            # updates are not deterministic across threads).
            "thread": 1,
            "seed": self.seed,
            "verbose": 0,
        }


# Small on purpose: each cell trains a model. dim 50 halves the cost of dim 100 for the same
# held-out accuracy on BANKING77 (measured: 89.3-90.0% across these cells, 10-20 s each).
DEFAULT_GRID: tuple[dict, ...] = (
    {"epoch": 25, "lr": 1.0, "dim": 50},
    {"epoch": 50, "lr": 0.5, "dim": 50},
)
# Small training sets need more passes to converge, and they are cheap.
SMALL_DATA_CELL = {"epoch": 100, "lr": 0.5, "dim": 50}
SMALL_DATA = 3000


def default_grid(n_examples: int) -> tuple[dict, ...]:
    return (*DEFAULT_GRID, SMALL_DATA_CELL) if n_examples <= SMALL_DATA else DEFAULT_GRID


def _label(name: str) -> str:
    return LABEL_PREFIX + name.replace(" ", "_")


def stratified_split(
    labels: Sequence[str], fraction: float, seed: int = 0
) -> tuple[list[int], list[int]]:
    """Indices (fit, held_out): ``fraction`` of every label held out, at least one kept to fit.

    Labels with a single example stay entirely in the fit part.
    """
    rng = random.Random(seed)
    by_label: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        by_label.setdefault(label, []).append(i)
    fit: list[int] = []
    held: list[int] = []
    for label in sorted(by_label):
        idx = by_label[label]
        rng.shuffle(idx)
        n_held = int(round(len(idx) * fraction)) if len(idx) > 1 else 0
        n_held = min(n_held, len(idx) - 1)
        held.extend(idx[:n_held])
        fit.extend(idx[n_held:])
    return sorted(fit), sorted(held)


class FastTextIntent:
    """A trained FastText intent classifier (tier ``fasttext``)."""

    def __init__(
        self,
        model,
        labels: list[str],
        params: FastTextParams,
        version: str,
        metrics: dict | None = None,
    ) -> None:
        self.model = model
        self.labels = labels  # intent names known to the model
        self.params = params
        self.version = version
        self.metrics = metrics or {}

    # -- training ---------------------------------------------------------------------------

    @classmethod
    def train(cls, texts: Sequence[str], labels: Sequence[str], **params) -> FastTextIntent:
        """Train on ``texts``/``labels`` with ``FastTextParams`` fields as keyword overrides."""
        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        if not texts:
            raise ValueError("no training examples")
        p = FastTextParams(**params)
        lines = [f"{_label(lab)} {fasttext_input(t)}" for t, lab in zip(texts, labels, strict=True)]
        rng = random.Random(p.seed)
        rng.shuffle(lines)  # fasttext reads in file order; interleave the intents
        fd, path = tempfile.mkstemp(suffix=".txt", prefix="tierdesk-ft-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
            model = _compact(fasttext.train_supervised(input=path, **p.fasttext_kwargs()))
        finally:
            os.unlink(path)
        names = sorted({lab.replace(" ", "_") for lab in labels})
        digest = hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:10]
        version = f"ft-{digest}-{p.epoch}e{p.dim}d"
        return cls(model, names, p, version)

    @classmethod
    def select(
        cls,
        fit_texts: Sequence[str],
        fit_labels: Sequence[str],
        val_texts: Sequence[str],
        val_labels: Sequence[str],
        *,
        grid: Sequence[dict] | None = None,
        seed: int = 0,
        progress=None,
    ) -> FastTextIntent:
        """Train one model per grid cell on the fit part; keep the best on the held-out part.

        The returned model's ``metrics["chosen"]`` holds the cell to refit on all data with.
        ``progress`` is an optional callable receiving a short status string per cell.
        """
        grid = list(grid or default_grid(len(fit_texts)))
        best, best_acc, results = None, -1.0, []
        for cell in grid:
            model = cls.train(fit_texts, fit_labels, seed=seed, **cell)
            acc = model.accuracy(val_texts, val_labels) if val_texts else 0.0
            results.append({**cell, "val_accuracy": round(acc, 4)})
            if progress:
                progress(f"fasttext {cell} held-out accuracy {acc:.3f}")
            if acc > best_acc + 1e-9:
                best, best_acc, best_cell = model, acc, dict(cell)
        best.metrics = {
            "val_accuracy": round(best_acc, 4) if val_texts else None,
            "grid": results,
            "chosen": best_cell,
            "n_train": len(fit_texts),
        }
        return best

    @classmethod
    def train_tuned(
        cls,
        texts: Sequence[str],
        labels: Sequence[str],
        *,
        grid: Sequence[dict] | None = None,
        val_fraction: float = 0.15,
        seed: int = 0,
        progress=None,
    ) -> FastTextIntent:
        """``select`` on a stratified split of the data, then refit the chosen cell on all."""
        fit, held = stratified_split(labels, val_fraction, seed)
        chosen = cls.select(
            [texts[i] for i in fit],
            [labels[i] for i in fit],
            [texts[i] for i in held],
            [labels[i] for i in held],
            grid=grid,
            seed=seed,
            progress=progress,
        ).metrics
        final = cls.train(texts, labels, seed=seed, **chosen["chosen"])
        final.metrics = {**chosen, "n_train": len(texts)}
        return final

    # -- prediction -------------------------------------------------------------------------

    def predict(self, query: str, k: int = 5) -> list[tuple[str, float]]:
        """Top-``k`` (intent, probability), best first."""
        line = fasttext_input(query)
        pairs = self.model.f.predict(line + "\n", k, 0.0, "strict")
        return [(label[len(LABEL_PREFIX) :], min(float(prob), 1.0)) for prob, label in pairs]

    def run(self, query: str, k: int = 5) -> TierResult:
        start = time.perf_counter()
        intents = self.predict(query, k)
        ms = (time.perf_counter() - start) * 1000
        confidence = intents[0][1] if intents else 0.0
        return TierResult(
            tier="fasttext",
            intents=intents,
            confidence=confidence,
            ms=ms,
            model_version=self.version,
        )

    def accuracy(self, texts: Sequence[str], labels: Sequence[str]) -> float:
        if not texts:
            return 0.0
        hits = sum(
            1
            for t, lab in zip(texts, labels, strict=True)
            if (self.predict(t, 1) or [("", 0)])[0][0] == lab.replace(" ", "_")
        )
        return hits / len(texts)

    def per_label_scores(self, texts: Sequence[str], labels: Sequence[str]) -> dict[str, dict]:
        """Precision, recall and support per intent on labelled data (for tier derivation)."""
        from app.nlp.tiers import label_scores

        predicted = [(self.predict(t, 1) or [("", 0.0)])[0][0] for t in texts]
        return label_scores(predicted, list(labels))

    # -- persistence ------------------------------------------------------------------------

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_model(str(folder / MODEL_FILE))
        meta = {
            "version": self.version,
            "labels": self.labels,
            "params": asdict(self.params),
            "metrics": self.metrics,
        }
        (folder / META_FILE).write_text(json.dumps(meta, indent=2))

    @classmethod
    def load(cls, folder: str | Path) -> FastTextIntent:
        folder = Path(folder)
        meta = json.loads((folder / META_FILE).read_text())
        model = _load_model(folder / MODEL_FILE)
        return cls(
            model,
            meta["labels"],
            FastTextParams(**meta["params"]),
            meta["version"],
            meta.get("metrics"),
        )


def _load_model(path: str | Path):
    # fasttext.load_model prints a warning on stderr for supervised models; silence-free
    # construction through the private class avoids it.
    return fasttext.FastText._FastText(model_path=str(path))


def _compact(model):
    """The same model, as loading it from disk builds it: a model fresh from training keeps
    the word hash table sized for fastText's largest vocabulary (30 million entries, 114 MiB)
    whatever its vocabulary, and loading sizes it to the words it has. Predictions are the
    same, at a third of the memory or less for every model a training holds (a grid's cells,
    a fold's model while it answers its held-out queries, the refit)."""
    fd, path = tempfile.mkstemp(suffix=".bin", prefix="tierdesk-ft-")
    os.close(fd)
    try:
        model.save_model(path)
        return _load_model(path)
    finally:
        os.unlink(path)
