"""A statement the database refuses reaches a caller as the store's own error on either backend: ``StoreError``
with the driver's message, the driver's error only as its cause, so no caller has to name a driver's classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from openclaw_lossless.errors import LosslessError
from openclaw_lossless.sidecar import place_of
from openclaw_lossless.store.backend import connect
from openclaw_lossless.store.model.store_errors import StoreError
from tests.helpers import make_settings


def test_a_refused_write_and_read_raise_store_error_with_the_drivers_message(tmp_path: Path) -> None:
    store = connect(place_of(make_settings(tmp_path)))
    try:
        with pytest.raises(StoreError) as written:
            store.db.write(lambda conn: conn.execute("INSERT INTO no_such_table VALUES (1)"))
        with pytest.raises(StoreError) as read, store.db.translated():
            store.db.reader().execute("SELECT * FROM no_such_table")
        for raised in (written.value, read.value):
            assert "no_such_table" in str(raised)
            assert not isinstance(raised, LosslessError)  # unnamed: an HTTP caller still gets the plain 500
            assert type(raised.__cause__).__module__.split(".")[0] in ("sqlite3", "sqlean", "psycopg")
        assert store.ops.messages.count(store.db.reader()) == 0  # the store goes on answering
    finally:
        store.db.close()


def test_an_error_the_project_names_keeps_its_name(tmp_path: Path) -> None:
    """Translation at the seam keeps what ``errors.py`` already names (here bad input of our own) untouched."""
    store = connect(place_of(make_settings(tmp_path)))
    try:
        with pytest.raises(LosslessError), store.db.translated():
            store.ops.snapshots.find_snapshot(store.db.reader(), "no spaces allowed")
    finally:
        store.db.close()
