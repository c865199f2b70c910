"""herald serve's HTTP protocol: the bounded httptools one, or h11's own bound when uvicorn is not the pinned version."""

from __future__ import annotations

import pytest

from herald.kit import http_protocol


def test_the_pinned_versions_get_the_bounded_httptools_protocol() -> None:
    options = http_protocol.uvicorn_http_options(7.5)
    assert issubclass(options["http"], http_protocol.HeadLimitedProtocol)
    assert options["http"].head_timeout == 7.5


def test_other_versions_fall_back_to_h11_with_its_head_limit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(http_protocol, "PINNED", {"uvicorn": "0.0.1", "httptools": "0.0.1"})
    assert http_protocol.uvicorn_http_options(30) == {"http": "h11", "h11_max_incomplete_event_size": 64 * 1024}
    assert "serving HTTP with h11" in caplog.text
