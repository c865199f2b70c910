from __future__ import annotations

from typing import Any

import pytest

from herald.engine import templates
from herald.engine.templates import (
    RenderedPush,
    TemplateError,
    html_to_text,
    render_chat,
    render_email,
    render_html,
    render_in_app,
    render_push,
    render_sms,
    render_text,
    safe_url,
    translate_handlebars,
)

CONTEXT: dict[str, Any] = {
    "subscriber": {"subscriberId": "sub-1", "firstName": "Ada", "lastName": "O'Neil <3", "data": {"plan": "pro"}},
    "payload": {
        "name": "Bob & Co",
        "count": 0,
        "blank": "",
        "items": [{"title": "First", "price": 5}, {"title": "<Second>", "price": 7}],
        "tags": ["a", "b"],
        "none": [],
        "subscriber": "shadowed",
        "url": "https://shop.test/orders/42?x=1&y=2",
    },
    "step": {"digest": True, "events": [{"name": "e1", "n": 1}, {"name": "e2", "n": 2}], "total_count": 2},
    "tenant": {"identifier": "acme", "name": "Acme"},
    "actor": {"subscriberId": "actor-1", "firstName": "Grace"},
}


# --------------------------------------------------------------------------- variables


def test_namespaced_variables() -> None:
    source = "{{subscriber.firstName}}|{{payload.name}}|{{step.total_count}}|{{tenant.name}}|{{actor.firstName}}"
    assert render_text(source, CONTEXT) == "Ada|Bob & Co|2|Acme|Grace"


def test_bare_variables_read_the_payload() -> None:
    assert render_text("Hi {{name}} ({{ items[1].title }})", CONTEXT) == "Hi Bob & Co (<Second>)"


def test_namespaces_win_over_payload_keys() -> None:
    assert render_text("{{subscriber.firstName}} {{payload.subscriber}}", CONTEXT) == "Ada shadowed"


def test_undefined_variables_render_empty() -> None:
    assert render_text("[{{missing}}][{{payload.a.b.c}}][{{ nope | upcase }}]", CONTEXT) == "[][][]"
    assert render_text("{{subscriber.firstName}}", {}) == ""


def test_plain_text_is_returned_as_is() -> None:
    assert render_text("no variables <b>here</b>", CONTEXT) == "no variables <b>here</b>"


def test_liquid_tags_and_filters() -> None:
    source = "{% for item in items %}{{ item.title | upcase }}{% unless forloop.last %}, {% endunless %}{% endfor %}"
    assert render_text(source, CONTEXT) == "FIRST, <SECOND>"
    assert render_text("{% if count == 0 %}none{% else %}some{% endif %}", CONTEXT) == "none"
    assert render_text("{{ tags | json }} {{ 'hello world' | titlecase }}", CONTEXT) == '["a", "b"] Hello World'


# --------------------------------------------------------------------------- Handlebars


def test_handlebars_if_else() -> None:
    assert render_text("{{#if name}}yes{{else}}no{{/if}}", CONTEXT) == "yes"
    assert render_text("{{#if missing}}yes{{else}}no{{/if}}", CONTEXT) == "no"


def test_handlebars_if_uses_handlebars_truthiness() -> None:
    # Liquid would treat "", 0 and [] as true; Handlebars does not.
    for name in ("blank", "count", "none"):
        assert render_text(f"{{{{#if {name}}}}}yes{{{{else}}}}no{{{{/if}}}}", CONTEXT) == "no", name
    assert render_text("{{#if payload.tags}}yes{{/if}}", CONTEXT) == "yes"


def test_handlebars_else_if_and_unless() -> None:
    source = "{{#if missing}}a{{else if name}}b{{else}}c{{/if}}"
    assert render_text(source, CONTEXT) == "b"
    assert render_text("{{#unless missing}}shown{{/unless}}{{#unless name}}hidden{{/unless}}", CONTEXT) == "shown"


def test_handlebars_each_over_digest_events() -> None:
    source = "{{#each step.events}}{{@index}}:{{name}}/{{this.n}}/{{../name}}/{{subscriber.firstName}};{{/each}}"
    assert render_text(source, CONTEXT) == "0:e1/1/Bob & Co/Ada;1:e2/2/Bob & Co/Ada;"


