"""docs/api.md and the pages it links list every route Herald serves, and only those, with the SDK operations that call them.

The facts are regenerated here, never copied: the served routes from the app's
OpenAPI document plus the few it leaves out (the Inbox's socket, the docs
pages); novu-py's operations from its modules' source (each method's
``self._build_request(method=..., path=...)``, and its attribute path from how
``sdk.py`` and each sub-SDK wire their classes); @novu/api's operation names
from its ``src/funcs/*.ts`` (each names the ``operationID`` novu-py names too).
Routes match by method and path template, parameter names aside.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import novu_py
import pytest

from herald.app import create_app
from herald.config import load_settings
from herald.realtime.server import PATH as SOCKET_PATH

REPO_ROOT = Path(__file__).resolve().parents[2]
# docs/api.md says what the routes share and links the pages that map them.
API_DOCS = [REPO_ROOT / "docs" / name for name in ("api.md", "api-routes.md", "api-herald-routes.md", "api-unserved.md")]
NOVU_PY = Path(novu_py.__file__).parent
NOVU_API_FUNCS = REPO_ROOT / "tests" / "sdk" / "node" / "node_modules" / "@novu" / "api" / "src" / "funcs"

# The columns of those pages' tables: served routes, and novu-py's operations Herald does not serve.
SERVED_HEADER = "| Method | Path | What it does | novu-py | @novu/api |"
UNSERVED_HEADER = "| novu-py | Route | Why not |"
NONE = "—"

Route = tuple[str, str]


def template(path: str) -> str:
    """A path with its parameters unnamed: ``/v2/topics/{topicKey}`` and ``/v2/topics/{key}`` are one route."""
    return re.sub(r"\{[^}]+\}", "{}", path)


@dataclass(frozen=True)
class Operation:
    sdk_path: str  # novu.topics.subscriptions.create
    method: str
    path: str
    operation_id: str


# -- the facts ----------------------------------------------------------------------------------------


@cache
def served_routes(data_dir: Path) -> frozenset[Route]:
    """Every (method, path) the app answers: its OpenAPI document, and the routes it leaves out of it."""
    app = create_app(load_settings(data_dir=data_dir, secret_key="api-doc-secret-key"))
    try:
        routes = {
            (method.upper(), path) for path, operations in app.openapi()["paths"].items() for method in operations
        }
        for route in app.routes:
            methods = getattr(route, "methods", None)
            if methods and not getattr(route, "include_in_schema", True):
                routes.update((method, route.path) for method in methods if method != "HEAD")  # type: ignore[attr-defined]
        # The socket.io handshake (herald/realtime), answered before any route.
        routes.add(("GET", SOCKET_PATH))
    finally:
        asyncio.run(app.state.engine.dispose())
    return frozenset(routes)


def _keyword(call: ast.Call, name: str) -> str | None:
    for keyword in call.keywords:
        if keyword.arg == name and isinstance(keyword.value, ast.Constant):
            return str(keyword.value.value)
    return None


@cache
def _sdk_classes() -> dict[str, tuple[dict[str, str], list[tuple[str, str, str, str]]]]:
    """Each class of novu-py: its sub-SDK attributes (attribute -> class) and its operations (name, method, path, id)."""
    classes: dict[str, tuple[dict[str, str], list[tuple[str, str, str, str]]]] = {}
    for module in sorted(NOVU_PY.glob("*.py")):
        tree = ast.parse(module.read_text())
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            children: dict[str, str] = {}
            operations: list[tuple[str, str, str, str]] = []
            for item in node.body:
                # sdk.py: _sub_sdk_map = {"topics": ("novu_py.topics", "Topics"), ...}
                if isinstance(item, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id == "_sub_sdk_map" for target in item.targets
                ):
                    mapping = ast.literal_eval(item.value)
                    children.update({attribute: class_name for attribute, (_, class_name) in mapping.items()})
                if not isinstance(item, ast.FunctionDef):
                    continue
                if item.name == "_init_sdks":
                    # self.subscriptions = Subscriptions(self.sdk_configuration, ...)
                    for statement in ast.walk(item):
                        if (
                            isinstance(statement, ast.Assign)
                            and isinstance(statement.value, ast.Call)
                            and isinstance(statement.value.func, ast.Name)
                            and isinstance(statement.targets[0], ast.Attribute)
                        ):
                            children[statement.targets[0].attr] = statement.value.func.id
                    continue
                request = operation_id = None
                for call in ast.walk(item):
                    if not isinstance(call, ast.Call):
                        continue
                    if isinstance(call.func, ast.Attribute) and call.func.attr == "_build_request":
                        request = (_keyword(call, "method"), _keyword(call, "path"))
                    elif operation_id is None and _keyword(call, "operation_id"):
                        operation_id = _keyword(call, "operation_id")
                if request and request[0] and request[1] and operation_id:
                    operations.append((item.name, request[0], request[1], operation_id))
            classes[node.name] = (children, operations)
    return classes


@cache
def novu_py_operations() -> tuple[Operation, ...]:
    """Every operation novu-py's ``Novu`` client reaches, by its attribute path from ``novu``."""
    classes = _sdk_classes()
    found: list[Operation] = []

    def walk(class_name: str, prefix: str) -> None:
        children, operations = classes[class_name]
        for name, method, path, operation_id in operations:
            found.append(Operation(f"{prefix}.{name}", method, path, operation_id))
        for attribute, child in children.items():
            walk(child, f"{prefix}.{attribute}")

    walk("Novu", "novu")
    return tuple(found)


