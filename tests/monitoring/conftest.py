"""The monitoring tests run the real worker, as the engine tests do."""

from tests.engine.conftest import worker  # noqa: F401
