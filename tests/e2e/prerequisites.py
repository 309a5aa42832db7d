"""What to do when a machine lacks something the OpenClaw tests need (a network namespace, a Node).

On a developer's machine the test is skipped, with the reason. Under CI (``CI=true``, as ``.ci/run`` is
started) it fails instead: a green CI run must mean that the end-to-end and plugin tests really ran.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test for ``reason``, or fail it under CI."""
    if running_in_ci():
        pytest.fail(f"{reason}. CI=true: under CI this test must run, so this is a failure, not a skip.", pytrace=False)
    pytest.skip(reason)
