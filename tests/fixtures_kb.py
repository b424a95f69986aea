"""Fixtures of the kb area, shared with other tests through pytest_plugins."""
