"""Admin pages of the console (/console/admin): reviewers, retention, erasure and export, model
activation, and the audit log. Only accounts with the ``admin`` role get in (403 otherwise);
every change is audited in the transaction that makes it.

Mounted inside the console blueprint, so its login guard and CSRF check apply here too.
"""

from __future__ import annotations

import json

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from sqlalchemy import select

from app.db import get_session
from app.models import Reviewer
from app.privacy import erasure, retention
from app.review import audit, auth
from app.services import get_engine, get_review_queue
from app.vocab import AuditAction, Role

bp = Blueprint("admin", __name__)


@bp.before_request
def _admins_only() -> None:
    reviewer = getattr(g, "reviewer", None)
    if reviewer is not None and reviewer.role != Role.ADMIN:
        abort(403, description="This page is for admins.")


def _done(message: str, anchor: str = ""):
    flash(message)
    return redirect(url_for("console.admin.home") + anchor)


def _refuse(message: str, anchor: str = ""):
    flash(message, "error")
    return redirect(url_for("console.admin.home") + anchor)


def _audited(action: str, *, target: str | None = None, detail: dict | None = None) -> None:
    audit.record(get_session(), action, reviewer_id=g.reviewer.id, target=target, detail=detail)


def _int(value: str | None, what: str) -> int:
    try:
        number = int((value or "").strip())
    except ValueError:
        raise ValueError(f"{what} must be a whole number of days") from None
    return number


def _model_versions(models_dir) -> tuple[list[dict], str | None]:
    """Saved model versions and the current one; app.nlp.store is
    imported only when there are versions (a serving process has imported it already)."""
    from pathlib import Path

    if not (Path(models_dir) / "versions").is_dir():
        return [], None
    from app.nlp.store import current_version, list_versions

    return list_versions(models_dir), current_version(models_dir)


@bp.get("/")
def home():
    db = get_session()
    versions, current = _model_versions(current_app.config["MODELS_DIR"])
    return render_template(
        "console/admin.html",
        reviewers=db.scalars(select(Reviewer).order_by(Reviewer.email)).all(),
        roles=list(Role),
        settings=retention.effective_settings(current_app.config),
        env_settings={k: current_app.config.get(k) or 0 for k in retention.OVERRIDES},
        preview=None,
        versions=versions,
        current=current,
    )


# -- reviewers ------------------------------------------------------------------------------


@bp.post("/reviewers")
def add_reviewer():
    form = request.form
    db = get_session()
    try:
        reviewer = auth.add_reviewer(
            db, form.get("email", ""), form.get("password", ""), role=form.get("role", "reviewer")
        )
    except auth.AccountError as exc:
        db.rollback()
        return _refuse(f"Not added: {exc}.", "#reviewers")
    _audited(
        AuditAction.REVIEWER_ADD,
        target=f"reviewer:{reviewer.email}",
        detail={"role": reviewer.role},
    )
    db.commit()
    return _done(f"Added {reviewer.email} ({reviewer.role}).", "#reviewers")


@bp.post("/reviewers/<int:reviewer_id>")
def update_reviewer(reviewer_id: int):
    db = get_session()
    reviewer = db.get(Reviewer, reviewer_id)
    if reviewer is None:
        abort(404, description="No such reviewer.")
    try:
        role = auth.validate_role(request.form.get("role", reviewer.role))
    except auth.AccountError as exc:
        return _refuse(str(exc), "#reviewers")
    active = request.form.get("active") == "on"
    if reviewer.id == g.reviewer.id and (role != Role.ADMIN or not active):
        return _refuse("You cannot demote or disable your own account.", "#reviewers")
    changes = {}
    if role != reviewer.role:
        changes["role"] = role
    if active != reviewer.active:
        changes["active"] = active
    password = request.form.get("password", "")
    if password:
        try:
            auth.add_reviewer(db, reviewer.email, password, reset=True)
        except auth.AccountError as exc:
            db.rollback()
            return _refuse(f"Not changed: {exc}.", "#reviewers")
        changes["password"] = "changed"
        if not active:  # add_reviewer(reset=True) reactivates
            reviewer.active = False
    if not changes:
        return _done("Nothing changed.", "#reviewers")
    reviewer.role, reviewer.active = role, active
    _audited(AuditAction.REVIEWER_UPDATE, target=f"reviewer:{reviewer.email}", detail=changes)
    db.commit()
    return _done(f"Updated {reviewer.email}.", "#reviewers")


