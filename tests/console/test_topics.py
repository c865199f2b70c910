"""The Topics pages: the list, a topic's members, adding and removing subscribers, roles and CSRF."""

from __future__ import annotations

import re

import httpx

from tests.fixtures.console import ConsoleAs


async def add_subscribers(api: httpx.AsyncClient, *subscriber_ids: str) -> None:
    response = await api.post("/v1/subscribers/bulk", json={"subscribers": [{"subscriberId": item} for item in subscriber_ids]})
    assert response.status_code == 201, response.text


async def test_topics_are_listed_with_their_member_counts(console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    await add_subscribers(api, "t-ann", "t-bob")
    assert (await api.post("/v1/topics/walkers/subscribers", json={"subscribers": ["t-ann", "t-bob"]})).status_code == 200
    assert (await api.post("/v1/topics", json={"key": "empty-one", "name": "Nobody yet"})).status_code == 201
    viewer = await console_as("viewer")
    page = await viewer.get("/console/topics")
    assert page.status_code == 200
    walkers = re.search(r'<a href="/console/topics/walkers">walkers</a></th>\s*<td>[^<]*</td>\s*<td class="numeric">(\d+)</td>', page.text)
    assert walkers is not None and walkers.group(1) == "2"
    assert "Nobody yet" in page.text
    # A viewer sees no form to change anything.
    assert "Create a topic" not in page.text
    topic = await viewer.get("/console/topics/walkers")
    assert ">t-ann</a>" in topic.text and ">t-bob</a>" in topic.text
    assert "Add subscribers" not in topic.text and ">Remove<" not in topic.text
    assert (await viewer.get("/console/topics/no-such-topic")).status_code == 404


async def test_an_author_creates_a_topic_adds_and_removes_subscribers(console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    await add_subscribers(api, "m-one", "m-two", "m-three")
    author = await console_as("author")
    await author.get("/console/topics")
    bad = await author.post_form("/console/topics", {"key": "has spaces", "name": ""})
    assert bad.status_code == 422 and "Key:" in bad.text
    created = await author.post_form("/console/topics", {"key": "readers", "name": "Readers"})
    assert (created.status_code, created.headers["location"]) == (303, "/console/topics/readers")
    assert (await author.post_form("/console/topics", {"key": "readers", "name": "Again"})).status_code == 409
    await author.get("/console/topics/readers")
    added = await author.post_form("/console/topics/readers/subscribers", {"subscriberIds": "m-one, m-two\nm-three"})
    assert added.status_code == 303
    page = await author.get("/console/topics/readers")
    assert all(f">{item}</a>" in page.text for item in ("m-one", "m-two", "m-three"))
    # An unknown subscriberId is named; the known ones are added.
    partly = await author.post_form("/console/topics/readers/subscribers", {"subscriberIds": "m-one ghost-9"})
    assert partly.status_code == 200 and "ghost-9" in partly.text and "Not every subscriber was added" in partly.text
    empty = await author.post_form("/console/topics/readers/subscribers", {"subscriberIds": "  "})
    assert empty.status_code == 422 and "Enter at least one subscriberId" in empty.text
    removed = await author.post_form("/console/topics/readers/subscribers/remove", {"subscriberId": "m-two"})
    assert removed.status_code == 303
    members = (await api.get("/v1/topics/readers")).json()["data"]["subscribers"]
    assert members == ["m-one", "m-three"]
    audit = await author.get("/console/audit", params={"action": "topic."})
    for action in ("topic.created", "topic.subscribers_added", "topic.subscribers_removed"):
        assert action in audit.text, action


async def test_a_viewer_cannot_change_a_topic_and_a_form_needs_its_token(console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    await add_subscribers(api, "v-one")
    assert (await api.post("/v1/topics/guarded/subscribers", json={"subscribers": ["v-one"]})).status_code == 200
    viewer = await console_as("viewer")
    await viewer.get("/console/topics")
    for path, data in (
        ("/console/topics", {"key": "viewer-made", "name": "x"}),
        ("/console/topics/guarded/subscribers", {"subscriberIds": "v-one"}),
        ("/console/topics/guarded/subscribers/remove", {"subscriberId": "v-one"}),
    ):
        refused = await viewer.post_form(path, data)
        assert refused.status_code == 403 and "Your role (viewer) does not allow topics.write" in refused.text, path
    author = await console_as("author")
    await author.get("/console/topics/guarded")
    assert (await author.post_form("/console/topics/guarded/subscribers/remove", {"subscriberId": "v-one"}, csrf="")).status_code == 403
    assert (await api.get("/v1/topics/guarded")).json()["data"]["subscribers"] == ["v-one"]


async def test_a_topics_members_page_by_keyset(console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    names = [f"k-{n:03d}" for n in range(60)]
    await add_subscribers(api, *names)
    assert (await api.post("/v1/topics/crowd/subscribers", json={"subscribers": names})).status_code == 200
    viewer = await console_as("viewer")
    first = await viewer.get("/console/topics/crowd")
    shown = re.findall(r">(k-\d{3})</a>", first.text)
    assert shown == names[:50]
    more = re.search(r'href="(/console/topics/crowd\?after=[^"]+)" rel="next"', first.text)
    assert more is not None
    second = await viewer.get(more.group(1))
    assert re.findall(r">(k-\d{3})</a>", second.text) == names[50:]
    assert 'rel="next"' not in second.text
