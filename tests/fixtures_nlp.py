"""Fixtures of the nlp area, shared with other tests through pytest_plugins.

- ``nlp_content``: (intents_dir, kb_dir) with the demo content when the repository has it, else
  a tiny built-in bank FAQ (four intents) written to a temp folder.
- ``trained_models_dir`` (session): real models trained once on that content (FastText, BERT
  head, calibrators, thresholds) in a temp ``models/`` folder with a ``current`` version.
- ``trained_app``: like conftest's ``app`` (migrated SQLite, real Redis, own key prefix) with
  the same content imported and ``LOAD_MODELS=True`` on a private models folder whose current
  version is the session's trained one (so a test may train again without touching others).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.config import PROJECT_ROOT

TINY_INTENTS = {
    "card_arrival": (
        "simple",
        "Where is my new card?",
        "Cards arrive within five working days; track the delivery in the app.",
        [
            "my card has not arrived yet",
            "when will my new card come",
            "still waiting for my card",
            "how long does card delivery take",
            "the card I ordered is not here",
            "card not delivered",
            "where is my card",
            "has my card been posted",
            "my debit card never came in the mail",
            "i ordered a card two weeks ago",
        ],
    ),
    "change_pin": (
        "simple",
        "How do I change my PIN?",
        "Open the app, choose Security, then Change PIN.",
        [
            "how do i change my pin",
            "i want a new pin",
            "can i reset my pin number",
            "forgot my pin what now",
            "change the pin on my card",
            "where do i update my pin",
            "my pin is blocked",
            "set a different pin",
            "pin change in the app",
            "how to pick a new pin code",
        ],
    ),
    "exchange_rate": (
        "simple",
        "Which exchange rate do you use?",
        "We use the interbank rate at the moment of payment, plus a small weekend markup.",
        [
            "what exchange rate do you use",
            "how is the currency rate calculated",
            "is the exchange rate fair",
            "rate for converting euros to dollars",
            "where can i see today's exchange rates",
            "do you add a markup to the rate",
            "why was the conversion rate so bad",
            "which rate applies to foreign payments",
            "exchange rate at the weekend",
            "currency conversion rate question",
        ],
    ),
    "card_payment_disputed": (
        "complex",
        "Disputing a card payment",
        "Report the payment in the app under the transaction; we investigate within 10 days.",
        [
            "i want to dispute a card payment",
            "there is a payment i did not make",
            "a merchant charged me for something i never received",
            "how do i dispute a charge",
            "unknown transaction on my card statement",
            "the shop refuses to refund me",
            "chargeback for a purchase",
            "i was charged twice and want it reversed",
            "a payment on my card looks fraudulent",
            "i need to contest a transaction",
        ],
    ),
}


def _write_tiny_content(folder: Path) -> tuple[Path, Path]:
    import yaml

    intents_dir = folder / "intents"
    kb_dir = folder / "knowledge_base"
    (intents_dir / "out_of_scope").mkdir(parents=True)
    kb_dir.mkdir(parents=True)
    definitions = []
    for name, (tier, title, body, examples) in TINY_INTENTS.items():
        definitions.append(
            {"name": name, "tier": tier, "description": title, "examples": examples[3:]}
        )
        front = {
            "title": title,
            "slug": name.replace("_", "-"),
            "category": name,
            "tags": ["demo"],
            "questions": examples[:3],
        }
        (kb_dir / f"{front['slug']}.md").write_text(
            "---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + body + "\n"
        )
    (intents_dir / "bank.yaml").write_text(yaml.safe_dump({"intents": definitions}))
    oos = [
        "what is the weather tomorrow",
        "recommend a pizza place",
        "who won the football",
        "tell me a joke",
        "how tall is the eiffel tower",
        "play some music",
    ]
    (intents_dir / "out_of_scope" / "dev.csv").write_text(
        "text,category\n" + "".join(f"{t},out_of_scope\n" for t in oos)
    )
    return intents_dir, kb_dir


def _demo_content_present() -> bool:
    return any((PROJECT_ROOT / "knowledge_base").glob("*.md")) and any(
        (PROJECT_ROOT / "intents").glob("*.yaml")
    )


@pytest.fixture(scope="session")
def nlp_content(tmp_path_factory) -> tuple[Path, Path]:
    if os.environ.get("TIERDESK_TEST_TINY_CONTENT") != "1" and _demo_content_present():
        return PROJECT_ROOT / "intents", PROJECT_ROOT / "knowledge_base"
    return _write_tiny_content(tmp_path_factory.mktemp("nlp_content"))


def import_content(db_url: str, intents_dir: Path, kb_dir: Path) -> None:
    """Load intents and articles into a migrated database, as ``tierdesk init`` does."""
    from app.db import session_scope
    from app.kb.importer import import_paths
    from app.kb.intents import load_intent_definitions

    with session_scope(db_url) as session:
        load_intent_definitions(session, intents_dir)
    with session_scope(db_url) as session:
        import_paths(session, [kb_dir])


@pytest.fixture(scope="session")
def trained_models_dir(tmp_path_factory, nlp_content) -> Path:
    from app import migrate
    from app.db import dispose_engine
    from app.nlp.training import train_models

    folder = tmp_path_factory.mktemp("trained")
    url = f"sqlite:///{folder / 'train.db'}"
    migrate.upgrade(url)
    intents_dir, kb_dir = nlp_content
    import_content(url, intents_dir, kb_dir)
    config = {
        "SQLALCHEMY_DATABASE_URI": url,
        "MODELS_DIR": folder / "models",
        "INTENTS_DIR": intents_dir,
        "BERT_PATH": None,
        "BERT_QUANTIZE": True,
    }
    train_models(config, progress=False)
    dispose_engine(url)
    return folder / "models"


def private_models_dir(shared: Path, target: Path) -> Path:
    """A models folder of one's own whose versions link to the shared trained ones."""
    from app.nlp.store import CURRENT_POINTER, VERSIONS_DIR

    (target / VERSIONS_DIR).mkdir(parents=True)
    for version in (shared / VERSIONS_DIR).iterdir():
        (target / VERSIONS_DIR / version.name).symlink_to(version, target_is_directory=True)
    (target / CURRENT_POINTER).write_text((shared / CURRENT_POINTER).read_text())
    return target


