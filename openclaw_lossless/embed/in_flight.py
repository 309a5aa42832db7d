"""The turn's requests in flight, counted so that background work can tell when the cores are its to use.

Why: draining a backlog (after an import, a catch-up, a re-embed or an embedding API outage) is model time,
and the model runs on one core per call. On a two-core machine the second core is idle most of the time a
gateway waits for its LLM, and using it roughly doubles the drain; but a turn must never wait behind it.
The hot paths (``assemble``, ``commit-turn``, ``search``) hold ``busy()`` while they run; the worker's extra
thread starts a piece of work only while ``idle()``, so a turn arriving mid-drain competes with at most one
short piece (one or two messages' embedding), never with a whole batch.

Counting costs a lock acquisition on the turn, nothing more: no I/O, no allocation.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class InFlight:
    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Count the caller's request as in flight until the block exits (however it exits)."""
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1

    def idle(self) -> bool:
        """No request is running now (a snapshot: one may start right after)."""
        return self._count == 0


class HoldsInFlight(Protocol):
    in_flight: InFlight


S = TypeVar("S", bound=HoldsInFlight)


def counted(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Decorate a hot-path method: it counts as a request in flight (``self.in_flight``) while it runs."""

    @functools.wraps(method)
    def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self.in_flight.busy():
            return method(self, *args, **kwargs)

    return run
