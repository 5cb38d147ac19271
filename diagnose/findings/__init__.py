"""findings layer."""
