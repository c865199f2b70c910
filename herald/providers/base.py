"""What every provider shares: the messages it sends, its result, its error and its base class."""

from __future__ import annotations

import hashlib
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import httpx

_TRUE_WORDS = frozenset({"true", "1", "yes", "on"})


@dataclass(frozen=True)
class Attachment:
    name: str
    mime: str
    content: bytes


@dataclass
class EmailMessage:
    to: list[str]
    subject: str
    html: str
    text: str = ""
    # When left out, the integration's ``from`` / ``senderName`` credentials are used.
    from_address: str | None = None
    sender_name: str | None = None
    reply_to: str | None = None
    cc: list[str] = field(default_factory=list)
    bcc: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)


@dataclass
class SmsMessage:
    to: str
    content: str
    # When left out, the integration's ``from`` credential is used.
    from_: str | None = None


@dataclass
class ChatMessage:
    content: str
    # The subscriber's webhook address; the integration's ``webhookUrl`` is the fallback.
    webhook_url: str | None = None
    channel: str | None = None
    title: str | None = None


@dataclass
class PushMessage:
    tokens: list[str]
    title: str
    content: str
    data: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class SendResult:
    provider_message_id: str | None
    raw: dict[str, Any] | None = None
    # Per-recipient errors when a send to several device tokens partly succeeded;
    # a send where every recipient failed raises ProviderError instead.
    failures: list[str] = field(default_factory=list)
    # The provider had this send already, under its idempotency key (a retry of a
    # send whose answer was lost): it took the message once, and did not send it again.
    deduplicated: bool = False


@dataclass(frozen=True)
class SendIdentity:
    """Which message a send is: the same on every attempt of it, so that a provider can tell a retry from a new message.

    ``message`` is the step's job (one message of one workflow step for one
    subscriber); ``delivery`` the delivery of it (an integration, or a
    subscriber's channel entry: chat and push send to each). A worker that died
    after the provider took the message, and before that was stored, is
    followed by another that sends it again: with the same identity, a provider
    that takes an idempotency key takes it once (docs/delivery.md).
    """

    message: str
    delivery: str

    @property
    def idempotency_key(self) -> str:
        """A UUID made from the message and the delivery (OneSignal and Brevo take only UUIDs; Resend any string)."""
        digest = hashlib.sha256(f"herald idempotency key\0{self.message}\0{self.delivery}".encode()).digest()
        return str(uuid.UUID(bytes=digest[:16], version=4))

    def message_id(self, domain: str) -> str:
        """An email's Message-ID: the same for every send of the message, whichever integration sends it."""
        digest = hashlib.sha256(f"herald message id\0{self.message}".encode()).hexdigest()[:32]
        return f"<{digest}@{domain or 'herald.invalid'}>"


# Called by a provider that cannot be asked later whether it took a message (SMTP) before its send
# begins: the engine records the attempt there (steps/delivery.py). Whatever it raises stops the
# send (the job was taken over, or the store cannot be written).
BeforeHandover = Callable[[], Awaitable[None]]


