"""Herald: a self-hosted notification service that speaks Novu's v1 REST API."""

__version__ = "0.1.0"
