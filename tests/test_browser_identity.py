"""The widget on a host site of another origin, under the host CSP docs/privacy.md documents:
a verified customer's conversation follows them to a second device; another customer sees none.

The host site is a second real HTTP server (http://localhost:<port>, another origin than the
app's http://127.0.0.1:<port>) that sends its own CSP; the widget script, its stylesheet and
the API come from the real app.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fixtures_chat import serve_app
from werkzeug.serving import make_server

from app.privacy.identity import sign

pytestmark = pytest.mark.browser

SECRET = "host-site-identity-secret"
LISTEN = """
window.__cspViolations = [];
document.addEventListener('securitypolicyviolation', function (e) {
  window.__cspViolations.push(e.violatedDirective + ' ' + e.blockedURI);
});
"""


def _host_page(base: str, customer_id: str) -> tuple[str, dict[str, str]]:
    html = f"""<!doctype html><html><head><title>Bank</title></head><body><h1>Your account</h1>
<script src="{base}/static/widget/widget.js" data-tierdesk-url="{base}"
  data-tierdesk-customer-id="{customer_id}"
  data-tierdesk-customer-hash="{sign(SECRET, customer_id)}" defer></script></body></html>"""
    # The host site's own policy, with what the widget needs (docs/privacy.md).
    csp = f"default-src 'self'; script-src {base}; style-src {base}; connect-src {base}; img-src {base} data:"
    return html, {"Content-Security-Policy": csp, "Content-Type": "text/html"}


@contextmanager
def host_site(base: str) -> Iterator[str]:
    """The bank's own site: /account/<customer id> embeds the widget signed for that id."""

    def wsgi(environ, start_response):
        customer_id = environ["PATH_INFO"].rsplit("/", 1)[-1]
        html, headers = _host_page(base, customer_id)
        start_response("200 OK", list(headers.items()))
        return [html.encode()]

    server = make_server("127.0.0.1", 0, wsgi, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def _device(browser, host: str, customer_id: str):
    context = browser.new_context()
    context.add_init_script(LISTEN)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{host}/account/{customer_id}")
    page.click("#tierdesk-launcher")
    page.wait_for_selector("#tierdesk-panel:not([hidden])")
    return context, page


def test_history_follows_a_verified_customer_to_another_device(browser, make_app):
    app = make_app(IDENTITY_SECRET=SECRET, CORS_ORIGINS=["*"])
    with serve_app(app) as base, host_site(base) as host:
        app.config["CORS_ORIGINS"] = [host]
        laptop_ctx, laptop = _device(browser, host, "cust-42")
        laptop.fill("#tierdesk-input", "talk to a person about my mortgage")
        laptop.keyboard.press("Enter")
        laptop.wait_for_selector("text=a person from our team")
        phone_ctx, phone = _device(browser, host, "cust-42")
        phone.wait_for_selector("text=talk to a person about my mortgage")
        other_ctx, other = _device(browser, host, "cust-43")
        other.wait_for_timeout(1500)  # time for a history fetch, if there were one
        assert "mortgage" not in other.inner_text("#tierdesk-panel")
        violations = [p.evaluate("window.__cspViolations") for p in (laptop, phone, other)]
        for context in (laptop_ctx, phone_ctx, other_ctx):
            context.close()
    assert violations == [[], [], []]
