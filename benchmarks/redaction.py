"""Redaction: what it catches, what it wrongly changes, and what it costs on the capture path.

Measured on the same machine in one run, for the rules of ``openclaw_lossless/capture/secret_rules.toml``
("after") and for the 22 hand-kept patterns they replaced ("before", kept below as ``BASELINE``):

- leaks: the credential corpus of ``tests/redaction_corpus.py`` (more than sixty shapes in realistic lines),
  a case counted as leaked when its secret survives redaction;
- false positives, as the share of messages changed at all:
  - LoCoMo: every dialogue turn of the development conversations (``../shared/data/locomo/locomo_dev.json``)
    as ``"<Speaker>: <text> [image: <caption>]"``, the text the product stores for them;
  - technical: ordinary text a developer pastes (``ordinary_texts``: SHAs, UUIDs, digests, data URIs, long
    URLs, stack traces, versions, colours, paths, code with secret-sounding names, log lines), generated
    bulk of the same kinds with fresh random values, and 20-line chunks of the Python standard library's
    source, all of it but its tests (code and docstrings full of ``token``, ``key``, ``password``);
  every changed message is written out (``--details``) so the cases can be read;
- beyond English, per language (``tests/redaction_languages.py``: Chinese, Japanese, Korean, Russian, Arabic,
  German, Spanish, French, Portuguese): the share of passwords and PINs given in a sentence that are caught,
  and the share of ordinary sentences of that language (many about passwords without giving one) changed;
- cost per message of ``Redactor.redact`` (p50/p95 µs): LoCoMo turns, and long messages (8-32 kB: LoCoMo
  sessions joined, standard-library files), best of three passes per message in this thread's CPU time
  (``time.thread_time``), to keep other load on shared cores out.

Run from the repository root::

    python benchmarks/redaction.py            # writes benchmarks/results/redaction.{json,md}
    python benchmarks/redaction.py --quick --out /tmp/x   # a smoke run on a sample

Timings are recorded, never asserted.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import string
import sys
import sysconfig
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import machine  # noqa: E402
from benchmarks.harness import percentile  # noqa: E402
from openclaw_lossless.capture.redact import build_redactor, builtin_rules  # noqa: E402
from tests.redaction_corpus import credential_cases, ordinary_texts, present  # noqa: E402
from tests.redaction_languages import LANGUAGES, ORDINARY, secret_cases  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
B64 = string.ascii_letters + string.digits + "+/"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"

# The patterns redaction used before the rules file, applied in order with re.sub (kept to measure against).
BASELINE: list[tuple[str, str]] = [
    ("private_key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)"),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    ("aws_secret_key", r"(?i)aws_?secret_?access_?key\s*[:=]\s*['\"]?[A-Za-z0-9/+]{40}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"),
    ("stripe_key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}"),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("twilio_key", r"\bSK[0-9a-fA-F]{32}\b"),
    ("discord_token", r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,}"),
    ("telegram_token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("bearer_token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{16,}=*"),
    ("url_password", r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
    (
        "secret_assignment",
        r"(?i)(?P<key>(?<![A-Za-z0-9])(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?token"
        r"|auth[_-]?token|client[_-]?secret|private[_-]?key)[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED)"
        r"(?P<value>[^\s\"',;]{4,})",
    ),
]


def baseline_redact() -> Callable[[str], str]:
    compiled = [(kind, re.compile(source)) for kind, source in BASELINE]

    def redact(text: str) -> str:
        for kind, pattern in compiled:
            replacement = rf"\g<key>[REDACTED:{kind}]" if "key" in pattern.groupindex else f"[REDACTED:{kind}]"
            text = pattern.sub(replacement, text)
        return text

    return redact


# -- corpora ----------------------------------------------------------------------------------------------


def locomo_messages(path: Path) -> tuple[list[str], list[str]]:
    """Every turn as the product stores it, and every session joined into one long message."""
    turns: list[str] = []
    sessions: list[str] = []
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        for key, value in conversation.items():
            if not (key.startswith("session_") and isinstance(value, list)):
                continue
            session = []
            for turn in value:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                session.append(text)
            turns += session
            sessions.append("\n".join(session))
    return turns, sessions


def generated_technical(rng: random.Random, n: int) -> list[str]:
    """Bulk ordinary text with fresh random values: the shapes that entropy rules mistake for keys."""
    hexchars = "0123456789abcdef"

    def hexs(k: int) -> str:
        return "".join(rng.choice(hexchars) for _ in range(k))

    def word() -> str:
        return rng.choice(["deploy", "config", "parser", "cache", "auth", "billing", "search", "index", "worker"])

    makers: list[Callable[[], str]] = [
        lambda: f"commit {hexs(40)}\nAuthor: Dev <dev@example.com>\n\n    Fix {word()} retry",
        lambda: f"{hexs(7)} (HEAD -> main) Merge branch '{word()}-{rng.randint(1, 999)}'",
        lambda: f"request {uuid.UUID(int=rng.getrandbits(128), version=4)} took {rng.randint(2, 900)} ms",
        lambda: f"sha256:{hexs(64)}",
        lambda: f"{hexs(64)}  dist/app-{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}.whl",
        lambda: f"md5 {hexs(32)} etag {hexs(32)}",
        lambda: (
            f"https://example.com/{word()}/search?q={word()}+{word()}&page={rng.randint(1, 50)}"
            f"&session_state={hexs(16)}&utm_campaign={word()}_{rng.randint(2020, 2026)}"
        ),
        lambda: f"![chart](data:image/png;base64,{''.join(rng.choice(B64) for _ in range(400))})",
        lambda: (
            f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T10:{rng.randint(10, 59)}:00Z INFO {word()} "
            f"trace_id={hexs(32)} span_id={hexs(16)} status=200"
        ),
        lambda: f'  File "/srv/app/{word()}/handlers.py", line {rng.randint(10, 900)}, in handle_{word()}',
        lambda: f"{word()}=={rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
        lambda: f"color: #{hexs(6)}; border-color: #{hexs(3)}",
        lambda: f"/var/lib/{word()}/{hexs(2)}/{hexs(38)}",
        lambda: f"{word()}_token_count = {rng.randint(1, 5000)}",
        lambda: f"key = ({word()!r}, {rng.randint(1, 99)})",
        lambda: f"kubectl rollout restart deployment/{word()}-{hexs(5)} -n {word()}",
        lambda: f"docker image ls | grep {hexs(12)}",
        lambda: f"Error: connection to {word()}-{rng.randint(1, 9)}.internal:{rng.randint(1024, 65535)} refused",
    ]
    return [rng.choice(makers)() for _ in range(n)]


def _stdlib_sources() -> list[Path]:
    """The standard library's own modules and packages (not its tests, IDLE or installed packages)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idlelib", "site-packages", "__pycache__"}
    return [f for f in sorted(root.rglob("*.py")) if not skip & set(f.relative_to(root).parts)]


