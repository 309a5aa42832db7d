"""What reading a message's time costs at capture: ``timeexpr.referenced`` per message, as commit runs it.

Capture runs the rules of every language (``timeexpr/languages/``) on every user and assistant message inside
the commit transaction (``store/sqlite/message_days.py``), where the budget is tens of microseconds a message.
Measured on the LoCoMo turns (real chat, ~9 % of which name a time), on short messages without time words (the
common case), on long ones at the 4,000 characters capture reads, and on everyday chat in nine other languages
(``tests/redaction_languages.py``; each language's cheap test decides whether its rules run at all), beside
what the rest of capture (text, redaction, hash, importance) costs for the same messages. Each figure is the
best of ``--passes`` passes (5) in this thread's CPU time (``time.thread_time``: the machine may be shared,
and other processes' work on the same cores then lengthens the wall clock, not this), in microseconds per
message.

    python benchmarks/timeexpr_speed.py            # writes benchmarks/results/timeexpr_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is on the path, the repository is not
    sys.path.insert(0, str(REPO))

from benchmarks import machine  # noqa: E402
from openclaw_lossless import timeexpr  # noqa: E402
from openclaw_lossless.capture.records import CaptureOptions, capture  # noqa: E402
from openclaw_lossless.capture.redact import build_redactor  # noqa: E402
from openclaw_lossless.store.model.message_days import MAX_CHARS  # noqa: E402
from tests.redaction_languages import ORDINARY  # noqa: E402

LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
SAMPLE = REPO / "benchmarks" / "fixtures" / "locomo-format-sample.json"
SAID = 1_683_550_800.0  # 8 May 2023 13:00 UTC
OPTIONS = CaptureOptions(redactor=build_redactor([]))
PASSES = 5
PLAIN = [
    "Sounds great, I will bring the snacks and the blanket for the picnic.",
    "Can you check why the build fails on the CI runner? It says the lockfile is out of date.",
    "Thanks! That recipe worked, the sauce was a bit thin so I reduced it longer.",
]


def turns(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    return [
        turn["text"]
        for sample in data
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]


def per_message_us(texts: Sequence[str], read: Callable[[str], object], passes: int = PASSES) -> float:
    best = float("inf")
    for _ in range(passes):
        began = time.thread_time()
        for text in texts:
            read(text)
        best = min(best, time.thread_time() - began)
    return round(best / len(texts) * 1e6, 2)


def read_time(text: str) -> object:
    return timeexpr.referenced(text[:MAX_CHARS], SAID)


def read_message(text: str) -> object:
    """The rest of capture, for scale: text, redaction, hash and importance of the same message."""
    return capture({"role": "user", "content": text, "timestamp": SAID * 1000}, OPTIONS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "timeexpr_speed.json")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="LoCoMo JSON (a small sample when absent)")
    parser.add_argument("--passes", type=int, default=PASSES, help="best of this many passes per figure")
    args = parser.parse_args(argv)
    source = args.data if args.data.exists() else SAMPLE
    chat = turns(source)
    long_text = (" ".join(chat) * 4)[:MAX_CHARS]
    other = [text for texts in ORDINARY.values() for text in texts]
    kinds = {
        "chat": chat,
        "no_time_words": PLAIN * 500,
        f"long_{MAX_CHARS}_chars": [long_text] * 50,
        "other_languages_chat": other * 5,
    }
    report = {
        "machine": machine.describe(),
        "load_average_1m": round(os.getloadavg()[0], 2),  # others' work on the same cores slows every figure
        "source": source.name,
        "messages": len(chat),
        "naming_a_time": sum(1 for t in chat if timeexpr.referenced(t, SAID)),
        "us_per_message": {kind: per_message_us(texts, read_time, args.passes) for kind, texts in kinds.items()},
        "capture_us_per_message": {
            kind: per_message_us(texts[:500], read_message, args.passes) for kind, texts in kinds.items()
        },
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
