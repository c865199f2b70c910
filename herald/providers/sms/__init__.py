"""SMS providers."""
