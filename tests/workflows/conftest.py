from tests.engine.conftest import worker  # noqa: F401  (the engine's worker, draining the test store)
