"""Small text helpers shared by features."""

from __future__ import annotations

import re
import unicodedata

_NON_SLUG = re.compile(r"[^a-z0-9]+")


def slugify(value: str) -> str:
    """Lower-case ASCII words joined by dashes, as Novu's ``slugify(strict)``."""
    normalized = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    return _NON_SLUG.sub("-", normalized.lower()).strip("-")
