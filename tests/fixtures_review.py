"""Fixtures of the review area, shared with other tests through pytest_plugins."""