class ProviderError(Exception):
    """A send that did not go through.

    ``transient`` says whether the same send may succeed later (timeouts,
    connection errors, 5xx, 429); bad credentials, rejected addresses and
    other 4xx answers are permanent.
    """

    def __init__(self, message: str, *, transient: bool, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient
        self.status_code = status_code
        # The provider may have taken the message all the same: an SMTP connection lost after its data,
        # before the server's reply. A retry may deliver a second copy.
        self.maybe_taken = False

    def __repr__(self) -> str:
        return f"ProviderError({self.message!r}, transient={self.transient}, status_code={self.status_code})"


MessageT = TypeVar("MessageT")


class Provider(ABC, Generic[MessageT]):
    provider_id: ClassVar[str]
    channel: ClassVar[str]
    display_name: ClassVar[str]
    # The credentials it cannot send without (what ``send`` takes with ``require``):
    # an active integration of the provider must have them (herald.integrations.service).
    required_credentials: ClassVar[tuple[str, ...]] = ()
    # The credentials it reads when given (a port, a regional ``baseUrl``); with the channel's
    # own and the required ones, what a form for the provider asks for (:meth:`declared_credentials`).
    optional_credentials: ClassVar[tuple[str, ...]] = ()
    channel_credentials: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        credentials: Mapping[str, Any],
        http: httpx.AsyncClient,
        *,
        integration_id: str | None = None,
        identity: SendIdentity | None = None,
        before_handover: BeforeHandover | None = None,
    ) -> None:
        self.credentials: dict[str, Any] = dict(credentials)
        self.http = http
        # The integration sending: what a provider keeps between sends (SMTP connections) is kept per integration.
        self.integration_id = integration_id
        # Which message this is (its idempotency key, its Message-ID); None outside the engine.
        self.identity = identity
        self.before_handover = before_handover

    @classmethod
    def declared_credentials(cls) -> tuple[str, ...]:
        """Every credential the provider reads, the required ones first, each once (the API's names)."""
        return tuple(dict.fromkeys(cls.required_credentials + cls.channel_credentials + cls.optional_credentials))

    @property
    def idempotency_key(self) -> str | None:
        return self.identity.idempotency_key if self.identity is not None else None

    @abstractmethod
    async def send(self, message: MessageT) -> SendResult: ...

    # Credential access. Values come from JSON (strings, booleans, sometimes
    # numbers); blank strings count as absent.

    def credential(self, name: str) -> str | None:
        value = self.credentials.get(name)
        if value is None or isinstance(value, (dict, list)):
            return None
        text = str(value).strip()
        return text or None

    def require(self, name: str) -> str:
        value = self.credential(name)
        if value is None:
            raise self.error(f"credential {name} is missing", transient=False)
        return value

    def flag(self, name: str) -> bool:
        value = self.credentials.get(name)
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return value.strip().lower() in _TRUE_WORDS
        return bool(value) if isinstance(value, int) else False

    def base_url(self, default: str) -> str:
        """``credentials.baseUrl`` (a regional endpoint, a gateway or a test peer) or the provider's host."""
        return (self.credential("baseUrl") or default).rstrip("/")

    def error(self, text: str, *, transient: bool, status_code: int | None = None) -> ProviderError:
        return ProviderError(f"{self.provider_id}: {text}", transient=transient, status_code=status_code)


class EmailProvider(Provider[EmailMessage]):
    channel: ClassVar[str] = "email"
    channel_credentials: ClassVar[tuple[str, ...]] = ("from", "senderName")

    def sender(self, message: EmailMessage) -> tuple[str, str | None]:
        """The from address and display name: the message's, else the integration's."""
        address = message.from_address or self.credential("from")
        if not address:
            raise self.error("credential from is missing (no from address for the email)", transient=False)
        if not message.to:
            raise self.error("the email has no recipient", transient=False)
        return address, message.sender_name or self.credential("senderName")


class SmsProvider(Provider[SmsMessage]):
    channel: ClassVar[str] = "sms"
    channel_credentials: ClassVar[tuple[str, ...]] = ("from",)

    def check_recipient(self, message: SmsMessage) -> None:
        if not message.to or not message.to.strip():
            raise self.error("the SMS has no recipient phone number", transient=False)

    def sender(self, message: SmsMessage) -> str:
        sender = message.from_ or self.credential("from")
        if not sender:
            raise self.error("credential from is missing (no sender for the SMS)", transient=False)
        return sender


class ChatProvider(Provider[ChatMessage]):
    channel: ClassVar[str] = "chat"
    channel_credentials: ClassVar[tuple[str, ...]] = ("webhookUrl",)

    def webhook_url(self, message: ChatMessage) -> str:
        url = message.webhook_url or self.credential("webhookUrl")
        if not url:
            raise self.error(
                "no webhook URL: the subscriber's channel credentials and the integration have none",
                transient=False,
            )
        return url


class PushProvider(Provider[PushMessage]):
    channel: ClassVar[str] = "push"

    def check_tokens(self, message: PushMessage) -> list[str]:
        tokens = [token for token in message.tokens if token]
        if not tokens:
            raise self.error("the push has no device token", transient=False)
        return tokens

    def settle(self, outcomes: Sequence[tuple[str, str | None | ProviderError]]) -> SendResult:
        """One result for a send to several tokens: ``outcomes`` pairs each token with its message id or error.

        It succeeds when at least one token was accepted (the others are
        listed in ``failures``), and raises when none was: transient if any
        token failed for a reason that may pass.
        """
        sent = {token: outcome for token, outcome in outcomes if not isinstance(outcome, ProviderError)}
        failed = [(token, outcome) for token, outcome in outcomes if isinstance(outcome, ProviderError)]
        failures = [f"token {token}: {error.message}" for token, error in failed]
        if not sent:
            if len(failed) == 1:
                raise failed[0][1]
            raise ProviderError(
                "; ".join(failures),
                transient=any(error.transient for _, error in failed),
                status_code=failed[0][1].status_code,
            )
        first_id = next((message_id for message_id in sent.values() if message_id), None)
        raw: dict[str, Any] = {"sent": sent}
        if failed:
            raw["failed"] = {token: error.message for token, error in failed}
        return SendResult(provider_message_id=first_id, raw=raw, failures=failures)