@cache
def novu_api_names() -> dict[str, str]:
    """@novu/api's standalone function of each operationID (``TopicsController_listTopics`` -> ``topicsList``)."""
    names = {}
    for source in sorted(NOVU_API_FUNCS.glob("*.ts")):
        for operation_id in set(re.findall(r'operationID:\s*"([^"]+)"', source.read_text())):
            names[operation_id] = source.stem
    return names


# -- the page -----------------------------------------------------------------------------------------


def _tables(header: str) -> Iterator[list[str]]:
    """The cells of every row of the pages' tables that start with ``header``."""
    for page in API_DOCS:
        lines = page.read_text().splitlines()
        for index, line in enumerate(lines):
            if line.strip() != header:
                continue
            for row in lines[index + 2 :]:
                if not row.startswith("|"):
                    break
                yield [cell.strip() for cell in row.strip().strip("|").split("|")]


def _code(cell: str) -> list[str]:
    """The names a cell lists in backticks (none for ``—``)."""
    return re.findall(r"`([^`]+)`", cell)


def documented_routes() -> dict[Route, list[str]]:
    rows: dict[Route, list[str]] = {}
    for cells in _tables(SERVED_HEADER):
        method, path = cells[0], _code(cells[1])[0]
        assert (method, path) not in rows, f"{method} {path} has two rows"
        rows[(method, path)] = cells
    return rows


def documented_unserved() -> dict[str, str]:
    """novu-py operation -> the route its row names (``GET /v1/agents``)."""
    return {_code(cells[0])[0]: " ".join(_code(cells[1])) or cells[1] for cells in _tables(UNSERVED_HEADER)}


# -- the checks ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> frozenset[Route]:
    return served_routes(tmp_path_factory.mktemp("api-doc"))


def _operations_by_route() -> dict[tuple[str, str], list[Operation]]:
    by_route: dict[tuple[str, str], list[Operation]] = {}
    for operation in novu_py_operations():
        by_route.setdefault((operation.method, template(operation.path)), []).append(operation)
    return by_route


def test_the_generator_finds_novu_pys_operations() -> None:
    operations = {operation.sdk_path: operation for operation in novu_py_operations()}
    # A few known ones, so a change of novu-py's layout fails here rather than empty the checks below.
    assert operations["novu.trigger"].path == "/v1/events/trigger"
    assert operations["novu.topics.subscriptions.create"].method == "POST"
    assert operations["novu.subscribers.preferences.update"].path == "/v2/subscribers/{subscriberId}/preferences"
    assert len(operations) > 100


def test_every_route_herald_serves_has_one_row_and_no_row_names_a_route_it_does_not(
    routes: frozenset[Route],
) -> None:
    documented = set(documented_routes())
    assert not documented - routes, f"docs/api-*.md list routes Herald does not serve: {sorted(documented - routes)}"
    assert not routes - documented, f"docs/api-*.md miss routes Herald serves: {sorted(routes - documented)}"


def test_each_rows_novu_py_operations_are_the_ones_that_call_its_route() -> None:
    by_route = _operations_by_route()
    for (method, path), cells in documented_routes().items():
        expected = sorted(operation.sdk_path for operation in by_route.get((method, template(path)), []))
        assert sorted(_code(cells[3])) == expected, f"{method} {path}: novu-py column should be {expected or NONE}"


def test_each_rows_novu_api_operations_are_the_ones_that_call_its_route() -> None:
    names = novu_api_names()
    if not names:
        pytest.skip("@novu/api is not installed (tests/sdk/node: make test installs it)")
    # Its column is read through novu-py's operations: an operation only @novu/api had would be missed.
    assert not set(names) - {operation.operation_id for operation in novu_py_operations()}
    by_route = _operations_by_route()
    for (method, path), cells in documented_routes().items():
        operation_ids = {operation.operation_id for operation in by_route.get((method, template(path)), [])}
        expected = sorted(names[operation_id] for operation_id in operation_ids if operation_id in names)
        assert sorted(_code(cells[4])) == expected, f"{method} {path}: @novu/api column should be {expected or NONE}"


def test_the_operations_herald_does_not_serve_are_exactly_novu_pys_others(routes: frozenset[Route]) -> None:
    served = {(method, template(path)) for method, path in routes}
    unserved = {
        operation.sdk_path: f"{operation.method} {operation.path}"
        for operation in novu_py_operations()
        if (operation.method, template(operation.path)) not in served
    }
    documented = documented_unserved()
    assert sorted(documented) == sorted(unserved), "docs/api-unserved.md's table is off"
    for sdk_path, route in unserved.items():
        assert documented[sdk_path] == route, f"{sdk_path} calls {route}"


def test_the_readme_links_the_api_map() -> None:
    assert "(docs/api.md)" in (REPO_ROOT / "README.md").read_text()
