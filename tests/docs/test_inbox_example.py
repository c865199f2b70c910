"""The Inbox example docs/inbox.md starts with is built from the packages the browser tests pin, and they load it."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = REPO_ROOT / "examples" / "inbox"
BROWSER_TESTS = REPO_ROOT / "tests" / "browser"


def test_the_example_pins_the_npm_packages_the_browser_tests_pin() -> None:
    example = json.loads((EXAMPLE / "package.json").read_text())
    tests = json.loads((BROWSER_TESTS / "package.json").read_text())
    assert example["dependencies"] == tests["dependencies"]
    assert example["devDependencies"]["esbuild"] == tests["devDependencies"]["esbuild"]
    # The bundle is made as the tests make theirs (tests/browser/conftest.py: novu_bundle).
    assert example["scripts"]["build"] == "esbuild entry.mjs --bundle --format=esm --platform=browser --target=es2020 --outfile=novu.js"
    assert (EXAMPLE / "entry.mjs").read_text() == (BROWSER_TESTS / "entry.mjs").read_text()


def test_the_browser_tests_load_the_example_page_and_the_docs_open_with_it() -> None:
    conftest = (BROWSER_TESTS / "conftest.py").read_text()
    assert 'EXAMPLE_PAGE = HERE.parents[1] / "examples" / "inbox" / "index.html"' in conftest
    assert '"/": (EXAMPLE_PAGE,' in conftest
    inbox = (REPO_ROOT / "docs" / "inbox.md").read_text()
    first_section = re.search(r"^## (.*)$", inbox, re.M)
    assert first_section and first_section.group(1) == "Try it: the example page"
    assert "examples/inbox" in inbox.split("\n## ", 2)[1]
    assert "## Troubleshooting" in inbox