def stdlib_chunks(rng: random.Random, n: int | None, lines: int = 20) -> list[str]:
    """Code a user pastes: ``lines``-line chunks of the standard library's source, all or ``n`` at random."""
    files = _stdlib_sources()
    chunks: list[str] = []
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace").splitlines()
        chunks += ["\n".join(text[i : i + lines]) for i in range(0, len(text), lines)]
    chunks = [chunk for chunk in chunks if chunk.strip()]
    if n is None:
        return chunks
    rng.shuffle(chunks)
    return chunks[:n]


def stdlib_files(rng: random.Random, n: int, low: int = 8_000, high: int = 32_000) -> list[str]:
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in _stdlib_sources()]
    fitting = [t[:high] for t in texts if len(t) >= low]
    rng.shuffle(fitting)
    return fitting[:n]


# -- measures ---------------------------------------------------------------------------------------------


@dataclass
class FalsePositives:
    name: str
    messages: int
    changed: list[tuple[str, str]]

    @property
    def share(self) -> float:
        return len(self.changed) / self.messages if self.messages else 0.0


def false_positives(name: str, texts: list[str], redact: Callable[[str], str]) -> FalsePositives:
    return FalsePositives(name, len(texts), [(t, out) for t in texts if (out := redact(t)) != t])


def languages(redact: Callable[[str], str]) -> dict[str, dict[str, int]]:
    """Per language: secrets given in a sentence and how many are caught; ordinary sentences and how many
    are changed."""
    cases = secret_cases()
    found: dict[str, dict[str, int]] = {}
    for code in LANGUAGES:
        mine = [case for case in cases if case.shape.startswith(f"{code}:")]
        found[code] = {
            "secrets": len(mine),
            "caught": sum(not present(case.secret, redact(case.text)) for case in mine),
            "ordinary": len(ORDINARY[code]),
            "changed": sum(redact(text) != text for text in ORDINARY[code]),
        }
    return found


