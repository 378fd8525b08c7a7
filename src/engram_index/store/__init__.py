"""Embedded storage: SQLite (WAL) for the records of every space."""
