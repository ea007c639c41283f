"""Every test here that takes ``store`` runs on SQLite and on PostgreSQL (tests/store_backends.py)."""

from store_backends import backend_store as store  # noqa: F401 (the fixture, on both backends)
