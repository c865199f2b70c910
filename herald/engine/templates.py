"""Rendering step templates: Liquid, plus the Handlebars forms Novu v1 templates use.

A template sees these variables (see docs/templates.md):

* ``subscriber``: the recipient (firstName, lastName, email, phone, avatar,
  locale, subscriberId, data, ...);
* ``payload``: the trigger payload; its keys are also available bare, so
  ``{{name}}`` means ``{{payload.name}}`` (a namespace wins over a payload key
  of the same name);
* ``step``: ``digest`` (bool), ``events`` (the digested payloads) and
  ``total_count``;
* ``tenant`` and ``actor`` when the trigger carried them; ``branding`` when known;
* ``env``: the organization's environment variables, each as its value for the
  environment of the run (``{{env.BASE_URL}}``, herald/environment_variables).

Undefined variables render as empty strings; malformed templates raise
:class:`TemplateError`. Compiled templates are cached (LRU) by source text.
"""

from __future__ import annotations

import asyncio
import contextvars
import html
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial, wraps
from html.parser import HTMLParser
from io import StringIO
from typing import Any, ClassVar, TypeVar

from liquid import BoundTemplate, Environment, Markup, RenderContext
from liquid.exceptions import (
    BlockNestingError,
    ContextDepthError,
    LiquidError,
    LocalNamespaceLimitError,
    LoopIterationLimitError,
    OutputStreamLimitError,
    ResourceLimitError,
)
from liquid.output import LimitedStringIO
from liquid.undefined import UNDEFINED

__all__ = [
    "NAMESPACES",
    "RenderedEmail",
    "RenderedPush",
    "TemplateError",
    "TemplateProblem",
    "check_template",
    "give_way",
    "on_loop_only",
    "render_bounded",
    "html_to_text",
    "render_chat",
    "render_email",
    "render_html",
    "render_in_app",
    "render_off_loop",
    "render_push",
    "render_sms",
    "render_text",
    "safe_url",
    "translate_handlebars",
]

NAMESPACES = frozenset({"subscriber", "payload", "step", "tenant", "actor", "branding", "env"})
"""Top-level variables that are never shadowed by payload keys."""

COMPILED_CACHE_SIZE = 2048

# --------------------------------------------------------------------------- limits
#
# Templates and payloads come from API users, and a render runs on the worker's event
# loop (in the API process itself under ``herald serve``): one render may not take the
# process's memory or stall its loop. Each limit fails the render with a TemplateError
# that names it, and the step fails for good (docs/templates.md, "Limits").

MAX_TEMPLATE_CHARS = 100_000
"""A template's source (the workflow's whole body may be 100 KB)."""
MAX_MARKUP_CHARS = 10_000
"""The characters of a template's tags and outputs ({{ }}, {% %}); parsing them costs up to 3.5 µs each."""
MAX_OUTPUT_BYTES = 1_000_000
"""What one step's renders write together, UTF-8: an email's subject, blocks and layout (its body counted once),
an in-app message's content, CTA and data (python-liquid's output_stream_limit bounds each render alone)."""
MAX_STRING_CHARS = 1_000_000
"""A string a template reads from its variables, or a filter takes or makes."""
MAX_ITEMS = 10_000
"""The items of a list a filter takes or makes (size, first and last take any)."""
MAX_NUMBER = 10**1000
"""Numbers a filter makes stay below this (a thousand digits)."""
MAX_LOOP_ITERATIONS = 10_000
"""Loop iterations of one render, all loops together (python-liquid counts each loop alone)."""
MAX_ASSIGNED_BYTES = 2_000_000
"""The values of assign and capture together, as sys.getsizeof counts (python-liquid's local_namespace_limit)."""
MAX_NESTING = 30
"""Blocks inside blocks (python-liquid's block_nesting_limit and context_depth_limit)."""
MAX_RENDER_SECONDS = 0.25
"""CPU time of one render of a step's content (off the event loop: see render_bounded)."""
ON_LOOP_RENDER_SECONDS = 0.005
"""CPU time a render may take on the event loop: a step's content taking longer is rendered again off
the loop (most take well under 1 ms; a 100-event digest email 4-5 ms); other renders (filter values) fail."""
RENDER_SWITCH_SECONDS = 0.001
"""The interpreter's switch interval while a render runs off the loop (Python's default is 5 ms)."""
GIVE_WAY_AFTER_SECONDS = 0.01
"""Render time after which the next step waits for the event loop's next turn (see give_way)."""


