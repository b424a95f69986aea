"""Training writes versioned models; the engine answers with them and hot-swaps new ones."""

from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import select

from app.db import session_scope
from app.models import Article
from app.nlp.capacity import SpareReview
from app.nlp.pipeline.data import generated_negatives, read_labelled_csv
from app.nlp.thresholds import Thresholds
from app.nlp.training import (
    CURRENT_POINTER,
    MANIFEST,
    TrainingError,
    activate,
    current_version,
    list_versions,
    models_present,
    version_folder,
)
from app.services import ENGINE_KEY
from app.state import MODEL_REVISION, get_revision


def test_models_present_needs_a_complete_current_version(tmp_path):
    assert not models_present(tmp_path)
    (tmp_path / CURRENT_POINTER).write_text(json.dumps({"version": "v1"}))
    assert not models_present(tmp_path)  # the pointer names a folder that does not exist
    version_folder(tmp_path, "v1").mkdir(parents=True)
    (version_folder(tmp_path, "v1") / MANIFEST).write_text("{}")
    assert models_present(tmp_path)


def test_activate_rejects_unknown_versions(tmp_path):
    with pytest.raises(TrainingError, match="no model version 'nope'"):
        activate(tmp_path, "nope")


def test_csv_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("text,category\nhello,greet\n,empty\n")
    with pytest.raises(TrainingError, match=r"bad.csv:3: empty text or category"):
        read_labelled_csv(path)
    path.write_text("sentence,label\nhello,greet\n")
    with pytest.raises(TrainingError, match=r"bad.csv:1: expected a header"):
        read_labelled_csv(path)


def test_generated_negatives_are_deterministic():
    assert generated_negatives(20, seed=1) == generated_negatives(20, seed=1)
    assert len(set(generated_negatives(60))) == 60


@pytest.mark.slow
def test_training_writes_a_versioned_folder(trained_models_dir):
    version = current_version(trained_models_dir)
    folder = version_folder(trained_models_dir, version)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["version"] == version
    assert len(manifest["data_hash"]) == 64
    assert manifest["trained_at"].endswith("Z")
    assert 0 < manifest["metrics"]["bert_val_accuracy"] <= 1
    for name in ("fasttext", "bert", "calibration.json", "thresholds.json", "tiers.json"):
        assert (folder / name).exists(), name
    thresholds = Thresholds.load(folder / "thresholds.json")
    assert "objective" in thresholds.provenance
    tiers = json.loads((folder / "tiers.json").read_text())
    assert set(tiers["effective"].values()) <= {"simple", "complex"}
    assert [m["version"] for m in list_versions(trained_models_dir)][0] == version


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


FAQ = {
    "opening-hours": (
        "When are you open?",
        [
            "what are your opening hours",
            "is the office open on saturday",
            "what time do you close",
            "when can I visit you",
        ],
    ),
    "lost-password": (
        "I forgot my password",
        [
            "how do I reset my password",
            "cannot log in, password forgotten",
            "password reset link",
            "I locked myself out of my account",
        ],
    ),
    "delivery-cost": (
        "How much is shipping?",
        [
            "what does delivery cost",
            "is shipping free",
            "shipping fees for my order",
            "how much do you charge to send a parcel",
        ],
    ),
}


@pytest.mark.slow
def test_faq_only_company_gets_a_working_bot(app, tmp_path):
    """Articles without categories, no intents: each article is its own intent."""
    from app.nlp.training import train_models

    url = app.config["SQLALCHEMY_DATABASE_URI"]
    with session_scope(url) as session:
        for slug, (title, questions) in FAQ.items():
            session.add(
                Article(slug=slug, title=title, body="See our help pages.", questions=questions)
            )
    config = dict(app.config)
    config["INTENTS_DIR"] = tmp_path / "no-intents"
    report = train_models(config, progress=False)
    assert report.n_intents == 3 and report.n_articles == 3
    assert models_present(app.config["MODELS_DIR"])
    engine = app.extensions[ENGINE_KEY]
    engine.load()
    assert engine.ready, engine.not_ready_reason
    assert engine.answer("when do you open on saturday").article.slug == "opening-hours"
    assert engine.answer("I forgot my password again").article.slug == "lost-password"


def test_models_cli_lists_and_rolls_back(app):
    from app.cli import main

    models_dir = app.config["MODELS_DIR"]
    for version, when in (("v1", "2026-01-01T00:00:00Z"), ("v2", "2026-02-01T00:00:00Z")):
        version_folder(models_dir, version).mkdir(parents=True)
        (version_folder(models_dir, version) / MANIFEST).write_text(
            json.dumps({"version": version, "trained_at": when, "data_hash": "ab" * 32})
        )
    activate(models_dir, "v2")
    runner = app.test_cli_runner()
    listed = runner.invoke(main, ["models", "list"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[0].startswith("* v2")
    rolled = runner.invoke(main, ["models", "activate", "v1"])
    assert rolled.exit_code == 0, rolled.output
    assert current_version(models_dir) == "v1"
    with session_scope(app.config["SQLALCHEMY_DATABASE_URI"]) as session:
        assert get_revision(session, MODEL_REVISION) == 1
    missing = runner.invoke(main, ["models", "activate", "v9"])
    assert missing.exit_code != 0 and "no model version 'v9'" in missing.output