# -- retention --------------------------------------------------------------------------------


@bp.post("/retention")
def set_retention():
    db = get_session()
    try:
        days = _int(request.form.get("days"), "Retention")
        training = _int(request.form.get("training_days"), "Training retention")
        retention.set_overrides(db, days, training)
    except (ValueError, retention.RetentionSettingsError) as exc:
        db.rollback()
        return _refuse(str(exc), "#retention")
    _audited(
        AuditAction.RETENTION_SET,
        detail={"retention_days": days, "training_retention_days": training},
    )
    db.commit()
    return _done(
        f"Retention set: chats {days} days, taught examples {training} days (0: kept).",
        "#retention",
    )


@bp.post("/purge")
def purge_now():
    dry_run = request.form.get("dry_run") == "1"
    get_session().close()  # the purge runs its own short transactions
    report = retention.purge(
        current_app.config,
        queue=get_review_queue(),
        dry_run=dry_run,
        actor=g.reviewer.email,
    )
    return _done(("Preview: " if dry_run else "") + report.summary() + ".", "#retention")


# -- erasure and export -------------------------------------------------------------------------


def _selected() -> tuple[list[str], str]:
    conversation_id = (request.form.get("conversation_id") or "").strip() or None
    email = (request.form.get("email") or "").strip() or None
    if (conversation_id is None) == (email is None):
        raise ValueError("Give a conversation id or an e-mail address (one of them).")
    ids = erasure.find_conversations(
        get_session(),
        current_app.config["SECRET_KEY"],
        conversation_id=conversation_id,
        email=email,
    )
    if not ids:
        raise ValueError("Nothing is stored for this customer.")
    return ids, ("conversation" if conversation_id else "email")


@bp.post("/export")
def export():
    db = get_session()
    try:
        ids, by = _selected()
    except ValueError as exc:
        return _refuse(str(exc), "#erasure")
    document = erasure.export(db, ids)
    _audited(AuditAction.EXPORT, detail={"by": by, "conversations": len(ids)})
    db.commit()
    return Response(
        json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False),
        mimetype="application/json",
        headers={"Content-Disposition": 'attachment; filename="tierdesk-export.json"'},
    )


@bp.post("/erase")
def erase():
    db = get_session()
    try:
        ids, _by = _selected()
    except ValueError as exc:
        return _refuse(str(exc), "#erasure")
    if request.form.get("confirm") != "yes":
        return _refuse(
            f"{len(ids)} conversation(s) found; tick the confirmation to erase them.", "#erasure"
        )
    report = erasure.erase(
        db, ids, queue=get_review_queue(), engine=get_engine(), reviewer_id=g.reviewer.id
    )
    return _done(f"Erased {report.summary()}.", "#erasure")


# -- models -------------------------------------------------------------------------------------


@bp.post("/models/activate")
def activate_model():
    from app.nlp import registry
    from app.nlp.store import StoreError

    version = (request.form.get("version") or "").strip()
    try:
        registry.activate_version(
            current_app.config["SQLALCHEMY_DATABASE_URI"],
            current_app.config["MODELS_DIR"],
            version,
            actor=g.reviewer.email,
        )
    except (StoreError, registry.RegistryError) as exc:
        return _refuse(str(exc), "#models")
    _audited(AuditAction.MODEL_ACTIVATE, target=f"model:{version}")
    get_session().commit()
    return _done(f"Activated {version}; servers reload it within seconds.", "#models")


# -- audit log -----------------------------------------------------------------------------------


@bp.get("/audit")
def audit_log():
    action = (request.args.get("action") or "").strip() or None
    return render_template(
        "console/audit.html",
        events=audit.recent(get_session(), limit=500, action=action),
        actions=list(AuditAction),
        action=action,
    )
