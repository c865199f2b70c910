"""Tools for trying Herald on one machine."""
