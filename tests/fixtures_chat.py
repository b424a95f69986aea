"""Fixtures of the chat area, shared with other tests through pytest_plugins."""
