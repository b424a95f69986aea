"""The model registry: every trained version with its status, manifest and history, in the
database; the database is also the shared store of its artifacts.

Statuses (``app.vocab.ModelStatus``) and the moves between them::

    candidate --promote--> shadow --promote--> canary --promote--> active
        \\______________________\\___________________\\___--to active--^
    any of them --retire--> retired          active --rollback--> retired, previous -> active

- One ``active`` version answers every conversation that is not in the canary; at most one
  ``canary`` answers ``traffic_share`` of the conversations (sticky: a conversation's bucket is
  a hash of its id); at most one ``shadow`` answers ``traffic_share`` of the live questions in
  the background (``app/nlp/shadow.py``), never the customer.
- Each move is one transaction: the row's status, a ``model_events`` row (from, to, share,
  reason, who) and MODEL_REVISION bumped. Every worker of every host polls that revision
  (``app/nlp/engine.py``, every 2 s) and rebuilds its routers from ``serving_plan``: a promote
  or rollback reaches all of them within seconds, without a restart.
- ``register`` packs the version folder (``app.nlp.store.pack``) into ``model_artifacts``
  chunks and records its SHA-256 digest. ``ensure_local`` gives a host the folder: kept when
  its digest matches, otherwise fetched from the chunks, verified and renamed into place. Two
  hosts with their own ``TIERDESK_MODELS_DIR`` and no shared disk serve the same bytes.
- Without any registered version (a deployment from before the registry, or a test writing
  ``models/current`` by hand) the engine serves ``models/current`` as it always did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.models import ModelArtifact, ModelEvent, ModelVersion, utcnow
from app.nlp import store
from app.state import MODEL_REVISION, bump_revision
from app.vocab import SERVING_STATUSES, ModelStatus

CHUNK_BYTES = 4 << 20  # under every database's packet and parameter limits
NEXT_STEP = {
    ModelStatus.CANDIDATE: ModelStatus.SHADOW,
    ModelStatus.SHADOW: ModelStatus.CANARY,
    ModelStatus.CANARY: ModelStatus.ACTIVE,
}
DEFAULT_SHARE = {ModelStatus.SHADOW: 0.2, ModelStatus.CANARY: 0.1}


class RegistryError(RuntimeError):
    """A registry operation that cannot be done; the message says why."""


@dataclass(frozen=True)
class ServingPlan:
    """What a server answers with: read by every worker after MODEL_REVISION moved."""

    active: str
    canary: str | None = None
    canary_share: float = 0.0
    shadow: str | None = None
    shadow_sample: float = 0.0

    def versions(self) -> list[str]:
        return [v for v in (self.active, self.canary, self.shadow) if v]


def conversation_bucket(conversation_id: str) -> float:
    """A conversation's fixed place in [0, 1): the canary takes the buckets under its share."""
    return int(hashlib.sha256(conversation_id.encode()).hexdigest()[:8], 16) / 2**32


# -- reading -----------------------------------------------------------------------------


def get(session: Session, version: str) -> ModelVersion:
    row = session.get(ModelVersion, version)
    if row is None:
        raise RegistryError(f"no registered model version {version!r} (see `tierdesk models list`)")
    return row


def all_versions(session: Session) -> list[ModelVersion]:
    return list(
        session.scalars(
            select(ModelVersion).order_by(ModelVersion.created_at.desc(), ModelVersion.version)
        )
    )


def with_status(session: Session, status: ModelStatus) -> ModelVersion | None:
    return session.scalars(
        select(ModelVersion)
        .where(ModelVersion.status == status.value)
        .order_by(ModelVersion.status_changed_at.desc())
    ).first()


def history(session: Session, version: str | None = None, limit: int = 200) -> list[ModelEvent]:
    query = select(ModelEvent).order_by(ModelEvent.id.desc()).limit(limit)
    if version is not None:
        query = query.where(ModelEvent.version == version)
    return list(session.scalars(query))


def serving_plan(session: Session) -> ServingPlan | None:
    """The registry's plan, or None while no version is registered as active."""
    rows = session.scalars(
        select(ModelVersion).where(ModelVersion.status.in_([s.value for s in SERVING_STATUSES]))
    ).all()
    by_status = {row.status: row for row in rows}
    active = by_status.get(ModelStatus.ACTIVE)
    if active is None:
        return None
    canary = by_status.get(ModelStatus.CANARY)
    shadow = by_status.get(ModelStatus.SHADOW)
    return ServingPlan(
        active=active.version,
        canary=canary.version if canary else None,
        canary_share=canary.traffic_share if canary else 0.0,
        shadow=shadow.version if shadow else None,
        shadow_sample=shadow.traffic_share if shadow else 0.0,
    )


