"""Herald's app as a module-level object, for ASGI servers that take ``module:app`` (granian).

``herald serve`` builds the app itself and runs uvicorn; this module builds the
same app from the environment (``HERALD_*``) so another server can run it.
``BENCH_RUN_WORKER=0`` leaves the worker out of the API process, like
``herald serve --no-worker``.
"""

from __future__ import annotations

import logging
import os

from herald.app import create_app
from herald.config import load_settings
from herald.kit.heap import settle_heap

_settings = load_settings(run_worker=os.environ.get("BENCH_RUN_WORKER", "1") != "0")
logging.basicConfig(
    level=getattr(logging, _settings.log_level.upper(), logging.INFO),
    format="%(asctime)s %(levelname)s %(name)s %(message)s",
)
app = create_app(_settings)
settle_heap()  # as `herald serve` does
