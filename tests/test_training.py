"""Training writes versioned models (the engine that serves them: test_engine.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from app.db import session_scope
from app.models import Article
from app.nlp.cli import TRAIN_SPIN_COUNT
from app.nlp.pipeline.data import generated_negatives, read_labelled_csv
from app.nlp.store import (
    CURRENT_POINTER,
    MANIFEST,
    StoreError,
    activate,
    current_version,
    list_versions,
    models_present,
    version_folder,
)
from app.nlp.thresholds import Thresholds
from app.nlp.training import TrainingError
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
    with pytest.raises(StoreError, match="no model version 'nope'"):
        activate(tmp_path, "nope")


def test_csv_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("text,category\nhello,greet\n,empty\n")
    with pytest.raises(TrainingError, match=r"bad.csv:3: empty text or category"):
        read_labelled_csv(path)
    path.write_text("sentence,label\nhello,greet\n")
    with pytest.raises(TrainingError, match=r"bad.csv:1: missing required column\(s\) text"):
        read_labelled_csv(path)
    # a spreadsheet's CSV: BOM, CRLF, the header in another case and `label` for category
    path.write_bytes("\ufeffText,Label\r\nhello,greet\r\n\r\nbye,leave\r\n".encode())
    assert read_labelled_csv(path) == (["hello", "bye"], ["greet", "leave"])


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


def _fresh_python(code: str, **env: str) -> str:
    """Run ``code`` in a new interpreter (torch not loaded yet) with ``env`` over a copy of
    this environment without the OpenMP wait settings; its stdout."""
    base = {k: v for k, v in os.environ.items() if k not in {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"}}
    result = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_train_shortens_the_openmp_spin_before_torch_loads_unless_the_operator_set_it():
    # What `tierdesk train` runs first: the CLI app, then the command's own set-up. torch must
    # not be loaded by then, or the spin count it reads at load time would be the default.
    code = (
        "import os, sys\n"
        "from app.cli import _cli_app\n"
        "from app.nlp.cli import _spin_less_while_idle\n"
        "_cli_app()\n"
        "loaded = 'torch' in sys.modules\n"
        "_spin_less_while_idle()\n"
        "import torch\n"
        "print(loaded, os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"
    )
    assert _fresh_python(code) == f"False {TRAIN_SPIN_COUNT} None"
    assert _fresh_python(code, GOMP_SPINCOUNT="500") == "False 500 None"
    assert _fresh_python(code, OMP_WAIT_POLICY="ACTIVE") == "False None ACTIVE"