def test_handlebars_each_first_last_and_this() -> None:
    source = "{{#each tags}}{{#if @first}}[{{/if}}{{this}}{{#if @last}}]{{else}},{{/if}}{{/each}}"
    assert render_text(source, CONTEXT) == "[a,b]"


def test_handlebars_each_else_and_block_parameter() -> None:
    assert render_text("{{#each none}}x{{else}}empty {{name}}{{/each}}", CONTEXT) == "empty Bob & Co"
    assert render_text("{{#each items as |item|}}{{item.title}} {{/each}}", CONTEXT) == "First <Second> "


def test_handlebars_nested_each() -> None:
    source = "{{#each items}}{{#each ../tags}}{{../title}}-{{this}} {{/each}}{{/each}}"
    assert render_text(source, CONTEXT) == "First-a First-b <Second>-a <Second>-b "


def test_handlebars_equals_helpers_paths_and_comments() -> None:
    assert render_text("{{#equals subscriber.data.plan 'pro'}}P{{else}}F{{/equals}}", CONTEXT) == "P"
    assert render_text("{{uppercase name}} {{lowercase name}} {{titlecase 'ada lovelace'}}", CONTEXT) == (
        "BOB & CO bob & co Ada Lovelace"
    )
    assert render_text("{{json tags}}", CONTEXT) == '["a", "b"]'
    assert render_text("{{payload.items.[1].title}} {{items.0.title}} {{@root.name}}", CONTEXT) == (
        "<Second> First Bob & Co"
    )
    assert render_text("a{{! note }}b{{!-- {{#if}} --}}c", CONTEXT) == "abc"


def test_handlebars_whitespace_control() -> None:
    assert render_text("a  {{~name~}}  b", CONTEXT) == "aBob & Cob"


def test_raw_blocks_are_not_translated() -> None:
    assert render_text("{% raw %}{{#if x}}{% endraw %}", CONTEXT) == "{{#if x}}"


