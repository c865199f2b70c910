"""The outbound policy: which addresses delivery may connect to.

Integration credentials and subscriber channels are written by API callers,
and they carry addresses Herald connects to (``credentials.baseUrl``, webhook
URLs, an SMTP host, a service account's ``token_uri``). Without a policy, a
caller could make Herald reach what only Herald can reach: the loopback
interface, the private network, the cloud metadata service (server-side
request forgery). So every outbound connection is checked here, on the address
actually connected to, after name resolution:

- the name is resolved once, every address it resolves to is checked, and the
  connection is made to a checked IP address, so no second lookup can answer
  differently between the check and the connection (DNS rebinding);
- TLS still verifies the host name (SNI and certificate): the callers connect
  by address and start TLS with the name.

Refused by default: loopback, private (RFC 1918, unique-local), link-local
(with the cloud metadata address), shared (carrier-grade NAT), multicast,
unspecified, reserved and other special-purpose addresses, in IPv4 and IPv6,
and IPv4 addresses written as IPv6 (``::ffff:127.0.0.1``). The setting
``HERALD_OUTBOUND_ALLOW`` lets named ones through: a host name is allowed
whatever it resolves to; an IP address or a CIDR range allows the addresses
inside it.

Two network backends plug the check into httpx (whose transports take no
hook between resolution and connection; httpcore takes a network backend):
:class:`GuardedAsyncBackend` for the providers' shared client and
:class:`GuardedSyncBackend` for the synchronous client google-auth mints FCM
tokens with. :meth:`OutboundPolicy.connect_socket` gives aiosmtplib an
already-connected socket for SMTP.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import time
import typing
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore

from herald.kit.asyncio_network import AsyncioBackend

SETTING = "HERALD_OUTBOUND_ALLOW"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_CARRIER_GRADE_NAT = ipaddress.ip_network("100.64.0.0/10")
_PRIVATE = (
    ipaddress.ip_network("10.0.0.0/8"),
    ipaddress.ip_network("172.16.0.0/12"),
    ipaddress.ip_network("192.168.0.0/16"),
    ipaddress.ip_network("fc00::/7"),
)
# AWS, GCP, Azure, OpenStack and others answer on 169.254.169.254; AWS also on fd00:ec2::254.
_METADATA = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})
_HOST_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$")


class OutboundRefused(Exception):
    """A connection the outbound policy does not allow; retrying cannot change that."""

    def __init__(self, host: str, address: str, why: str) -> None:
        self.host = host
        self.address = address
        self.why = why
        where = why if _same_host(host, address) else f"{host} resolves to {why}"
        super().__init__(f"outbound policy refused {address} ({where}); allow it with {SETTING}")


def refusal_reason(address: IPAddress) -> str | None:
    """What kind of address this is when the policy refuses it by default, else None."""
    if isinstance(address, ipaddress.IPv6Address):
        # An IPv4 address written as IPv6 reaches that IPv4 address.
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            address = embedded
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address in _METADATA:
        return "the cloud metadata address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if any(address in network for network in _PRIVATE):
        return "a private address"
    if address in _CARRIER_GRADE_NAT:
        return "a shared (carrier-grade NAT) address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "a special-purpose address"
    return None


@dataclass(frozen=True)
class OutboundPolicy:
    """The addresses outbound connections may reach; built once, from ``HERALD_OUTBOUND_ALLOW``.

    ``OutboundPolicy()`` is the default, strict policy.
    """

    allowed_hosts: frozenset[str] = frozenset()
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def allowing(cls, entries: Iterable[str]) -> OutboundPolicy:
        """The policy that lets ``entries`` through (host names, IP addresses, CIDR ranges).

        Raises ValueError naming an entry that is none of these.
        """
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = _normalize(entry)
            # An all-numeric last label is a mistyped address (10.0.0), never a host name.
            if "/" in entry or ":" in entry or not _HOST_NAME.match(name) or name.rsplit(".", 1)[-1].isdigit():
                raise ValueError(f"{entry!r} is neither a host name, an IP address nor a CIDR range")
            hosts.add(name)
        return cls(frozenset(hosts), tuple(networks))

    def check(self, host: str, addresses: Iterable[str]) -> list[str]:
        """The addresses ``host`` resolved to, when every one is allowed; raises OutboundRefused otherwise.

        One refused address refuses them all: a name that resolves to both a
        public and an internal address is not a name to trust with either.
        """
        checked = list(addresses)
        if self.allowed_hosts and _normalize(host) in self.allowed_hosts:
            return checked
        for text in checked:
            address = ipaddress.ip_address(text)
            if self.allowed_networks and self._allowed_address(address):
                continue
            why = refusal_reason(address)
            if why is not None:
                raise OutboundRefused(host, text, why)
        return checked

    def _allowed_address(self, address: IPAddress) -> bool:
        forms = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        return any(form in network for form in forms for network in self.allowed_networks)

    async def resolve(self, host: str, port: int, timeout: float | None = None) -> list[tuple[socket.AddressFamily, tuple[typing.Any, ...]]]:
        """Resolve ``host`` once (the event loop's getaddrinfo) and check every address; (family, sockaddr) pairs."""
        infos = _literal(host, port)
        if infos is None:
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(timeout):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        return self._checked(host, infos)

    def resolve_sync(self, host: str, port: int) -> list[tuple[socket.AddressFamily, tuple[typing.Any, ...]]]:
        """:meth:`resolve` for synchronous callers."""
        infos = _literal(host, port)
        if infos is None:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        return self._checked(host, infos)

    def _checked(self, host: str, infos: list[typing.Any]) -> list[tuple[socket.AddressFamily, tuple[typing.Any, ...]]]:
        found: list[tuple[socket.AddressFamily, tuple[typing.Any, ...]]] = []
        for family, _type, _proto, _name, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6) and (family, sockaddr) not in found:
                found.append((family, sockaddr))
        if not found:
            raise OSError(f"{host} has no IPv4 or IPv6 address")
        self.check(host, [_address_text(sockaddr) for _family, sockaddr in found])
        return found

    async def connect_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        """A TCP socket connected to a checked address of ``host`` (non-blocking), within ``timeout``.

        For clients that take a connected socket (aiosmtplib's ``sock=``) and
        keep the host name for TLS. The addresses are tried in the order the
        resolver gave them, as ``socket.create_connection`` does.
        """
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout
        addresses = await self.resolve(host, port, timeout)
        error: OSError | None = None
        for family, sockaddr in addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await loop.sock_connect(sock, sockaddr)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
            except BaseException:
                sock.close()
                raise
        assert error is not None
        raise error


class GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the outbound check between resolution and connection.

    httpcore hands ``connect_tcp`` the URL's host; this resolves it, checks
    every address and has the wrapped backend connect to a checked address.
    httpcore then starts TLS with the URL's host as ``server_hostname``, so the
    certificate is still verified against the name.
    """

    def __init__(self, policy: OutboundPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        # asyncio's streams rather than httpcore's default anyio ones: a quarter less CPU a request (kit/asyncio_network.py).
        self._inner = inner or AsyncioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        started = time.monotonic()
        try:
            addresses = await self.policy.resolve(host, port, timeout)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        error: Exception | None = None
        for _family, sockaddr in addresses:
            remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
            try:
                return await self._inner.connect_tcp(
                    _address_text(sockaddr), port, timeout=remaining, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("outbound policy: Unix sockets are not used for delivery")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedSyncBackend(httpcore.NetworkBackend):
    """:class:`GuardedAsyncBackend` for synchronous httpx clients."""

    def __init__(self, policy: OutboundPolicy, inner: httpcore.NetworkBackend | None = None) -> None:
        self.policy = policy
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self.policy.resolve_sync(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        error: Exception | None = None
        for _family, sockaddr in addresses:
            try:
                return self._inner.connect_tcp(
                    _address_text(sockaddr), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("outbound policy: Unix sockets are not used for delivery")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _literal(host: str, port: int) -> list[typing.Any] | None:
    """getaddrinfo's answer for an IP address (no lookup, no executor thread), or None for a name."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            return None  # getaddrinfo turns the scope's name into its number
        return [(socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port, 0, 0))]
    return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port))]


def _address_text(sockaddr: tuple[typing.Any, ...]) -> str:
    return str(sockaddr[0])


def _normalize(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _same_host(host: str, address: str) -> bool:
    try:
        return ipaddress.ip_address(_normalize(host)) == ipaddress.ip_address(address)
    except ValueError:
        return False
