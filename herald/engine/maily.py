"""Email bodies of Novu's block editor (``editorType: "block"``): Maily's TipTap JSON made into an HTML template.

Novu's dashboard and @novu/api (whose email controls default to ``editorType:
"block"``) send the body as a JSON string: a TipTap document of Maily's node
types (paragraphs, headings, lists, buttons, images, sections, columns...),
with variables as nodes of their own (``{"type": "variable", "attrs": {"id":
"payload.name"}}``), ``showIfKey`` on any node to show it only when a variable
is true, and ``repeat``/``for`` nodes that repeat their content for each item
of a list. Novu wraps the variables in Liquid, renders the Liquid over the JSON
and then the JSON to HTML; a body that is not JSON is taken as HTML as written.

Herald turns the document into one HTML template with the Liquid in place
(``{{ payload.name }}``, ``{% if %}``, ``{% for %}``) when the step is saved,
and the engine renders that template like any custom HTML body: with the same
bounded renderer (herald/engine/templates.py: its time, size, loop and nesting
limits) and the same escaping of every variable's value. The document's own
text and attributes are escaped here, so only the variables' Liquid is live.

A document deeper than :data:`MAX_DEPTH` or with more than :data:`MAX_NODES`
nodes is refused (:class:`MailyError`), as is a variable name that is not a
variable path.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from typing import Any

from herald.engine.templates import TemplateError

MAX_DEPTH = 30
MAX_NODES = 10_000

# A variable as the editor names it: ``payload.items``, ``subscriber.firstName``, ``payload.rows[0].name``.
_VARIABLE_PATH = re.compile(r"^[A-Za-z_][\w-]*(?:\.[\w-]+|\[\d+\])*$")
# Liquid already in a text or attribute (typed by hand): kept as it is, the rest escaped around it.
_LIQUID = re.compile(r"(\{\{.*?\}\}|\{%.*?%\})", re.DOTALL)
_SAFE_URL = re.compile(r"^(?:https?:|mailto:|tel:|/|#|\{\{)", re.IGNORECASE)

_ALIGN = frozenset({"left", "center", "right", "justify"})
_BUTTON_STYLE = (
    "display:inline-block;padding:12px 24px;border-radius:6px;text-decoration:none;font-weight:600;"
    "background-color:{bg};color:{fg}"
)


class MailyError(TemplateError):
    """The document cannot be made into a template (too large, too deep, or a variable that is no path)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, limit="more than" in message or "deeper" in message)


def maily_document(body: Any) -> dict[str, Any] | None:
    """The Maily document a body holds (a JSON string of ``{"type": "doc", ...}``, or that object); else None."""
    document = body
    if isinstance(body, str):
        stripped = body.strip()
        if not stripped.startswith("{"):
            return None
        try:
            document = json.loads(stripped)
        except ValueError:
            return None
    if isinstance(document, dict) and document.get("type") == "doc":
        return document
    return None


def _escape_text(text: str) -> str:
    """Text with its Liquid kept live and everything else escaped for HTML."""
    parts = _LIQUID.split(text)
    return "".join(part if index % 2 else html.escape(part, quote=True) for index, part in enumerate(parts))


def _variable(name: Any, fallback: Any = None) -> str:
    """A variable's Liquid output, with its fallback as Novu writes it (``| default: '...'``)."""
    path = str(name or "").strip()
    if path.startswith("{{") and path.endswith("}}"):
        path = path[2:-2].strip()
    if not _VARIABLE_PATH.match(path):
        raise MailyError(f"{path[:80]!r} is not a variable (payload.name, subscriber.firstName...)")
    if isinstance(fallback, str) and fallback:
        return "{{ " + path + " | default: '" + fallback.replace("'", "’") + "' }}"
    return "{{ " + path + " }}"


def _attr(attrs: Mapping[str, Any], name: str, flag: str | None = None) -> str:
    """An attribute's value for HTML: the variable's Liquid when the editor marked it as one, else escaped text."""
    value = attrs.get(name)
    if value is None:
        return ""
    if flag is not None and attrs.get(flag):
        return _variable(value, attrs.get("fallback"))
    return _escape_text(str(value))


def _url(attrs: Mapping[str, Any], name: str, flag: str | None = None) -> str:
    url = _attr(attrs, name, flag)
    return url if _SAFE_URL.match(url) else ("#" if url else "")


def _style_value(value: Any) -> str:
    """A colour or size from the document, for a style attribute: nothing that could end the declaration."""
    text = str(value or "")
    return text if re.fullmatch(r"#?[\w.%() ,-]{1,40}", text) else ""


def _align(attrs: Mapping[str, Any], key: str = "textAlign") -> str:
    align = attrs.get(key) or attrs.get("alignment")
    return f"text-align:{align};" if align in _ALIGN else ""