def test_translation_leaves_liquid_alone() -> None:
    source = "{{ name | upcase }} {% if count == 0 %}z{% endif %} {{ payload['name'] }} {{ \"a|b\" }}"
    assert translate_handlebars(source) == source


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{#if name}}never closed", "'{{#if}}' block is never closed"),
        ("{{/if}}", "'{{/if}}' closes a block that was never opened at line 1, column 1"),
        ("x\n  {{#each items}}{{/if}}", "'{{/if}}' closes '{{#each}}' at line 2, column 18"),
        ("{{#with name}}{{/with}}", "unsupported Handlebars block '{{#with}}'"),
        ("{{formatDate when 'YYYY'}}", "unsupported Handlebars helper 'formatDate'"),
        ("{{> header}}", "Handlebars partials are not supported"),
        ("{{@index}}", "'@index' is only available inside '{{#each}}'"),
        ("{{#if a b}}{{/if}}", "'{{#if}}' takes exactly one variable"),
    ],
)
def test_unsupported_or_broken_handlebars_raises(source: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        render_text(source, CONTEXT)
    assert message in caught.value.message


# --------------------------------------------------------------------------- errors


def test_liquid_syntax_error_raises_with_position() -> None:
    with pytest.raises(TemplateError) as caught:
        render_text("Hello\n{% if %}x{% endif %}", CONTEXT)
    assert caught.value.message.startswith("template syntax error: missing expression at line 2")
    assert caught.value.line == 2


def test_unclosed_liquid_tag_raises() -> None:
    with pytest.raises(TemplateError, match="template syntax error"):
        render_text("{% if name %}never closed", CONTEXT)
    with pytest.raises(TemplateError, match="template syntax error"):
        render_text("{{ name ", CONTEXT)


def test_render_errors_raise() -> None:
    with pytest.raises(TemplateError, match="unknown filter 'nosuch'"):
        render_text("{{ name | nosuch }}", CONTEXT)
    with pytest.raises(TemplateError, match="loop iteration limit"):
        render_text("{% for i in (1..1000000) %}{% endfor %}", CONTEXT)


def test_non_string_template_raises() -> None:
    with pytest.raises(TemplateError, match="template must be a string"):
        render_text(["x"], CONTEXT)  # type: ignore[arg-type]


def test_compiled_templates_are_cached() -> None:
    source = "cache probe {{ name }} 1f3a"
    before = templates._compile.cache_info()
    render_text(source, CONTEXT)
    render_text(source, {"payload": {"name": "other"}})
    after = templates._compile.cache_info()
    assert after.hits - before.hits >= 1
    assert after.misses - before.misses == 1


# --------------------------------------------------------------------------- HTML


def test_html_escapes_values_but_not_markup() -> None:
    assert render_html("<b>{{ subscriber.lastName }}</b> {{ name }}", CONTEXT) == "<b>O&#39;Neil &lt;3</b> Bob &amp; Co"


def test_triple_stash_and_safe_output_raw_html() -> None:
    context = {"payload": {"snippet": "<i>hi</i>"}}
    assert render_html("{{{snippet}}}|{{ snippet | safe }}|{{snippet}}", context) == (
        "<i>hi</i>|<i>hi</i>|&lt;i&gt;hi&lt;/i&gt;"
    )


def test_safe_url() -> None:
    assert safe_url(" https://x.test/a?b=1 ") == "https://x.test/a?b=1"
    assert safe_url("/relative") == "/relative"
    assert safe_url("JavaScript:alert(1)") == "#"
    assert safe_url("java\nscript:alert(1)") == "#"
    assert safe_url("data:text/html,x") == "#"


def test_html_to_text() -> None:
    markup = (
        "<html><head><title>T</title><style>p{color:red}</style></head><body>"
        "<div style='display:none'>preheader</div>"
        "<h1>Hello &amp; welcome</h1><p>Line one<br>line\n   two</p>"
        "<ul><li>a</li><li>b</li></ul><p><a href='https://x.test'>Open</a> <a href='#'>x</a></p>"
        "<script>alert(1)</script></body></html>"
    )
    assert html_to_text(markup) == "Hello & welcome\n\nLine one\nline two\n\n- a\n- b\n\nOpen (https://x.test) x"


# --------------------------------------------------------------------------- email


def test_email_blocks_render_to_html_and_text() -> None:
    blocks = [
        {"type": "text", "content": "Hello {{subscriber.firstName}} {{subscriber.lastName}}\nYour order is ready."},
        {"type": "text", "content": "Centered", "styles": {"textAlign": "center"}},
        {"type": "button", "content": "View {{name}}", "url": "{{payload.url}}"},
    ]
    email = render_email(blocks, "Order for {{name}}", CONTEXT, preheader="Hi {{subscriber.firstName}}")
    assert email.subject == "Order for Bob & Co"
    assert '<p style="margin:0 0 16px;text-align:left;">Hello Ada O&#39;Neil &lt;3<br>\nYour order is ready.</p>' in (
        email.html
    )
    assert 'text-align:center;">Centered</p>' in email.html
    assert '<a href="https://shop.test/orders/42?x=1&amp;y=2"' in email.html
    assert ">View Bob &amp; Co</a>" in email.html
    assert email.html.startswith("<!DOCTYPE html>")
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in email.html
    assert "<title>Order for Bob &amp; Co</title>" in email.html
    assert ">Hi Ada</div>" in email.html  # hidden preheader
    assert email.text == (
        "Hello Ada O'Neil <3\nYour order is ready.\n\nCentered\n\n"
        "View Bob & Co: https://shop.test/orders/42?x=1&y=2"
    )


def test_email_button_alignment_color_and_unsafe_url() -> None:
    context = {**CONTEXT, "branding": {"color": "#ff0000"}, "payload": {"url": "javascript:alert(1)"}}
    blocks = [{"type": "button", "content": "Go", "url": "{{payload.url}}", "styles": {"textAlign": "right"}}]
    email = render_email(blocks, "s", context)
    assert '<td align="right"' in email.html
    assert "background-color:#ff0000" in email.html
    assert 'href="#"' in email.html
    assert "javascript" not in email.html
    assert email.text == "Go"


def test_email_button_without_url_is_not_a_link() -> None:
    email = render_email([{"type": "button", "content": "Soon"}], "s", CONTEXT)
    assert "<span" in email.html and ">Soon</span>" in email.html
    assert email.text == "Soon"


def test_email_custom_html_fragment_is_wrapped() -> None:
    email = render_email("<h1>Hi {{ name }}</h1><p>Bye</p>", "Subject", CONTEXT)
    assert "<h1>Hi Bob &amp; Co</h1><p>Bye</p>" in email.html
    assert email.html.startswith("<!DOCTYPE html>")
    assert email.text == "Hi Bob & Co\n\nBye"


def test_email_custom_html_document_is_sent_as_written() -> None:
    source = "<!DOCTYPE html><html><body><p>{{name}}</p></body></html>"
    email = render_email(source, "s", CONTEXT)
    assert email.html == "<!DOCTYPE html><html><body><p>Bob &amp; Co</p></body></html>"
    assert email.text == "Bob & Co"


def test_email_layout() -> None:
    layout = "<html><body><div class='pre'>{{preheader}}</div>{{{body}}}<footer>{{tenant.name}}</footer></body></html>"
    email = render_email([{"type": "text", "content": "Hi {{name}}"}], "S", CONTEXT, layout=layout, preheader="P")
    assert email.html == (
        "<html><body><div class='pre'>P</div>"
        '<p style="margin:0 0 16px;text-align:left;">Hi Bob &amp; Co</p><footer>Acme</footer></body></html>'
    )
    assert email.text == "Hi Bob & Co"


def test_email_layout_body_may_use_double_braces() -> None:
    email = render_email("<b>{{name}}</b>", "S", CONTEXT, layout="<main>{{ body }}</main>")
    assert email.html == "<main><b>Bob &amp; Co</b></main>"


def test_email_layout_without_body_raises() -> None:
    with pytest.raises(TemplateError, match=r"layout must output the content with \{\{\{body\}\}\} or \{\{content\}\}"):
        render_email("x", "s", CONTEXT, layout="<html></html>")


def test_email_subject_is_one_plain_line() -> None:
    email = render_email("x", "  Hello\n{{subscriber.lastName}}  ", CONTEXT)
    assert email.subject == "Hello O'Neil <3"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ([{"type": "image", "content": "x"}], "email block 1 has unsupported type 'image'"),
        (["text"], "email block 1 must be an object"),
        ([{"type": "text", "content": 5}], "email block 1 content must be a string"),
        ([{"type": "text", "content": "ok"}, {"type": "text", "content": "{% if %}"}], "email block 2: template syntax"),
        (5, "email content must be HTML or a list of blocks"),
    ],
)
def test_email_bad_content_raises(content: Any, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        render_email(content, "s", CONTEXT)
    assert message in caught.value.message


# --------------------------------------------------------------------------- other channels


def test_in_app() -> None:
    template = {
        "content": "{{actor.firstName}} commented on {{name}}",
        "subject": "New comment",
        "cta": {
            "type": "redirect",
            "data": {"url": "/orders/{{payload.items.[0].price}}"},
            "action": {"buttons": [{"type": "primary", "content": "Reply to {{actor.firstName}}"}]},
        },
    }
    assert render_in_app(template, CONTEXT) == {
        "content": "Grace commented on Bob &amp; Co",
        "subject": "New comment",
        "cta": {
            "type": "redirect",
            "data": {"url": "/orders/5"},
            "action": {"buttons": [{"type": "primary", "content": "Reply to Grace"}]},
        },
    }


def test_in_app_unsafe_cta_url_and_bad_content() -> None:
    template = {"content": "x", "cta": {"data": {"url": " javascript:alert(1)"}}}
    assert render_in_app(template, CONTEXT)["cta"]["data"]["url"] == "#"
    with pytest.raises(TemplateError, match="in-app content must be a string"):
        render_in_app({"content": [{"type": "text"}]}, CONTEXT)


def test_sms_chat_and_push_are_plain_text() -> None:
    assert render_sms("Hi {{subscriber.lastName}}, {{name}}", CONTEXT) == "Hi O'Neil <3, Bob & Co"
    assert render_chat("*{{name}}* has {{step.total_count}} updates", CONTEXT) == "*Bob & Co* has 2 updates"
    assert render_push("New for\n{{subscriber.firstName}}", "{{name}} & more", CONTEXT) == RenderedPush(
        title="New for Ada", content="Bob & Co & more"
    )
    assert render_sms(None, CONTEXT) == ""  # type: ignore[arg-type]


# --------------------------------------------------------------------------- limits


def limit_error(source: str, payload: dict[str, Any] | None = None, render: Any = render_text) -> TemplateError:
    with pytest.raises(TemplateError) as caught:
        render(source, {"subscriber": {}, "payload": payload or {}})
    assert caught.value.limit, caught.value.message
    assert "(render limit)" in caught.value.message
    return caught.value


def test_a_string_doubled_in_a_loop_stops_at_the_string_limit() -> None:
    # 31 doublings would build 4 GB (the process grew to 5.4 GB); it stops past 1,000,000 characters.
    error = limit_error('{% assign s = "aa" %}{% for i in (1..31) %}{% assign s = s | append: s %}{% endfor %}{{ s }}')
    assert "append would make a string of 1,048,576 characters, more than 1,000,000 (render limit)" in error.message
    error = limit_error("{% capture s %}ab{% endcapture %}{% for i in (1..31) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}")
    assert "output exceeds 1,000,000 bytes" in error.message


def test_what_assign_keeps_is_bounded_as_a_whole() -> None:
    source = "{% assign a = s | append: 'a' %}{% assign b = s | append: 'b' %}{% assign c = s | append: 'c' %}"
    error = limit_error(source, {"s": "x" * 900_000})
    assert "assigned values exceed 2,000,000 bytes (render limit)" in error.message


async def test_loop_iterations_are_counted_over_all_loops() -> None:
    # python-liquid counts each loop alone: a hundred loops of 9,000 each passed its limit.
    error = limit_error("{% for i in (1..2) %}{% endfor %}{% for i in (1..9999) %}{% endfor %}")
    assert "loop iteration limit of 10,000 reached (render limit)" in error.message
    assert "loop iteration limit of 10,000" in limit_error("{% for i in (1..101) %}{% for j in (1..100) %}{% endfor %}{% endfor %}").message
    assert "loop iteration limit of 10,000" in limit_error("{% for i in (1..1000000000) %}{% endfor %}").message
    at_the_limit = "{% for i in (1..5000) %}{% endfor %}{% for i in (1..5000) %}{% endfor %}done"
    assert await templates.render_bounded(render_text, at_the_limit, {}) == "done"


def test_output_is_bounded() -> None:
    error = limit_error("{% for i in (1..11) %}{{ s }}{% endfor %}", {"s": "é" * 50_000})  # 100,000 bytes each
    assert "output exceeds 1,000,000 bytes (render limit)" in error.message
    assert len(render_text("{% for i in (1..10) %}{{ s }}{% endfor %}", {"payload": {"s": "x" * 100_000}})) == 1_000_000


def test_strings_a_template_reads_or_filters_make_are_bounded() -> None:
    error = limit_error("{{ s }}", {"s": "x" * 1_000_001})
    assert "'s' is a string of 1,000,001 characters, more than 1,000,000 (render limit)" in error.message
    assert "'payload.s' is a string" in limit_error("{{ payload.s | upcase }}", {"s": "x" * 1_000_001}).message
    assert "replace would make a string of" in limit_error("{{ s | replace: 'x', s }}", {"s": "x" * 2_000}).message
    assert "join would make a string" in limit_error("{{ s | split: ',' | join: s }}", {"s": "," * 5_000}).message
    assert "has 1,000,000,000 items, more than 10,000" in limit_error("{{ (1..1000000000) | join }}").message
    assert "would make text of more than 1,000,000 characters" in limit_error(
        "{% assign a = s | split: '-' %}{% for i in (1..20) %}{% assign a = a | concat: a %}{% endfor %}{{ a | size }}",
        {"s": "x" * 1_000 + "-" + "y" * 1_000},
    ).message
    assert "times would make a number of more than 1,000 digits" in limit_error(
        "{% assign n = 9 %}{% for i in (1..40) %}{% assign n = n | times: n %}{% endfor %}{{ n }}"
    ).message
    # At the limit, strings are read and written as usual.
    assert render_text("{{ s | size }}", {"payload": {"s": "x" * 1_000_000}}) == "1000000"


def test_a_render_on_the_event_loop_stops_after_5_ms_of_cpu() -> None:
    # 25,000 upcase of a 1 MB string blocked the event loop for 13 s.
    error = limit_error("{% for i in (1..9000) %}{% assign u = s | upcase %}{% endfor %}", {"s": "x" * 1_000_000})
    assert "render took more than 5 ms of CPU (render limit)" in error.message
    error = limit_error("{% for i in (1..10000) %}" + "{{ '' }}" * 500 + "{% endfor %}")
    assert "render took more than 5 ms of CPU" in error.message


SLOW = "{% for i in (1..30) %}{% assign u = s | upcase %}{% endfor %}{{ u | size }}"  # about 50 ms
ENDLESS = "{% for i in (1..9000) %}{% assign u = s | upcase %}{% endfor %}"


async def test_a_step_render_too_long_for_the_loop_is_finished_off_it() -> None:
    context = {"payload": {"s": "x" * 1_000_000}}
    assert await templates.render_bounded(render_sms, SLOW, context) == "1000000"
    email = await templates.render_bounded(render_email, "x", SLOW, context, preheader="p")
    assert email.subject == "1000000"
    with pytest.raises(TemplateError, match=r"render took more than 250 ms of CPU \(render limit\)") as caught:
        await templates.render_bounded(render_sms, ENDLESS, context)
    assert caught.value.limit
    # Inside a trigger's expansion it is not taken off the loop: the step runs again on its own.
    with templates.on_loop_only(), pytest.raises(templates.RenderOvertime):
        await templates.render_bounded(render_sms, SLOW, context)
    # Renders that fit stay on the loop.
    assert await templates.render_bounded(render_sms, "{{ s | size }}", context) == "1000000"


def test_template_source_is_bounded() -> None:
    error = limit_error("{{ name }}" + "x" * 100_000)
    assert "template has 100,010 characters, more than 100,000 (render limit)" in error.message
    error = limit_error("{{a}}" * 2_001)
    assert "template has 10,005 characters of tags and outputs, more than 10,000 (render limit)" in error.message
    assert render_html("<p>" + "x" * 90_000 + "</p>{{ name }}", CONTEXT).endswith("</p>Bob &amp; Co")


def test_text_without_tags_is_held_to_the_source_limit() -> None:
    # A translated template may be long text with no tag: it was let through unchecked.
    error = limit_error("x" * 100_001)
    assert "template has 100,001 characters, more than 100,000 (render limit)" in error.message
    assert render_text("x" * 100_000, CONTEXT) == "x" * 100_000


def test_a_steps_renders_share_one_output_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1.2 MB of output takes a few ms of CPU: on a busy machine more than the on-loop budget (5 ms). The CPU
    # limit is not what this test is about, so its renders get the off-loop budget a large render gets.
    monkeypatch.setattr(templates, "ON_LOOP_RENDER_SECONDS", templates.MAX_RENDER_SECONDS)
    context = {"payload": {"s": "x" * 10_000}}
    part = "{% for i in (1..60) %}{{ s }}{% endfor %}"  # 600,000 bytes: within the limit alone
    for render in (
        lambda: render_email([{"type": "text", "content": part}] * 2, "x", context),
        lambda: render_email(part, part, context),
        lambda: render_in_app({"content": part, "data": {"more": part}}, context),
        lambda: render_push(part, part, context),
    ):
        with pytest.raises(TemplateError, match=r"the step's output exceeds 1,000,000 bytes, all its parts together") as caught:
            render()
        assert caught.value.limit
    # Each step has its own account; the body a layout places is counted once.
    assert len(render_email(part, "x", context, layout="<main>{{{body}}}</main>").html) == 600_013
    assert len(render_sms(part, context)) == len(render_chat(part, context)) == 600_000


def test_every_renderer_reports_the_limit() -> None:
    bomb = '{% assign s = "aa" %}{% for i in (1..31) %}{% assign s = s | append: s %}{% endfor %}{{ s }}'
    for render in (
        lambda context: render_email(bomb, "x", context),
        lambda context: render_email([{"type": "text", "content": bomb}], "x", context),
        lambda context: render_email("x", bomb, context),
        lambda context: render_in_app({"content": bomb}, context),
        lambda context: render_in_app({"content": "x", "cta": {"data": {"url": bomb}}}, context),
        lambda context: render_sms(bomb, context),
        lambda context: render_chat(bomb, context),
        lambda context: render_push(bomb, "x", context),
        lambda context: render_push("x", "{{#if a}}" + bomb + "{{/if}}", {"payload": {"a": True}}),
    ):
        with pytest.raises(TemplateError, match=r"append would make a string of 1,048,576 characters.*\(render limit\)") as caught:
            render(CONTEXT)
        assert caught.value.limit


def test_handlebars_translation_takes_time_linear_in_the_source() -> None:
    # Unclosed openings made the translation quadratic: "x{{" * 30,000 took 43 s, 10,000 unclosed raw tags 6 s.
    import time

    started = time.perf_counter()
    assert translate_handlebars("x{{" * 30_000) == "x{{" * 30_000
    assert translate_handlebars("{% endraw %}" + "{% raw %}" * 10_000) == "{% endraw %}" + "{% raw %}" * 10_000
    assert translate_handlebars("{{!-- " * 15_000 + "}}") == ""
    with pytest.raises(TemplateError, match="cannot read variable"):
        translate_handlebars("{{{a}} " * 14_000)
    assert time.perf_counter() - started < 5  # seconds; each takes milliseconds


async def test_give_way_lets_the_event_loop_turn_after_long_renders() -> None:
    import asyncio

    turned: list[str] = []
    templates._spent = 0.0
    await templates.give_way()  # nothing rendered: no wait
    render_text("{{ name }}", CONTEXT)
    assert templates._spent > 0  # renders are accounted
    asyncio.get_running_loop().call_soon(turned.append, "other")
    templates._spent = templates.GIVE_WAY_AFTER_SECONDS
    await templates.give_way()
    assert turned == ["other"] and templates._spent == 0.0


def test_in_app_avatar_and_data_for_the_inbox() -> None:
    from herald.engine.templates import render_in_app

    context = {"payload": {"name": "Ada <b>"}, "actor": {"avatar": "https://example.com/actor.png"}}
    rendered = render_in_app(
        {"content": "Hi", "data": {"who": "{{payload.name}}", "n": 1, "list": ["{{payload.name}}"]}}, context
    )
    # Data is JSON for the page's code: rendered, not HTML-escaped.
    assert rendered["data"] == {"who": "Ada <b>", "n": 1, "list": ["Ada <b>"]}
    assert "avatar" not in rendered
    assert render_in_app({"content": "Hi", "actor": {"type": "user"}}, context)["avatar"] == "https://example.com/actor.png"
    custom = {"content": "Hi", "actor": {"type": "system_custom", "data": "https://example.com/icon.png"}}
    assert render_in_app(custom, context)["avatar"] == "https://example.com/icon.png"
    assert render_in_app({"content": "Hi", "avatar": "javascript:alert(1)"}, context)["avatar"] == "#"
    assert "avatar" not in render_in_app({"content": "Hi", "actor": {"type": "none"}}, context)


def test_an_email_rendered_for_a_preview_has_the_same_html_and_no_text_part() -> None:
    context = {"payload": {"name": "Ada"}}
    full = render_email("<p>Hello {{payload.name}}</p>", "Hi", context, layout="<div>{{{body}}}</div>")
    preview = render_email("<p>Hello {{payload.name}}</p>", "Hi", context, layout="<div>{{{body}}}</div>", with_text=False)
    assert preview.html == full.html == "<div><p>Hello Ada</p></div>"
    assert full.text == "Hello Ada" and preview.text == ""


def test_blocks_written_out_as_html_render_as_the_blocks_do() -> None:
    """The editor's switch from blocks to HTML: the same email, variables kept as variables."""
    blocks = [
        {"type": "text", "content": "Hi {{payload.name}}\nline two & <b>bold</b>", "styles": {"textAlign": "center"}},
        {"type": "button", "content": "Open", "url": "https://example.com/o/{{payload.id}}?a=1&b=2"},
        {"type": "button", "content": "No link"},
    ]
    context = {"payload": {"name": "Ada <admin>", "id": "7"}}
    written = templates.blocks_as_html(blocks)
    assert "{{payload.name}}" in written and "{{payload.id}}" in written
    as_blocks = templates.render_email(blocks, "Hi", context, with_text=False)
    as_html = templates.render_email(written, "Hi", context, with_text=False)
    assert as_html.html == as_blocks.html
