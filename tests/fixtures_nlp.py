"""Fixtures of the nlp area, shared with other tests through pytest_plugins."""
