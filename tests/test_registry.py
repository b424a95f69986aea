"""The model registry on SQLite and PostgreSQL: statuses, history, the artifacts store that a
second host fetches from, and the `tierdesk models` commands."""

from __future__ import annotations

import json
import os

import pytest
from sqlalchemy import inspect
from test_store import fake_version

from app import migrate
from app.db import get_engine, session_scope
from app.nlp import registry
from app.nlp.registry import RegistryError, ServingPlan
from app.nlp.store import digest, version_folder, version_present
from app.state import MODEL_REVISION, get_revision
from app.vocab import ModelStatus


def register(url, models_dir, version, trained_at, status=ModelStatus.CANDIDATE, **manifest):
    fake_version(models_dir, version, trained_at, payload=os.urandom(64_000))
    path = version_folder(models_dir, version) / "manifest.json"
    path.write_text(
        json.dumps(
            {"version": version, "trained_at": trained_at, "data_hash": "ab" * 32, **manifest}
        )
    )
    with session_scope(url) as session:
        registry.register(session, models_dir, version, status=status)


def plan(url) -> ServingPlan | None:
    with session_scope(url) as session:
        return registry.serving_plan(session)


def statuses(url) -> dict[str, str]:
    with session_scope(url) as session:
        return {r.version: r.status for r in registry.all_versions(session)}


def test_lifecycle_moves_and_history(any_db_url, tmp_path):
    url, models = any_db_url, tmp_path / "models"
    register(url, models, "v1", "2026-01-01T00:00:00Z", ModelStatus.ACTIVE)
    register(url, models, "v2", "2026-02-01T00:00:00Z")
    assert plan(url) == ServingPlan(active="v1")
    with session_scope(url) as session:
        revision = get_revision(session, MODEL_REVISION)
        assert registry.promote(session, "v2", share=0.3).status == ModelStatus.SHADOW
    assert plan(url) == ServingPlan(active="v1", shadow="v2", shadow_sample=0.3)
    with session_scope(url) as session:
        assert get_revision(session, MODEL_REVISION) == revision + 1  # every worker reloads
        registry.promote(session, "v2", share=0.1)
    assert plan(url) == ServingPlan(active="v1", canary="v2", canary_share=0.1)
    with session_scope(url) as session:
        registry.promote(session, "v2")
    assert plan(url) == ServingPlan(active="v2")
    assert statuses(url) == {"v1": "retired", "v2": "active"}
    with session_scope(url) as session:
        assert registry.rollback(session).version == "v1"
    assert plan(url) == ServingPlan(active="v1")
    assert statuses(url) == {"v1": "active", "v2": "retired"}
    with session_scope(url) as session:
        moves = [(e.from_status, e.to_status) for e in reversed(registry.history(session, "v2"))]
        reasons = [e.reason for e in registry.history(session, "v2")]
    assert moves == [
        (None, "candidate"),
        ("candidate", "shadow"),
        ("shadow", "canary"),
        ("canary", "active"),
        ("active", "retired"),
    ]
    assert reasons[0] == "rolled back by v1"


def test_refused_moves_say_why(db_url, tmp_path):
    url, models = db_url, tmp_path / "models"
    register(url, models, "v1", "2026-01-01T00:00:00Z", ModelStatus.ACTIVE)
    register(url, models, "v2", "2026-02-01T00:00:00Z")
    register(url, models, "v3", "2026-03-01T00:00:00Z")

    def refused(action, *args, match, **kwargs):
        with pytest.raises(RegistryError, match=match), session_scope(url) as session:
            action(session, *args, **kwargs)

    refused(registry.promote, "v9", match="no registered model version 'v9'")
    refused(registry.promote, "v1", match="already active")
    refused(registry.retire, "v1", match="is active")
    refused(registry.rollback, match="no earlier active version")
    refused(registry.promote, "v2", to=ModelStatus.CANARY, share=0.0, match=r"share must be in")
    with session_scope(url) as session:
        registry.promote(session, "v2", to=ModelStatus.CANARY)
    refused(registry.promote, "v3", to=ModelStatus.CANARY, match="v2 is already the canary")
    with session_scope(url) as session:
        registry.retire(session, "v2", reason="bad answers")
    refused(registry.retire, "v2", match="already retired")
    refused(registry.promote, "v2", match="say where with --to")
    assert plan(url) == ServingPlan(active="v1")


