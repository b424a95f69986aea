"""Alembic, driven from Python: ``tierdesk db upgrade`` and friends call these."""

from __future__ import annotations

from alembic import command
from alembic.config import Config as AlembicConfig

from app.config import PROJECT_ROOT


def alembic_config(db_url: str) -> AlembicConfig:
    cfg = AlembicConfig(str(PROJECT_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    # ConfigParser interpolation would eat '%' in passwords.
    cfg.set_main_option("sqlalchemy.url", db_url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(db_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(db_url), revision)


def downgrade(db_url: str, revision: str) -> None:
    command.downgrade(alembic_config(db_url), revision)


def current(db_url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    from app.db import get_engine

    with get_engine(db_url).connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision(db_url: str) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(db_url)).get_current_head()
