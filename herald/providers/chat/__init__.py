"""Chat providers."""
