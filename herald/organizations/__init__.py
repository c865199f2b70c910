"""Organizations, environments and API keys: the tenancy every request is scoped by."""
