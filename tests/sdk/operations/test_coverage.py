"""Every novu-py operation Herald serves has its test here, named after the operation's SDK path.

The operations are read from the installed novu-py itself (its modules parsed with ``ast``, not
imported one by one): a public sync method of an SDK class that calls ``self._build_request`` is an
operation, and its path is the chain of sub-SDK attributes from ``Novu`` down to that class
(``novu.topics.subscriptions.create``). An upgrade of novu-py that adds an operation makes this
fail until the operation is served and tested, or listed below as one Herald does not serve.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import novu_py

HERE = Path(__file__).resolve().parent
SDK = Path(novu_py.__file__).resolve().parent

# Families that only make sense on Novu's hosted service (agents and their chat integrations,
# channel connections and endpoints, inbound e-mail domains and their routes).
HOSTED_ONLY_FAMILIES = ("agents", "channel_connections", "channel_endpoints", "domains")
# Integration operations that hand a user to a hosted OAuth flow, a hosted mobile link or a hosted
# provider's webhook set-up.
HOSTED_ONLY_INTEGRATION_OPERATIONS = frozenset(
    {
        "generate_chat_o_auth_url",
        "generate_connect_o_auth_url",
        "generate_link_user_o_auth_url",
        "create_mobile_link",
        "link_channel_endpoint",
        "integrations_controller_auto_configure_integration",
        "integrations_controller_configure_integration_webhook",
    }
)
SERVED_OPERATIONS = 106


@dataclass
class SdkClass:
    """One class of novu-py's modules: its sub-SDK attributes and the operations it sends."""

    sub_sdks: dict[str, str] = field(default_factory=dict)
    operations: dict[str, tuple[str, str]] = field(default_factory=dict)


def annotation_name(annotation: ast.expr) -> str | None:
    """``topics: Topics`` and ``topics: "Topics"`` both name the class Topics."""
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value
    return None


def request_sent(method: ast.FunctionDef) -> tuple[str, str] | None:
    """The (HTTP method, path) of the ``self._build_request(method=..., path=...)`` call in a method."""
    for node in ast.walk(method):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_build_request":
            keywords = {keyword.arg: keyword.value for keyword in node.keywords}
            return ast.literal_eval(keywords["method"]), ast.literal_eval(keywords["path"])
    return None


def sdk_classes() -> dict[str, SdkClass]:
    classes: dict[str, SdkClass] = {}
    for module in sorted(SDK.glob("*.py")):
        for node in ast.parse(module.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            found = classes.setdefault(node.name, SdkClass())
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    name = annotation_name(item.annotation)
                    if name is not None:
                        found.sub_sdks[item.target.id] = name
                # Only plain ``def``s: the ``async def ..._async`` twins send the same request.
                elif isinstance(item, ast.FunctionDef) and not item.name.startswith("_"):
                    sent = request_sent(item)
                    if sent is not None:
                        found.operations[item.name] = sent
    return classes


def sdk_operations() -> dict[str, tuple[str, str]]:
    """Every operation of the installed novu-py by its dotted path under ``Novu``."""
    classes = sdk_classes()

    def walk(class_name: str, prefix: tuple[str, ...]) -> Iterator[tuple[str, tuple[str, str]]]:
        sdk_class = classes[class_name]
        for operation, sent in sdk_class.operations.items():
            yield ".".join((*prefix, operation)), sent
        for attribute, sub_class in sdk_class.sub_sdks.items():
            if sub_class in classes and sub_class != class_name:
                yield from walk(sub_class, (*prefix, attribute))

    return dict(walk("Novu", ()))


def served(path: str) -> bool:
    parts = path.split(".")
    family, operation = parts[0], parts[-1]
    if family in HOSTED_ONLY_FAMILIES:
        return False
    return not (family == "integrations" and operation in HOSTED_ONLY_INTEGRATION_OPERATIONS)


def defined_test_names() -> list[str]:
    """The test functions defined at the top level of this folder's test modules (a name may repeat)."""
    names: list[str] = []
    for module in sorted(HERE.glob("test_*.py")):
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                names.append(node.name)
    return names


def test_the_sdk_is_read_whole() -> None:
    """The walk finds the families at every depth, so an empty or shallow reading cannot pass."""
    operations = sdk_operations()
    assert operations["trigger"] == ("POST", "/v1/events/trigger")
    assert operations["topics.subscriptions.create"] == ("POST", "/v2/topics/{topicKey}/subscriptions")
    assert operations["translations.master.import_master_json"] == ("POST", "/v2/translations/master-json")
    assert "agents.integrations.create" in operations and "domains.routes.test" in operations
    assert not any(path.endswith("_async") for path in operations)


def test_every_served_operation_has_its_test() -> None:
    served_operations = sorted(path for path in sdk_operations() if served(path))
    defined = defined_test_names()
    expected = {path: "test_" + path.replace(".", "_") for path in served_operations}
    missing = sorted(f"{path} ({name})" for path, name in expected.items() if name not in defined)
    repeated = sorted({name for name in expected.values() if defined.count(name) > 1})
    assert len(served_operations) == SERVED_OPERATIONS, (
        f"{len(served_operations)} served operations, not {SERVED_OPERATIONS}: {served_operations}"
    )
    assert not missing, f"{len(missing)} served operations without a test: " + ", ".join(missing)
    assert not repeated, "operations tested twice under the same name: " + ", ".join(repeated)
