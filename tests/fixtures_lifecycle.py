"""Fixtures of the model lifecycle tests, shared through pytest_plugins.

- ``two_versions(models_dir)``: the session's trained version and a second one made from it
  with ``tau_review`` 0.9999 (it escalates almost everything: a canary customers would notice),
  both on disk in ``models_dir``; returns their names.
- ``lifecycle_app``: ``trained_app`` with both versions in the registry (the trained one
  active, the other a candidate) and the engine reloaded from the registry's plan.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.db import session_scope
from app.nlp import registry
from app.nlp.store import MANIFEST, current_version, version_folder
from app.nlp.thresholds import THRESHOLDS_FILE, Thresholds
from app.vocab import ModelStatus


def make_strict_copy(models_dir: Path, version: str, new: str, tau_review: float = 0.9999) -> str:
    """A copy of ``version`` under the name ``new`` whose router escalates under ``tau_review``."""
    source = version_folder(models_dir, version).resolve()
    target = version_folder(models_dir, new)
    shutil.copytree(source, target)
    thresholds = Thresholds.load(target / THRESHOLDS_FILE)
    thresholds.tau_review = tau_review
    thresholds.save(target / THRESHOLDS_FILE)
    manifest = json.loads((target / MANIFEST).read_text())
    manifest.update(version=new, trained_at=manifest["trained_at"].replace("Z", ".5Z"))
    (target / MANIFEST).write_text(json.dumps(manifest))
    return new


@pytest.fixture
def lifecycle_app(trained_app):
    from app.services import ENGINE_KEY

    url = trained_app.config["SQLALCHEMY_DATABASE_URI"]
    models_dir = Path(trained_app.config["MODELS_DIR"])
    v1 = current_version(models_dir)
    v2 = make_strict_copy(models_dir, v1, v1 + "-strict")
    with session_scope(url) as session:
        registry.register(session, models_dir, v1, status=ModelStatus.ACTIVE)
        registry.register(session, models_dir, v2)
    engine = trained_app.extensions[ENGINE_KEY]
    engine.check_for_updates(wait=True)
    assert engine.ready and engine.model_version == v1, engine.not_ready_reason
    trained_app.versions = (v1, v2)
    return trained_app
