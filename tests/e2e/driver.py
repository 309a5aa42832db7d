"""End-to-end driver: real OpenClaw gateway + the lossless plugin + a fake model, all on loopback.

Run it INSIDE a fresh network namespace that has only loopback (the pytest side launches it with
``unshare -n``; this script brings ``lo`` up itself and refuses to run where any other interface is up).
It starts the fake model, writes an isolated ``OPENCLAW_HOME``, installs the plugin from this repository,
starts the gateway, plays the scenarios, and writes a JSON report. It asserts nothing: the pytest side
(``test_e2e_*.py``) reads the report and asserts, so a failure shows every scenario's evidence.

Two gateways, one after the other, share the OpenClaw state and the sidecar's store, as a user's do:
the first with the plugin's default (autoStart: it starts and keeps alive its own sidecar), the second with
autoStart off (the user runs ``openclaw-lossless serve``), which is where a foreign program holds the port.

    python driver.py --cache DIR --workdir DIR --report FILE [--sidecar real|stub] [--venv-bin DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.e2e import scenarios_core as core  # noqa: E402 - the repository root is on the path only now
from tests.e2e import scenarios_memory as memory  # noqa: E402
from tests.e2e import scenarios_operator as operator  # noqa: E402
from tests.e2e import scenarios_outage as outage  # noqa: E402
from tests.e2e import scenarios_watch as watch  # noqa: E402
from tests.e2e.gateway import DEGRADED_LINE, JsonObj, Run  # noqa: E402
from tests.e2e.loopback import assert_loopback_only, bring_up_loopback  # noqa: E402

Scenario = Callable[[Run], JsonObj]
# Played only when --only names them (the other OpenClaw lines' lean runs, test_e2e_lines.py).
ON_REQUEST = {"typedNew"}
# Played on the SQLite pass only, to keep the PostgreSQL pass lean: what these add is the plugin's and the
# host's (the trim and spool, a foreign program on the port, a sidecar the user restarts, a long outage, the
# engine switched away and back), the same on either store. The PostgreSQL pass still kills and catches up
# the gateway's sidecar (outageByPlugin); tests/test_spool.py and tests/test_ui_watch.py run on both backends.
SQLITE_PASS_ONLY = {"outageOverflow", "foreignPort", "outageByHand", "outageLong", "watchMode"}

# In order. The healthy ones first (their gateway log must show no degradation), then the ones that break
# things: the plugin's sidecar killed, then the second gateway (autoStart off) with a foreign program on the
# port, and the user's own sidecar killed and brought back.
HEALTHY: list[tuple[str, Scenario]] = [
    ("selected", core.scenario_selected),
    ("compaction", core.scenario_compaction),
    ("newSession", core.scenario_new_session),
    ("typedNew", core.scenario_typed_new),
    ("agentTools", core.scenario_agent_tools),
    ("subagents", core.scenario_subagents),
    ("chatCommand", operator.scenario_chat_command),
    ("importReal", core.scenario_import_real),
    ("doctor", operator.scenario_doctor),
    ("memoryFile", memory.scenario_memory_file),
]
DISRUPTIVE: list[tuple[str, Scenario]] = [
    ("outageByPlugin", outage.scenario_outage_by_plugin),
    ("foreignPort", operator.scenario_foreign_port),
    ("outageByHand", outage.scenario_outage_by_hand),
    ("outageLong", lambda run: outage.scenario_outage_long(run, lambda label: operator.doctor_now(run, label))),
    ("outageOverflow", outage.scenario_outage_overflow),
    ("watchMode", watch.scenario_watch_mode),  # last: it switches the engine to legacy and back
]


def play(run: Run, name: str, scenario: Scenario) -> None:
    with run.timed(f"scenario:{name}"):
        try:
            run.report["scenarios"][name] = {"ok": True, **scenario(run)}
        except Exception as error:  # recorded in the report, asserted by pytest
            run.report["scenarios"][name] = {"ok": False, "error": f"{error!r}", "trace": traceback.format_exc()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache", type=Path, required=True, help="the install.sh cache (node + openclaw)")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--venv-bin", type=Path, default=Path(sys.prefix) / "bin")
    parser.add_argument("--sidecar", choices=["real", "stub"], default=os.environ.get("LOSSLESS_E2E_SIDECAR", "real"))
    parser.add_argument("--only", help="comma-separated scenario names to play (for working on one)")
    args = parser.parse_args()

    bring_up_loopback()
    assert_loopback_only()
    args.workdir.mkdir(parents=True, exist_ok=True)
    run = Run(args.cache, args.workdir, args.venv_bin, args.sidecar)
    report = run.report
    report.update({"sidecarMode": args.sidecar, "workdir": str(args.workdir), "scenarios": {}})
    wanted = set(args.only.split(",")) if args.only else None
    skipped = ON_REQUEST | (SQLITE_PASS_ONLY if os.environ.get("LOSSLESS_DATABASE_URL") else set())
    report["notPlayed"] = sorted(skipped - wanted if wanted is not None else skipped)
    began = time.monotonic()
    try:
        run.setup()
        for name, scenario in HEALTHY:
            if (wanted is None and name not in skipped) or (wanted is not None and name in wanted):
                play(run, name, scenario)
        healthy_log = run.gateway_log_text()
        for name, scenario in DISRUPTIVE:
            if (wanted is None and name not in skipped) or (wanted is not None and name in wanted):
                play(run, name, scenario)
        report["gatewayLog"] = {
            "degradedLines": [ln for ln in healthy_log.splitlines() if DEGRADED_LINE in ln][:10],
            "quarantineLines": [ln for ln in healthy_log.splitlines() if "quarantin" in ln.lower()][:10],
            "losslessLines": [ln for ln in run.gateway_log_text().splitlines() if "lossless" in ln][:60],
            # The whole run's, outages included: a 2026.7 host quarantines an engine for the process on a throw.
            "quarantineLinesAll": [ln for ln in run.gateway_log_text().splitlines() if "quarantin" in ln.lower()][:10],
        }
    except Exception as error:  # a setup failure is the report's finding
        report["setupError"] = f"{error!r}"
        report["setupTrace"] = traceback.format_exc()
    finally:
        report["turnSeconds"] = [round(t.seconds, 2) for t in run.turns]
        report["timings"] = {**run.timings, "total": round(time.monotonic() - began, 2)}
        run.stop_everything()
        args.report.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
