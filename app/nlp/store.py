"""The store of trained model versions on this host's disk, and the typed loaded version.

Layout of ``TIERDESK_MODELS_DIR``::

    versions/<version>/      one complete version (written under a temp name, then renamed)
        manifest.json        version, trained_at, data_hash, metrics, tiers_active, ...
        fasttext/            the intent tier (absent when the data were too thin for one)
        bert/                BERT head, KB vectors (and fine-tuned encoder weights)
        calibration.json     the two calibrators
        thresholds.json      the tuned thresholds
        tiers.json           derived tiers per intent
    current                  {"version": ...}: the version this host serves without a registry
    thresholds.json          optional override written by ``tierdesk tune``

A version folder is immutable once renamed into place; its ``digest`` (SHA-256 over every
file's relative path and bytes) is what the registry publishes and another host verifies after
fetching the packed folder (``pack`` / ``unpack``).

``load_version`` reads one folder into a ``LoadedVersion``: FastText, BERT, calibration,
thresholds, tiers and manifest as one typed object, which the engine builds routers from.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.files import write_json_atomic
from app.nlp.thresholds import THRESHOLDS_FILE, Thresholds

if TYPE_CHECKING:
    from app.nlp.calibration import CalibrationSet
    from app.nlp.intent import FastTextIntent
    from app.nlp.training import TrainedModels, TrainingData

log = logging.getLogger(__name__)

CURRENT_POINTER = "current"
VERSIONS_DIR = "versions"
MANIFEST = "manifest.json"
CALIBRATION_FILE = "calibration.json"
TIERS_FILE = "tiers.json"
FASTTEXT_DIR = "fasttext"
BERT_DIR = "bert"
KEEP_VERSIONS = 5
DIGEST_BLOCK = 1 << 20


class StoreError(RuntimeError):
    """A version is missing, incomplete or does not match its published digest."""


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- folders -----------------------------------------------------------------------------


def current_version(models_dir: str | Path) -> str | None:
    pointer = Path(models_dir) / CURRENT_POINTER
    try:
        return json.loads(pointer.read_text())["version"]
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, KeyError, TypeError):
        return None


def version_folder(models_dir: str | Path, version: str) -> Path:
    return Path(models_dir) / VERSIONS_DIR / version


def version_present(models_dir: str | Path, version: str) -> bool:
    return (version_folder(models_dir, version) / MANIFEST).is_file()


def models_present(models_dir: str | Path) -> bool:
    """True when ``models/current`` names a complete version folder."""
    version = current_version(models_dir)
    return bool(version) and version_present(models_dir, version)


def read_manifest(models_dir: str | Path, version: str) -> dict:
    path = version_folder(models_dir, version) / MANIFEST
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise StoreError(f"no model version {version!r} in {path.parent.parent}") from None
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None


def list_versions(models_dir: str | Path) -> list[dict]:
    """Manifests of every saved version, newest first."""
    root = Path(models_dir) / VERSIONS_DIR
    manifests = []
    for folder in root.iterdir() if root.is_dir() else []:
        if folder.name.startswith("."):
            continue  # a version being written or unpacked
        try:
            manifests.append(json.loads((folder / MANIFEST).read_text()))
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            continue
    return sorted(manifests, key=lambda m: m.get("trained_at", ""), reverse=True)


def activate(models_dir: str | Path, version: str, db_url: str | None = None) -> None:
    """Point ``models/current`` at ``version`` (atomically) and tell running servers."""
    if not version_present(models_dir, version):
        raise StoreError(f"no model version {version!r} in {Path(models_dir) / VERSIONS_DIR}")
    write_json_atomic(
        Path(models_dir) / CURRENT_POINTER, {"version": version, "activated_at": now_iso()}
    )
    if db_url:
        from app.db import session_scope
        from app.state import MODEL_REVISION, bump_revision

        with session_scope(db_url) as session:
            bump_revision(session, MODEL_REVISION)


def save_version(
    models_dir: str | Path,
    trained: TrainedModels,
    data: TrainingData,
    extra: dict[str, Any] | None = None,
) -> str:
    """Write a complete version folder (under a temp name, renamed when complete).

    ``extra`` goes into the manifest as well (``tierdesk distill`` records its sources there).
    """
    root = Path(models_dir) / VERSIONS_DIR
    root.mkdir(parents=True, exist_ok=True)
    data_hash = data.data_hash()
    version = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + data_hash[:8]
    if (root / version).exists():  # two versions of the same data in one second
        version += "-" + os.urandom(2).hex()
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{version}-"))
    if trained.fasttext is not None:
        trained.fasttext.save(staging / FASTTEXT_DIR)
    trained.bert.save(staging / BERT_DIR)
    trained.calibration.save(staging / CALIBRATION_FILE)
    trained.thresholds.save(staging / THRESHOLDS_FILE)
    (staging / TIERS_FILE).write_text(json.dumps(trained.tiers, indent=2, sort_keys=True))
    manifest = {
        "version": version,
        "trained_at": now_iso(),
        "data_hash": data_hash,
        "train_seconds": trained.train_seconds,
        "metrics": trained.metrics,
        "fasttext_version": trained.fasttext.version if trained.fasttext else None,
        "tiers_active": trained.metrics.get("tiers_active"),
        "bert_version": getattr(trained.bert, "version", None),
        "n_articles": len(data.articles),
        **(extra or {}),
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    os.replace(staging, root / version)
    return version


def prune_versions(
    models_dir: str | Path, keep: int = KEEP_VERSIONS, protect: Iterable[str] = ()
) -> list[str]:
    """Delete all but the ``keep`` newest versions (never the current one nor ``protect``:
    the versions the registry serves as active, canary or shadow)."""
    spared = {current_version(models_dir), *protect}
    removed = []
    for manifest in list_versions(models_dir)[keep:]:
        if manifest["version"] not in spared:
            shutil.rmtree(version_folder(models_dir, manifest["version"]), ignore_errors=True)
            removed.append(manifest["version"])
    return removed


# -- digests and packing (the shared store moves these bytes) -----------------------------


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".tmp"))


def digest(folder: str | Path) -> str:
    """SHA-256 over every file of a version folder (relative path, size, bytes), in order."""
    folder = Path(folder)
    h = hashlib.sha256()
    for path in _files(folder):
        rel = path.relative_to(folder).as_posix()
        h.update(f"{rel}\0{path.stat().st_size}\0".encode())
        with path.open("rb") as f:
            while block := f.read(DIGEST_BLOCK):
                h.update(block)
    return h.hexdigest()


def pack(folder: str | Path) -> bytes:
    """The version folder as an uncompressed tar (the weights do not compress)."""
    folder = Path(folder)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in _files(folder):
            tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return buffer.getvalue()


def unpack(models_dir: str | Path, version: str, data: bytes, expected_digest: str) -> Path:
    """Write a packed version into ``versions/<version>`` if its digest is ``expected_digest``.

    Extracted under a temp name, verified, then renamed into place: a host never serves a
    half-fetched or altered version. Raises StoreError on a mismatch (nothing is kept).
    """
    root = Path(models_dir) / VERSIONS_DIR
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{version}-fetch-"))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            tar.extractall(staging, filter="data")
        got = digest(staging)
        if got != expected_digest:
            raise StoreError(
                f"version {version}: fetched artifacts hash {got[:12]}, registry says "
                f"{expected_digest[:12]}; not installed"
            )
        final = root / version
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
        return final
    except (tarfile.TarError, OSError) as exc:
        raise StoreError(f"version {version}: unreadable artifacts: {exc}") from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


# -- one loaded version ------------------------------------------------------------------


@dataclass
class LoadedVersion:
    """A version's models in memory; routers are built from it (shared, never mutated by a
    request: the BERT tier gets a KB-indexed copy per router)."""

    version: str
    folder: Path
    manifest: dict
    fasttext: FastTextIntent | None  # None: trained without an intent tier
    bert: Any  # app.nlp.bert.BertTier, or None when it failed to load
    bert_error: str | None
    calibration: CalibrationSet
    thresholds: Thresholds  # the version's own (``models/thresholds.json`` may override)
    tiers: dict

    @property
    def trained_at(self) -> str | None:
        return self.manifest.get("trained_at")


def load_version(
    models_dir: str | Path,
    version: str,
    *,
    bert_path: str | Path | None = None,
    quantize: bool = True,
) -> LoadedVersion:
    """Read ``versions/<version>``; BERT failing to load leaves ``bert`` None (degraded)."""
    from app.nlp.calibration import CalibrationSet
    from app.nlp.intent import FastTextIntent

    folder = version_folder(models_dir, version)
    manifest = read_manifest(models_dir, version)
    bert, bert_error = None, None
    try:
        from app.nlp.bert import BertTier

        bert = BertTier.load(folder / BERT_DIR, bert_path=bert_path, quantize=quantize)
    except Exception as exc:  # noqa: BLE001 - degrade to the fast tier
        bert_error = f"{type(exc).__name__}: {exc}"
        log.exception("BERT tier of %s failed to load; serving it in degraded mode", version)
    return LoadedVersion(
        version=version,
        folder=folder,
        manifest=manifest,
        fasttext=FastTextIntent.load(folder / FASTTEXT_DIR)
        if (folder / FASTTEXT_DIR).is_dir()
        else None,
        bert=bert,
        bert_error=bert_error,
        calibration=CalibrationSet.load(folder / CALIBRATION_FILE),
        thresholds=Thresholds.load(folder / THRESHOLDS_FILE),
        tiers=json.loads((folder / TIERS_FILE).read_text()),
    )
