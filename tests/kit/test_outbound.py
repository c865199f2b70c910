"""The outbound policy itself: what it refuses, what HERALD_OUTBOUND_ALLOW lets through, and the setting."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpcore
import pytest

from herald.config import SettingsError, load_settings
from herald.kit.outbound import GuardedAsyncBackend, OutboundPolicy, OutboundRefused

STRICT = OutboundPolicy()


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.255.254", "a loopback address"),
        ("::1", "a loopback address"),
        ("10.0.0.1", "a private address"),
        ("10.255.255.255", "a private address"),
        ("172.16.0.1", "a private address"),
        ("172.31.255.254", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fc00::1", "a private address"),
        ("fd12:3456::1", "a private address"),
        ("169.254.169.254", "the cloud metadata address"),
        ("fd00:ec2::254", "the cloud metadata address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("100.127.255.254", "a shared (carrier-grade NAT) address"),
        ("224.0.0.1", "a multicast address"),
        ("239.255.255.250", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("0.0.0.0", "an unspecified address"),
        ("::", "an unspecified address"),
        ("240.0.0.1", "a reserved address"),
        ("255.255.255.255", "a reserved address"),
        ("192.0.2.1", "a special-purpose address"),  # documentation (TEST-NET-1)
        # IPv4 written as IPv6 reaches the IPv4 address.
        ("::ffff:127.0.0.1", "a loopback address"),
        ("::ffff:10.1.2.3", "a private address"),
        ("::ffff:169.254.169.254", "the cloud metadata address"),
        ("::ffff:100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("2002:7f00:1::", "a loopback address"),  # 6to4 of 127.0.0.1
    ],
)
def test_the_default_policy_refuses(address: str, kind: str) -> None:
    with pytest.raises(OutboundRefused) as refused:
        STRICT.check(address, [address])

    assert str(refused.value) == f"outbound policy refused {address} ({kind}); allow it with HERALD_OUTBOUND_ALLOW"


@pytest.mark.parametrize(
    "address",
    ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"],
)
def test_the_default_policy_lets_public_addresses_through(address: str) -> None:
    assert STRICT.check(address, [address]) == [address]


def test_a_refusal_names_the_host_and_what_it_resolves_to() -> None:
    with pytest.raises(OutboundRefused) as refused:
        STRICT.check("hooks.internal", ["127.0.0.1"])

    assert str(refused.value) == (
        "outbound policy refused 127.0.0.1 (hooks.internal resolves to a loopback address); "
        "allow it with HERALD_OUTBOUND_ALLOW"
    )


def test_one_internal_address_among_public_ones_refuses_the_name() -> None:
    with pytest.raises(OutboundRefused) as refused:
        STRICT.check("mixed.example", ["93.184.216.34", "169.254.169.254"])

    assert refused.value.address == "169.254.169.254"


def test_a_host_name_entry_allows_that_name_whatever_it_resolves_to() -> None:
    policy = OutboundPolicy.allowing(["hooks.internal"])

    assert policy.check("hooks.internal", ["127.0.0.1", "10.0.0.5"]) == ["127.0.0.1", "10.0.0.5"]
    assert policy.check("HOOKS.Internal.", ["127.0.0.1"]) == ["127.0.0.1"]  # case and the root dot do not matter
    with pytest.raises(OutboundRefused):
        policy.check("other.internal", ["127.0.0.1"])
    with pytest.raises(OutboundRefused):
        policy.check("127.0.0.1", ["127.0.0.1"])


def test_an_ip_entry_allows_that_address_only() -> None:
    policy = OutboundPolicy.allowing(["127.0.0.1"])

    assert policy.check("127.0.0.1", ["127.0.0.1"]) == ["127.0.0.1"]
    assert policy.check("any.name", ["127.0.0.1"]) == ["127.0.0.1"]
    assert policy.check("::ffff:127.0.0.1", ["::ffff:127.0.0.1"]) == ["::ffff:127.0.0.1"]
    with pytest.raises(OutboundRefused):
        policy.check("127.0.0.2", ["127.0.0.2"])
    with pytest.raises(OutboundRefused):
        policy.check("::1", ["::1"])


def test_a_cidr_entry_allows_the_addresses_inside_it() -> None:
    policy = OutboundPolicy.allowing(["10.0.0.0/8", "fd00::/8", "[::1]"])

    assert policy.check("a", ["10.1.2.3"]) and policy.check("b", ["fd12::1"]) and policy.check("c", ["::1"])
    with pytest.raises(OutboundRefused):
        policy.check("d", ["192.168.0.1"])
    with pytest.raises(OutboundRefused):
        policy.check("e", ["fc00::1"])


def test_the_setting_is_read_into_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("HERALD_OUTBOUND_ALLOW", " 127.0.0.1, ::1 ,hooks.internal,,10.0.0.0/8 ")

    settings = load_settings(data_dir=tmp_path, secret_key="k")

    assert settings.outbound_allow == ("127.0.0.1", "::1", "hooks.internal", "10.0.0.0/8")


def test_without_the_setting_nothing_is_allowed(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("HERALD_OUTBOUND_ALLOW", raising=False)

    assert load_settings(data_dir=tmp_path, secret_key="k").outbound_allow == ()


@pytest.mark.parametrize(
    "entry", ["10.0.0.0/33", "http://hooks.internal", "hooks internal", "*.internal", "300.1.1.1/8", "10.0.0", "-bad.example"]
)
def test_an_entry_that_cannot_be_read_is_a_settings_error(
    entry: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("HERALD_OUTBOUND_ALLOW", f"127.0.0.1,{entry}")

    with pytest.raises(SettingsError) as raised:
        load_settings(data_dir=tmp_path, secret_key="k")

    assert "HERALD_OUTBOUND_ALLOW" in str(raised.value) and repr(entry) in str(raised.value)


async def test_a_name_that_resolves_to_loopback_is_refused_as_loopback() -> None:
    with pytest.raises(OutboundRefused) as refused:
        await STRICT.resolve("localhost", 80)

    assert "(localhost resolves to a loopback address)" in str(refused.value)


class RecordingBackend(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.hosts: list[str] = []

    async def connect_tcp(self, host: str, port: int, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        self.hosts.append(host)
        return httpcore.AsyncMockStream([])


async def test_the_backend_resolves_once_and_connects_to_the_checked_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: a second lookup could answer differently from the one checked; there is none."""
    answers = iter(["93.184.216.34", "127.0.0.1"])  # a resolver that changes its mind
    lookups: list[str] = []

    async def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (next(answers), port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    inner = RecordingBackend()

    await GuardedAsyncBackend(STRICT, inner).connect_tcp("rebind.example", 443, timeout=1.0)

    assert lookups == ["rebind.example"]
    assert inner.hosts == ["93.184.216.34"]  # the address checked, not the name


async def test_the_backend_refuses_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    async def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("169.254.169.254", port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    inner = RecordingBackend()

    with pytest.raises(OutboundRefused, match=r"metadata.example resolves to the cloud metadata address"):
        await GuardedAsyncBackend(STRICT, inner).connect_tcp("metadata.example", 80, timeout=1.0)

    assert inner.hosts == []
