"""The store's model: the types and rules every backend shares, with no SQL and no driver.

Callers outside ``store/`` name sessions, messages, snapshots and the rest through these modules and reach a
backend only through the ``Store`` handle (``store/backend.py``); each backend (``sqlite/``, ``postgres/``)
imports its types from here, never from the other. ``tests/test_import_cycles.py`` holds that rule.
"""
