"""Email providers."""
