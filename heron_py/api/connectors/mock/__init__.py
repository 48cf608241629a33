"""Mock sources for tests and examples."""
