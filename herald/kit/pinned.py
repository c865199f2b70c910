"""Code written against another library's internals runs only with the versions it was checked against."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import version

logger = logging.getLogger("herald")


def is_pinned(pinned: Mapping[str, str], written: str, instead: str) -> bool:
    """Whether ``pinned``'s packages are installed at its versions; if not, logs that ``written`` serves ``instead``."""
    installed = {name: version(name) for name in pinned}
    if installed == dict(pinned):
        return True
    logger.warning(
        "%s was written for %s but %s is installed: %s until it is checked", written, dict(pinned), installed, instead
    )
    return False
