"""Experiments: two router configurations over the same models, sticky per conversation, with
per-arm metrics and a significance estimate (CLI, console, and the engine with real models)."""

from __future__ import annotations

import pytest

from app.db import session_scope
from app.models import Conversation, Message, new_id
from app.nlp import experiments
from app.nlp.canary import arm_metrics
from app.nlp.experiments import Experiment, ExperimentError, parse_overrides, two_proportion
from app.services import ENGINE_KEY


def test_overrides_are_checked():
    assert parse_overrides(["tau_review=0.8", "tau_fast=0.5"]) == {
        "tau_review": 0.8,
        "tau_fast": 0.5,
    }
    for bad, match in (
        (["tau_review"], "expected NAME=VALUE"),
        (["budget=0.5"], "expected NAME=VALUE"),
        (["tau_review=high"], "not a number"),
        (["tau_review=1.5"], "between 0 and 1"),
    ):
        with pytest.raises(ExperimentError, match=match):
            parse_overrides(bad)
    with pytest.raises(ExperimentError, match="INTENT=simple or INTENT=complex"):
        experiments.parse_tiers(["card_arrival=medium"])


def test_arms_are_sticky_and_split_by_share():
    experiment = Experiment("pilot", 0.3, {"tau_review": 0.8})
    ids = [new_id() for _ in range(3000)]
    arms = [experiment.arm(i) for i in ids]
    assert arms == [experiment.arm(i) for i in ids]
    assert 0.27 < arms.count("b") / len(arms) < 0.33
    other = Experiment("other", 0.3, {"tau_review": 0.8})
    assert [other.arm(i) for i in ids] != arms  # each experiment draws its own split


def test_two_proportion_test():
    same = two_proportion(50, 500, 52, 500)
    assert same["p_value"] > 0.5
    clear = two_proportion(50, 500, 100, 500)
    assert clear["diff"] == pytest.approx(0.1) and clear["p_value"] < 0.001
    assert two_proportion(0, 0, 1, 10)["p_value"] is None


def test_start_stop_and_show(app):
    from app.cli import main

    runner = app.test_cli_runner()
    url = app.config["SQLALCHEMY_DATABASE_URI"]

    def run(*args):
        result = runner.invoke(main, ["experiment", *args])
        return result.exit_code, result.output

    code, out = run("start", "pilot", "--share", "0.5", "--set", "tau_review=0.8")
    assert code == 0, out
    assert 'arm b on 50% of conversations with {"tau_review": 0.8}' in out
    code, out = run("start", "again", "--set", "tau_review=0.7")
    assert code != 0 and "'pilot' is running" in out
    code, out = run("start", "empty")
    assert code != 0
    for arm, escalated in (("a", 5), ("b", 30)):
        with session_scope(url) as session:
            for i in range(100):
                conversation = Conversation(id=new_id())
                session.add(conversation)
                session.flush()
                trace = {
                    "versions": {"models": "v1"},
                    "experiment": {"name": "pilot", "arm": arm},
                    "escalation_reason": "below_threshold" if i < escalated else None,
                }
                session.add(
                    Message(conversation_id=conversation.id, role="bot", text="a", trace=trace)
                )
    code, out = run("show")
    assert code == 0, out
    assert "arm a: 100 answers, escalated 5.0%" in out
    assert "arm b: 100 answers, escalated 30.0%" in out
    assert "escalation: b - a = +25.0%, p = 0.000" in out
    assert run("stop") == (0, "experiment pilot stopped\n")
    code, out = run("show", "pilot")
    assert code == 0 and "stopped" in out
    code, out = run("start", "pilot", "--set", "tau_review=0.8")
    assert code != 0 and "ran before" in out
    assert run("stop")[0] != 0


@pytest.mark.slow
def test_engine_routes_each_arm_with_its_thresholds(lifecycle_app, make_reviewer):
    from fixtures_review import login

    app = lifecycle_app
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    engine = app.extensions[ENGINE_KEY]
    with session_scope(url) as session:
        experiments.start(session, "strict", 0.5, {"tau_review": 0.9999}, {}, "now")
    assert engine.check_for_updates(wait=True)
    assert engine.status()["experiment"] == {"name": "strict", "share": 0.5}
    client = app.test_client()
    question = "how do I change my pin"
    arms = {}
    for _ in range(16):
        reply = client.post("/api/v1/chat", json={"message": question}).get_json()
        with session_scope(url) as session:
            bot = session.get(Message, reply["message_id"])
            arm = bot.trace["experiment"]["arm"]
            assert arm == Experiment("strict", 0.5).arm(reply["conversation_id"])
            arms.setdefault(arm, set()).add(bot.trace["thresholds"]["tau_review"])
    assert set(arms) == {"a", "b"}
    assert arms["b"] == {0.9999} and 0.9999 not in arms["a"]  # one question, two thresholds
    with session_scope(url) as session:
        a, b = arm_metrics(session, "strict", "a"), arm_metrics(session, "strict", "b")
        assert b.escalation_rate > a.escalation_rate
    account = make_reviewer()
    console = app.test_client()
    assert login(console, account.email, account.password).status_code == 302
    page = console.get("/console/models").get_data(as_text=True)
    assert "Experiment <code>strict</code> (running)" in page and "b − a (p)" in page
