"""Cross-origin access to the chat API (app/chat/cors.py): only configured origins, refusals
as JSON 403 that store nothing."""

from __future__ import annotations

from fixtures_chat import api_error, rows

from app.models import Message


def test_cors_allows_configured_origins_only(make_app, db_url):
    client = make_app(CORS_ORIGINS=["https://shop.example"]).test_client()
    preflight = client.options(
        "/api/v1/chat",
        headers={
            "Origin": "https://shop.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "https://shop.example"
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    assert "Content-Type" in preflight.headers["Access-Control-Allow-Headers"]
    allowed = client.post(
        "/api/v1/chat", json={"message": "hi"}, headers={"Origin": "https://shop.example"}
    )
    assert allowed.status_code == 200
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://shop.example"

    evil = {"Origin": "https://evil.example"}
    refused = client.options(
        "/api/v1/chat", headers={**evil, "Access-Control-Request-Method": "POST"}
    )
    api_error(refused, 403, "origin_not_allowed")
    assert "Access-Control-Allow-Origin" not in refused.headers
    post = client.post("/api/v1/chat", json={"message": "hi"}, headers=evil)
    api_error(post, 403, "origin_not_allowed")
    assert len(rows(db_url, Message, role="customer")) == 1

    same_site = client.post(
        "/api/v1/chat", json={"message": "hi"}, headers={"Origin": "http://localhost"}
    )
    assert same_site.status_code == 200
    assert "Access-Control-Allow-Origin" not in same_site.headers


def test_no_cross_origin_access_by_default(client):
    resp = client.post(
        "/api/v1/chat", json={"message": "hi"}, headers={"Origin": "https://shop.example"}
    )
    api_error(resp, 403, "origin_not_allowed")


def test_a_malformed_origin_is_a_foreign_one_not_a_500(client, db_url):
    for origin in ("http://[::1", "http://[", "http://%zz]"):
        preflight = client.options(
            "/api/v1/chat", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
        )
        api_error(preflight, 403, "origin_not_allowed")
        post = client.post("/api/v1/chat", json={"message": "hi"}, headers={"Origin": origin})
        api_error(post, 403, "origin_not_allowed")
    assert rows(db_url, Message, role="customer") == []