def test_a_second_host_fetches_and_verifies_the_artifacts(any_db_url, tmp_path):
    url = any_db_url
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    register(url, host_a, "v1", "2026-01-01T00:00:00Z", ModelStatus.ACTIVE)
    registry.CHUNK_BYTES, chunk = 10_000, registry.CHUNK_BYTES  # several chunks
    try:
        register(url, host_a, "v2", "2026-02-01T00:00:00Z")
    finally:
        registry.CHUNK_BYTES = chunk
    with session_scope(url) as session:
        assert registry.artifact_bytes(session, "v2") > 60_000
        folder = registry.ensure_local(session, host_b, "v2")
    assert digest(folder) == digest(version_folder(host_a, "v2"))

    # A local copy that does not match the published digest is replaced, not served.
    (folder / "bert" / "head.safetensors").write_bytes(b"tampered")
    with session_scope(url) as session:
        registry.ensure_local(session, host_b, "v2")
    assert digest(folder) == digest(version_folder(host_a, "v2"))

    # Altered artifacts in the store are refused and nothing is installed.
    with get_engine(url).begin() as conn:
        conn.exec_driver_sql(
            "UPDATE model_versions SET digest = %s WHERE version = 'v1'"
            if url.startswith("postgresql")
            else "UPDATE model_versions SET digest = ? WHERE version = 'v1'",
            ("f" * 64,),
        )
    with pytest.raises(Exception, match="registry says"), session_scope(url) as session:
        registry.ensure_local(session, host_b, "v1")
    assert not version_present(host_b, "v1")


def test_diff_lists_changed_manifest_fields(db_url, tmp_path):
    models = tmp_path / "models"
    register(
        db_url, models, "v1", "2026-01-01T00:00:00Z", metrics={"router": {"val_accuracy": 0.9}}
    )
    register(
        db_url, models, "v2", "2026-02-01T00:00:00Z", metrics={"router": {"val_accuracy": 0.92}}
    )
    with session_scope(db_url) as session:
        changes = registry.diff(registry.get(session, "v1"), registry.get(session, "v2"))
    assert changes == [
        ("metrics.router.val_accuracy", 0.9, 0.92),
        ("trained_at", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"),
    ]


def test_models_commands(app, tmp_path):
    from app.cli import main

    url, models = app.config["SQLALCHEMY_DATABASE_URI"], app.config["MODELS_DIR"]
    register(url, models, "v1", "2026-01-01T00:00:00Z", ModelStatus.ACTIVE)
    register(url, models, "v2", "2026-02-01T00:00:00Z")
    fake_version(models, "v0", "2025-12-01T00:00:00Z")  # on disk only, from before the registry
    runner = app.test_cli_runner()

    def run(*args):
        result = runner.invoke(main, ["models", *args])
        return result.exit_code, result.output

    code, out = run("list")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("  v2  candidate") and lines[1].startswith("* v1  active")
    assert lines[2].startswith("  v0  local")
    assert run("promote", "v2", "--to", "canary", "--share", "0.25") == (
        0,
        "v2 is now canary on 25%\n",
    )
    code, out = run("list")
    assert "v2  canary 25%" in out
    code, out = run("show", "v2")
    assert code == 0, out
    assert "status      canary 25%" in out and "candidate -> canary 25%" in out
    assert "live        0 answers" in out
    code, out = run("diff", "v1", "v2")
    assert code == 0 and "trained_at" in out
    assert run("promote", "v2")[0] == 0
    code, out = run("rollback", "--reason", "customers unhappy")
    assert (code, out) == (0, "rolled back: v1 is active\n")
    code, out = run("show", "v2")
    assert "active -> retired" in out and "rolled back by v1" in out
    code, out = run("retire", "v2")
    assert code != 0 and "already retired" in out
    code, out = run("show", "nope")
    assert code != 0 and "no registered model version 'nope'" in out
    code, out = run("list", "--json")
    assert json.loads(out.splitlines()[1]) == {
        "version": "v1",
        "status": "active",
        "share": 1.0,
        "trained_at": "2026-01-01T00:00:00Z",
        "val_accuracy": None,
    }
    assert run("check") == (0, "no canary\n")


def test_migration_0004_goes_down_and_up(any_db_url):
    tables = {"model_versions", "model_events", "model_artifacts", "shadow_comparisons"}
    assert tables <= set(inspect(get_engine(any_db_url)).get_table_names())
    migrate.downgrade(any_db_url, "0001")
    get_engine(any_db_url).dispose()
    assert not tables & set(inspect(get_engine(any_db_url)).get_table_names())
    migrate.upgrade(any_db_url)
    get_engine(any_db_url).dispose()
    assert tables <= set(inspect(get_engine(any_db_url)).get_table_names())
