"""The embedded backend: one SQLite file with FTS5 for keywords and sqlite-vec beside an in-memory index."""
