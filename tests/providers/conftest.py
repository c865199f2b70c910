"""Fixtures for provider tests: one HTTP peer per session, reset for every test, and keys."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from herald.providers import create_http_client
from tests.fixtures.peers import LOCAL_PEERS, EcKey, HttpPeer, RsaKey, new_p8_key, new_rsa_key
from tests.providers.cases import Keys


@pytest.fixture(scope="session")
def _http_peer() -> Iterator[HttpPeer]:
    peer = HttpPeer().start()
    yield peer
    peer.stop()


@pytest.fixture
def peer(_http_peer: HttpPeer) -> Iterator[HttpPeer]:
    _http_peer.reset()
    yield _http_peer
    _http_peer.reset()


# Clients are shared by the whole session, as the engine shares one.


@pytest.fixture(scope="session")
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with create_http_client(timeout=5.0, outbound=LOCAL_PEERS) as client:
        yield client


@pytest.fixture(scope="session")
async def impatient_http() -> AsyncIterator[httpx.AsyncClient]:
    """A client that gives up after 0.25 s, for a peer that stalls."""
    async with create_http_client(timeout=0.25, outbound=LOCAL_PEERS) as client:
        yield client


@pytest.fixture(scope="session")
def rsa_key() -> RsaKey:
    return new_rsa_key()


@pytest.fixture(scope="session")
def p8_key() -> EcKey:
    return new_p8_key()


@pytest.fixture
def keys(rsa_key: RsaKey, p8_key: EcKey) -> Keys:
    return Keys(rsa=rsa_key, p8=p8_key)
