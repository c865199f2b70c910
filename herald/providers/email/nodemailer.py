"""Any SMTP server ("Custom SMTP" in Novu, provider id ``nodemailer``)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import aiosmtplib

from herald.kit.outbound import OutboundRefused
from herald.providers.base import EmailMessage, EmailProvider, ProviderError, SendResult
from herald.providers.email.mime import build_mime, render_mime
from herald.providers.email.smtp_pool import SmtpPool, pool_key
from herald.providers.http import TOTAL_TIMEOUT, excerpt, outbound_policy, refused_error


class Transfer:
    """Whether one send's message data began to go to the server: past that, a failure without a reply leaves it unknown
    whether the server has the message."""

    data_began = False

    def note(self) -> str:
        """What an error without a reply adds once DATA began."""
        return "; the message's data had been sent, so the server may have taken it" if self.data_began else ""


class TransferSMTP(aiosmtplib.SMTP):
    """aiosmtplib's client, which notes in the send's :class:`Transfer` when the DATA command begins (after every RCPT).

    ``data`` is aiosmtplib's public command, which ``sendmail`` and
    ``send_message`` call once the recipients are accepted.
    """

    transfer: Transfer | None = None

    async def data(self, message: str | bytes, /, **kwargs: Any) -> aiosmtplib.SMTPResponse:
        if self.transfer is not None:
            self.transfer.data_began = True
        return await super().data(message, **kwargs)


def smtp_pool(http: Any) -> SmtpPool | None:
    """The SMTP connections ``http``'s owner keeps (providers/http.py's client has them), or None."""
    pool = getattr(http, "smtp_pool", None)
    return pool if isinstance(pool, SmtpPool) else None


class SmtpProvider(EmailProvider):
    """Credentials: host, port, secure (implicit TLS), requireTls (STARTTLS or fail), ignoreTls
    (never STARTTLS), user, password, from, senderName, tlsOptions.rejectUnauthorized.

    Without secure, requireTls or ignoreTls, STARTTLS is used when the server offers it.
    Connections are kept open between sends, per integration (smtp_pool.py).
    """

    provider_id: ClassVar[str] = "nodemailer"
    display_name: ClassVar[str] = "Custom SMTP"
    required_credentials: ClassVar[tuple[str, ...]] = ("host",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("port", "user", "password", "secure", "requireTls", "ignoreTls")

    async def send(self, message: EmailMessage) -> SendResult:
        from_address, sender_name = self.sender(message)
        host = self.require("host")
        secure = self.flag("secure")
        port = self._port(secure)
        recipients = [*message.to, *message.cc, *message.bcc]
        # The same on every send of the message: a copy sent again after a crash carries the Message-ID of the first.
        stable_id = self.identity.message_id(from_address.rpartition("@")[2]) if self.identity is not None else None
        transfer = Transfer()
        if all(address.isascii() for address in (from_address, *recipients)):
            data, message_id = render_mime(message, from_address, sender_name, stable_id)

            async def send_on(client: aiosmtplib.SMTP) -> tuple[dict[str, aiosmtplib.SMTPResponse], str]:
                return await client.sendmail(from_address, recipients, data)
        else:
            # An address beyond ASCII needs SMTPUTF8, which aiosmtplib asks for when it flattens the message itself.
            mime = build_mime(message, from_address, sender_name, stable_id)
            message_id = str(mime["Message-ID"])

            async def send_on(client: aiosmtplib.SMTP) -> tuple[dict[str, aiosmtplib.SMTPResponse], str]:
                return await client.send_message(mime, sender=from_address, recipients=recipients)

        async def transmit(client: aiosmtplib.SMTP) -> tuple[dict[str, aiosmtplib.SMTPResponse], str]:
            if isinstance(client, TransferSMTP):
                client.transfer = transfer
            try:
                return await send_on(client)
            finally:
                if isinstance(client, TransferSMTP):
                    client.transfer = None
        timeout = self.http.timeout.read or TOTAL_TIMEOUT
        connect_timeout = min(self.http.timeout.connect or timeout, timeout)

        async def connect() -> aiosmtplib.SMTP:
            """A new connection, greeted, with STARTTLS and AUTH as the credentials say."""
            client = TransferSMTP(
                hostname=host,  # for TLS: SNI and the certificate
                use_tls=secure,
                start_tls=self._start_tls(secure),
                validate_certs=self._validate_certs(),
                username=self.credential("user"),
                password=self.credential("password"),
                timeout=timeout,
            )
            try:
                # Connected here, to an address the outbound policy checked, and
                # handed to aiosmtplib, which would otherwise resolve the name again.
                sock = await outbound_policy(self.http).connect_socket(host, port, connect_timeout)
            except OutboundRefused as exc:
                raise refused_error(self.provider_id, exc) from None
            except TimeoutError as exc:
                raise self.error(
                    f"SMTP server {host}:{port} timed out: no connection within {connect_timeout:g} s", transient=True
                ) from exc
            except OSError as exc:
                raise self.error(f"could not reach SMTP server {host}:{port}: {exc}", transient=True) from exc
            # From here the socket is aiosmtplib's: its transport closes it.
            try:
                await client.connect(sock=sock)
            except BaseException:
                client.close()
                raise
            return client

        if self.before_handover is not None:
            # The engine writes down that this attempt hands the message over (steps/delivery.py); whatever
            # stops it (the job taken over, the store unreachable) stops the send, and goes up as it is.
            await self.before_handover()
        try:
            async with asyncio.timeout(timeout * 2):
                refused, reply = await self._deliver(connect, transmit, transfer)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            codes = [refusal.code for refusal in exc.recipients]
            details = "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in exc.recipients)
            raise self.error(
                f"every recipient was refused: {details}",
                transient=all(400 <= code < 500 for code in codes),
                status_code=codes[0] if codes else None,
            ) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise self._response_error(exc) from exc
        except (aiosmtplib.SMTPTimeoutError, TimeoutError) as exc:
            raise self._unanswered(f"SMTP server {host}:{port} timed out: {exc}", transfer) from exc
        except aiosmtplib.SMTPConnectError as exc:
            # aiosmtplib reports a failed TLS handshake (implicit TLS) as a connection error.
            failed_tls = isinstance(exc.__cause__, ssl.SSLError)
            raise self.error(f"could not talk to SMTP server {host}:{port}: {exc}", transient=not failed_tls) from exc
        except aiosmtplib.SMTPServerDisconnected as exc:
            raise self._unanswered(f"could not talk to SMTP server {host}:{port}: {exc}", transfer) from exc
        except ssl.SSLError as exc:
            raise self.error(f"TLS with {host}:{port} failed: {exc}", transient=False) from exc
        except aiosmtplib.SMTPException as exc:
            # STARTTLS or AUTH demanded but not offered, and the like: a
            # configuration mismatch that retrying will not fix.
            raise self.error(f"SMTP server {host}:{port}: {exc}", transient=False) from exc
        except OSError as exc:
            raise self._unanswered(f"could not reach SMTP server {host}:{port}: {exc}", transfer) from exc

        failures = [f"{address}: {answer.code} {answer.message}" for address, answer in refused.items()]
        raw: dict[str, Any] = {"response": reply}
        if refused:
            raw["refused"] = {address: f"{answer.code} {answer.message}" for address, answer in refused.items()}
        return SendResult(provider_message_id=message_id, raw=raw, failures=failures)

    async def _deliver(
        self,
        connect: Callable[[], Awaitable[aiosmtplib.SMTP]],
        transmit: Callable[[aiosmtplib.SMTP], Awaitable[tuple[dict[str, aiosmtplib.SMTPResponse], str]]],
        transfer: Transfer,
    ) -> tuple[dict[str, aiosmtplib.SMTPResponse], str]:
        """Send on a pooled connection of this integration (smtp_pool.py), or on one of its own.

        A reused connection the server closed while it sat idle fails on its
        first command; the send then goes once more on a fresh connection, unless
        the message's data had begun to go (the server may have it: that is the
        engine's to decide).
        """
        pool = smtp_pool(self.http)
        if pool is None:
            client = await connect()
            async with client:
                return await transmit(client)
        key = pool_key(self.integration_id, self.credentials)
        while True:
            reused = False
            try:
                async with pool.connection(key, connect) as connection:
                    reused = connection.reused
                    return await transmit(connection.client)
            except (aiosmtplib.SMTPServerDisconnected, ConnectionError):
                if not reused or transfer.data_began:
                    raise

    def _unanswered(self, text: str, transfer: Transfer) -> ProviderError:
        """A transient failure without a reply; once the data began, the server may have the message (``maybe_taken``)."""
        error = self.error(text + transfer.note(), transient=True)
        error.maybe_taken = transfer.data_began
        return error

    def _port(self, secure: bool) -> int:
        value = self.credential("port")
        if value is None:
            return 465 if secure else 587
        try:
            return int(value)
        except ValueError:
            raise self.error(f"credential port is not a number: {value!r}", transient=False) from None

    def _start_tls(self, secure: bool) -> bool | None:
        if secure:
            return False  # already TLS from the first byte
        if self.flag("ignoreTls"):
            return False
        if self.flag("requireTls"):
            return True
        return None  # STARTTLS when offered

    def _validate_certs(self) -> bool:
        options = self.credentials.get("tlsOptions")
        return not (isinstance(options, dict) and options.get("rejectUnauthorized") is False)

    def _response_error(self, exc: aiosmtplib.SMTPResponseException) -> ProviderError:
        kind = (
            "authentication failed" if isinstance(exc, aiosmtplib.SMTPAuthenticationError) else "SMTP server answered"
        )
        return self.error(
            f"{kind}: {exc.code} {excerpt(exc.message)}",
            # 4yz replies are temporary by definition (RFC 5321 §4.2.1), 5yz permanent.
            transient=400 <= exc.code < 500,
            status_code=exc.code,
        )
