"""Translated step content: ``{{t.key}}`` replaced by the subscriber's locale's text before the step renders.

Novu's translated templates name keys as ``{{t.key}}``, nested ones as ``{{t.product.details.title}}``.
A key is looked up in the subscriber's ``locale`` (exact: ``fr_FR``; Novu's locales are
``language_REGION`` and a language alone is no locale), then in the organization's default locale;
a key neither has renders as its own path (``product.details.title``), as Novu's translation module
shows a missing key. The text put in its place is template source, as Novu's is: a translation such
as ``Bonjour {{subscriber.firstName}}`` is rendered with the step's variables afterwards, through the
bounded renderer (herald/engine/templates.py) and its limits. A translation counts toward them as
the text it replaces would: a step's template, its translations put in, may have MAX_TEMPLATE_CHARS
characters in all, and a step past it fails for good with that limit named (no text is made past it).

Only steps of workflows with ``isTranslationEnabled`` are read for: the others cost a boolean read
with their event and nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.templates import MAX_TEMPLATE_CHARS, TemplateError
from herald.translations.repository import TranslationRepository
from herald.translations.schemas import ResourceType
from herald.translations.service import DEFAULT_LOCALE

if TYPE_CHECKING:
    from herald.engine.steps.base import StepContext

KEY_PATTERN = re.compile(r"\{\{\s*t\.([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)\s*\}\}")
"""``{{t.key}}`` and ``{{ t.a.b-c }}``: the key path after ``t.``."""

MAX_TEMPLATE_DEPTH = 50
"""How deep a step's template is walked for strings (its blocks and buttons are a few levels)."""


def lookup(keys: Mapping[str, Any], path: str) -> str | None:
    """The text at ``path`` in a locale's keys, nested (``{"a": {"b": ...}}``) or flat (``{"a.b": ...}``) or both."""
    value = _find(keys, path.split("."))
    if value is None or isinstance(value, dict):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _find(node: Mapping[str, Any], parts: list[str]) -> Any:
    # Longest flat key first: {"a.b": "x"} and {"a": {"b": "x"}} both answer a.b.
    for taken in range(len(parts), 0, -1):
        key = ".".join(parts[:taken])
        if key not in node:
            continue
        value = node[key]
        if taken == len(parts):
            return value
        if isinstance(value, dict):
            found = _find(value, parts[taken:])
            if found is not None:
                return found
    return None


class _Budget:
    """The characters a step's translated template may still have (MAX_TEMPLATE_CHARS in all)."""

    __slots__ = ("left",)

    def __init__(self, chars: int = MAX_TEMPLATE_CHARS) -> None:
        self.left = chars

    def take(self, chars: int) -> None:
        self.left -= chars
        if self.left < 0:
            raise TemplateError(
                f"the step's template with its translations has more than {MAX_TEMPLATE_CHARS:,} characters (render limit)",
                limit=True,
            )


def translate_text(text: str, locales: Sequence[Mapping[str, Any]], budget: _Budget | None = None) -> str:
    """``text`` with each ``{{t.key}}`` replaced by the first locale's text for it, else by the key's path.

    Raises TemplateError, before making it, when the text would be longer than ``budget`` allows
    (MAX_TEMPLATE_CHARS when not given).
    """
    budget = budget if budget is not None else _Budget()
    if "t." not in text or "{{" not in text:
        budget.take(len(text))
        return text
    pieces: list[str] = []
    position = 0
    for match in KEY_PATTERN.finditer(text):
        path = match.group(1)
        found = next((value for keys in locales if (value := lookup(keys, path)) is not None), path)
        budget.take(match.start() - position + len(found))
        pieces += (text[position : match.start()], found)
        position = match.end()
    budget.take(len(text) - position)
    pieces.append(text[position:])
    return "".join(pieces)


def translate_template(
    value: Any, locales: Sequence[Mapping[str, Any]], depth: int = 0, budget: _Budget | None = None
) -> Any:
    """A copy of a step's template with every string translated (dicts and lists walked), all of them
    together within MAX_TEMPLATE_CHARS (TemplateError past it)."""
    budget = budget if budget is not None else _Budget()
    if isinstance(value, str):
        return translate_text(value, locales, budget)
    if depth >= MAX_TEMPLATE_DEPTH:
        return value
    if isinstance(value, dict):
        return {key: translate_template(item, locales, depth + 1, budget) for key, item in value.items()}
    if isinstance(value, list):
        return [translate_template(item, locales, depth + 1, budget) for item in value]
    return value


async def apply_translations(session: AsyncSession, contexts: Sequence[StepContext]) -> None:
    """Translate the templates of the steps whose workflow has translations on: one read of translations
    (and one of each organization's locales) for the whole batch; other steps are left as they are."""
    wanted = [ctx for ctx in contexts if ctx.event.workflow_translation_enabled and ctx.step.get("template")]
    if not wanted:
        return
    repository = TranslationRepository(session)
    defaults: dict[str, str] = {}
    for organization_id in {ctx.job.organization_id for ctx in wanted}:
        row = await repository.locales(organization_id)
        defaults[organization_id] = row.default_locale if row is not None else DEFAULT_LOCALE
    by_environment: dict[str, list[StepContext]] = {}
    for ctx in wanted:
        by_environment.setdefault(ctx.job.environment_id, []).append(ctx)
    for environment_id, group in by_environment.items():
        identifiers = {ctx.event.trigger_identifier for ctx in group}
        locales = {defaults[ctx.job.organization_id] for ctx in group}
        locales |= {ctx.subscriber.locale for ctx in group if ctx.subscriber.locale}
        rows = await repository.for_resources(environment_id, ResourceType.WORKFLOW.value, identifiers, locales)
        content = {(row.resource_id, row.locale): row.content or {} for row in rows}
        for ctx in group:
            identifier = ctx.event.trigger_identifier
            chain = [ctx.subscriber.locale, defaults[ctx.job.organization_id]]
            found = [
                content[(identifier, locale)] for locale in dict.fromkeys(chain) if (identifier, locale) in content
            ]
            try:
                ctx.step = {**ctx.step, "template": translate_template(ctx.step["template"], found)}
            except TemplateError as exc:
                ctx.template_error = f"Template error: {exc}"