def diff(a: ModelVersion, b: ModelVersion) -> list[tuple[str, object, object]]:
    """Manifest fields whose values differ between two versions, as (dotted key, a, b)."""
    flat_a, flat_b = _flatten(a.manifest), _flatten(b.manifest)
    skip = {"version"}
    return [
        (key, flat_a.get(key), flat_b.get(key))
        for key in sorted(set(flat_a) | set(flat_b))
        if key not in skip and flat_a.get(key) != flat_b.get(key)
    ]


def _flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


# -- registering and the shared store ----------------------------------------------------


def register(
    session: Session,
    models_dir: str | Path,
    version: str,
    *,
    status: ModelStatus = ModelStatus.CANDIDATE,
    reason: str = "trained",
    actor: str = "cli",
) -> ModelVersion:
    """Publish a local version folder (artifacts and digest) and enter it with ``status``.

    ``status`` may be ``candidate`` or ``active`` (what ``tierdesk train`` does by default);
    registering a version again re-publishes its artifacts and keeps its status.
    """
    manifest = store.read_manifest(models_dir, version)
    folder = store.version_folder(models_dir, version)
    packed = store.pack(folder)
    row = session.get(ModelVersion, version)
    new = row is None
    if new:
        row = ModelVersion(version=version, status=ModelStatus.CANDIDATE.value)
        session.add(row)
    row.manifest = manifest
    row.digest = store.digest(folder)
    row.size_bytes = len(packed)
    session.execute(delete(ModelArtifact).where(ModelArtifact.version == version))
    session.flush()
    for seq, start in enumerate(range(0, len(packed), CHUNK_BYTES)):
        session.add(
            ModelArtifact(version=version, seq=seq, data=packed[start : start + CHUNK_BYTES])
        )
    if new:
        _event(session, row, None, ModelStatus.CANDIDATE, reason, actor)
        if status == ModelStatus.ACTIVE:
            _make_active(session, row, reason, actor)
    session.flush()
    bump_revision(session, MODEL_REVISION)
    return row


def ensure_local(session: Session, models_dir: str | Path, version: str) -> Path:
    """The version's folder on this host, fetched from the registry when it is missing or its
    files do not hash to the published digest (a half-copied or altered folder)."""
    row = get(session, version)
    folder = store.version_folder(models_dir, version)
    if row.digest is None:
        raise RegistryError(f"version {version} has no published artifacts")
    if store.version_present(models_dir, version) and store.digest(folder) == row.digest:
        return folder
    chunks = session.scalars(
        select(ModelArtifact.data)
        .where(ModelArtifact.version == version)
        .order_by(ModelArtifact.seq)
    ).all()
    if not chunks:
        raise RegistryError(f"version {version}: no artifacts in the registry's store")
    return store.unpack(models_dir, version, b"".join(chunks), row.digest)


def drop_artifacts(session: Session, keep: Iterable[str]) -> int:
    """Delete the stored artifacts of retired versions not in ``keep``; returns how many."""
    keep = set(keep)
    versions = [
        v
        for v in session.scalars(
            select(ModelVersion.version).where(ModelVersion.status == ModelStatus.RETIRED.value)
        )
        if v not in keep
    ]
    if versions:
        session.execute(delete(ModelArtifact).where(ModelArtifact.version.in_(versions)))
    return len(versions)


def artifact_bytes(session: Session, version: str) -> int:
    return int(
        session.scalar(
            select(func.coalesce(func.sum(func.length(ModelArtifact.data)), 0)).where(
                ModelArtifact.version == version
            )
        )
    )


# -- moving between statuses -------------------------------------------------------------


