"""Push providers: FCM with its token endpoint, APNs token auth, Expo tickets, OneSignal, push webhook."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
import pytest

from herald.providers import ProviderError, PushMessage, SendIdentity, create_http_client
from herald.providers.push.apns import ApnsProvider
from herald.providers.push.expo import ExpoProvider
from herald.providers.push.fcm import FcmProvider
from herald.providers.push.onesignal import OneSignalProvider
from herald.providers.push.webhook import PushWebhookProvider
from tests.fixtures import peers
from tests.fixtures.peers import EcKey, Http2Peer, HttpPeer, RsaKey, hmac_hex
from tests.providers.cases import APNS_TOKEN, EXPO_TOKEN, service_account

MESSAGE = PushMessage(
    tokens=["token-1"],
    title="New message",
    content="Ada sent you a message",
    data={"threadId": "t1", "unread": 3},
)


def with_tokens(*tokens: str, **changes: object) -> PushMessage:
    return PushMessage(
        tokens=list(tokens),
        title=MESSAGE.title,
        content=MESSAGE.content,
        data=dict(MESSAGE.data),
        overrides=dict(changes.get("overrides", {})),  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------------------
# FCM
# ---------------------------------------------------------------------------


def fcm(peer: HttpPeer, rsa_key: RsaKey, http: httpx.AsyncClient) -> tuple[FcmProvider, peers.FcmState]:
    state = peers.install_fcm(
        peer, project_id="herald-test", client_email="fcm@herald-test.iam.gserviceaccount.com", key=rsa_key
    )
    provider = FcmProvider({"serviceAccount": service_account(peer, rsa_key), "baseUrl": peer.url}, http)
    return provider, state


async def test_fcm_mints_a_token_and_sends_one_request_per_device(
    peer: HttpPeer, rsa_key: RsaKey, http: httpx.AsyncClient
) -> None:
    provider, state = fcm(peer, rsa_key, http)

    result = await provider.send(with_tokens("token-1", "token-2"))

    sends = peer.requests_to("/v1/projects/herald-test/messages:send")
    assert state.token_requests == 1
    assert sorted(request.json()["message"]["token"] for request in sends) == ["token-1", "token-2"]
    message = sends[0].json()["message"]
    assert message["notification"] == {"title": "New message", "body": "Ada sent you a message"}
    assert message["data"] == {"threadId": "t1", "unread": "3"}  # FCM data values are strings
    assert result.provider_message_id and result.provider_message_id.startswith("projects/herald-test/messages/")
    assert set(result.raw["sent"]) == {"token-1", "token-2"}  # type: ignore[index]


async def test_fcm_reuses_the_access_token(peer: HttpPeer, rsa_key: RsaKey, http: httpx.AsyncClient) -> None:
    provider, state = fcm(peer, rsa_key, http)

    await provider.send(MESSAGE)
    await provider.send(MESSAGE)

    assert state.token_requests == 1
    assert len(peer.requests_to("/v1/projects/")) == 2


async def test_fcm_data_message_puts_title_and_body_in_data(
    peer: HttpPeer, rsa_key: RsaKey, http: httpx.AsyncClient
) -> None:
    provider, _ = fcm(peer, rsa_key, http)

    await provider.send(with_tokens("token-1", overrides={"type": "data", "android": {"priority": "high"}}))

    [send] = peer.requests_to("/v1/projects/")
    message = send.json()["message"]
    assert "notification" not in message
    assert message["data"] == {
        "threadId": "t1",
        "unread": "3",
        "title": "New message",
        "body": "Ada sent you a message",
        "message": "Ada sent you a message",
    }
    assert message["android"] == {"priority": "high"}


async def test_fcm_unregistered_token_among_good_ones_is_reported_not_raised(
    peer: HttpPeer, rsa_key: RsaKey, http: httpx.AsyncClient
) -> None:
    provider, state = fcm(peer, rsa_key, http)
    state.unregistered.add("stale")

    result = await provider.send(with_tokens("token-1", "stale"))

    assert result.provider_message_id
    assert result.failures == ["token stale: fcm: answered 404: UNREGISTERED: Requested entity was not found."]


async def test_fcm_every_token_unregistered_is_a_permanent_error(
    peer: HttpPeer, rsa_key: RsaKey, http: httpx.AsyncClient
) -> None:
    provider, state = fcm(peer, rsa_key, http)
    state.unregistered.update({"stale-1", "stale-2"})

    with pytest.raises(ProviderError) as raised:
        await provider.send(with_tokens("stale-1", "stale-2"))

    assert raised.value.transient is False
    assert raised.value.status_code == 404
    assert "token stale-1:" in raised.value.message and "token stale-2:" in raised.value.message


@pytest.mark.parametrize(
    ("service_account_json", "expected"),
    [
        ("not json", "credential serviceAccount is not JSON"),
        (json.dumps({"type": "service_account", "client_email": "x@y"}), "credential serviceAccount has no project_id"),
        (
            json.dumps({"project_id": "p", "client_email": "x@y", "token_uri": "http://127.0.0.1:9/token"}),
            "not a usable service account",
        ),
    ],
)
async def test_fcm_unusable_service_account_is_a_permanent_error(
    service_account_json: str, expected: str, http: httpx.AsyncClient
) -> None:
    with pytest.raises(ProviderError) as raised:
        await FcmProvider({"serviceAccount": service_account_json}, http).send(MESSAGE)

    assert raised.value.transient is False
    assert expected in raised.value.message


# ---------------------------------------------------------------------------
# APNs
# ---------------------------------------------------------------------------


def apns_credentials(peer: HttpPeer, p8_key: EcKey) -> dict[str, str]:
    return {
        "secretKey": p8_key.private_pem,
        "apiKey": "KEY1234567",
        "projectName": "TEAM123456",
        "applicationId": "test.herald.app",
        "baseUrl": peer.url,
    }


def install_apns(peer: HttpPeer, p8_key: EcKey) -> peers.ApnsState:
    return peers.install_apns(peer, key=p8_key, key_id="KEY1234567", team_id="TEAM123456", bundle_id="test.herald.app")


async def test_apns_sends_an_alert_with_token_auth(peer: HttpPeer, p8_key: EcKey, http: httpx.AsyncClient) -> None:
    install_apns(peer, p8_key)

    result = await ApnsProvider(apns_credentials(peer, p8_key), http).send(
        with_tokens(APNS_TOKEN, overrides={"sound": "default", "badge": 2, "collapseId": "thread-t1"})
    )

    [request] = peer.requests
    assert request.path == f"/3/device/{APNS_TOKEN}"
    assert request.headers["apns-topic"] == "test.herald.app"
    assert request.headers["apns-push-type"] == "alert"
    assert request.headers["apns-priority"] == "10"
    assert request.headers["apns-collapse-id"] == "thread-t1"
    assert request.json() == {
        "aps": {"alert": {"title": "New message", "body": "Ada sent you a message"}, "sound": "default", "badge": 2},
        "threadId": "t1",
        "unread": 3,
    }
    assert result.provider_message_id  # the apns-id header


@pytest.fixture(scope="module")
def h2_peer() -> Iterator[Http2Peer]:
    server = Http2Peer().start()
    yield server
    server.stop()


async def test_apns_speaks_http2_with_token_auth(h2_peer: Http2Peer, p8_key: EcKey) -> None:
    """The shared client negotiates HTTP/2 (TLS, ALPN h2) with a peer that speaks nothing else, as Apple's."""
    h2_peer.reset()
    install_apns(h2_peer, p8_key)  # type: ignore[arg-type]
    credentials = apns_credentials(h2_peer, p8_key)  # type: ignore[arg-type]

    async with create_http_client(timeout=5.0, verify=h2_peer.client_context(), outbound=peers.LOCAL_PEERS) as http:
        result = await ApnsProvider(credentials, http).send(with_tokens(APNS_TOKEN, overrides={"collapseId": "thread-t1"}))

    [request] = h2_peer.requests
    assert request.http_version == "HTTP/2"
    assert (request.method, request.path) == ("POST", f"/3/device/{APNS_TOKEN}")
    assert request.host == f"127.0.0.1:{h2_peer.port}"
    assert request.headers["authorization"].startswith("bearer ")  # the ES256 provider token the peer verified
    assert request.headers["apns-topic"] == "test.herald.app"
    assert (request.headers["apns-push-type"], request.headers["apns-priority"]) == ("alert", "10")
    assert request.headers["apns-collapse-id"] == "thread-t1"
    assert request.json()["aps"]["alert"] == {"title": "New message", "body": "Ada sent you a message"}
    assert result.provider_message_id  # the apns-id header of the 200 answer


