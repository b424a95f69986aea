"""The version store on disk: folders, the current pointer, digests, packing and pruning."""

from __future__ import annotations

import json
import os

import pytest

from app.nlp import store
from app.nlp.store import (
    MANIFEST,
    StoreError,
    activate,
    current_version,
    digest,
    list_versions,
    pack,
    prune_versions,
    read_manifest,
    unpack,
    version_folder,
)


def fake_version(models_dir, version: str, trained_at: str, payload: bytes = b"weights") -> None:
    folder = version_folder(models_dir, version)
    (folder / "bert").mkdir(parents=True)
    (folder / "bert" / "head.safetensors").write_bytes(payload)
    (folder / MANIFEST).write_text(json.dumps({"version": version, "trained_at": trained_at}))


def test_list_versions_newest_first_and_skips_folders_being_written(tmp_path):
    fake_version(tmp_path, "v1", "2026-01-01T00:00:00Z")
    fake_version(tmp_path, "v2", "2026-02-01T00:00:00Z")
    (version_folder(tmp_path, ".v3-staging")).mkdir()
    (version_folder(tmp_path, "broken")).mkdir()
    (version_folder(tmp_path, "broken") / MANIFEST).write_text("{not json")
    assert [m["version"] for m in list_versions(tmp_path)] == ["v2", "v1"]
    with pytest.raises(StoreError, match=r"broken.*manifest.json:1: not valid JSON"):
        read_manifest(tmp_path, "broken")
    with pytest.raises(StoreError, match="no model version 'v9'"):
        read_manifest(tmp_path, "v9")


def test_prune_keeps_current_and_protected_versions(tmp_path):
    for i in range(1, 6):
        fake_version(tmp_path, f"v{i}", f"2026-0{i}-01T00:00:00Z")
    activate(tmp_path, "v1")
    removed = prune_versions(tmp_path, keep=2, protect=["v2"])
    assert sorted(removed) == ["v3"]
    assert [m["version"] for m in list_versions(tmp_path)] == ["v5", "v4", "v2", "v1"]
    assert current_version(tmp_path) == "v1"


def test_digest_covers_names_and_bytes(tmp_path):
    fake_version(tmp_path, "v1", "2026-01-01T00:00:00Z")
    folder = version_folder(tmp_path, "v1")
    first = digest(folder)
    assert first == digest(folder)
    (folder / "bert" / "head.safetensors").write_bytes(b"weightz")
    assert digest(folder) != first
    (folder / "bert" / "head.safetensors").write_bytes(b"weights")
    (folder / "bert" / "head.safetensors").rename(folder / "bert" / "other.safetensors")
    assert digest(folder) != first  # same bytes under another name


def test_pack_unpack_round_trip_and_refuses_a_wrong_digest(tmp_path):
    source, target = tmp_path / "a", tmp_path / "b"
    fake_version(source, "v1", "2026-01-01T00:00:00Z", payload=os.urandom(100_000))
    folder = version_folder(source, "v1")
    packed = pack(folder)
    installed = unpack(target, "v1", packed, digest(folder))
    assert digest(installed) == digest(folder)
    assert read_manifest(target, "v1")["version"] == "v1"

    with pytest.raises(StoreError, match="registry says"):
        unpack(target / "other", "v1", packed, "0" * 64)
    assert not store.version_present(target / "other", "v1")
    assert not list((target / "other" / store.VERSIONS_DIR).iterdir())  # no staging left over
    with pytest.raises(StoreError, match="unreadable artifacts"):
        unpack(target / "other", "v1", b"not a tar", digest(folder))
