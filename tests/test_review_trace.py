"""Reading stored routing traces, SVG charts and queue statistics."""

from __future__ import annotations

from datetime import datetime, timedelta

from fixtures_review import SAMPLE_TRACE
from hypothesis import given, settings
from hypothesis import strategies as st

from app.review.stats import depth_over_time, model_trained_at
from app.review.svg import bar_chart, line_chart
from app.review.trace import read_trace

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(
                ["tier", "intents", "candidates", "slug", "score", "x", "stages", "name"]
            )
            | st.text(max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


def test_sample_trace_tiers():
    view = read_trace(SAMPLE_TRACE)
    names = [t.name for t in view.tiers]
    assert names == ["fasttext", "bm25", "bert"]
    bert = view.tiers[2]
    assert bert.intents[0] == ("card_arrival", 0.47)
    assert bert.candidates[0]["slug"] == "card-arrival" and bert.candidates[0]["score"] == 0.81
    assert view.summary["route"] == "complex" and view.summary["confidence"] == "0.41"


def test_tier_result_shapes_are_understood():
    from app.nlp.types import Candidate, TierResult

    result = TierResult(
        tier="bm25",
        intents=[("a", 0.9)],
        candidates=[Candidate("s", "T", 3.5, "a")],
        confidence=0.7,
        ms=1.2,
    )
    view = read_trace({"tiers": [result.to_dict()]})
    assert view.tiers[0].name == "bm25" and view.tiers[0].candidates[0]["title"] == "T"
    assert view.tiers[0].details["confidence"] == "0.7"


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_trace_is_read_without_error(trace):
    view = read_trace(trace)
    assert isinstance(view.raw_json, str)
    for tier in view.tiers:
        assert all(isinstance(name, str) for name, _ in tier.intents)


def test_depth_over_time_sweep():
    t0 = datetime(2026, 1, 1)
    spans = [
        (t0, t0 + timedelta(hours=2)),
        (t0 + timedelta(hours=1), None),
        (t0 + timedelta(hours=3), t0 + timedelta(hours=4)),
    ]
    series = depth_over_time(spans, t0, t0 + timedelta(hours=4), points=5)
    assert [d for _, d in series] == [1, 2, 1, 2, 1]


def test_svg_escapes_labels_and_handles_empty():
    svg = bar_chart([("<b>x</b>", 0.5, "1/2 <50%>")], title="t<")
    assert "<b>" not in svg and "&lt;b&gt;" in svg and "1/2 &lt;50%&gt;" in svg
    assert "no data yet" in line_chart([], title="empty")
    assert "<polyline" in line_chart([("a", 1), ("b", 3)], title="depth")


def test_model_trained_at_from_engine_or_metadata(tmp_path):
    class Engine:
        trained_at = "2026-05-01T10:00:00Z"

    assert model_trained_at(Engine(), None) == datetime(2026, 5, 1, 10)
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "meta.json").write_text('{"trained_at": "2026-06-01T08:00:00Z"}')
    (tmp_path / "broken.json").write_text("{not json")
    assert model_trained_at(object(), tmp_path) == datetime(2026, 6, 1, 8)
    assert model_trained_at(object(), tmp_path / "missing") is None
    # The version ``current`` points at wins over newer, inactive versions.
    for version, moment in (("v1", "2026-07-01T00:00:00Z"), ("v2", "2026-08-01T00:00:00Z")):
        (tmp_path / "versions" / version).mkdir(parents=True)
        (tmp_path / "versions" / version / "manifest.json").write_text(
            f'{{"trained_at": "{moment}"}}'
        )
    (tmp_path / "current").write_text('{"version": "v1"}')
    assert model_trained_at(object(), tmp_path) == datetime(2026, 7, 1)


def test_dashboard_figures_on_every_database(any_db_url, redis_client, redis_prefix):
    """The stats page's queries on SQLite and PostgreSQL, with known rows."""
    from datetime import timedelta

    from app.db import session_scope
    from app.models import Conversation, Message, ReviewItem, TrainingExample, utcnow
    from app.review.queue import ReviewQueue
    from app.review.stats import dashboard

    now = utcnow()
    with session_scope(any_db_url) as session:
        conversation = Conversation(status="bot")
        session.add(conversation)
        session.flush()
        for i, route in enumerate(["simple", "simple", "simple", "complex"]):
            session.add(
                Message(
                    conversation_id=conversation.id,
                    seq=i,
                    role="customer",
                    text=f"q{i}",
                    route=route,
                    intent="card_arrival",
                )
            )
        session.flush()
        message_id = session.query(Message.id).first()[0]
        for minutes, unchanged, route in ((10, True, "simple"), (30, False, "complex")):
            session.add(
                ReviewItem(
                    conversation_id=conversation.id,
                    message_id=message_id,
                    reason="ambiguous",
                    route=route,
                    intent="card_arrival",
                    status="resolved",
                    created_at=now - timedelta(hours=1),
                    resolved_at=now - timedelta(hours=1) + timedelta(minutes=minutes),
                    draft_unchanged=unchanged,
                )
            )
        session.add(TrainingExample(text="taught", intent="card_arrival", origin="reviewer"))
    queue = ReviewQueue(redis_client, redis_prefix, any_db_url, lease_seconds=60)
    with session_scope(any_db_url) as session:
        board = dashboard(session, queue, engine=None, models_dir=None)
    assert board.median_resolve_s == 20 * 60
    assert (board.drafts_judged, board.drafts_unchanged) == (2, 1)
    assert sorted(board.by_route) == [("complex", 1, 1), ("simple", 1, 3)]
    assert board.by_intent == [("card_arrival", 2, 4)]
    assert board.taught_examples_pending == 1 and board.model_trained_at is None
    assert board.counts["resolved"] == 2 and board.counts["pending"] == 0
    assert max(depth for _, depth in board.depth_series) >= 1
