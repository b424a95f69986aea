"""gunicorn --preload: a process forked after torch used its thread pool still runs torch
(app/forking.py), and a preloaded 2-worker server answers BERT-route questions concurrently."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest
from ops_servers import Server


def _child_runs_torch(torch) -> int:
    pid = os.fork()
    if pid == 0:  # the child: torch's parallel ops, then out without running pytest's exit
        signal.alarm(20)  # a hang ends as SIGALRM instead of blocking the suite
        x = torch.ones(4_000_000)
        for _ in range(5):
            x = (x * 1.0001 + 1).sqrt()
        os._exit(0 if float(x.sum()) > 0 else 3)
    _, status = os.waitpid(pid, 0)
    return status


def test_a_forked_worker_runs_torch_after_the_master_used_its_thread_pool():
    torch = pytest.importorskip("torch")
    from app import forking

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        x = torch.ones(4_000_000)
        assert float((x * 2 + 1).sqrt().sum()) > 0  # the parent's pool is up
        forking.register()
        assert _child_runs_torch(torch) == 0
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_a_preloaded_server_answers_concurrent_bert_questions(
    tmp_path, db_url, redis_url, redis_prefix, redis_client, nlp_content, trained_models_dir
):
    from fixtures_nlp import import_content, private_models_dir

    import_content(db_url, *nlp_content)
    server = Server(
        db_url=db_url,
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        models_dir=private_models_dir(trained_models_dir, tmp_path / "models"),
        var_dir=tmp_path / "var",
        workers=2,
        env={"TIERDESK_PRELOAD": "1", "TIERDESK_ANSWER_CACHE_SIZE": "0"},
    )
    questions = [
        f"there is a payment on my card that I did not make, number {i}" for i in range(24)
    ]
    with server:
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(lambda q: server.json("POST", "/api/v1/chat", {"message": q}), questions)
            )
    assert [status for status, _ in answers] == [200] * len(questions)
    assert {body["route"] for _, body in answers} & {"complex"}, answers[0]
