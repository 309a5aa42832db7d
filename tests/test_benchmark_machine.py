"""Every benchmark result names its CPU and the instruction sets its figures depend on (benchmarks/machine.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import machine

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse4_2 avx avx2 fma f16c bmi2 sha_ni
processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu vme sse4_2 avx avx2 fma f16c bmi2 sha_ni
"""
XEON = (
    "model name\t: Intel(R) Xeon(R) Platinum 8375C\n"
    "flags\t: sse4_2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni\n"
)
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd aes sha2 asimddp sve\nCPU part\t: 0xd40\n"


def test_an_avx2_only_cpu_is_told_from_one_with_avx512_and_vnni(tmp_path: Path) -> None:
    (tmp_path / "epyc").write_text(EPYC)
    (tmp_path / "xeon").write_text(XEON)
    epyc, xeon = machine.cpu(tmp_path / "epyc"), machine.cpu(tmp_path / "xeon")
    assert epyc == {"model": "AMD EPYC 7B13", "flags": ["sse4_2", "avx", "avx2", "fma", "f16c"]}
    assert "avx512_vnni" in xeon["flags"] and "avx512_vnni" not in epyc["flags"]
    line = machine.line({"cpus": 2, "cpu": epyc, "platform": "Linux", "python": "3.11"})
    assert line == "2 cores, AMD EPYC 7B13 (sse4_2, avx, avx2, fma, f16c), Linux, Python 3.11"


def test_arm_features_and_a_missing_cpuinfo_are_reported_as_they_are(tmp_path: Path) -> None:
    (tmp_path / "graviton").write_text(GRAVITON)
    assert machine.cpu(tmp_path / "graviton")["flags"] == ["asimd", "asimddp", "sve"]
    assert machine.cpu(tmp_path / "absent")["flags"] == []
    assert "CPU not recorded" in machine.line({"cpus": 2, "platform": "Linux", "python": "3.11"})


def test_scale_latencies_are_also_reported_as_ratios_to_the_seed_in_the_same_run() -> None:
    """A slower CPU makes every millisecond larger; the ratio to the seed's scan, run beside it, does not move."""
    from benchmarks import scale_report

    def run(factor: float) -> dict[str, object]:
        size = {
            "assemble": {"p50": 10.0 * factor, "p95": 20.0 * factor, "p99": 30.0 * factor},
            "baseline": {"assemble": {"p50": 100.0 * factor, "p95": 125.0 * factor, "p99": 150.0 * factor}},
            "server": {"http_assemble": {"p95": 25.0 * factor}},
            "drain": {"msg_per_s": 50.0 / factor},
        }
        return {"sizes": {"100000": size}}

    fast, slow = (scale_report.ratio_table(run(f)["sizes"], ["100000"]) for f in (1.0, 1.5))  # type: ignore[arg-type]
    assert fast == slow
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1].rstrip(" |") for line in fast if " | " in line}
    assert rows["assemble p50 ms (in the sidecar, prompt as query)"] == "0.100"  # p50 over the seed's p50
    assert rows["assemble p95 ms (in the sidecar, prompt as query)"] == "0.160"
    assert rows["assemble p95 ms over HTTP, 200-message history"] == "0.200"
    assert rows["keyword lane p95 ms (top-100)"] == "—"  # not measured: no ratio made up
    assert not any(key.startswith("backlog drain") for key in rows)  # a rate, not a latency


def test_a_recorded_command_holds_no_output_path_and_no_database_url() -> None:
    """A result is published with its command: where the run wrote (a path of that machine) is left out, and
    a database URL (it may hold a password) is recorded as ``URL``, in either spelling of each flag."""
    url = "postgresql://lossless:hunter2@db.internal/lossless"
    argv = ["--backend", "postgres", "--out", "/home/me/run", "--database-url", url, "--rounds", "6"]
    assert machine.command("revision_ab.py", argv) == (
        "python benchmarks/revision_ab.py --backend postgres --database-url URL --rounds 6"
    )
    recorded = machine.command("scale.py", ["--out=/home/me/run", f"--database-url={url}", "--quick"])
    assert recorded == "python benchmarks/scale.py --database-url URL --quick"
    assert "hunter2" not in recorded and "/home/me" not in recorded
