"""Push providers."""
