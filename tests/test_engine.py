"""The engine (app/nlp/engine.py) answers with the current model version, hot-swaps a new one
or a KB change without a restart, keeps spare-capacity escalations out of its answer cache, and
says why it is not ready without models."""

from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.models import Article
from app.nlp.capacity import SpareReview
from app.nlp.store import MANIFEST, activate, current_version, version_folder
from app.nlp.thresholds import Thresholds
from app.services import ENGINE_KEY
from app.state import MODEL_REVISION, get_revision


@pytest.mark.slow
def test_engine_answers_and_hot_swaps_a_new_version(trained_app):
    engine = trained_app.extensions[ENGINE_KEY]
    assert engine.ready, engine.not_ready_reason
    with session_scope(trained_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        article = session.scalars(select(Article).order_by(Article.slug)).first()
        question = (article.questions or [article.title])[0]
    decision = engine.answer(question)
    assert decision.article is not None
    assert decision.trace["versions"]["models"] == engine.model_version
    assert engine.answer(question).trace["cache"] == "hit"

    # A second version with a different operating point, activated as a rollback would be.
    models_dir = trained_app.config["MODELS_DIR"]
    old = current_version(models_dir)
    new = old + "-b"
    shutil.copytree(version_folder(models_dir, old), version_folder(models_dir, new))
    thresholds = Thresholds.load(version_folder(models_dir, new) / "thresholds.json")
    thresholds.tau_review = 0.99
    thresholds.save(version_folder(models_dir, new) / "thresholds.json")
    manifest_path = version_folder(models_dir, new) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["version"] = new
    manifest_path.write_text(json.dumps(manifest))
    url = trained_app.config["SQLALCHEMY_DATABASE_URI"]
    activate(models_dir, new, url)
    with session_scope(url) as session:
        assert get_revision(session, MODEL_REVISION) >= 1

    old_router = engine.router
    assert old_router.spare is None  # spare review capacity is opt-in
    assert engine.check_for_updates(wait=True)
    assert engine.router is not old_router
    assert engine.model_version == new
    swapped = engine.answer(question)
    assert swapped.trace["thresholds"]["tau_review"] == 0.99
    assert swapped.trace["cache"] == "miss"  # the cache is keyed by versions


@pytest.mark.slow
def test_spare_capacity_escalations_are_not_cached(trained_app):
    engine = trained_app.extensions[ENGINE_KEY]
    assert engine.ready, engine.not_ready_reason
    with session_scope(trained_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        article = session.scalars(select(Article).order_by(Article.slug.desc())).first()
        question = (article.questions or [article.title])[0]
    probe = engine.router.route(question)  # straight to the router: nothing cached yet
    assert not probe.escalate, probe.escalation_reason  # confident enough to answer
    # Capacity for exactly one spare review, and a threshold over any confidence below 1.
    spare = SpareReview(0.5, min_seen=2, window=2, refresh=1)
    spare.record(1.0, False)
    spare.record(1.0, False)
    engine.router.spare = spare
    first = engine.answer(question)
    assert first.escalation_reason == "spare_capacity"
    again = engine.answer(question)
    assert again.trace["cache"] == "miss"  # not replayed from the cache
    assert not again.escalate  # the allowance was spent: answered as tuned
    assert engine.answer(question).trace["cache"] == "hit"  # that answer is cached as usual


@pytest.mark.slow
def test_engine_picks_up_a_kb_import(trained_app, tmp_path):
    from app.kb.importer import import_paths

    engine = trained_app.extensions[ENGINE_KEY]
    assert engine.ready
    kb_revision_before = engine.revisions[0]
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "parrot.md").write_text(
        "---\ntitle: Can I bring my parrot to the branch?\nslug: parrot-policy\n"
        "questions:\n  - Are parrots allowed in your branches?\n"
        "  - May I come in with my pet bird?\n  - Do you let birds into the bank?\n---\n"
        "Assistance animals only, sorry.\n"
    )
    with session_scope(trained_app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        import_paths(session, [tmp_path / "new"])
    assert engine.check_for_updates(wait=True)
    assert engine.revisions[0] > kb_revision_before
    slugs = {doc.slug for doc in engine.router.m.bm25.docs}
    assert "parrot-policy" in slugs
    decision = engine.answer("are parrots allowed in your branches")
    candidates = [c["slug"] for s in decision.trace["stages"].values() for c in s["candidates"]]
    assert "parrot-policy" in candidates


@pytest.mark.slow
def test_engine_not_ready_without_models(app):
    engine = app.extensions[ENGINE_KEY]
    engine.load()
    assert not engine.ready
    assert "tierdesk train" in engine.not_ready_reason
