"""Shared plumbing: database sessions, auth, errors, idempotency, pagination, ids."""
