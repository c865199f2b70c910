"""The block editor's email documents (Maily's TipTap JSON) made into HTML templates (herald/engine/maily.py)."""

from __future__ import annotations

import json

import pytest

from herald.engine.maily import MAX_NODES, MailyError, maily_document, maily_to_template
from herald.engine.templates import TemplateError, render_html


def doc(*content: dict) -> dict:
    return {"type": "doc", "content": list(content)}


def text(value: str, *marks: dict) -> dict:
    return {"type": "text", "text": value, **({"marks": list(marks)} if marks else {})}


def paragraph(*content: dict, **attrs: object) -> dict:
    return {"type": "paragraph", "content": list(content), **({"attrs": attrs} if attrs else {})}


def variable(name: str, **attrs: object) -> dict:
    return {"type": "variable", "attrs": {"id": name, **attrs}}


def rendered(document: dict, **context: object) -> str:
    return render_html(maily_to_template(document), {"payload": {}, "subscriber": {}, **context})


def test_a_body_is_a_document_only_when_it_is_a_json_doc() -> None:
    document = doc(paragraph(text("Hi")))
    assert maily_document(json.dumps(document)) == document
    assert maily_document(document) == document
    for body in ("<p>Hi</p>", "", "123", '{"type": "paragraph"}', "{not json", None):
        assert maily_document(body) is None


def test_text_is_escaped_and_variables_are_rendered_escaped() -> None:
    document = doc(
        {"type": "heading", "attrs": {"level": 1}, "content": [text("Hi "), variable("subscriber.firstName")]},
        paragraph(text("<script>x</script> & {{ payload.note }}", {"type": "bold"})),
    )
    html = rendered(document, subscriber={"firstName": "<Ada>"}, payload={"note": "a < b"})
    assert html == (
        '<h1 style="margin:0 0 12px;">Hi &lt;Ada&gt;</h1>'
        '<p style="margin:0 0 16px;"><strong>&lt;script&gt;x&lt;/script&gt; &amp; a &lt; b</strong></p>'
    )


def test_a_variables_fallback_shows_when_it_is_empty() -> None:
    assert rendered(doc(paragraph(variable("subscriber.firstName", fallback="there")))) == (
        '<p style="margin:0 0 16px;">there</p>'
    )


def test_repeat_writes_its_content_for_each_item_up_to_its_iterations() -> None:
    repeat = {
        "type": "repeat",
        "attrs": {"each": "payload.items", "iterations": 2},
        "content": [paragraph(variable("payload.items.name"))],
    }
    html = rendered(doc(repeat), payload={"items": [{"name": "one"}, {"name": "two"}, {"name": "three"}]})
    assert html == '<p style="margin:0 0 16px;">one</p><p style="margin:0 0 16px;">two</p>'


def test_show_if_hides_a_block_unless_its_variable_is_true() -> None:
    document = doc(paragraph(text("shown")), paragraph(text("maybe"), showIfKey="payload.vip"))
    assert "maybe" in rendered(document, payload={"vip": True})
    for value in (False, "false", None, ""):
        assert "maybe" not in rendered(document, payload={"vip": value})


def test_buttons_links_and_images_with_variable_addresses() -> None:
    document = doc(
        {
            "type": "button",
            "attrs": {"text": "Track", "url": "payload.url", "isUrlVariable": True, "alignment": "center"},
        },
        paragraph(text("docs", {"type": "link", "attrs": {"href": "https://example.com/?a=1&b=2"}})),
        {"type": "image", "attrs": {"src": "https://example.com/a.png", "alt": 'A "logo"'}},
        paragraph(text("bad", {"type": "link", "attrs": {"href": "javascript:alert(1)"}})),
    )
    html = rendered(document, payload={"url": "https://example.com/track/1"})
    assert 'href="https://example.com/track/1"' in html and ">Track</a>" in html
    assert 'href="https://example.com/?a=1&amp;b=2"' in html
    assert '<img src="https://example.com/a.png" alt="A &quot;logo&quot;"' in html
    assert "javascript:" not in html and 'href="#"' in html


def test_trailing_empty_paragraphs_are_dropped_and_unknown_blocks_keep_their_text() -> None:
    document = doc({"type": "someNewBlock", "content": [paragraph(text("kept"))]}, {"type": "paragraph"})
    assert rendered(document) == '<p style="margin:0 0 16px;">kept</p>'


def test_what_cannot_be_made_into_a_template_is_refused() -> None:
    deep = paragraph(text("x"))
    for _ in range(40):
        deep = {"type": "blockquote", "content": [deep]}
    with pytest.raises(MailyError, match="deeper"):
        maily_to_template(doc(deep))
    with pytest.raises(MailyError, match="blocks"):
        maily_to_template(doc(*[paragraph(text("x")) for _ in range(MAX_NODES)]))
    with pytest.raises(MailyError, match="is not a variable"):
        maily_to_template(doc(paragraph(variable("payload.x }}{% raw %}"))))
    # A template error as any other: the engine and the previews report it as one.
    assert issubclass(MailyError, TemplateError)
