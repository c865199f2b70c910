"""Firebase Cloud Messaging, HTTP v1 API, with an OAuth2 token minted from a service account."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar

import httpcore
import httpx
from google.auth import exceptions as google_exceptions
from google.auth import transport as google_transport
from google.oauth2 import service_account

from herald.kit.outbound import GuardedSyncBackend, OutboundPolicy, OutboundRefused
from herald.providers.answers import read_streamed_sync
from herald.providers.base import ProviderError, PushMessage, PushProvider, SendResult
from herald.providers.http import (
    TOTAL_TIMEOUT,
    error_text,
    excerpt,
    is_transient_status,
    json_body,
    json_object,
    outbound_policy,
    refused_error,
    send_raw,
)

DEFAULT_BASE_URL = "https://fcm.googleapis.com"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"

# Service-account credentials by the hash of their JSON: the access token they
# hold is reused until it nears expiry.
_credentials: dict[str, service_account.Credentials] = {}
_refresh_locks: dict[str, asyncio.Lock] = {}


class FcmProvider(PushProvider):
    """Credentials: serviceAccount (the service account JSON file, as a string).

    The project comes from the file's ``project_id`` and the token endpoint
    from its ``token_uri``. One request per device token.

    ``overrides`` may carry ``type: "data"`` (data-only message, title and
    body go into data), ``data`` (more data keys), ``android``, ``apns``,
    ``webpush``, ``fcmOptions`` and ``image``.
    """

    provider_id: ClassVar[str] = "fcm"
    display_name: ClassVar[str] = "Firebase Cloud Messaging"
    required_credentials: ClassVar[tuple[str, ...]] = ("serviceAccount",)
    optional_credentials: ClassVar[tuple[str, ...]] = ("baseUrl",)

    async def send(self, message: PushMessage) -> SendResult:
        tokens = self.check_tokens(message)
        raw_account = self.require("serviceAccount")
        account = self._service_account(raw_account)
        project_id = account.get("project_id")
        if not project_id:
            raise self.error("credential serviceAccount has no project_id", transient=False)
        cache_key = hashlib.sha256(raw_account.encode()).hexdigest()
        access_token = await self._access_token(cache_key, account)

        url = f"{self.base_url(DEFAULT_BASE_URL)}/v1/projects/{project_id}/messages:send"
        outcomes = await asyncio.gather(*(self._send_one(url, access_token, token, message) for token in tokens))
        if any(isinstance(outcome, ProviderError) and outcome.status_code == 401 for outcome in outcomes):
            # A token Google no longer accepts is not reused.
            _credentials.pop(cache_key, None)
        return self.settle(list(zip(tokens, outcomes, strict=True)))

    async def _send_one(
        self, url: str, access_token: str, token: str, message: PushMessage
    ) -> str | None | ProviderError:
        try:
            response = await send_raw(
                self.http,
                self.provider_id,
                "POST",
                url,
                json={"message": _fcm_message(token, message)},
                headers={"authorization": f"Bearer {access_token}"},
            )
        except ProviderError as error:
            return error
        if response.is_success:
            name = json_object(response).get("name")  # projects/<project>/messages/<id>
            return str(name) if name else None
        return self.error(
            f"answered {response.status_code}: {_fcm_error(response)}",
            # UNREGISTERED, INVALID_ARGUMENT, SENDER_ID_MISMATCH and bad
            # credentials are 4xx; QUOTA_EXCEEDED (429) and UNAVAILABLE/INTERNAL (5xx) pass.
            transient=is_transient_status(response.status_code),
            status_code=response.status_code,
        )

    def _service_account(self, raw: str) -> dict[str, Any]:
        try:
            account = json.loads(raw)
        except ValueError as exc:
            raise self.error(f"credential serviceAccount is not JSON: {exc}", transient=False) from None
        if not isinstance(account, dict):
            raise self.error("credential serviceAccount is not a JSON object", transient=False)
        return account

    async def _access_token(self, cache_key: str, account: Mapping[str, Any]) -> str:
        credentials = _credentials.get(cache_key)
        if credentials is None:
            try:
                credentials = service_account.Credentials.from_service_account_info(account, scopes=[SCOPE])
            except (ValueError, KeyError, TypeError) as exc:
                raise self.error(
                    f"credential serviceAccount is not a usable service account: {exc}", transient=False
                ) from None
            _credentials[cache_key] = credentials
        if credentials.valid:
            return str(credentials.token)
        lock = _refresh_locks.setdefault(cache_key, asyncio.Lock())
        async with lock:
            if not credentials.valid:
                request = _HttpxRequest(self.http.timeout.read or TOTAL_TIMEOUT, outbound_policy(self.http))
                try:
                    await asyncio.to_thread(credentials.refresh, request)
                except OutboundRefused as exc:
                    raise refused_error(self.provider_id, exc) from None
                except google_exceptions.TransportError as exc:
                    raise self.error(f"could not reach the token endpoint: {exc}", transient=True) from None
                except google_exceptions.RefreshError as exc:
                    raise self.error(
                        f"the token endpoint refused the service account: {_refresh_error(request.last_response)}",
                        transient=bool(getattr(exc, "retryable", False)),
                        status_code=request.last_status,
                    ) from None
                except ValueError as exc:  # a private key that does not load
                    raise self.error(f"credential serviceAccount cannot sign: {exc}", transient=False) from None
                except (TypeError, KeyError):
                    # google-auth indexes the answer as a JSON object; one that is not (cut at the
                    # limit, or not JSON) is an answer it cannot read, which a later try may not meet.
                    raise self.error(
                        f"the token endpoint gave no token: {_refresh_error(request.last_response)}", transient=True
                    ) from None
                finally:
                    request.close()
        return str(credentials.token)


def _fcm_message(token: str, message: PushMessage) -> dict[str, Any]:
    overrides = dict(message.overrides)
    data = {**message.data, **(overrides.get("data") or {})}
    body: dict[str, Any] = {"token": token}
    if overrides.get("type") == "data":
        data.update({"title": message.title, "body": message.content, "message": message.content})
    else:
        notification = {"title": message.title, "body": message.content}
        if overrides.get("image"):
            notification["image"] = overrides["image"]
        body["notification"] = notification
    if data:
        # FCM data values must be strings.
        body["data"] = {key: value if isinstance(value, str) else json.dumps(value) for key, value in data.items()}
    for key, wire in (
        ("android", "android"),
        ("apns", "apns"),
        ("webpush", "webpush"),
        ("webPush", "webpush"),
        ("fcmOptions", "fcm_options"),
        ("fcm_options", "fcm_options"),
    ):
        if overrides.get(key):
            body[wire] = overrides[key]
    return body


def _fcm_error(response: httpx.Response) -> str:
    body = json_body(response)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = next(
            (
                detail.get("errorCode")
                for detail in error.get("details") or []
                if isinstance(detail, dict) and detail.get("errorCode")
            ),
            None,
        )
        return excerpt(f"{code or error.get('status') or 'error'}: {error.get('message') or 'no error text'}")
    return error_text(response)


def _refresh_error(response: httpx.Response | None) -> str:
    """Why the token endpoint gave no token: its JSON error field, never the rest of its answer."""
    if response is None:
        return "no answer"
    if response.is_success:
        return f"answered {response.status_code} without an access token"
    return f"answered {response.status_code}: {error_text(response)}"


class _HttpxResponse(google_transport.Response):
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    @property
    def status(self) -> int:
        return self._response.status_code

    @property
    def headers(self) -> Mapping[str, str]:
        return self._response.headers

    @property
    def data(self) -> bytes:
        return self._response.content


class _HttpxRequest(google_transport.Request):
    """google-auth's transport interface over httpx, so minting a token needs no other HTTP library.

    Its connections go through the outbound policy too: ``token_uri`` comes
    from the service account, which the caller wrote.
    """

    def __init__(self, timeout: float, outbound: OutboundPolicy) -> None:
        self._client = httpx.Client(timeout=timeout, transport=_OutboundSyncTransport(outbound), trust_env=False)
        self.last_response: httpx.Response | None = None

    @property
    def last_status(self) -> int | None:
        return self.last_response.status_code if self.last_response is not None else None

    def __call__(
        self,
        url: str,
        method: str = "GET",
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> _HttpxResponse:
        try:
            # Streamed and read to MAX_ANSWER_BYTES at most (providers/answers.py): ``token_uri`` may name anything.
            request = self._client.build_request(
                method, url, content=body, headers=dict(headers or {}), timeout=timeout or self._client.timeout
            )
            response = read_streamed_sync(self._client.send(request, stream=True))
        except httpx.HTTPError as exc:
            raise google_exceptions.TransportError(exc) from exc
        self.last_response = response
        return _HttpxResponse(response)

    def close(self) -> None:
        self._client.close()


class _OutboundSyncTransport(httpx.HTTPTransport):
    """httpx's synchronous transport over a pool whose network backend applies the outbound policy."""

    def __init__(self, policy: OutboundPolicy) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=True), network_backend=GuardedSyncBackend(policy)
        )