async def test_apns_background_push(peer: HttpPeer, p8_key: EcKey, http: httpx.AsyncClient) -> None:
    install_apns(peer, p8_key)

    await ApnsProvider(apns_credentials(peer, p8_key), http).send(
        with_tokens(APNS_TOKEN, overrides={"type": "background"})
    )

    [request] = peer.requests
    assert (request.headers["apns-push-type"], request.headers["apns-priority"]) == ("background", "5")
    assert request.json()["aps"] == {"content-available": 1}


async def test_apns_unregistered_and_bad_tokens(peer: HttpPeer, p8_key: EcKey, http: httpx.AsyncClient) -> None:
    state = install_apns(peer, p8_key)
    gone = "b" * 64
    state.unregistered.add(gone)
    provider = ApnsProvider(apns_credentials(peer, p8_key), http)

    partial = await provider.send(with_tokens(APNS_TOKEN, gone, "not-a-token"))
    with pytest.raises(ProviderError) as raised:
        await provider.send(with_tokens(gone))

    assert partial.failures == [
        f"token {gone}: apns: answered 410: Unregistered",
        "token not-a-token: apns: answered 400: BadDeviceToken",
    ]
    assert (raised.value.transient, raised.value.status_code) == (False, 410)


async def test_apns_key_that_is_not_a_p8_key_is_a_permanent_error(
    peer: HttpPeer, p8_key: EcKey, http: httpx.AsyncClient
) -> None:
    credentials = {
        **apns_credentials(peer, p8_key),
        "secretKey": "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----",
    }

    with pytest.raises(ProviderError) as raised:
        await ApnsProvider(credentials, http).send(with_tokens(APNS_TOKEN))

    assert raised.value.transient is False
    assert "credential secretKey is not a usable .p8 key" in raised.value.message
    assert peer.requests == []