def timings(texts: Iterable[str], redact: Callable[[str], str]) -> dict[str, float]:
    samples = []
    for text in texts:
        best = float("inf")
        for _ in range(3):
            start = time.thread_time()
            redact(text)
            best = min(best, time.thread_time() - start)
        samples.append(best * 1e6)
    return {
        "n": len(samples),
        "p50_us": round(percentile(samples, 50), 1),
        "p95_us": round(percentile(samples, 95), 1),
        "mean_us": round(sum(samples) / len(samples), 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(2026)
    after = build_redactor().redact
    before = baseline_redact()
    turns, sessions = locomo_messages(args.data) if args.data.exists() else ([], [])
    n_bulk, n_chunks, n_long = (400, 200, 20) if args.quick else (4000, None, 200)
    if args.quick:
        turns = turns[:400]
    technical = {
        "hand-assembled": ordinary_texts(),
        "generated": generated_technical(rng, n_bulk),
        "stdlib code": stdlib_chunks(rng, n_chunks),
    }
    long_texts = [s for s in sessions if len(s) >= 8_000][: n_long // 2] + stdlib_files(rng, n_long // 2)
    code = "\n".join(stdlib_files(rng, 40, low=1_000, high=1_000_000))
    pixel = base64.b64encode(rng.randbytes(750_000)).decode()
    huge = {
        "64 kB of code": code[:64_000],
        "200 kB of code": code[:200_000],
        "1 MB data URI in a sentence": f"see ![shot](data:image/png;base64,{pixel}) please",
    }
    cases = credential_cases()
    result: dict[str, Any] = {
        "rules": len(builtin_rules()),
        "kinds": len({rule.kind for rule in builtin_rules()}),
        "credential_cases": len(cases),
        "machine": machine.describe(),
    }
    details: dict[str, list[tuple[str, str]]] = {}
    for label, redact in (("before", before), ("after", after)):
        leaked = [case.shape for case in cases if case.secret in redact(case.text)]
        fps = [false_positives("LoCoMo", turns, redact)]
        fps += [false_positives(f"technical: {name}", texts, redact) for name, texts in technical.items()]
        all_technical = [t for texts in technical.values() for t in texts]
        fps.append(false_positives("technical: all", all_technical, redact))
        result[label] = {
            "leaked": leaked,
            "false_positives": {fp.name: {"messages": fp.messages, "changed": len(fp.changed)} for fp in fps},
            "cost_locomo": timings(turns, redact),
            "cost_long": timings(long_texts, redact),
            "long_chars_median": sorted(map(len, long_texts))[len(long_texts) // 2] if long_texts else 0,
            "cost_huge_ms": {name: round(timings([text], redact)["p50_us"] / 1000, 1) for name, text in huge.items()},
        }
        result[label]["languages"] = languages(redact)
        details.update({f"{label} / {fp.name}": fp.changed for fp in fps if fp.changed})
    if args.details:
        args.details.write_text(json.dumps(details, indent=1, ensure_ascii=False))
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Redaction",
        "",
        f"{result['rules']} rules ({result['kinds']} kinds) in `openclaw_lossless/capture/secret_rules.toml`, "
        f"against the 22 patterns they replaced. {machine.line(result['machine'])}. "
        "Produced by `python benchmarks/redaction.py`.",
        "",
        "## Credentials that survive redaction",
        "",
        f"Corpus: {result['credential_cases']} credential shapes in realistic lines (`tests/redaction_corpus.py`).",
        "",
        "| | leaked | share |",
        "| --- | ---: | ---: |",
    ]
    for label in ("before", "after"):
        leaked = result[label]["leaked"]
        lines.append(f"| {label} | {len(leaked)} | {len(leaked) / result['credential_cases']:.1%} |")
    lines += ["", "## Messages changed that hold no secret (false positives)", ""]
    lines += ["| corpus | messages | before | after |", "| --- | ---: | ---: | ---: |"]
    for name, after in result["after"]["false_positives"].items():
        before = result["before"]["false_positives"][name]
        n = after["messages"]
        lines.append(
            f"| {name} | {n} | {before['changed']} ({before['changed'] / max(n, 1):.2%}) "
            f"| {after['changed']} ({after['changed'] / max(n, 1):.2%}) |"
        )
    lines += ["", "## Beyond English: passwords and PINs given in a sentence", ""]
    lines += [
        "Corpus: `tests/redaction_languages.py` (sentences written for these tests; secrets seeded at run time).",
        "",
    ]
    lines += [
        "| language | secrets | caught before | caught after | ordinary sentences | changed before | changed after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for code, after in result["after"]["languages"].items():
        before = result["before"]["languages"][code]
        lines.append(
            f"| {LANGUAGES[code]} | {after['secrets']} | {before['caught']} | {after['caught']} "
            f"| {after['ordinary']} | {before['changed']} | {after['changed']} |"
        )
    lines += ["", "## Cost per message on the capture path (`Redactor.redact`, best of 3 per message, CPU time)", ""]
    lines += ["| messages | n | before p50 / p95 µs | after p50 / p95 µs |", "| --- | ---: | ---: | ---: |"]
    for key, name in (("cost_locomo", "LoCoMo turns"), ("cost_long", "long (8-32 kB)")):
        b, a = result["before"][key], result["after"][key]
        if key == "cost_long":
            name += f", median {result['after']['long_chars_median']} chars"
        lines.append(f"| {name} | {a['n']} | {b['p50_us']} / {b['p95_us']} | {a['p50_us']} / {a['p95_us']} |")
    lines += ["", "| one large message | before ms | after ms |", "| --- | ---: | ---: |"]
    for name, after_ms in result["after"]["cost_huge_ms"].items():
        lines.append(f"| {name} | {result['before']['cost_huge_ms'][name]} | {after_ms} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=LOCOMO, help="LoCoMo JSON (skipped when absent)")
    parser.add_argument("--quick", action="store_true", help="a sample of each corpus: a smoke run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--details", type=Path, help="write every changed message here (JSON)")
    args = parser.parse_args()
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "redaction-quick" if args.quick else "redaction"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1))
    (args.out / f"{name}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
