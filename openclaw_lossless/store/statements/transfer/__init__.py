"""The export's statements, alike on both backends (``transfer/export.py`` of each reads the store out with them)."""
