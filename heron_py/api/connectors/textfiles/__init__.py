"""Text-file sources."""
