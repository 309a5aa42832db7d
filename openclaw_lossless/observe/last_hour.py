"""The last hour, minute by minute: each operation's latency percentiles and the embedding backlog's size.

Why: the status page answers "is it slow now?" and "is the backlog draining?", which numbers since the start
cannot (a slow hour hides in a week of fast ones). ``/stats`` keeps its percentiles since the start
(``metrics.Reservoir``); this record is for the page only, and is not on any documented interface.

What it costs the turn: ``LatencyWindow.add`` is O(1) and allocates nothing. Each of the 60 minutes is a slot
of a ring, reused when its minute comes round again; a slot counts latencies in fixed steps of 19 % (four per
doubling, from 0.25 ms to 16 s), so a percentile read back from the steps is within 10 % of the true one, and
nothing is sorted or kept per call. The backlog's size is sampled off the turn's path: by the embedding worker
once a minute, and by each read of ``/healthz``, ``/stats`` and the status page, which count it anyway.

The minutes are the wall clock's (``time.time() // 60``), so a chart can name them; a minute older than an hour
is never read, whatever the clock did.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

MINUTES = 60
STEPS_PER_DOUBLING = 4
SMALLEST_MS = 0.25
DOUBLINGS = 16  # 0.25 ms * 2**16: 16 s, above any latency worth telling apart
STEPS = DOUBLINGS * STEPS_PER_DOUBLING + 2  # one step at or below the smallest, one above the largest
_ZEROS = (0,) * STEPS

Clock = Callable[[], float]


def step_of(ms: float) -> int:
    """The step a latency in milliseconds falls in: 0 up to 0.25 ms, then one per 19 %, the last open-ended."""
    if not ms > SMALLEST_MS:  # NaN too
        return 0
    steps = math.log2(ms / SMALLEST_MS) * STEPS_PER_DOUBLING
    return STEPS - 1 if steps >= STEPS - 2 else 1 + int(steps)


def step_value(step: int) -> float:
    """The latency a step stands for: the geometric middle of its bounds (its lower bound for the last one)."""
    if step == 0:
        return SMALLEST_MS
    middle = step - 0.5 if step < STEPS - 1 else step - 1
    return SMALLEST_MS * 2 ** (middle / STEPS_PER_DOUBLING)


def percentile(steps: list[int], count: int, fraction: float) -> float:
    """The latency below which ``fraction`` of ``count`` calls fell, read from the counts per step."""
    rank = max(1, math.ceil(fraction * count))
    seen = 0
    for step, n in enumerate(steps):
        seen += n
        if seen >= rank:
            return round(step_value(step), 3)
    return round(step_value(STEPS - 1), 3)


@dataclass(frozen=True)
class MinuteLatency:
    """One minute of one operation: when it began (Unix time), how many calls, their p50 and p95 in ms."""

    start: float
    count: int
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class MinuteBacklog:
    """One minute of the backlog: when it began (Unix time), its last sampled size (None: not sampled in it),
    and the worker's drain since the sample before, in messages per second (None: no sample before, no worker).
    """

    start: float
    backlog: int | None
    drain_per_s: float | None


class _LatencySlot:
    __slots__ = ("count", "minute", "steps")

    def __init__(self) -> None:
        self.minute = -1
        self.count = 0
        self.steps = list(_ZEROS)


class LatencyWindow:
    """One operation's last hour; not locked: ``metrics.Metrics`` holds its lock around every call."""

    def __init__(self) -> None:
        self._slots = [_LatencySlot() for _ in range(MINUTES)]

    def add(self, ms: float, now: float) -> None:
        """Count one call of ``ms`` milliseconds in the minute of ``now`` (Unix time)."""
        minute = int(now // 60)
        slot = self._slots[minute % MINUTES]
        if slot.minute != minute:  # the slot last held the minute an hour (or more) ago: start it again
            slot.minute, slot.count = minute, 0
            slot.steps[:] = _ZEROS
        slot.count += 1
        slot.steps[step_of(ms)] += 1

    def copy(self, now: float) -> list[tuple[int, int, list[int]]]:
        """The last hour's slots as (minute, count, steps), oldest first; an empty minute has count 0."""
        current = int(now // 60)
        kept = {slot.minute: slot for slot in self._slots}
        copied: list[tuple[int, int, list[int]]] = []
        for minute in range(current - MINUTES + 1, current + 1):
            slot = kept.get(minute)
            copied.append((minute, slot.count, list(slot.steps)) if slot else (minute, 0, []))
        return copied


def minutes_of(copied: list[tuple[int, int, list[int]]]) -> list[MinuteLatency]:
    """Percentiles of each copied minute (outside the lock: reading 60 minutes walks 4,000 counts)."""
    return [
        MinuteLatency(minute * 60, count, percentile(steps, count, 0.5), percentile(steps, count, 0.95))
        if count
        else MinuteLatency(minute * 60, 0, None, None)
        for minute, count, steps in copied
    ]


class BacklogWindow:
    """The backlog's size and the worker's embedded count, as last sampled in each minute of the last hour.

    The drain rate between two samples is the difference of the worker's running count over the time between
    them, so samples taken now and then (each read of ``/stats`` or the status page) still give a true rate.
    """

    def __init__(self, clock: Clock = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._minute = [-1] * MINUTES
        self._sample: list[tuple[float, int, int | None]] = [(0.0, 0, None)] * MINUTES  # (at, size, embedded)

    def sample(self, size: int, embedded: int | None) -> None:
        """The backlog holds ``size`` messages now; the worker has embedded ``embedded`` since the start."""
        now = self._clock()
        minute = int(now // 60)
        with self._lock:
            self._minute[minute % MINUTES] = minute
            self._sample[minute % MINUTES] = (now, size, embedded)

    def due(self) -> bool:
        """No sample yet in this minute (a sampler that runs often then counts the backlog once a minute)."""
        minute = int(self._clock() // 60)
        with self._lock:
            return self._minute[minute % MINUTES] != minute

    def minutes(self) -> list[MinuteBacklog]:
        """The last hour, oldest first; a minute without a sample has neither size nor rate."""
        current = int(self._clock() // 60)
        with self._lock:
            kept = {m: self._sample[m % MINUTES] for m in self._minute if current - MINUTES < m <= current}
        shown: list[MinuteBacklog] = []
        before: tuple[float, int, int | None] | None = None
        for minute in range(current - MINUTES + 1, current + 1):
            sample = kept.get(minute)
            if sample is None:
                shown.append(MinuteBacklog(minute * 60, None, None))
                continue
            shown.append(MinuteBacklog(minute * 60, sample[1], _rate(before, sample)))
            before = sample
        return shown


def _rate(before: tuple[float, int, int | None] | None, after: tuple[float, int, int | None]) -> float | None:
    """Messages embedded per second between two samples, or None (no sample before, no worker, no time)."""
    if before is None or before[2] is None or after[2] is None or after[0] <= before[0]:
        return None
    return round(max(0, after[2] - before[2]) / (after[0] - before[0]), 2)