@pytest.fixture
def trained_app_config() -> dict:
    """Configuration a test module adds to ``trained_app`` (override this fixture)."""
    return {}


@pytest.fixture
def trained_app(
    tmp_path,
    db_url,
    redis_client,
    redis_prefix,
    nlp_content,
    trained_models_dir,
    trained_app_config,
):
    """The app with content imported and real trained models loaded and warmed."""
    from app import create_app

    intents_dir, kb_dir = nlp_content
    import_content(db_url, intents_dir, kb_dir)
    models_dir = private_models_dir(trained_models_dir, tmp_path / "models")
    app = create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": db_url,
            "REDIS_CLIENT": redis_client,
            "REDIS_PREFIX": redis_prefix,
            "VAR_DIR": tmp_path / "var",
            "MODELS_DIR": models_dir,
            "INTENTS_DIR": intents_dir,
            "KB_DIR": kb_dir,
            "LOAD_MODELS": True,
            "SECRET_KEY": "test-secret",
            "RATE_LIMIT": "off",
            **trained_app_config,
        }
    )
    yield app
    from app.services import ENGINE_KEY

    engine = app.extensions.get(ENGINE_KEY)
    if engine is not None and hasattr(engine, "close"):
        engine.close()


def current_manifest(models_dir: Path) -> dict:
    from app.nlp.store import MANIFEST, current_version, version_folder

    return json.loads(
        (version_folder(models_dir, current_version(models_dir)) / MANIFEST).read_text()
    )