@pytest.mark.parametrize(("production", "host"), [(True, "api.push.apple.com"), (False, "api.sandbox.push.apple.com")])
async def test_apns_production_flag_picks_the_host(p8_key: EcKey, production: bool, host: str) -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"apns-id": "id-1"})

    credentials = {
        "secretKey": p8_key.private_pem,
        "apiKey": "K",
        "projectName": "T",
        "applicationId": "b",
        "secure": production,
    }
    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
        await ApnsProvider(credentials, client).send(with_tokens(APNS_TOKEN))

    assert [request.url.host for request in seen] == [host]


# ---------------------------------------------------------------------------
# Expo
# ---------------------------------------------------------------------------


async def test_expo_sends_messages_with_the_access_token(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_expo(peer, access_token="expo-token")

    result = await ExpoProvider({"apiKey": "expo-token", "baseUrl": peer.url}, http).send(
        with_tokens(EXPO_TOKEN, overrides={"sound": "default", "channelId": "alerts", "unknownKey": 1})
    )

    [request] = peer.requests
    assert request.json() == [
        {
            "to": EXPO_TOKEN,
            "title": "New message",
            "body": "Ada sent you a message",
            "data": {"threadId": "t1", "unread": 3},
            "sound": "default",
            "channelId": "alerts",
        }
    ]
    assert result.provider_message_id


async def test_expo_without_an_access_token_sends_no_authorization(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_expo(peer)

    await ExpoProvider({"baseUrl": peer.url}, http).send(with_tokens(EXPO_TOKEN))

    [request] = peer.requests
    assert "authorization" not in request.headers


async def test_expo_ticket_errors(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_expo(peer)
    provider = ExpoProvider({"baseUrl": peer.url}, http)

    partial = await provider.send(with_tokens(EXPO_TOKEN, "junk"))
    with pytest.raises(ProviderError) as raised:
        await provider.send(with_tokens("junk"))

    assert partial.failures == [
        'token junk: expo: ticket error: DeviceNotRegistered: "junk" is not a registered push notification recipient'
    ]
    assert raised.value.transient is False


async def test_expo_sends_at_most_100_messages_per_request(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_expo(peer)
    tokens = [f"ExponentPushToken[{index:022d}]" for index in range(150)]

    result = await ExpoProvider({"baseUrl": peer.url}, http).send(with_tokens(*tokens))

    assert [len(request.json()) for request in peer.requests] == [100, 50]
    assert len(result.raw["sent"]) == 150  # type: ignore[index]


# ---------------------------------------------------------------------------
# OneSignal
# ---------------------------------------------------------------------------


async def test_onesignal_legacy_key_uses_basic_auth_and_player_ids(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_onesignal(peer, app_id="app-1", api_key="legacy-key", subscribed={"player-1"})

    result = await OneSignalProvider(
        {"applicationId": "app-1", "apiKey": "legacy-key", "baseUrl": peer.url}, http
    ).send(with_tokens("player-1", overrides={"subtitle": "From Ada", "channelId": "alerts"}))

    [request] = peer.requests
    assert request.headers["authorization"] == "Basic legacy-key"
    body = request.json()
    assert body["app_id"] == "app-1"
    assert body["include_player_ids"] == ["player-1"]
    assert (body["headings"], body["contents"], body["subtitle"]) == (
        {"en": "New message"},
        {"en": "Ada sent you a message"},
        {"en": "From Ada"},
    )
    assert body["data"] == {"threadId": "t1", "unread": 3}
    assert body["android_channel_id"] == "alerts"
    assert result.provider_message_id


async def test_onesignal_gets_the_same_key_for_the_same_message_and_makes_one_notification(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    sends = peers.install_onesignal(peer, app_id="app-1", api_key="os_v2_key", subscribed={"sub-1"})
    message_one, message_two = SendIdentity("job-1", "push:one-signal:0"), SendIdentity("job-1", "push:one-signal:1")

    def provider(identity: SendIdentity) -> OneSignalProvider:
        return OneSignalProvider({"applicationId": "app-1", "apiKey": "os_v2_key", "baseUrl": peer.url}, http, identity=identity)

    first = await provider(message_one).send(with_tokens("sub-1"))
    again = await provider(message_one).send(with_tokens("sub-1"))
    other = await provider(message_two).send(with_tokens("sub-1"))

    # A UUID, as OneSignal requires; another channel entry of the same step is another notification.
    assert sends.keys == [message_one.idempotency_key, message_one.idempotency_key, message_two.idempotency_key]
    assert str(uuid.UUID(message_one.idempotency_key)) == message_one.idempotency_key
    assert sends.sent == 2
    assert again.provider_message_id == first.provider_message_id != other.provider_message_id


async def test_onesignal_current_key_uses_key_auth_and_subscription_ids(
    peer: HttpPeer, http: httpx.AsyncClient
) -> None:
    key = "os_v2_app_abcdef"
    peers.install_onesignal(peer, app_id="app-1", api_key=key, subscribed={"sub-1"})

    await OneSignalProvider({"applicationId": "app-1", "apiKey": key, "baseUrl": peer.url}, http).send(
        with_tokens("sub-1")
    )

    [request] = peer.requests
    assert request.headers["authorization"] == f"Key {key}"
    assert request.json()["include_subscription_ids"] == ["sub-1"]
    assert request.json()["target_channel"] == "push"


async def test_onesignal_external_id_api_version_targets_aliases(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_onesignal(peer, app_id="app-1", api_key="k", subscribed=set())

    credentials = {"applicationId": "app-1", "apiKey": "k", "apiVersion": "externalId", "baseUrl": peer.url}
    await OneSignalProvider(credentials, http).send(with_tokens("user-42"))

    [request] = peer.requests
    assert request.json()["include_aliases"] == {"external_id": ["user-42"]}


async def test_onesignal_unsubscribed_players(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_onesignal(peer, app_id="app-1", api_key="k", subscribed={"player-1"})
    provider = OneSignalProvider({"applicationId": "app-1", "apiKey": "k", "baseUrl": peer.url}, http)

    partial = await provider.send(with_tokens("player-1", "player-9"))
    with pytest.raises(ProviderError) as raised:
        await provider.send(with_tokens("player-9"))

    assert partial.failures == ["token player-9: not subscribed"]
    assert raised.value.transient is False
    assert "All included players are not subscribed" in raised.value.message


# ---------------------------------------------------------------------------
# Push webhook
# ---------------------------------------------------------------------------


async def test_push_webhook_posts_the_notification_signed(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_signed_webhook(peer, path="/hooks/push", secret="push-secret")
    credentials = {"webhookUrl": f"{peer.url}/hooks/push", "secretKey": "push-secret"}

    result = await PushWebhookProvider(credentials, http).send(with_tokens("d1", "d2", overrides={"sound": "ping"}))

    [request] = peer.requests
    assert request.json() == {
        "target": ["d1", "d2"],
        "title": "New message",
        "content": "Ada sent you a message",
        "payload": {"threadId": "t1", "unread": 3},
        "overrides": {"sound": "ping"},
    }
    assert request.headers["x-novu-signature"] == hmac_hex("push-secret", request.body)
    assert result.provider_message_id and result.provider_message_id.startswith("hook-")


async def test_push_webhook_with_hmac_off_sends_unsigned(peer: HttpPeer, http: httpx.AsyncClient) -> None:
    peers.install_signed_webhook(peer, path="/hooks/push", secret=None)
    credentials = {"webhookUrl": f"{peer.url}/hooks/push", "secretKey": "push-secret", "hmac": False}

    await PushWebhookProvider(credentials, http).send(with_tokens("d1"))

    [request] = peer.requests
    assert "x-novu-signature" not in request.headers


async def test_push_without_tokens_is_a_permanent_error(http: httpx.AsyncClient) -> None:
    with pytest.raises(ProviderError) as raised:
        await PushWebhookProvider({"webhookUrl": "http://127.0.0.1:9/hook"}, http).send(with_tokens())

    assert raised.value.transient is False
    assert raised.value.message == "push-webhook: the push has no device token"
