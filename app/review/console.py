"""The reviewer console: a Flask blueprint mounted at /console, server-rendered.

Every page needs a logged-in reviewer (others are redirected to the login page); every POST
needs the session's CSRF token (400 otherwise). Actions on an item need its lease: the page
renews the lease whenever the reviewer opens it or acts on it.
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from sqlalchemy import select
from werkzeug.exceptions import HTTPException, NotFound

from app.db import get_session, row_id
from app.models import Article, Message, Reviewer, ReviewItem, SpotCheck, utcnow
from app.review import auth, models_console, service
from app.review import spot_checks as spot
from app.review.admin import bp as admin_bp
from app.review.queue import Reconciler
from app.review.stats import dashboard
from app.review.svg import bar_chart, line_chart
from app.review.trace import read_trace
from app.services import get_engine, get_redis, get_review_queue
from app.vocab import OPEN_STATUSES, ConversationState, ReviewStatus

bp = Blueprint("console", __name__, template_folder="templates")
bp.register_blueprint(admin_bp, url_prefix="/admin")  # /console/admin: admins only

PUBLIC_ENDPOINTS = {"console.login"}
RECONCILER_KEY = "tierdesk.review_reconciler"
_reconciler_lock = threading.Lock()
QUEUE_PAGE_ROWS = 100
SPOT_CHECK_HISTORY = 50  # messages of a spot-checked conversation shown for context


# -- background reconciler ------------------------------------------------------------------


@bp.before_app_request
def _start_reconciler_once() -> None:
    """Start the periodic reconciler in the serving process, on its first request.

    Starting it on the first request rather than in the factory keeps it out of CLI commands
    and out of a gunicorn master that forks workers (threads do not survive a fork).
    """
    app = current_app._get_current_object()
    if RECONCILER_KEY in app.extensions:
        return
    with _reconciler_lock:
        if RECONCILER_KEY in app.extensions:
            return
        interval = app.config.get("RECONCILE_INTERVAL_SECONDS", 0)
        if app.testing or not interval or interval <= 0:
            app.extensions[RECONCILER_KEY] = None
            return
        reconciler = Reconciler(get_review_queue(), interval)
        reconciler.start()
        app.extensions[RECONCILER_KEY] = reconciler
        from app.review.console_handoff import start_background

        start_background(app)


# -- authentication and CSRF ----------------------------------------------------------------


@bp.app_template_global()
def csrf_token() -> str:
    return auth.csrf_token()


@bp.before_request
def _guard() -> object | None:
    reviewer = None
    reviewer_id = session.get(auth.SESSION_REVIEWER)
    if reviewer_id is not None:
        reviewer = get_session().get(Reviewer, reviewer_id)
        if reviewer is None or not reviewer.active:
            session.clear()
            reviewer = None
    g.reviewer = reviewer
    if reviewer is None and request.endpoint not in PUBLIC_ENDPOINTS:
        target = request.full_path if request.method == "GET" else None
        return redirect(url_for("console.login", next=target))
    if request.method == "POST":
        auth.check_csrf()
    return None


@bp.after_request
def _no_store(response):
    """Console pages show customers' messages and an item's state at one moment: a browser
    must not keep them, so Back shows the item as it is now (not "You hold this item" after
    it was answered) and nothing of them is left in the browser after logging out."""
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def _safe_next(target: str | None) -> str:
    """Only same-site console paths are followed after login (no open redirect)."""
    if target:
        parts = urlsplit(target)
        if (
            not parts.scheme
            and not parts.netloc
            and parts.path.startswith("/console/")
            and not target.startswith("//")
            and target.isprintable()  # a line break would split the Location header
        ):
            return target.rstrip("?")
    return url_for("console.queue")


def _limiter() -> auth.LoginLimiter:
    config = current_app.config
    return auth.LoginLimiter(
        get_redis(),
        config["REDIS_PREFIX"],
        config.get("LOGIN_MAX_FAILURES", 5),
        config.get("LOGIN_WINDOW_SECONDS", 900),
    )


@bp.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "GET":
        if g.reviewer is not None:
            return redirect(url_for("console.queue"))
        return render_template("console/login.html", next=request.args.get("next", ""))
    email = request.form.get("email", "")[:320]
    password = request.form.get("password", "")[:1024]
    next_url = request.form.get("next", "")
    ip = request.remote_addr or "unknown"
    limiter = _limiter()
    wait = limiter.retry_after(ip, email)
    if wait:
        minutes = max(1, round(wait / 60))
        message = f"Too many failed attempts. Try again in about {minutes} minute(s)."
        response = current_app.make_response(
            (render_template("console/login.html", error=message, email=email, next=next_url), 429)
        )
        response.headers["Retry-After"] = str(wait)
        return response
    db = get_session()
    reviewer = auth.authenticate(db, email, password)
    if reviewer is None:
        limiter.record_failure(ip, email)
        return render_template(
            "console/login.html", error="Wrong e-mail or password.", email=email, next=next_url
        ), 401
    db.commit()
    limiter.reset(ip, email)
    session.clear()  # a fresh session (and CSRF token) after login: no fixation
    session[auth.SESSION_REVIEWER] = reviewer.id
    auth.csrf_token()
    return redirect(_safe_next(next_url))


@bp.post("/logout")
def logout():
    session.clear()
    flash("You are logged out.")
    return redirect(url_for("console.login"))


# -- queue ------------------------------------------------------------------------------------


def _filters() -> dict[str, str | None]:
    return {
        key: (request.values.get(key) or "").strip()[:200] or None
        for key in ("intent", "route", "reason")
    }


@bp.get("/")
def queue():
    db = get_session()
    review_queue = get_review_queue()
    filters = _filters()
    query = select(ReviewItem).where(ReviewItem.status.in_(OPEN_STATUSES))
    for key, value in filters.items():
        if value:
            query = query.where(getattr(ReviewItem, key) == value)
    items = sorted(db.scalars(query).all(), key=review_queue.score)
    open_items = db.execute(
        select(ReviewItem.intent, ReviewItem.route, ReviewItem.reason).where(
            ReviewItem.status.in_(OPEN_STATUSES)
        )
    ).all()
    options = {
        "intent": sorted({i for i, _, _ in open_items if i}),
        "route": sorted({r for _, r, _ in open_items if r}),
        "reason": sorted({x for _, _, x in open_items if x}),
    }
    messages = {
        m.id: m
        for m in db.scalars(
            select(Message).where(Message.id.in_([i.message_id for i in items[:QUEUE_PAGE_ROWS]]))
        )
    }
    from app.review.stats import queue_counts

    now = utcnow()
    mine = [
        i
        for i in items
        if i.status == ReviewStatus.CLAIMED
        and i.claimed_by == g.reviewer.id
        and i.lease_expires_at
        and i.lease_expires_at > now
    ]
    return render_template(
        "console/queue.html",
        items=items[:QUEUE_PAGE_ROWS],
        total=len(items),
        counts=queue_counts(db, review_queue),
        filters=filters,
        options=options,
        messages=messages,
        mine=mine,
        now=now,
    )


@bp.post("/claim")
def claim_next():
    filters = _filters()
    claim = get_review_queue().claim_next(g.reviewer.id, **filters)
    if claim is None:
        flash("Nothing is waiting" + (" for these filters." if any(filters.values()) else "."))
        return redirect(url_for("console.queue", **{k: v for k, v in filters.items() if v}))
    _take_over(claim.item_id)
    return redirect(url_for("console.item", item_id=claim.item_id))


def _take_over(item_id: int) -> None:
    """A claim puts the conversation with this reviewer (app/review/handoff.py)."""
    db = get_session()
    review_item = db.get(ReviewItem, item_id)
    if review_item is not None:
        service.take_over(db, review_item, g.reviewer.id)


# -- item ---------------------------------------------------------------------------------------


def _item_or_404(item_id: int) -> ReviewItem:
    item = get_session().get(ReviewItem, item_id)
    if item is None:
        raise NotFound("No such review item.")
    return item


def _held_by_me(item: ReviewItem) -> bool:
    return item.status == ReviewStatus.CLAIMED and item.claimed_by == g.reviewer.id


def _renew(item: ReviewItem) -> None:
    if _held_by_me(item):
        expires = get_review_queue().renew(item.id, g.reviewer.id)
        get_session().expire(item)
        if expires is None:
            flash("Your lease on this item ran out and another reviewer has it now.")


@bp.get("/items/<int:item_id>")
def item(item_id: int):
    _renew(_item_or_404(item_id))
    return _item_page(item_id)


def _item_page(item_id: int, *, refused: dict | None = None, status: int = 200):
    """The item page; ``refused``: a reply or teach form the server refused, shown again as
    typed with its error (``kind``, ``error`` and the form's fields)."""
    db = get_session()
    review_item = _item_or_404(item_id)
    customer = db.get(Message, review_item.message_id)
    draft = service.draft_of(db, review_item)
    history = list(
        db.scalars(
            select(Message)
            .where(Message.conversation_id == review_item.conversation_id)
            .order_by(Message.seq, Message.created_at)
            .limit(200)
        )
    )
    trace = read_trace(draft.trace if draft is not None else (customer.trace if customer else None))
    _fill_titles(db, trace)
    holder = db.get(Reviewer, review_item.claimed_by) if review_item.claimed_by else None
    articles = db.execute(
        select(Article.slug, Article.title)
        .where(Article.published.is_(True))
        .order_by(Article.title)
        .limit(2000)
    ).all()
    return render_template(
        "console/item.html",
        item=review_item,
        customer=customer,
        draft=draft,
        history=history,
        trace=trace,
        holder=holder,
        held=_held_by_me(review_item),
        articles=articles,
        intents=service.known_intents(db),
        now=utcnow(),
        refused=refused or {},
        **console_handoff.item_context(db, review_item),
    ), status


def _fill_titles(db, trace) -> None:
    """Traces name candidates by slug; show the article titles where the trace has none."""
    slugs = {c["slug"] for tier in trace.tiers for c in tier.candidates if c["slug"]}
    if not slugs:
        return
    titles = dict(
        db.execute(select(Article.slug, Article.title).where(Article.slug.in_(slugs))).all()
    )
    for tier in trace.tiers:
        for candidate in tier.candidates:
            if candidate["title"] == candidate["slug"] and candidate["slug"] in titles:
                candidate["title"] = titles[candidate["slug"]]


def _back(item_id: int):
    return redirect(url_for("console.item", item_id=item_id))


@bp.post("/items/<int:item_id>/claim")
def claim_item(item_id: int):
    review_item = _item_or_404(item_id)
    expires = review_item.lease_expires_at
    if _held_by_me(review_item) and expires and expires > utcnow():
        _renew(review_item)  # "Claim it again" on a lease another tab of mine renewed
    elif get_review_queue().claim_item(item_id, g.reviewer.id) is None:
        flash("This item is not free: it was resolved or another reviewer holds it.")
    else:
        _take_over(item_id)
    return _back(item_id)


@bp.post("/items/<int:item_id>/release")
def release(item_id: int):
    review_item = _item_or_404(item_id)
    if get_review_queue().release(item_id, g.reviewer.id):
        service.return_to_queue(get_session(), review_item)
        flash("The item is back in the queue.")
        return redirect(url_for("console.queue"))
    return _back(item_id)


def _act(item_id: int, action, success: str):
    """Run a resolving action; a refused one is explained on the item page."""
    db = get_session()
    review_item = _item_or_404(item_id)
    try:
        action(db, review_item)
    except service.ReviewError as exc:
        db.rollback()
        flash(str(exc), "error")
        return _back(item_id)
    flash(success)
    return redirect(url_for("console.queue"))


@bp.post("/items/<int:item_id>/reply")
def reply(item_id: int):
    text = request.form.get("text", "")
    then = request.form.get("then", ConversationState.BOT)
    if then not in (
        ConversationState.BOT,
        ConversationState.WITH_PERSON,
        ConversationState.RESOLVED,
    ):
        then = ConversationState.BOT
    db = get_session()
    try:
        service.send_reply(
            db, _item_or_404(item_id), g.reviewer.id, text, then=then, queue=get_review_queue()
        )
    except service.ReviewError as exc:
        # Nothing was sent; the page comes back with the reply as typed (a lease that ran out
        # must not cost the reviewer a long answer), in the form or, when the item is no longer
        # theirs, to copy.
        db.rollback()
        refused = {"kind": "reply", "text": text, "error": str(exc)}
        return _item_page(item_id, refused=refused, status=400)
    if then == ConversationState.WITH_PERSON:
        flash("Sent. The conversation stays with you.")
        return _back(item_id)
    flash("Reply sent to the customer.")
    return redirect(url_for("console.queue"))


@bp.post("/items/<int:item_id>/article")
def reply_article(item_id: int):
    slug = request.form.get("slug", "").strip()
    return _act(
        item_id,
        lambda db, it: service.reply_with_article(
            db, it, g.reviewer.id, slug, queue=get_review_queue()
        ),
        "Article sent to the customer.",
    )


@bp.post("/items/<int:item_id>/discard")
def discard(item_id: int):
    reason = request.form.get("reason", "")
    return _act(
        item_id,
        lambda db, it: service.discard(db, it, g.reviewer.id, reason, queue=get_review_queue()),
        "Item discarded.",
    )


@bp.post("/items/<int:item_id>/teach")
def teach(item_id: int):
    db = get_session()
    review_item = _item_or_404(item_id)
    _renew(review_item)
    form = request.form
    kind = form.get("kind", "")
    text = form.get("text", "")
    try:
        if kind == "intent":
            _example, created = service.teach_intent(db, text, form.get("intent", ""))
            flash(
                f"Saved as a training example of {form.get('intent')}."
                if created
                else "That example was already known."
            )
        elif kind == "question":
            article, added = service.teach_question(db, text, form.get("slug", "").strip())
            flash(
                f"Added as an alternate question of “{article.title}”."
                if added
                else f"“{article.title}” already has that question."
            )
        elif kind == "article":
            article = service.teach_article(
                db,
                title=form.get("title", ""),
                body=form.get("body", ""),
                category=form.get("category"),
                question=text,
            )
            flash(f"Created the article “{article.title}”.")
        else:
            flash("Choose what to teach.", "error")
    except service.ReviewError as exc:
        # Nothing is stored; the form comes back as typed (a redirect would lose it: a new
        # article's body does not fit in the session cookie).
        db.rollback()
        fields = ("text", "intent", "slug", "title", "body", "category")
        refused = {key: form.get(key, "") for key in fields}
        return _item_page(item_id, refused={**refused, "kind": kind, "error": str(exc)}, status=400)
    return _back(item_id)


# -- spot checks ---------------------------------------------------------------------------------
# Answered turns drawn at random for a person to judge afterwards (app/review/spot_checks.py):
# not review items, no lease; the verdict teaches the models and measures answered accuracy.


def _spot_check_or_404(check_id: int) -> SpotCheck:
    check = get_session().get(SpotCheck, check_id)
    if check is None:
        raise NotFound("No such spot check.")
    return check


@bp.get("/spot-checks")
def spot_checks():
    db = get_session()
    after = row_id(request.args.get("after"))
    check = spot.next_waiting(db, after=after)
    context: dict = {}
    if check is not None:
        question = db.get(Message, check.message_id)
        answer = db.get(Message, check.answer_message_id)
        context = {
            "question": question,
            "answer": answer,
            "article_title": (
                db.scalar(select(Article.title).where(Article.slug == check.article_slug))
                if check.article_slug
                else None
            ),
            "history": list(
                db.scalars(
                    select(Message)
                    .where(Message.conversation_id == check.conversation_id)
                    .order_by(Message.seq, Message.created_at)
                    .limit(SPOT_CHECK_HISTORY)
                )
            ),
            "escalation_id": db.scalar(
                select(ReviewItem.id)
                .where(ReviewItem.conversation_id == check.conversation_id)
                .order_by(ReviewItem.id.desc())
                .limit(1)
            ),
            # "Wrong" with the bot's own intent is refused: it is not offered.
            "intents": [name for name in spot.spot_check_intents(db) if name != check.intent],
        }
    return render_template(
        "console/spot_checks.html",
        check=check,
        after=after,
        waiting=spot.waiting(db),
        now=utcnow(),
        **context,
    )


def _back_to_spot_check(check_id: int):
    """The page that shows this check while it waits (the next one once it is judged)."""
    return redirect(
        url_for("console.spot_checks", after=check_id - 1)
        if check_id > 1
        else url_for("console.spot_checks")
    )


def _verdict_message(judged: spot.Judged) -> str:
    mark = "Marked right" if judged.check.verdict == spot.RIGHT else "Marked wrong"
    if judged.example is None:
        return f"{mark}; nothing in the knowledge base answers it, so nothing was taught."
    intent = judged.example.intent
    if judged.created:
        return f"{mark}; taught as an example of {intent}."
    return f"{mark}; the question was already an example of {intent}."


def _judge_spot_check(check_id: int, *, right: bool, intent: str | None = None):
    db = get_session()
    check = _spot_check_or_404(check_id)
    if check.verdict is not None:
        # judge() refuses it too (a race); this says which verdict it has, mine or another's.
        flash(f"This answer was judged already: {check.verdict}. Nothing changed.", "error")
        return _back_to_spot_check(check_id)
    try:
        judged = spot.judge(db, check, g.reviewer.id, right=right, intent=intent)
    except service.ReviewError as exc:
        db.rollback()
        flash(str(exc), "error")
        return _back_to_spot_check(check_id)
    flash(_verdict_message(judged))
    # The next waiting one; past this one, so that checks the reviewer skipped come last.
    if spot.next_waiting(db, after=check_id) is not None:
        return redirect(url_for("console.spot_checks", after=check_id))
    return redirect(url_for("console.spot_checks"))


@bp.post("/spot-checks/<int:check_id>/right")
def spot_check_right(check_id: int):
    return _judge_spot_check(check_id, right=True)


@bp.post("/spot-checks/<int:check_id>/wrong")
def spot_check_wrong(check_id: int):
    if "intent" not in request.form:  # the form's placeholder: no choice made
        _spot_check_or_404(check_id)
        flash(
            "Choose what the question is: an intent, or “Nothing in the knowledge base "
            "answers it”.",
            "error",
        )
        return _back_to_spot_check(check_id)
    return _judge_spot_check(check_id, right=False, intent=request.form["intent"][:200])


# -- stats --------------------------------------------------------------------------------------


def _rate_bars(rows) -> list[tuple[str, float, str]]:
    """(name, escalated, total) rows as bars of the escalation rate, labelled "n/total (r%)"."""
    return [
        (name, n / total if total else 0.0, f"{n}/{total} ({n / total:.0%})" if total else f"{n}")
        for name, n, total in rows
    ]


@bp.get("/stats")
def stats():
    try:
        days = min(max(int(request.args.get("days", 14)), 1), 365)
    except ValueError:
        days = 14
    board = dashboard(
        get_session(),
        get_review_queue(),
        engine=get_engine(),
        models_dir=current_app.config.get("MODELS_DIR"),
        window_days=days,
    )
    charts = {
        "depth": line_chart(board.depth_series, title="Open review items over time"),
        "route": bar_chart(
            _rate_bars(board.by_route),
            title="Escalation rate by route",
            max_value=1.0,
        ),
        "intent": bar_chart(
            _rate_bars(board.by_intent),
            title="Escalation rate by intent (most escalated)",
            max_value=1.0,
        ),
        "reason": bar_chart(
            [(name, n, str(n)) for name, n in board.by_reason], title="Escalations by reason"
        ),
    }
    return render_template("console/stats.html", board=board, charts=charts, days=days)


models_console.register(bp)  # /console/models: versions, canary, shadow


# -- errors -------------------------------------------------------------------------------------


@bp.errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    return render_template("console/error.html", error=exc), exc.code or 500


from app.review import console_handoff  # noqa: E402,F401 - handoff pages on this blueprint
