"""The providers' shared HTTP client: what one provider's answer leaves behind does not reach the next request."""

from __future__ import annotations

import base64

import httpx
from starlette.responses import Response

from herald.providers.http import send_raw
from tests.fixtures.peers import HttpPeer, RecordedRequest


def set_a_cookie(recorded: RecordedRequest) -> Response:
    return Response(status_code=202, headers={"set-cookie": "session=provider-a; Path=/"})


async def test_cookies_set_by_a_provider_are_not_sent_with_later_requests(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    """Providers share one client; a cookie one answer sets would otherwise ride along on every later request there."""
    peer.route("POST", "/first", set_a_cookie)
    peer.route("POST", "/second", set_a_cookie)

    first = await send_raw(http, "first", "POST", f"{peer.url}/first", json={})
    second = await send_raw(http, "second", "POST", f"{peer.url}/second", json={})

    assert (first.status_code, second.status_code) == (202, 202)
    assert first.headers["set-cookie"].startswith("session=")
    assert "cookie" not in peer.requests_to("/second")[0].headers


async def test_basic_auth_and_the_clients_own_headers_are_sent(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peer.route("POST", "/auth", lambda recorded: Response(status_code=200, content=b'{"ok":true}'))

    answer = await send_raw(http, "auth", "POST", f"{peer.url}/auth", auth=("AC123", "secret"), data={"a": "1"})

    [request] = peer.requests_to("/auth")
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"AC123:secret").decode()
    assert request.headers["user-agent"].startswith("herald/")
    assert request.form_value("a") == "1"
    assert answer.json() == {"ok": True} and answer.request.url == f"{peer.url}/auth"