class TemplateError(Exception):
    """A template that cannot be compiled or rendered; the message says where and why.

    ``limit`` is True when the template went past one of the limits above.
    """

    def __init__(
        self, message: str, *, line: int | None = None, column: int | None = None, limit: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.limit = limit


class RenderLimitError(ResourceLimitError):
    """A render that went past one of Herald's limits; the message names it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, token=None)


class _Written:
    """What the renders of one step have written so far, in UTF-8 bytes (see MAX_OUTPUT_BYTES)."""

    __slots__ = ("bytes",)

    def __init__(self) -> None:
        self.bytes = 0

    def add(self, size: int) -> None:
        self.bytes += size
        if self.bytes > MAX_OUTPUT_BYTES:
            raise RenderLimitError(f"the step's output exceeds {MAX_OUTPUT_BYTES:,} bytes, all its parts together (render limit)")


# The account of the step being rendered (set by render_email, render_in_app, ...; None for a render alone).
_written: contextvars.ContextVar[_Written | None] = contextvars.ContextVar("herald_render_written", default=None)


def _one_step(render: Callable[..., _Result]) -> Callable[..., _Result]:
    """Count everything ``render`` (a step's whole render) writes against MAX_OUTPUT_BYTES, together."""

    @wraps(render)
    def counted(*args: Any, **kwargs: Any) -> _Result:
        if _written.get() is not None:
            return render(*args, **kwargs)
        token = _written.set(_Written())
        try:
            return render(*args, **kwargs)
        finally:
            _written.reset(token)

    return counted


class _StepBuffer(LimitedStringIO):
    """A render's output stream: MAX_OUTPUT_BYTES for the render, and for its step's renders together."""

    def __init__(self, written: _Written | None) -> None:
        super().__init__(limit=MAX_OUTPUT_BYTES)
        self.written = written

    def write(self, text: str) -> int:
        if text:
            size = len(text.encode("utf-8"))
            self.size += size
            if self.size > self.limit:  # the render's own limit first: its error names it
                raise OutputStreamLimitError("output stream limit reached", token=None)
            if self.written is not None:
                self.written.add(size)
        return StringIO.write(self, text)


class RenderOvertime(Exception):  # noqa: N818 (not an error: the render is taken off the loop)
    """A render that took longer than the event loop allows, tried on it by render_bounded."""


_Result = TypeVar("_Result")

# How long the renders of this context may take: "loop" (the default: ON_LOOP_RENDER_SECONDS, then a
# limit error), "try" (ON_LOOP_RENDER_SECONDS, then RenderOvertime), "off-loop" (MAX_RENDER_SECONDS).
_budget: contextvars.ContextVar[str] = contextvars.ContextVar("herald_render_budget", default="loop")
_offload: contextvars.ContextVar[bool] = contextvars.ContextVar("herald_render_offload", default=True)


# --------------------------------------------------------------------------- Liquid set-up


def _json_filter(value: object) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _titlecase_filter(value: object) -> str:
    return " ".join(word[:1].upper() + word[1:].lower() for word in str(value).split(" "))


def _check_value(value: object, what: str) -> None:
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise RenderLimitError(
                f"{what} is a string of {len(value):,} characters, more than {MAX_STRING_CHARS:,} (render limit)"
            )
    elif isinstance(value, int) and not isinstance(value, bool):
        if not -MAX_NUMBER < value < MAX_NUMBER:
            raise RenderLimitError(f"{what} is a number of more than 1,000 digits (render limit)")
    elif isinstance(value, list | tuple | range | Mapping | set | frozenset) and len(value) > MAX_ITEMS:
        raise RenderLimitError(f"{what} has {len(value):,} items, more than {MAX_ITEMS:,} (render limit)")


def _text_size(value: object, budget: int) -> int:
    """Roughly the characters of ``value`` written out, counted until past ``budget``."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list | tuple):
        total = 2
        for item in value:
            total += 1 + _text_size(item, budget - total)
            if total > budget:
                break
        return total
    return 24


def _check_text_size(value: object, what: str) -> None:
    if isinstance(value, list | tuple | Mapping) and _text_size(value, MAX_STRING_CHARS) > MAX_STRING_CHARS:
        raise RenderLimitError(f"{what} would make text of more than {MAX_STRING_CHARS:,} characters (render limit)")


def _longer_than_limit(length: int, name: str) -> None:
    if length > MAX_STRING_CHARS:
        raise RenderLimitError(f"{name} would make a string of {length:,} characters, more than {MAX_STRING_CHARS:,} (render limit)")


def _before_append(name: str, left: object, args: tuple[Any, ...]) -> None:
    if args and isinstance(left, str) and isinstance(args[0], str):
        _longer_than_limit(len(left) + len(args[0]), name)


def _before_replace(name: str, left: object, args: tuple[Any, ...]) -> None:
    if len(args) >= 2 and isinstance(left, str):
        old, new = str(args[0]), str(args[1])
        count = left.count(old) if name == "replace" else 1
        _longer_than_limit(len(left) + count * max(0, len(new) - len(old)), name)


def _before_join(name: str, left: object, args: tuple[Any, ...]) -> None:
    if isinstance(left, list | tuple):
        separator = len(str(args[0])) if args else 1
        _longer_than_limit(_text_size(left, MAX_STRING_CHARS) + separator * len(left), name)


def _before_times(name: str, left: object, args: tuple[Any, ...]) -> None:
    if args and isinstance(left, int) and isinstance(args[0], int) and left.bit_length() + args[0].bit_length() > 3400:
        raise RenderLimitError(f"{name} would make a number of more than 1,000 digits (render limit)")


# Filters whose result can be much larger than what they take: checked before they run.
_BEFORE = {
    "append": _before_append,
    "prepend": _before_append,
    "replace": _before_replace,
    "replace_first": _before_replace,
    "replace_last": _before_replace,
    "join": _before_join,
    "times": _before_times,
}
# Filters that read a list without writing it out (the others may write it as text).
_READ_ONLY_ON_LISTS = frozenset(
    {"size", "first", "last", "slice", "sort", "sort_natural", "map", "where", "reject", "find", "find_index",
     "has", "uniq", "reverse", "compact", "concat", "sum", "default"}
)
_ANY_LENGTH = frozenset({"size", "first", "last", "default"})


class _BoundedContext(RenderContext):
    """A render context that keeps the render within the limits (loop iterations of
    all loops together, the size of what variables and filters give, CPU time)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._nodes = 0
        self._iterations = 0
        self._mode = _budget.get()
        self._seconds = MAX_RENDER_SECONDS if self._mode == "off-loop" else ON_LOOP_RENDER_SECONDS
        # A first try on the loop is timed by the wall clock alone: running over only sends the render to
        # the thread, where the CPU time is what counts. Reading the thread's CPU clock for every render
        # cost an email a fifteenth of a worker's CPU (three renders, python -m bench.email).
        self._cpu_started = None if self._mode == "try" else time.thread_time()
        self._wall_deadline = time.perf_counter() + self._seconds
        super().__init__(*args, **kwargs)

    # Every node checks ``disabled_tags`` before it renders: the hook to keep time.
    @property
    def disabled_tags(self) -> list[str]:
        self._nodes += 1
        if not self._nodes & 31:
            self._check_time()
        return self._disabled_tags

    @disabled_tags.setter
    def disabled_tags(self, value: list[str]) -> None:
        self._disabled_tags = value

    def _check_time(self) -> None:
        # perf_counter is cheap; the thread's CPU time (ten times dearer) is read only when the
        # wall clock says the time may be up, so time spent waiting for the CPU does not count.
        if time.perf_counter() < self._wall_deadline:
            return
        if self._cpu_started is None:
            raise RenderOvertime
        spent = time.thread_time() - self._cpu_started
        if spent > self._seconds:
            if self._mode == "try":
                raise RenderOvertime
            raise RenderLimitError(f"render took more than {self._seconds * 1000:.0f} ms of CPU (render limit)")
        self._wall_deadline = time.perf_counter() + self._seconds - spent

    def raise_for_loop_limit(self, length: int = 1) -> None:
        self._iterations += length
        if self._iterations > MAX_LOOP_ITERATIONS:
            raise RenderLimitError(f"loop iteration limit of {MAX_LOOP_ITERATIONS:,} reached (render limit)")
        self._check_time()
        super().raise_for_loop_limit(length)

    def get(self, path: list[object], *, token: Any, default: object = UNDEFINED) -> object:
        value = super().get(path, token=token, default=default)
        if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
            shown = ".".join(str(segment) for segment in path)
            _check_value(value, f"'{shown}'")
        return value

    def filter(self, name: str, token: Any) -> Callable[..., object]:  # noqa: A003
        func = super().filter(name, token)

        def bounded(left: object, *args: Any, **kwargs: Any) -> object:
            self._check_time()
            what = f"the input of {name}"
            if name not in _ANY_LENGTH:
                _check_value(left, what)
            if name not in _READ_ONLY_ON_LISTS:
                _check_text_size(left, what)
            for arg in args:
                _check_value(arg, f"an argument of {name}")
            before = _BEFORE.get(name)
            if before is not None:
                before(name, left, args)
            try:
                result = func(left, *args, **kwargs)
            except (ValueError, OverflowError, ArithmeticError) as err:
                if isinstance(err, LiquidError):
                    raise
                raise RenderLimitError(f"{name}: {err}") from None
            _check_value(result, f"the result of {name}")
            if name == "concat":
                _check_text_size(result, "the result of concat")
            return result

        return bounded


class _Template(BoundTemplate):
    context_class = _BoundedContext

    def _get_buffer(self) -> LimitedStringIO:
        return _StepBuffer(_written.get())


class _Environment(Environment):
    # Templates come from API users: bound the work one render may do (see the limits above).
    template_class = _Template
    loop_iteration_limit: ClassVar[int | None] = MAX_LOOP_ITERATIONS
    output_stream_limit: ClassVar[int | None] = MAX_OUTPUT_BYTES
    local_namespace_limit: ClassVar[int | None] = MAX_ASSIGNED_BYTES
    block_nesting_limit: ClassVar[int] = MAX_NESTING
    context_depth_limit: ClassVar[int] = MAX_NESTING


def _environment(*, autoescape: bool) -> Environment:
    env = _Environment(autoescape=autoescape)
    env.add_filter("json", _json_filter)
    env.add_filter("titlecase", _titlecase_filter)
    return env


_TEXT_ENV = _environment(autoescape=False)
_HTML_ENV = _environment(autoescape=True)

# python-liquid's own limit errors, in words that name the limit.
_LIMIT_MESSAGES: dict[type[LiquidError], str] = {
    OutputStreamLimitError: f"output exceeds {MAX_OUTPUT_BYTES:,} bytes (render limit)",
    LocalNamespaceLimitError: f"assigned values exceed {MAX_ASSIGNED_BYTES:,} bytes (render limit)",
    LoopIterationLimitError: f"loop iteration limit of {MAX_LOOP_ITERATIONS:,} reached (render limit)",
    BlockNestingError: f"blocks nested more than {MAX_NESTING} deep (render limit)",
    ContextDepthError: f"blocks nested more than {MAX_NESTING} deep (render limit)",
}


def _error_position(err: LiquidError) -> tuple[int | None, int | None]:
    context = err.context()
    if context is None:
        return None, None
    line, column, *_ = context
    return line, column + 1


def _template_error(prefix: str, err: LiquidError) -> TemplateError:
    line, column = _error_position(err)
    where = f" at line {line}, column {column}" if line is not None else ""
    limit = isinstance(err, ResourceLimitError)
    message = _LIMIT_MESSAGES.get(type(err), err.message) if limit else err.message
    return TemplateError(f"{prefix}: {message}{where}", line=line, column=column, limit=limit)


def _markup_chars(source: str) -> int:
    """The characters from each ``{{`` or ``{%`` to its closing (or to the end); linear time."""
    total = 0
    next_output, next_tag = source.find("{{"), source.find("{%")
    while next_output >= 0 or next_tag >= 0:
        if next_tag < 0 or 0 <= next_output < next_tag:
            start, closing = next_output, "}}"
        else:
            start, closing = next_tag, "%}"
        end = source.find(closing, start + 2)
        if end < 0:
            return total + len(source) - start
        total += end + 2 - start
        if 0 <= next_output < end + 2:
            next_output = source.find("{{", end + 2)
        if 0 <= next_tag < end + 2:
            next_tag = source.find("{%", end + 2)
    return total


@lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _compile(source: str, autoescape: bool) -> BoundTemplate:
    markup = _markup_chars(source)
    if markup > MAX_MARKUP_CHARS:
        raise TemplateError(
            f"template has {markup:,} characters of tags and outputs, more than {MAX_MARKUP_CHARS:,} (render limit)",
            limit=True,
        )
    liquid_source = translate_handlebars(source)
    env = _HTML_ENV if autoescape else _TEXT_ENV
    try:
        return env.from_string(liquid_source)
    except LiquidError as err:
        raise _template_error("template syntax error", err) from None


@dataclass(frozen=True)
class TemplateProblem:
    """Why a template cannot be saved, and where (line and column from 1; None when not known)."""

    line: int | None
    column: int | None
    message: str

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        return f"{self.message} (line {self.line}, column {self.column})"


MAX_PROBLEMS = 10
"""The problems check_template reports for one template at most (a broken template can have many)."""

_WHERE = re.compile(r" at line \d+, column \d+$")


def _position(source: str, index: int) -> tuple[int, int]:
    line = source.count("\n", 0, index) + 1
    return line, index - (source.rfind("\n", 0, index) + 1) + 1


def _filter_position(source: str, liquid_source: str, name: str, index: int) -> tuple[int, int]:
    """Where filter ``name`` is in the author's source; the Liquid a Handlebars template became may differ."""
    if liquid_source == source:
        return _position(source, index)
    written = re.search(r"\|\s*" + re.escape(name) + r"\b", source)
    if written is not None:
        return _position(source, written.end() - len(name))
    helper = re.search(r"\{\{\s*" + re.escape(name) + r"\b", source)
    return _position(source, helper.end() - len(name)) if helper is not None else (None, None)  # type: ignore[return-value]


@lru_cache(maxsize=COMPILED_CACHE_SIZE)
def _check(source: str) -> tuple[TemplateProblem, ...]:
    try:
        template = _compile(source, False)
    except TemplateError as err:
        message = _WHERE.sub("", err.message).removeprefix("template syntax error: ")
        return (TemplateProblem(err.line, err.column, message),)
    liquid_source = translate_handlebars(source)
    known = _TEXT_ENV.filters
    problems: list[TemplateProblem] = []
    for name, spans in template.analyze().filters.items():
        if name in known:
            continue
        line, column = _filter_position(source, liquid_source, name, spans[0].index)
        problems.append(TemplateProblem(line, column, f"unknown filter '{name}'"))
    problems.sort(key=lambda problem: (problem.line or 0, problem.column or 0))
    return tuple(problems[:MAX_PROBLEMS])


def check_template(source: str) -> list[TemplateProblem]:
    """What stops ``source`` from being saved: a syntax error, or filters that do not exist.

    Only parses (nothing is rendered, so it takes no data and no render time);
    Handlebars forms are read as the renderer reads them. An empty list means
    the template parses and names only known filters and tags. Bounded like a
    render: a template over the size limits is one problem, and at most
    MAX_PROBLEMS are reported.
    """
    if not isinstance(source, str):
        return [TemplateProblem(None, None, f"template must be a string, got {type(source).__name__}")]
    if len(source) > MAX_TEMPLATE_CHARS:
        message = f"template has {len(source):,} characters, more than {MAX_TEMPLATE_CHARS:,} (render limit)"
        return [TemplateProblem(None, None, message)]
    if "{{" not in source and "{%" not in source:
        return []
    return list(_check(source))


def _variables(context: Mapping[str, Any]) -> dict[str, Any]:
    payload = context.get("payload")
    if not isinstance(payload, Mapping):
        payload = {}
    variables: dict[str, Any] = {key: value for key, value in payload.items() if isinstance(key, str)}
    for key, value in context.items():
        if isinstance(key, str):
            variables[key] = value
    variables["payload"] = payload
    variables.setdefault("subscriber", {})
    return variables


_spent = 0.0
"""Seconds rendered since the event loop last had a turn (see give_way)."""
_reset_on: asyncio.AbstractEventLoop | None = None
"""The loop whose next turn will set ``_spent`` back to 0."""


def _render(source: str, context: Mapping[str, Any], *, autoescape: bool, extra: Mapping[str, Any] | None = None) -> str:
    global _spent
    if not isinstance(source, str):
        raise TemplateError(f"template must be a string, got {type(source).__name__}")
    # Checked before the text without tags is let through: a translation's text may be long and tagless.
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(
            f"template has {len(source):,} characters, more than {MAX_TEMPLATE_CHARS:,} (render limit)", limit=True
        )
    if "{{" not in source and "{%" not in source:
        # Nothing to evaluate; in HTML the literal text is the author's markup. It is the step's output all the same.
        written = _written.get()
        if written is not None:
            try:
                written.add(len(source.encode("utf-8")))
            except RenderLimitError as err:
                raise TemplateError(f"template could not be rendered: {err.message}", limit=True) from None
        return source
    started = time.perf_counter()
    try:
        template = _compile(source, autoescape)
        variables = _variables(context)
        if extra:
            variables.update(extra)
        try:
            return template.render(**variables)
        except LiquidError as err:
            raise _template_error("template could not be rendered", err) from None
        except RecursionError:
            raise TemplateError(f"blocks nested more than {MAX_NESTING} deep (render limit)", limit=True) from None
    finally:
        _spent += time.perf_counter() - started


_render_pool: ThreadPoolExecutor | None = None


async def render_bounded(render: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
    """``render(*args)`` (render_in_app, render_email, ...) without holding the event loop long.

    Tried on the loop first, where nearly every render ends within ON_LOOP_RENDER_SECONDS;
    one that takes longer is stopped and rendered again in a thread of its own, with
    MAX_RENDER_SECONDS (the thread gives the loop the interpreter every few ms, so
    requests are still answered). One such thread a process: long renders queue.
    Under on_loop_only (a step run inside a trigger's expansion, holding its
    transaction) the overtime is raised instead, and the step runs again on its own.
    """
    global _render_pool
    token = _budget.set("try")
    try:
        return render(*args, **kwargs)
    except RenderOvertime:
        if not _offload.get():
            raise
    finally:
        _budget.reset(token)
    if _render_pool is None:
        _render_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="herald-render")
    return await asyncio.get_running_loop().run_in_executor(_render_pool, partial(render_off_loop, render, *args, **kwargs))


# Renders running off the loop in this process (the engine's thread and the previews'): the first sets the
# switch interval, the last puts it back.
_off_loop_lock = threading.Lock()
_off_loop_renders = 0
_loop_switch_interval = 0.005


def render_off_loop(render: Callable[..., _Result], *args: Any, **kwargs: Any) -> _Result:
    """``render(*args)`` in a thread that is not the event loop's, with MAX_RENDER_SECONDS of CPU."""
    global _off_loop_renders, _loop_switch_interval
    _budget.set("off-loop")  # the pool's thread does not run in the caller's context: set here
    # While it renders, the event loop's thread waits for the interpreter at most 1 ms (not 5).
    with _off_loop_lock:
        if _off_loop_renders == 0:
            _loop_switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(RENDER_SWITCH_SECONDS)
        _off_loop_renders += 1
    try:
        return render(*args, **kwargs)
    finally:
        with _off_loop_lock:
            _off_loop_renders -= 1
            if _off_loop_renders == 0:
                sys.setswitchinterval(_loop_switch_interval)
        _budget.set("loop")


@contextmanager
def on_loop_only() -> Any:
    """Within it, render_bounded raises RenderOvertime instead of leaving the loop."""
    token = _offload.set(False)
    try:
        yield
    finally:
        _offload.reset(token)


async def give_way() -> None:
    """Wait for the event loop's next turn when renders took long since its last one.

    Steps that render run one after another on the event loop (the worker's concurrent
    steps start in the same turn): without a turn between two long renders, a request
    to the API would wait for both.
    """
    global _reset_on
    while _spent >= GIVE_WAY_AFTER_SECONDS:
        loop = asyncio.get_running_loop()
        if _reset_on is not loop:
            # Scheduled before this step's own wake-up: the turn starts by clearing the
            # account, the first step woken renders, the others wait one more turn.
            _reset_on = loop
            loop.call_soon(_new_turn)
        await asyncio.sleep(0)


def _new_turn() -> None:
    global _spent, _reset_on
    _spent = 0.0
    _reset_on = None


def render_text(source: str, context: Mapping[str, Any]) -> str:
    """Render ``source`` as plain text (no HTML escaping)."""
    return _render(source, context, autoescape=False)


def render_html(source: str, context: Mapping[str, Any]) -> str:
    """Render ``source`` as HTML: variable values are escaped, the template's own markup is kept.

    ``{{{x}}}`` (Handlebars) or ``{{ x | safe }}`` (Liquid) output a value unescaped.
    """
    return _render(source, context, autoescape=True)


# --------------------------------------------------------------------------- Handlebars


# A raw or comment block's opening and closing tags; the text between them is left alone.
_RAW_OPEN = re.compile(r"\{%-?\s*(raw|comment)\s*-?%\}")
_RAW_CLOSE = {
    "raw": re.compile(r"\{%-?\s*endraw\s*-?%\}"),
    "comment": re.compile(r"\{%-?\s*endcomment\s*-?%\}"),
}
_ARG = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|\S+")
_LIQUID_IDENT = re.compile(r"[A-Za-z_][\w-]*\??")
_LIQUID_PATH = re.compile(
    r"[A-Za-z_][\w-]*\??(?:\.[A-Za-z_][\w-]*\??|\[\d+\]|\[-\d+\]|\['[^']*'\]|\[\"[^\"]*\"\])*"
)
_HB_SEGMENT = re.compile(r"\[([^\]]*)\]|([^./\[\]]+)")
_LITERAL = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?|true|false|null|undefined|nil")
_EACH_AS = re.compile(r"^(?P<path>\S+)\s+as\s+\|\s*(?P<name>[A-Za-z_][\w-]*)\s*\|$")

_HELPER_FILTERS = {"uppercase": "upcase", "lowercase": "downcase", "titlecase": "titlecase", "json": "json"}
_LOOP_VARIABLES = {"@index": "forloop.index0", "@first": "forloop.first", "@last": "forloop.last"}
_NOT_REWRITTEN = NAMESPACES | {"forloop", "true", "false", "nil", "empty", "blank"}


@dataclass
class _Block:
    kind: str  # if | unless | each | equals
    loop_variable: str | None = None
    block_parameter: bool = False
    in_else: bool = False


class _Translator:
    def __init__(self) -> None:
        self.blocks: list[_Block] = []

    # Scopes are the loops whose item is the current context (not their {{else}} part).
    @property
    def scopes(self) -> list[_Block]:
        return [block for block in self.blocks if block.kind == "each" and not block.in_else]

    def mustache(self, match: _Mustache) -> str:
        text = match.group(0)
        if text.startswith("{{!--"):
            return ""
        body = (match.group("body") or "").strip()
        left = "-" if match.group("lws") else ""
        right = "-" if match.group("rws") else ""
        if match.group("triple"):
            return "{{" + left + " " + self.output(body) + " | safe " + right + "}}"
        if body.startswith("!"):
            return ""
        if body.startswith("#"):
            return self.open_block(body[1:].strip(), left, right)
        if body.startswith("/"):
            return self.close_block(body[1:].strip(), left, right)
        if body == "else" or body == "^" or body.startswith("else "):
            return self.else_branch(body, left, right)
        if body.startswith(">"):
            raise TemplateError(f"Handlebars partials are not supported: '{{{{{body}}}}}'")
        return "{{" + left + " " + self.output(body) + " " + right + "}}"

    def output(self, body: str) -> str:
        if not body:
            raise TemplateError("empty output tag '{{}}'")
        if _LIQUID_PATH.fullmatch(body) or _LITERAL.fullmatch(body):
            return self.path(body)
        if "|" in body:
            # Liquid filters: only the leading variable needs the loop scope.
            head, _, filters = body.partition("|")
            if self.scopes and _LIQUID_PATH.fullmatch(head.strip()):
                return f"{self.path(head.strip())} |{filters}"
            return body
        args = _ARG.findall(body)
        if len(args) == 1:
            return self.path(args[0])
        helper, *rest = args
        if helper in _HELPER_FILTERS:
            if len(rest) != 1:
                raise TemplateError(f"Handlebars helper '{helper}' takes one argument: '{{{{{body}}}}}'")
            return f"{self.path(rest[0])} | {_HELPER_FILTERS[helper]}"
        supported = ", ".join(sorted(_HELPER_FILTERS))
        raise TemplateError(f"unsupported Handlebars helper '{helper}' in '{{{{{body}}}}}' (supported: {supported})")

    def truthy(self, argument: str) -> str:
        value = self.path(argument)
        # Handlebars treats "", 0, [] and null as false; Liquid only nil and false.
        return f"{value} and {value} != blank and {value} != 0"

    def single_argument(self, helper: str, arguments: str) -> str:
        args = _ARG.findall(arguments)
        if len(args) != 1 or args[0].startswith("("):
            raise TemplateError(f"'{{{{#{helper}}}}}' takes exactly one variable, got '{arguments}'")
        return args[0]

    def open_block(self, body: str, left: str, right: str) -> str:
        helper, _, arguments = body.replace("\n", " ").replace("\t", " ").partition(" ")
        arguments = arguments.strip()
        if helper in ("if", "unless"):
            condition = self.truthy(self.single_argument(helper, arguments))
            self.blocks.append(_Block(helper))
            return "{%" + left + f" {helper} {condition} " + right + "%}"
        if helper == "each":
            named = _EACH_AS.match(arguments)
            source = named.group("path") if named else self.single_argument(helper, arguments)
            collection = self.path(source)
            if named:
                block = _Block("each", named.group("name"), block_parameter=True)
            else:
                block = _Block("each", f"_hb{len(self.scopes) + 1}")
            self.blocks.append(block)
            return "{%" + left + f" for {block.loop_variable} in {collection} " + right + "%}"
        if helper == "equals":
            args = _ARG.findall(arguments)
            if len(args) != 2:
                raise TemplateError(f"'{{{{#equals}}}}' takes two values, got '{arguments}'")
            self.blocks.append(_Block("equals"))
            return "{%" + left + f" if {self.path(args[0])} == {self.path(args[1])} " + right + "%}"
        raise TemplateError(
            f"unsupported Handlebars block '{{{{#{helper}}}}}' (supported: #if, #unless, #each, #equals)"
        )

    def close_block(self, name: str, left: str, right: str) -> str:
        if not self.blocks:
            raise TemplateError(f"'{{{{/{name}}}}}' closes a block that was never opened")
        block = self.blocks.pop()
        if block.kind != name:
            raise TemplateError(f"'{{{{/{name}}}}}' closes '{{{{#{block.kind}}}}}'")
        end = {"if": "endif", "equals": "endif", "unless": "endunless", "each": "endfor"}[block.kind]
        return "{%" + left + f" {end} " + right + "%}"

    def else_branch(self, body: str, left: str, right: str) -> str:
        if not self.blocks:
            raise TemplateError("'{{else}}' outside of a block")
        block = self.blocks[-1]
        if block.in_else:
            raise TemplateError(f"second '{{{{else}}}}' in '{{{{#{block.kind}}}}}'")
        condition = body[len("else") :].strip() if body.startswith("else") else ""
        if condition:
            keyword, _, argument = condition.replace("\n", " ").partition(" ")
            if keyword != "if" or block.kind not in ("if", "equals"):
                raise TemplateError(f"unsupported '{{{{{body}}}}}' in '{{{{#{block.kind}}}}}'")
            return "{%" + left + f" elsif {self.truthy(self.single_argument('if', argument.strip()))} " + right + "%}"
        block.in_else = True
        return "{%" + left + " else " + right + "%}"

    def path(self, token: str) -> str:
        """A Handlebars path or literal as a Liquid expression, resolved against the loop scopes."""
        if _LITERAL.fullmatch(token):
            return "nil" if token in ("null", "undefined") else token
        if token in _LOOP_VARIABLES:
            if not self.scopes:
                raise TemplateError(f"'{token}' is only available inside '{{{{#each}}}}'")
            return _LOOP_VARIABLES[token]
        if token.startswith("@root."):
            return _hb_path(token[len("@root.") :], token)
        if token.startswith("@"):
            raise TemplateError(f"unsupported Handlebars data variable '{token}'")
        scopes = self.scopes
        ups = 0
        rest = token
        while rest.startswith("../"):
            ups += 1
            rest = rest[3:]
        if rest.startswith("./"):
            rest = rest[2:]
        if rest == "this" or rest.startswith(("this.", "this/", "this[")):
            rest = rest[4:]
            if rest.startswith((".", "/")):
                rest = rest[1:]
            explicit_this = True
        else:
            explicit_this = False
        if ups:
            index = len(scopes) - 1 - ups
            base = scopes[index].loop_variable if index >= 0 else None
        elif explicit_this:
            base = scopes[-1].loop_variable if scopes else None
        elif scopes:
            first = _first_segment(rest)
            named = {block.loop_variable for block in scopes if block.block_parameter}
            base = None if first in _NOT_REWRITTEN or first in named else scopes[-1].loop_variable
        else:
            base = None
        if not rest:
            return base if base else "''"
        expression = rest if _LIQUID_PATH.fullmatch(rest) else _hb_path(rest, token, nested=base is not None)
        if base is None:
            return expression
        return f"{base}{expression}" if expression.startswith("[") else f"{base}.{expression}"


def _first_segment(path: str) -> str:
    match = _LIQUID_IDENT.match(path)
    return match.group(0) if match else ""


def _hb_path(path: str, original: str, *, nested: bool = False) -> str:
    """``a.[b c].0`` / ``a/b`` (Handlebars) as ``a['b c'][0]`` (Liquid).

    ``nested`` paths continue a loop variable, so they may start with an index.
    """
    segments = [bracketed or plain for bracketed, plain in _HB_SEGMENT.findall(path)]
    if not segments:
        raise TemplateError(f"cannot read variable '{original}'")
    parts: list[str] = []
    for position, segment in enumerate(segments):
        if _LIQUID_IDENT.fullmatch(segment):
            parts.append(segment if position == 0 else f".{segment}")
        elif segment.isdigit():
            parts.append(f"[{segment}]")
        else:
            quoted = segment.replace("\\", "\\\\").replace("'", "\\'")
            parts.append(f"['{quoted}']")
    expression = "".join(parts)
    if expression.startswith("[") and not nested:
        raise TemplateError(f"cannot read variable '{original}': it must start with a name")
    return expression


def translate_handlebars(source: str) -> str:
    """Rewrite the Handlebars constructs of Novu v1 templates as Liquid.

    Supported: ``{{#if x}}`` / ``{{else if y}}`` / ``{{else}}`` / ``{{/if}}``,
    ``{{#unless x}}``, ``{{#each list}}`` (and ``as |item|``; ``{{else}}`` for an
    empty list), ``{{#equals a b}}``, ``this``, ``../``, ``@root.``, ``@index``,
    ``@first``, ``@last``, ``{{{raw}}}``, ``{{! comments }}``, ``~`` whitespace
    control, ``a.[0]`` / ``a.0`` segments, and the helpers ``uppercase``,
    ``lowercase``, ``titlecase`` and ``json``. Inside ``{{#each}}`` a bare name is
    read from the current item, except the namespaces (subscriber, payload, ...).
    Anything else Handlebars-only raises :class:`TemplateError`. Liquid syntax
    passes through unchanged; ``{% raw %}`` blocks are left alone.

    The source is read once, left to right (time linear in its length): each
    opening is matched with the first closing after it, found with ``str.find``,
    and a closing known to be absent is not looked for again.
    """
    translator = _Translator()
    pieces = _raw_blocks(source)
    offset = 0
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            pieces[index] = _substitute_mustaches(piece, translator, source, offset)
        offset += len(piece)
    if translator.blocks:
        raise TemplateError(f"'{{{{#{translator.blocks[-1].kind}}}}}' block is never closed")
    return "".join(pieces)


def _raw_blocks(source: str) -> list[str]:
    """The source as [text, raw block, text, raw block, ..., text]."""
    pieces: list[str] = []
    start = 0
    search_from = 0
    unclosed: set[str] = set()  # kinds with no closing tag left in the source
    while True:
        opening = _RAW_OPEN.search(source, search_from)
        if opening is None:
            break
        kind = opening.group(1)
        closing = None if kind in unclosed else _RAW_CLOSE[kind].search(source, opening.end())
        if closing is None:
            unclosed.add(kind)
            search_from = opening.start() + 1
            continue
        pieces.append(source[start : opening.start()])
        pieces.append(source[opening.start() : closing.end()])
        start = search_from = closing.end()
    pieces.append(source[start:])
    return pieces


@dataclass(frozen=True)
class _Mustache:
    """One ``{{...}}`` (or ``{{{...}}}``, ``{{!-- --}}``) found in the source, read as a match is."""

    text: str
    start: int
    triple: str | None = None
    lws: str = ""
    body: str = ""
    rws: str = ""

    def group(self, name: int | str = 0) -> str | None:
        if name == 0:
            return self.text
        return {"triple": self.triple, "lws": self.lws, "body": self.body, "rws": self.rws}[str(name)]


def _substitute_mustaches(piece: str, translator: _Translator, source: str, offset: int) -> str:
    replace = _positioned(translator, source, offset)
    out: list[str] = []
    position = 0
    no_comment_end = no_triple_end = len(piece) + 1  # where a search for that closing found none
    while True:
        start = piece.find("{{", position)
        if start < 0:
            break
        end = -1
        mustache: _Mustache | None = None
        if piece.startswith("{{!--", start) and start + 5 < no_comment_end:
            close = piece.find("--}}", start + 5)
            if close < 0:
                no_comment_end = start + 5
            else:
                end = close + 4
                mustache = _Mustache(piece[start:end], start)
        if mustache is None and piece.startswith("{{{", start):
            lws = piece[start + 3] if start + 3 < len(piece) and piece[start + 3] in "~-" else ""
            body_start = start + 3 + len(lws)
            close = piece.find("}}}", body_start) if body_start < no_triple_end else -1
            if close < 0:
                no_triple_end = min(no_triple_end, body_start)
            else:
                rws = piece[close - 1] if close - 1 >= body_start and piece[close - 1] in "~-" else ""
                end = close + 3
                mustache = _Mustache(piece[start:end], start, "{", lws, piece[body_start : close - len(rws)], rws)
        if mustache is None:
            lws = piece[start + 2] if start + 2 < len(piece) and piece[start + 2] in "~-" else ""
            body_start = start + 2 + len(lws)
            close = piece.find("}}", body_start)
            if close < 0:
                break  # no closing left: nothing after this is a mustache
            rws = piece[close - 1] if close - 1 >= body_start and piece[close - 1] in "~-" else ""
            end = close + 2
            mustache = _Mustache(piece[start:end], start, None, lws, piece[body_start : close - len(rws)], rws)
        out.append(piece[position:start])
        out.append(replace(mustache))
        position = end
    out.append(piece[position:])
    return "".join(out)


def _positioned(translator: _Translator, source: str, offset: int) -> Callable[[_Mustache], str]:
    def replace(match: _Mustache) -> str:
        try:
            return translator.mustache(match)
        except TemplateError as err:
            start = offset + match.start
            line = source.count("\n", 0, start) + 1
            column = start - (source.rfind("\n", 0, start) + 1) + 1
            raise TemplateError(f"{err.message} at line {line}, column {column}", line=line, column=column) from None

    return replace


# --------------------------------------------------------------------------- URLs and text


_UNSAFE_SCHEMES = ("javascript:", "vbscript:", "data:")


def safe_url(url: str) -> str:
    """The URL, or ``#`` when it would run script (javascript:, vbscript:, data:)."""
    stripped = url.strip()
    compact = re.sub(r"[\x00-\x20]+", "", stripped).lower()
    if compact.startswith(_UNSAFE_SCHEMES):
        return "#"
    return stripped


class _TextExtractor(HTMLParser):
    _SKIPPED = {"script", "style", "head", "title", "template"}
    _VOID = {"br", "img", "hr", "meta", "link", "input", "area", "base", "col", "embed", "source", "wbr"}
    _PARAGRAPHS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "blockquote", "pre", "hr"}
    _LINES = {"div", "tr", "section", "article", "header", "footer", "td", "th", "center"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip_stack: list[str] = []
        self.links: list[tuple[str, int]] = []
        self.preformatted = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip_stack:
            if tag == self.skip_stack[-1] and tag not in self._VOID:
                self.skip_stack.append(tag)
            return
        style = (dict(attrs).get("style") or "").replace(" ", "").lower()
        if tag in self._SKIPPED or ("display:none" in style and tag not in self._VOID):
            self.skip_stack.append(tag)
            return
        if tag == "pre":
            self.preformatted += 1
        if tag == "br":
            self.parts.append("\n")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in self._PARAGRAPHS:
            self.parts.append("\n\n")
        elif tag in self._LINES:
            self.parts.append("\n")
        elif tag == "a":
            self.links.append((dict(attrs).get("href") or "", len(self.parts)))

    def handle_endtag(self, tag: str) -> None:
        if self.skip_stack:
            if tag == self.skip_stack[-1]:
                self.skip_stack.pop()
            return
        if tag == "pre" and self.preformatted:
            self.preformatted -= 1
        if tag in self._PARAGRAPHS:
            self.parts.append("\n\n")
        elif tag in self._LINES:
            self.parts.append("\n")
        elif tag == "a" and self.links:
            href, start = self.links.pop()
            label = "".join(self.parts[start:]).strip()
            if href and href != "#" and not href.startswith("mailto:") and href != label:
                self.parts.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        if self.skip_stack:
            return
        # Source line breaks are whitespace in HTML; only tags break lines (except in <pre>).
        self.parts.append(data if self.preformatted else re.sub(r"[ \t\r\n\f\v]+", " ", data))


def html_to_text(markup: str) -> str:
    """A readable plain-text version of an HTML fragment or document."""
    extractor = _TextExtractor()
    extractor.feed(markup)
    extractor.close()
    text = "".join(extractor.parts).replace("\xa0", " ")
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.split("\n")]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _single_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------- Email


@dataclass(frozen=True)
class RenderedEmail:
    subject: str
    html: str
    text: str


_TEXT_ALIGN = {"left", "center", "right"}
_HEX_COLOR = re.compile(r"#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?")
DEFAULT_BUTTON_COLOR = "#2563eb"
_FONT = "-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif"
# Where a layout places the email: Novu's v1 layouts write {{{body}}}, its v2 layouts {{content}}.
_LAYOUT_BODY = re.compile(r"\{\{\{?[~-]?\s*(?:body|content)\b")
_FULL_DOCUMENT = re.compile(r"^\s*(?:<!--.*?-->\s*)*<(?:!doctype|html)\b", re.I | re.S)


def _button_color(context: Mapping[str, Any]) -> str:
    branding = context.get("branding")
    color = branding.get("color") if isinstance(branding, Mapping) else None
    return color if isinstance(color, str) and _HEX_COLOR.fullmatch(color) else DEFAULT_BUTTON_COLOR


def _alignment(block: Mapping[str, Any], default: str) -> str:
    styles = block.get("styles")
    align = styles.get("textAlign") if isinstance(styles, Mapping) else None
    return align if align in _TEXT_ALIGN else default


def _render_blocks(blocks: Sequence[Any], context: Mapping[str, Any]) -> tuple[str, str]:
    """The blocks as (HTML body, plain text)."""
    html_parts: list[str] = []
    text_parts: list[str] = []
    color = _button_color(context)
    for number, block in enumerate(blocks, start=1):
        if not isinstance(block, Mapping):
            raise TemplateError(f"email block {number} must be an object")
        kind = block.get("type")
        content = block.get("content", "")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise TemplateError(f"email block {number} content must be a string")
        try:
            if kind == "text":
                align = _alignment(block, "left")
                rendered = render_html(content, context).replace("\r\n", "\n").replace("\n", "<br>\n")
                html_parts.append(f'<p style="margin:0 0 16px;text-align:{align};">{rendered}</p>')
                text_parts.append(html_to_text(rendered))
            elif kind == "button":
                align = _alignment(block, "center")
                label = render_html(content, context)
                raw_url = block.get("url")
                url = safe_url(render_text(raw_url, context)) if isinstance(raw_url, str) and raw_url.strip() else ""
                button_style = (
                    f"display:inline-block;padding:12px 24px;background-color:{color};color:#ffffff;"
                    "text-decoration:none;border-radius:6px;font-weight:600;"
                )
                if url:
                    element = (
                        f'<a href="{html.escape(url, quote=True)}" target="_blank" rel="noopener" '
                        f'style="{button_style}">{label}</a>'
                    )
                else:
                    element = f'<span style="{button_style}">{label}</span>'
                html_parts.append(
                    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0">'
                    f'<tr><td align="{align}" style="padding:8px 0 16px;">{element}</td></tr></table>'
                )
                label_text = html_to_text(label)
                text_parts.append(f"{label_text}: {url}" if url and url != "#" else label_text)
            else:
                raise TemplateError(f"email block {number} has unsupported type {kind!r} (expected 'text' or 'button')")
        except TemplateError as err:
            if err.message.startswith("email block"):
                raise
            raise TemplateError(f"email block {number}: {err.message}", line=err.line, column=err.column, limit=err.limit) from None
    return "\n".join(html_parts), "\n\n".join(part for part in text_parts if part)


def blocks_as_html(blocks: Sequence[Any], button_color: str = DEFAULT_BUTTON_COLOR) -> str:
    """Email blocks as the HTML template that renders as they do (the editor's switch from blocks to HTML).

    The markup is :func:`_render_blocks`'s, with each block's content and
    link left as the template source they are, so variables stay variables.
    A button takes ``button_color`` (the blocks take the brand's colour when
    they are sent; written out, the colour is fixed).
    """
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        content = block.get("content") if isinstance(block.get("content"), str) else ""
        if block.get("type") == "button":
            align = _alignment(block, "center")
            style = (
                f"display:inline-block;padding:12px 24px;background-color:{button_color};color:#ffffff;"
                "text-decoration:none;border-radius:6px;font-weight:600;"
            )
            url = block.get("url") if isinstance(block.get("url"), str) else ""
            if url.strip():
                element = f'<a href="{html.escape(url, quote=True)}" target="_blank" rel="noopener" style="{style}">{content}</a>'
            else:
                element = f'<span style="{style}">{content}</span>'
            parts.append(
                '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0">'
                f'<tr><td align="{align}" style="padding:8px 0 16px;">{element}</td></tr></table>'
            )
        else:
            align = _alignment(block, "left")
            text = content.replace("\r\n", "\n").replace("\n", "<br>\n")
            parts.append(f'<p style="margin:0 0 16px;text-align:{align};">{text}</p>')
    return "\n".join(parts)


def _default_layout(body: str, subject: str, preheader: str) -> str:
    hidden = (
        '<div style="display:none;max-height:0;max-width:0;overflow:hidden;opacity:0;mso-hide:all;">'
        f"{html.escape(preheader)}</div>\n"
        if preheader
        else ""
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="x-apple-disable-message-reformatting">\n'
        f"<title>{html.escape(subject)}</title>\n"
        "<style>\n"
        "@media only screen and (max-width: 620px) {\n"
        "  .herald-content { padding: 20px 16px !important; }\n"
        "  .herald-outer { padding: 0 !important; }\n"
        "}\n"
        "</style>\n</head>\n"
        '<body style="margin:0;padding:0;background-color:#f4f4f5;">\n'
        f"{hidden}"
        '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" '
        'style="background-color:#f4f4f5;">\n'
        '<tr><td class="herald-outer" align="center" style="padding:24px 12px;">\n'
        '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" '
        'style="max-width:600px;background-color:#ffffff;border-radius:8px;">\n'
        f'<tr><td class="herald-content" style="padding:32px;font-family:{_FONT};font-size:16px;'
        'line-height:1.5;color:#18181b;">\n'
        f"{body}\n"
        "</td></tr>\n</table>\n</td></tr>\n</table>\n</body>\n</html>\n"
    )


@_one_step
def render_email(
    content: str | Sequence[Mapping[str, Any]],
    subject: str | None,
    context: Mapping[str, Any],
    layout: str | None = None,
    preheader: str | None = None,
    *,
    with_text: bool = True,
) -> RenderedEmail:
    """Render an email step.

    ``content`` is custom HTML (contentType customHtml) or a list of EmailBlock
    objects (``text`` blocks become paragraphs, ``button`` blocks links styled as
    buttons). The body is placed in ``layout`` when given (a template that must
    output ``{{{body}}}`` or ``{{content}}``, both the rendered HTML, unescaped; it
    also sees ``subject`` and ``preheader``), otherwise in
    a responsive default layout, except custom HTML that is already a whole
    document (``<html>``/``<!DOCTYPE>``), which is sent as written. The text part
    comes from the blocks, or from the custom HTML with its tags stripped; a
    preview, which shows the HTML only, asks for none (``with_text=False``:
    making it is a third of the render of a long email).
    """
    rendered_subject = _single_line(render_text(subject, context)) if subject else ""
    rendered_preheader = _single_line(render_text(preheader, context)) if preheader else ""
    if isinstance(content, str):
        body = render_html(content, context)
        text = html_to_text(body) if with_text else ""
        whole_document = bool(_FULL_DOCUMENT.match(body))
    elif isinstance(content, Sequence):
        body, text = _render_blocks(content, context)
        whole_document = False
    elif content is None:
        body, text, whole_document = "", "", False
    else:
        raise TemplateError(f"email content must be HTML or a list of blocks, got {type(content).__name__}")

    if layout is not None:
        if not isinstance(layout, str) or not _LAYOUT_BODY.search(layout):
            raise TemplateError("email layout must output the content with {{{body}}} or {{content}}")
        written = _written.get()
        if written is not None:
            # The layout writes the body again: counted once, as the body.
            written.bytes -= len(body.encode("utf-8"))
        try:
            document = _render(
                layout,
                context,
                autoescape=True,
                extra={"body": Markup(body), "content": Markup(body), "subject": rendered_subject, "preheader": rendered_preheader},
            )
        except TemplateError as err:
            raise TemplateError(f"email layout: {err.message}", line=err.line, column=err.column, limit=err.limit) from None
    elif whole_document:
        document = body
    else:
        document = _default_layout(body, rendered_subject, rendered_preheader)
    return RenderedEmail(subject=rendered_subject, html=document, text=text)


# --------------------------------------------------------------------------- Other channels


@_one_step
def render_in_app(template: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """Render an in-app step: ``content``, ``subject``/``title`` when present, and ``cta``.

    Text is HTML-escaped, as Novu's Handlebars does for in-app content (the Inbox
    displays it as HTML). The CTA's ``data.url`` is rendered as text and passed
    through :func:`safe_url`; button ``content``/``resultContent`` are rendered.
    """
    if not isinstance(template, Mapping):
        raise TemplateError("in-app template must be an object")
    content = template.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise TemplateError("in-app content must be a string")
    result: dict[str, Any] = {"content": render_html(content, context)}
    for key in ("subject", "title"):
        value = template.get(key)
        if isinstance(value, str):
            result[key] = render_html(value, context)
    cta = template.get("cta")
    if isinstance(cta, Mapping):
        result["cta"] = _render_cta(cta, context)
    avatar = _avatar(template, context)
    if avatar:
        result["avatar"] = avatar
    data = template.get("data")
    if isinstance(data, Mapping):
        # The Inbox's notification.data: JSON for the page's code, so strings are rendered as text, unescaped.
        result["data"] = _render_data(data, context)
    return result


def _avatar(template: Mapping[str, Any], context: Mapping[str, Any]) -> str | None:
    """The Inbox's avatar: the step's ``avatar`` (a URL template), else its actor's (Novu's v1 ``actor``):
    ``user`` is the trigger's actor's avatar, ``system_custom`` a URL of its own."""
    avatar = template.get("avatar")
    if isinstance(avatar, str) and avatar.strip():
        return safe_url(render_text(avatar, context)) or None
    actor = template.get("actor")
    if not isinstance(actor, Mapping):
        return None
    if actor.get("type") == "user":
        trigger_actor = context.get("actor")
        value = trigger_actor.get("avatar") if isinstance(trigger_actor, Mapping) else None
        return safe_url(value) if isinstance(value, str) and value else None
    if actor.get("type") == "system_custom" and isinstance(actor.get("data"), str):
        return safe_url(render_text(actor["data"], context)) or None
    return None


def _render_data(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return render_text(value, context)
    if isinstance(value, Mapping):
        return {str(key): _render_data(item, context) for key, item in value.items()}
    if isinstance(value, list):
        return [_render_data(item, context) for item in value]
    return value


def _render_cta(cta: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    rendered: dict[str, Any] = dict(cta)
    data = cta.get("data")
    if isinstance(data, Mapping):
        rendered_data = dict(data)
        url = data.get("url")
        if isinstance(url, str):
            rendered_data["url"] = safe_url(render_text(url, context)) if url.strip() else ""
        rendered["data"] = rendered_data
    action = cta.get("action")
    if isinstance(action, Mapping) and isinstance(action.get("buttons"), list):
        buttons = []
        for button in action["buttons"]:
            if isinstance(button, Mapping):
                button = dict(button)
                for key in ("content", "resultContent"):
                    if isinstance(button.get(key), str):
                        button[key] = render_html(button[key], context)
            buttons.append(button)
        rendered["action"] = {**action, "buttons": buttons}
    return rendered


@_one_step
def render_sms(content: str, context: Mapping[str, Any]) -> str:
    """SMS body as plain text."""
    return render_text(content or "", context)


@_one_step
def render_chat(content: str, context: Mapping[str, Any]) -> str:
    """Chat message as plain text (the provider applies its own formatting)."""
    return render_text(content or "", context)


@dataclass(frozen=True)
class RenderedPush:
    title: str
    content: str


@_one_step
def render_push(title: str | None, content: str | None, context: Mapping[str, Any]) -> RenderedPush:
    """Push notification title and body as plain text."""
    return RenderedPush(
        title=_single_line(render_text(title or "", context)),
        content=render_text(content or "", context),
    )