def promote(
    session: Session,
    version: str,
    *,
    to: ModelStatus | None = None,
    share: float | None = None,
    reason: str = "",
    actor: str = "cli",
) -> ModelVersion:
    """Move ``version`` one step on (or ``to`` a serving status), with a traffic ``share``
    for shadow (questions sampled) and canary (conversations answered)."""
    row = _locked(session, version)
    current = ModelStatus(row.status)
    if current == ModelStatus.ACTIVE and to in (None, ModelStatus.ACTIVE):
        raise RegistryError(f"version {version} is already active")
    if to is None:
        if current not in NEXT_STEP:
            raise RegistryError(
                f"version {version} is {current}; say where with --to shadow|canary|active"
            )
        to = NEXT_STEP[current]
    if to not in SERVING_STATUSES:
        raise RegistryError(f"promote goes to shadow, canary or active, not {to}")
    if to == ModelStatus.ACTIVE:
        _make_active(session, row, reason or f"promoted from {current}", actor)
    else:
        if share is None:
            share = row.traffic_share if current == to else DEFAULT_SHARE[to]
        if not 0.0 < share <= 1.0:
            raise RegistryError(f"the {to} share must be in (0, 1], got {share}")
        if current == ModelStatus.ACTIVE:
            raise RegistryError(f"version {version} is active; roll back instead")
        holder = with_status(session, to)
        if holder is not None and holder.version != version:
            raise RegistryError(f"{holder.version} is already the {to}; retire or promote it first")
        _move(session, row, to, share, reason or f"promoted from {current}", actor)
    bump_revision(session, MODEL_REVISION)
    return row


def retire(session: Session, version: str, *, reason: str = "", actor: str = "cli") -> ModelVersion:
    """End a candidate, shadow or canary (its traffic goes back to the active version)."""
    row = _locked(session, version)
    if row.status == ModelStatus.ACTIVE:
        raise RegistryError(
            f"version {version} is active; promote another or `tierdesk models rollback`"
        )
    if row.status == ModelStatus.RETIRED:
        raise RegistryError(f"version {version} is already retired")
    _move(session, row, ModelStatus.RETIRED, 0.0, reason or "retired", actor)
    bump_revision(session, MODEL_REVISION)
    return row


def rollback(
    session: Session, version: str | None = None, *, reason: str = "", actor: str = "cli"
) -> ModelVersion:
    """Make the previously active version (or ``version``) active again; the current active
    one is retired. Returns the version now active."""
    active = with_status(session, ModelStatus.ACTIVE)
    if version is None:
        version = _previous_active(session, active.version if active else None)
        if version is None:
            raise RegistryError("no earlier active version to roll back to")
    target = _locked(session, version)
    if target.status == ModelStatus.ACTIVE:
        raise RegistryError(f"version {version} is already active")
    _make_active(session, target, reason or "rollback", actor, previous_to="rolled back")
    bump_revision(session, MODEL_REVISION)
    return target


def _previous_active(session: Session, current: str | None) -> str | None:
    events = session.scalars(
        select(ModelEvent)
        .where(ModelEvent.to_status == ModelStatus.ACTIVE.value)
        .order_by(ModelEvent.id.desc())
    )
    for event in events:
        if event.version != current:
            return event.version
    return None


def _make_active(
    session: Session, row: ModelVersion, reason: str, actor: str, previous_to: str = "superseded"
) -> None:
    previous = with_status(session, ModelStatus.ACTIVE)
    if previous is not None and previous.version != row.version:
        _move(session, previous, ModelStatus.RETIRED, 0.0, f"{previous_to} by {row.version}", actor)
    _move(session, row, ModelStatus.ACTIVE, 1.0, reason, actor)


def _locked(session: Session, version: str) -> ModelVersion:
    row = session.get(ModelVersion, version, with_for_update=True)
    if row is None:
        raise RegistryError(f"no registered model version {version!r} (see `tierdesk models list`)")
    return row


def _move(
    session: Session, row: ModelVersion, to: ModelStatus, share: float, reason: str, actor: str
) -> None:
    before = row.status
    row.status = to.value
    row.traffic_share = share
    row.status_changed_at = utcnow()
    _event(session, row, before, to, reason, actor, share)
    session.flush()


def _event(session, row, before, to, reason, actor, share: float = 0.0) -> None:
    session.add(
        ModelEvent(
            version=row.version,
            from_status=before,
            to_status=to.value if hasattr(to, "value") else to,
            traffic_share=share,
            reason=reason,
            actor=actor,
            created_at=utcnow(),
        )
    )


def activate_version(db_url: str, models_dir: str | Path, version: str, actor: str) -> None:
    """Make ``version`` serve everyone (a rollback by hand): a registered version becomes
    ``active`` in the registry (fetched first if this host lacks it), then ``models/current``
    points at it and running servers reload. Raises StoreError or RegistryError."""
    from app.db import session_scope

    with session_scope(db_url) as session:
        if session.get(ModelVersion, version) is not None:
            ensure_local(session, models_dir, version)
            if get(session, version).status != ModelStatus.ACTIVE:
                promote(session, version, to=ModelStatus.ACTIVE, actor=actor)
    store.activate(models_dir, version, db_url)
