"""The embedded target: a small but real repository in SQL (SQLite by default, PostgreSQL)."""