class _Writer:
    """One pass over the document, counting its nodes; repeat loops rename the variables of their list's items."""

    def __init__(self) -> None:
        self.nodes = 0
        # (the list's path, the loop variable) of each repeat the writer is inside, innermost last.
        self.loops: list[tuple[str, str]] = []

    def in_loop(self, path: str) -> str:
        """A variable inside a repeat: ``payload.items.name`` is the current item's ``name``, as in Novu."""
        for list_path, item in reversed(self.loops):
            if path == list_path:
                return item
            if path.startswith(list_path + "."):
                return item + path[len(list_path) :]
        return path

    def variable(self, name: Any, fallback: Any = None) -> str:
        output = _variable(name, fallback)  # checked as a path first
        path = output[3:].split(" |", 1)[0].removesuffix(" }}").strip()
        return output.replace(path, self.in_loop(path), 1)

    def children(self, node: Mapping[str, Any], depth: int) -> str:
        content = node.get("content")
        if not isinstance(content, list):
            return ""
        return "".join(self.node(child, depth + 1) for child in content if isinstance(child, dict))

    def node(self, node: Mapping[str, Any], depth: int) -> str:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise MailyError(f"the email body has more than {MAX_NODES} blocks")
        if depth > MAX_DEPTH:
            raise MailyError(f"the email body nests blocks deeper than {MAX_DEPTH}")
        attrs = node.get("attrs") if isinstance(node.get("attrs"), dict) else {}
        written = self.write(str(node.get("type") or ""), node, attrs, depth)
        show_if = attrs.get("showIfKey")
        if show_if:
            condition = self.in_loop(_variable(show_if)[3:-3].strip())
            # Novu shows the block when the variable renders to anything but false, null, undefined or nothing.
            written = (
                f"{{% if {condition} and {condition} != '' and {condition} != 'false' and {condition} != 'null' %}}"
                f"{written}{{% endif %}}"
            )
        return written

    def write(self, kind: str, node: Mapping[str, Any], attrs: Mapping[str, Any], depth: int) -> str:
        inner = self.children
        if kind == "doc":
            return inner(node, depth)
        if kind == "text":
            return self.marks(_escape_text(str(node.get("text") or "")), node.get("marks"))
        if kind == "variable":
            return self.marks(self.variable(attrs.get("id"), attrs.get("fallback")), node.get("marks"))
        if kind == "paragraph":
            return f'<p style="margin:0 0 16px;{_align(attrs)}">{inner(node, depth) or "&nbsp;"}</p>'
        if kind == "heading":
            level = attrs.get("level") if attrs.get("level") in (1, 2, 3, 4, 5, 6) else 2
            return f'<h{level} style="margin:0 0 12px;{_align(attrs)}">{inner(node, depth)}</h{level}>'
        if kind == "bulletList":
            return f'<ul style="margin:0 0 16px;padding-left:24px">{inner(node, depth)}</ul>'
        if kind == "orderedList":
            start = attrs.get("start")
            begin = f' start="{start}"' if isinstance(start, int) and not isinstance(start, bool) else ""
            return f'<ol{begin} style="margin:0 0 16px;padding-left:24px">{inner(node, depth)}</ol>'
        if kind == "listItem":
            return f"<li>{inner(node, depth)}</li>"
        if kind == "blockquote":
            return (
                '<blockquote style="margin:0 0 16px;padding-left:12px;border-left:3px solid #d1d5db">'
                f"{inner(node, depth)}</blockquote>"
            )
        if kind == "horizontalRule":
            return '<hr style="border:none;border-top:1px solid #e5e7eb;margin:16px 0">'
        if kind == "hardBreak":
            return "<br>"
        if kind == "spacer":
            height = attrs.get("height")
            pixels = {"sm": 8, "md": 16, "lg": 32, "xl": 64}.get(str(height), 16)
            if isinstance(height, int | float) and not isinstance(height, bool):
                pixels = max(0, min(int(height), 400))
            return f'<div style="height:{pixels}px;line-height:{pixels}px">&nbsp;</div>'
        if kind in ("image", "logo", "inlineImage"):
            return self.image(kind, attrs)
        if kind == "button":
            return self.button(attrs)
        if kind in ("repeat", "for"):
            return self.repeat(node, attrs, depth)
        if kind == "columns":
            return (
                '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" style="margin:0 0 16px">'
                f"<tr>{inner(node, depth)}</tr></table>"
            )
        if kind == "column":
            width = _style_value(attrs.get("width"))
            style = f"width:{width}%;" if width and width.replace(".", "").isdigit() else ""
            return f'<td valign="top" style="{style}">{inner(node, depth)}</td>'
        if kind == "section":
            background = _style_value(attrs.get("backgroundColor"))
            style = f"background-color:{background};" if background else ""
            return (
                f'<div style="{style}padding:16px;margin:0 0 16px;{_align(attrs, "align")}">{inner(node, depth)}</div>'
            )
        if kind == "footer":
            return f'<p style="margin:0 0 16px;font-size:12px;color:#6b7280">{inner(node, depth)}</p>'
        if kind == "htmlCodeBlock":
            # The editor's raw HTML block: written by the workflow's author, sent as written (like an HTML body).
            return "".join(
                str(child.get("text") or "") for child in node.get("content") or [] if isinstance(child, dict)
            )
        if kind == "codeBlock":
            return f"<pre><code>{inner(node, depth)}</code></pre>"
        # A block Herald has no HTML of its own for (a newer editor's): its content, so no text is lost.
        return inner(node, depth)

    def marks(self, text: str, marks: Any) -> str:
        for mark in marks if isinstance(marks, list) else []:
            if not isinstance(mark, dict):
                continue
            kind = mark.get("type")
            attrs = mark.get("attrs") if isinstance(mark.get("attrs"), dict) else {}
            if kind == "bold":
                text = f"<strong>{text}</strong>"
            elif kind == "italic":
                text = f"<em>{text}</em>"
            elif kind == "underline":
                text = f"<u>{text}</u>"
            elif kind == "strike":
                text = f"<s>{text}</s>"
            elif kind == "code":
                text = f"<code>{text}</code>"
            elif kind == "link":
                href = self.url_of(attrs, "href", "isUrlVariable")
                text = f'<a href="{href}" target="_blank" rel="noopener noreferrer">{text}</a>'
            elif kind == "textStyle" and _style_value(attrs.get("color")):
                text = f'<span style="color:{_style_value(attrs.get("color"))}">{text}</span>'
        return text

    def url_of(self, attrs: Mapping[str, Any], name: str, flag: str) -> str:
        if attrs.get(flag) and attrs.get(name):
            return self.variable(attrs.get(name), attrs.get("fallback"))
        return _url(attrs, name)

    def image(self, kind: str, attrs: Mapping[str, Any]) -> str:
        src = self.url_of(attrs, "src", "isSrcVariable")
        if not src:
            return ""
        alt = _attr(attrs, "alt")
        width = attrs.get("width")
        size = f' width="{int(width)}"' if isinstance(width, int | float) and not isinstance(width, bool) else ""
        if kind == "logo" and not size:
            size = ' width="48"'
        image = f'<img src="{src}" alt="{alt}"{size} style="max-width:100%;height:auto;border:0">'
        link = self.url_of(attrs, "externalLink", "isExternalLinkVariable")
        if link and link != "#":
            image = f'<a href="{link}" target="_blank" rel="noopener noreferrer">{image}</a>'
        if kind == "inlineImage":
            return image
        return f'<div style="margin:0 0 16px;{_align(attrs, "alignment")}">{image}</div>'

    def button(self, attrs: Mapping[str, Any]) -> str:
        label = (
            self.variable(attrs["text"], attrs.get("fallback"))
            if attrs.get("isTextVariable") and attrs.get("text")
            else _escape_text(str(attrs.get("text") or ""))
        )
        href = self.url_of(attrs, "url", "isUrlVariable") or "#"
        background = _style_value(attrs.get("buttonColor")) or "#111827"
        color = _style_value(attrs.get("textColor")) or "#ffffff"
        style = _BUTTON_STYLE.format(bg=background, fg=color)
        return (
            f'<div style="margin:0 0 16px;{_align(attrs, "alignment")}">'
            f'<a href="{href}" target="_blank" rel="noopener noreferrer" style="{style}">{label}</a></div>'
        )

    def repeat(self, node: Mapping[str, Any], attrs: Mapping[str, Any], depth: int) -> str:
        list_path = self.in_loop(_variable(attrs.get("each"))[3:-3].strip())
        item = f"item{len(self.loops) + 1}"
        iterations = attrs.get("iterations")
        limit = (
            f" limit: {iterations}"
            if isinstance(iterations, int) and not isinstance(iterations, bool) and iterations > 0
            else ""
        )
        self.loops.append((str(attrs.get("each")).strip("{} "), item))
        try:
            body = self.children(node, depth)
        finally:
            self.loops.pop()
        return f"{{% for {item} in {list_path}{limit} %}}{body}{{% endfor %}}"


def maily_to_template(document: Mapping[str, Any]) -> str:
    """The HTML template (Liquid inside) of a Maily document; :class:`MailyError` when it cannot be one."""
    content = document.get("content")
    if isinstance(content, list):
        # Novu drops the empty paragraphs the editor leaves at the end of a body.
        while content and _is_empty_paragraph(content[-1]):
            content = content[:-1]
        document = {**document, "content": content}
    return _Writer().node(document, 0)


def _is_empty_paragraph(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "paragraph" and not node.get("content")
