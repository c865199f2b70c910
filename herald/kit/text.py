"""Small text helpers shared by features."""

from __future__ import annotations

import re
import unicodedata

_NON_SLUG = re.compile(r"[^a-z0-9]+")


def slugify(value: str) -> str:
    """Lower-case ASCII words joined by dashes, as Novu's ``slugify(strict)``."""
    normalized = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    return _NON_SLUG.sub("-", normalized.lower()).strip("-")


# Novu's VALID_ID_REGEX: subscriber ids and topic keys are simple tokens or email addresses.
VALID_ID = re.compile(r"^[a-zA-Z0-9_:.-]+$|^\S+@\S+\.\S+$")


def is_valid_identifier(value: object) -> bool:
    return isinstance(value, str) and bool(VALID_ID.match(value))
