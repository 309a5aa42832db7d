"""Export and import of the store as JSONL, apart from SQL: the line format both backends read and write.

The file's layout and its rules are described in ``store/sqlite/transfer/__init__.py``.
"""
