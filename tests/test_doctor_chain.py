"""``doctor`` checks the chain from the OpenClaw config the gateway reads to the sidecar it reaches.

Each test writes a real OpenClaw state dir (a JSON5 config, the plugin linked as ``plugins install -l`` links
it) broken in one way, and asserts the one finding a user needs: its stable code and the fix. The reach
checks talk over real loopback HTTP to a real served sidecar, or to a foreign HTTP server on the port.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

import openclaw_lossless
from openclaw_lossless import doctor
from openclaw_lossless.cli.main import main
from openclaw_lossless.config import Settings
from openclaw_lossless.doctor import reach
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.doctor.gateway import lock_path
from tests.helpers import free_port, live_sidecar, make_settings
from tests.openclaw_state import PLUGIN_DIR, linked_config, openclaw_env, plugin_copy, write_config
from tests.reliability import SidecarProcess
from tests.test_catch_up import HostSession, set_born
from tests.test_history_import import AgentDatabase


def findings(home: Path, tmp_path: Path, env: dict[str, str] | None = None, **kw: Any) -> dict[str, Finding]:
    settings = Settings(state_dir=tmp_path / "sidecar-state", embedding_provider="none")
    return {f.check: f for f in doctor.run(settings, env=env or openclaw_env(home), **kw)}


def quiet_url() -> str:
    """A loopback URL nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_a_healthy_linked_install_passes_every_link(home: Path, tmp_path: Path) -> None:
    write_config(home / ".openclaw", linked_config(sidecarUrl=quiet_url()))
    found = findings(home, tmp_path)
    chain = ["openclaw-config", "context-engine-slot", "plugin-entry", "plugin-install", "plugin-version"]
    assert all(found[name].ok for name in [*chain, "plugin-config", "sidecar-reach"]), found
    assert found["plugin-install"].data == {"path": str(PLUGIN_DIR), "how": "plugins.load.paths", "version": "0.1.0"}
    assert found["sidecar-reach"].code == "sidecar_not_running" and found["sidecar-reach"].fix  # a note: autoStart


def test_without_openclaw_the_host_checks_are_skipped_and_a_good_store_passes(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sidecar used alone (or before the gateway is installed): doctor says the host checks did not run."""
    for name, value in openclaw_env(home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    code = main(["doctor", "--json", "--state-dir", str(tmp_path / "s")])
    out, err = capsys.readouterr()
    assert code == 0 and err == ""
    found = json.loads(out)["findings"]
    config = next(f for f in found if f["check"] == "openclaw-config")
    assert config["code"] == "host_checks_skipped" and config["ok"] and config["skipped"]
    assert str(home / ".openclaw" / "openclaw.json") in config["detail"] and "OPENCLAW_CONFIG_PATH" in config["detail"]
    assert not any(f["check"].startswith(("plugin-", "context-engine", "sidecar-reach")) for f in found)
    assert main(["doctor", "--state-dir", str(tmp_path / "s")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if "openclaw-config" in line] == [
        next(line for line in lines if line.startswith("skip openclaw-config: skipped the OpenClaw checks"))
    ]
    assert not any(line.startswith("BAD") for line in lines)


def test_a_config_named_but_missing_is_one_clear_finding(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Told where OpenClaw lives (OPENCLAW_CONFIG_PATH, OPENCLAW_STATE_DIR, --profile) and it is not there: BAD."""
    for name, value in openclaw_env(home, OPENCLAW_STATE_DIR=str(home / "elsewhere")).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    code = main(["doctor", "--json", "--state-dir", str(tmp_path / "s")])
    out, err = capsys.readouterr()
    assert code == 1 and err == ""
    config = next(f for f in json.loads(out)["findings"] if f["check"] == "openclaw-config")
    assert config["code"] == "config_missing" and not config["ok"]
    assert str(home / "elsewhere" / "openclaw.json") in config["detail"] and "OPENCLAW_CONFIG_PATH" in config["fix"]
    assert main(["doctor", "--profile", "work", "--state-dir", str(tmp_path / "s")]) == 1
    assert "BAD  openclaw-config: no OpenClaw config at" in capsys.readouterr().out


def test_json5_that_does_not_parse_names_the_file_and_line(home: Path, tmp_path: Path) -> None:
    path = write_config(
        home / ".openclaw",
        "{\n  // a comment is fine\n  plugins: {\n    slots: {contextEngine: 'lossless',},\n  }\n  gateway: {},\n}\n",
    )  # line 5 lacks its comma: the parser stops on line 6
    config = findings(home, tmp_path)["openclaw-config"]
    assert not config.ok and config.code == "config_unparsable"
    assert config.data is not None and config.data["error"]["line"] == 6
    assert f"{path} line 6" in config.detail and "fix " + str(path) in (config.fix or "")


def test_profiles_and_overrides_choose_the_file_as_openclaw_does(home: Path, tmp_path: Path) -> None:
    write_config(home / ".openclaw", linked_config(sidecarUrl=quiet_url()))
    write_config(home / ".openclaw-work", {"plugins": {"slots": {"contextEngine": "legacy"}}})
    assert findings(home, tmp_path)["context-engine-slot"].ok
    assert findings(home, tmp_path, profile="work")["context-engine-slot"].code == "slot_not_lossless"
    named = findings(home, tmp_path, env=openclaw_env(home, OPENCLAW_PROFILE="work"))["openclaw-config"]
    assert "--profile work" in named.detail  # the variable alone moves nothing in OpenClaw: say so
    elsewhere = write_config(tmp_path / "custom", {"plugins": {}})
    explicit = openclaw_env(home, OPENCLAW_STATE_DIR=str(tmp_path / "custom"))
    assert (findings(home, tmp_path, env=explicit, profile="work")["openclaw-config"].data or {})["path"] == str(
        elsewhere
    )
    by_path = openclaw_env(home, OPENCLAW_CONFIG_PATH=str(elsewhere))
    assert findings(home, tmp_path, env=by_path)["context-engine-slot"].code == "slot_not_lossless"


def test_includes_are_resolved_and_a_broken_one_is_named(home: Path, tmp_path: Path) -> None:
    state = home / ".openclaw"
    write_config(state, "{ plugins: { $include: './plugins.json5' }, gateway: { mode: 'local' } }")
    (state / "plugins.json5").write_text(json.dumps(linked_config(sidecarUrl=quiet_url())["plugins"]))
    found = findings(home, tmp_path)
    assert found["context-engine-slot"].ok and found["plugin-install"].ok
    assert (found["openclaw-config"].data or {})["includes"] == [str(state / "plugins.json5")]
    (state / "plugins.json5").unlink()
    config = findings(home, tmp_path)["openclaw-config"]
    assert config.code == "config_include_failed" and "./plugins.json5" in config.detail
    (tmp_path / "outside.json5").write_text("{}")
    write_config(state, "{ plugins: { $include: '../../outside.json5' } }")  # OpenClaw keeps includes inside
    assert "outside the config directory" in findings(home, tmp_path)["openclaw-config"].detail
    (state / "plugins.json5").write_text("{ $include: './openclaw.json' }")
    write_config(state, "{ plugins: { $include: './plugins.json5' } }")
    config = findings(home, tmp_path)["openclaw-config"]
    assert config.code == "config_include_failed" and "circular" in config.detail


@pytest.mark.parametrize(
    ("edit", "check", "code"),
    [
        (lambda c: c["plugins"].pop("slots"), "context-engine-slot", "slot_not_lossless"),
        (lambda c: c["plugins"]["entries"]["lossless"].update(enabled=False), "plugin-entry", "entry_disabled"),
        (lambda c: c["plugins"]["entries"].pop("lossless"), "plugin-entry", "entry_missing"),
        (lambda c: c["plugins"].update(deny=["lossless"]), "plugin-entry", "plugin_denied"),
        (lambda c: c["plugins"].update(allow=["voice-call"]), "plugin-entry", "plugin_not_allowed"),
        (lambda c: c["plugins"].update(enabled=False), "plugin-entry", "plugins_disabled"),
        (lambda c: c["plugins"].pop("load"), "plugin-install", "plugin_not_installed"),
    ],
    ids=["slot-missing", "entry-disabled", "entry-missing", "denied", "not-allowed", "all-off", "not-installed"],
)
def test_each_broken_link_is_reported_with_its_fix(
    home: Path, tmp_path: Path, edit: Any, check: str, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A removed entry takes its sidecarUrl with it: the default port must not be whatever runs on this machine.
    monkeypatch.setattr(reach, "DEFAULT_URL", quiet_url())
    config = linked_config(sidecarUrl=quiet_url())
    edit(config)
    write_config(home / ".openclaw", config)
    found = findings(home, tmp_path)
    assert not found[check].ok and found[check].code == code and found[check].fix
    assert [f.check for f in found.values() if not f.ok] == [check]


def test_fixes_name_the_commands_that_fix_them(home: Path, tmp_path: Path) -> None:
    config = linked_config(sidecarUrl=quiet_url())
    config["plugins"].pop("slots")
    config["plugins"].pop("load")
    config["plugins"]["entries"]["lossless"]["enabled"] = False
    write_config(home / ".openclaw", config)
    found = findings(home, tmp_path)
    assert "openclaw config set plugins.slots.contextEngine lossless" in (found["context-engine-slot"].fix or "")
    assert "openclaw plugins enable lossless" in (found["plugin-entry"].fix or "")
    assert f"openclaw plugins install -l {PLUGIN_DIR} --force" in (found["plugin-install"].fix or "")


def test_a_plugin_from_another_release_is_a_version_mismatch(home: Path, tmp_path: Path) -> None:
    other = plugin_copy(tmp_path / "other-plugin", "9.9.9")
    write_config(home / ".openclaw", linked_config(other, sidecarUrl=quiet_url()))
    version = findings(home, tmp_path)["plugin-version"]
    assert not version.ok and version.code == "version_mismatch"
    assert version.data == {"plugin": "9.9.9", "sidecar": openclaw_lossless.__version__}


def test_invalid_config_values_are_listed_by_path(home: Path, tmp_path: Path) -> None:
    bad: dict[str, Any] = {
        "retrievalCount": 500,
        "timeouts": {"assembleMs": 10},
        "recallScop": "agent",
        "sidecarUrl": quiet_url(),
    }
    write_config(home / ".openclaw", linked_config(**bad))
    found = findings(home, tmp_path)
    config = found["plugin-config"]
    # OpenClaw refuses the whole config (and `openclaw config set`) while a value is invalid: listed first.
    names = list(found)
    assert names.index("plugin-config") == names.index("openclaw-config") + 1 and "edit " in (config.fix or "")
    assert not config.ok and config.code == "config_invalid" and config.data is not None
    assert [e["path"] for e in config.data["errors"]] == ["(config)", "retrievalCount", "timeouts.assembleMs"]
    assert "'recallScop' was unexpected" in config.detail and "500 is greater than the maximum of 200" in config.detail


def test_a_sidecar_url_without_scheme_is_reported(home: Path, tmp_path: Path) -> None:
    write_config(home / ".openclaw", linked_config(sidecarUrl="localhost:8377"))
    reach = findings(home, tmp_path)["sidecar-reach"]
    assert not reach.ok and reach.code == "sidecar_url_invalid"
    assert 'sidecarUrl = "http://127.0.0.1:8377"' in (reach.fix or "") and (reach.fix or "").startswith("edit ")


def test_a_remote_sidecar_url_is_not_probed_unless_allowed(home: Path, tmp_path: Path) -> None:
    write_config(home / ".openclaw", linked_config(sidecarUrl="http://192.0.2.1:8377"))
    reach = findings(home, tmp_path)["sidecar-reach"]
    assert not reach.ok and reach.code == "sidecar_url_remote"


def test_the_session_selection_is_shown_when_set(home: Path, tmp_path: Path) -> None:
    write_config(home / ".openclaw", linked_config(sidecarUrl=quiet_url()))
    assert "session-selection" not in findings(home, tmp_path)
    chosen: dict[str, Any] = {"excludeSessions": ["agent:*:cron:*"], "includeSessions": ["agent:main:*"]}
    write_config(home / ".openclaw", linked_config(sidecarUrl=quiet_url(), **chosen))
    selection = findings(home, tmp_path)["session-selection"]
    assert selection.ok and selection.data == chosen and "agent:*:cron:*" in selection.detail


def test_nothing_listening_fails_only_when_autostart_is_off(home: Path, tmp_path: Path) -> None:
    url = quiet_url()
    write_config(home / ".openclaw", linked_config(sidecarUrl=url, autoStart=False))
    reach = findings(home, tmp_path)["sidecar-reach"]
    assert not reach.ok and reach.code == "sidecar_not_running"
    assert f"openclaw-lossless serve --host 127.0.0.1 --port {url.rsplit(':', 1)[1]}" in (reach.fix or "")


def test_the_running_sidecar_proves_it_is_the_plugins(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "plugin-state"
    with live_sidecar(make_settings(state, embedding_provider="none"), None) as server:
        write_config(home / ".openclaw", linked_config(sidecarUrl=server.url, stateDir=str(state)))
        reach = findings(home, tmp_path)["sidecar-reach"]
        assert reach.ok and reach.code == "sidecar_verified", reach
        assert reach.data is not None and reach.data["pid"] == os.getpid()
        other = tmp_path / "other-state"
        other.mkdir(mode=0o700)
        (other / "token").write_text("another-token-of-enough-length")
        write_config(home / ".openclaw", linked_config(sidecarUrl=server.url, stateDir=str(other)))
        reach = findings(home, tmp_path)["sidecar-reach"]
        assert not reach.ok and reach.code == "sidecar_other_token"


def test_a_sidecar_of_another_version_is_named(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "plugin-state"
    with live_sidecar(make_settings(state, embedding_provider="none"), None) as server:
        write_config(home / ".openclaw", linked_config(sidecarUrl=server.url, stateDir=str(state)))
        monkeypatch.setattr(openclaw_lossless, "__version__", "9.9.9")  # this package upgraded, the server not
        reach = findings(home, tmp_path)["sidecar-reach"]
    assert not reach.ok and reach.code == "sidecar_version_mismatch" and "kill" in (reach.fix or "")


class _Foreign(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    healthz: ClassVar[bytes | None] = None  # set: a /healthz like an older sidecar's, without /v1/identity

    def do_GET(self) -> None:
        self.seen.append(self.path + str(self.headers.get("Authorization")))
        old = self.healthz is not None and self.path == "/healthz"
        body = self.healthz if old and self.healthz else b"<html><body>404 Not Found</body></html>"
        self.send_response(200 if old else 404)
        self.send_header("Content-Type", "application/json" if old else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def foreign_server(healthz: dict[str, Any] | None = None) -> Iterator[str]:
    handler = type("Handler", (_Foreign,), {"healthz": None if healthz is None else json.dumps(healthz).encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_another_program_on_the_port_is_named_and_gets_no_token(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "plugin-state"
    state.mkdir(mode=0o700)
    (state / "token").write_text("the-plugins-own-token-0123456789")
    with foreign_server() as url:
        write_config(home / ".openclaw", linked_config(sidecarUrl=url, stateDir=str(state)))
        reach = findings(home, tmp_path)["sidecar-reach"]
    assert not reach.ok and reach.code == "port_held_by_other_program"
    assert f"port {url.rsplit(':', 1)[1]} is held by another program" in reach.detail
    assert reach.data is not None and reach.data["holder"]["pid"] == os.getpid()
    assert _Foreign.seen and all("token" not in seen and seen.endswith("None") for seen in _Foreign.seen)


def test_turns_the_host_recorded_while_the_sidecar_was_down_are_counted_and_the_fix_brings_them_in(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    openclaw, state = home / ".openclaw", tmp_path / "plugin-state"
    for name, value in openclaw_env(home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    write_config(openclaw, linked_config(sidecarUrl=quiet_url(), stateDir=str(state)))
    host = AgentDatabase(openclaw)
    try:
        session = HostSession(host)
        with live_sidecar(make_settings(state, openclaw_state=openclaw, embedding_provider="none"), None) as server:
            for n in range(2):
                assert server.post("commit-turn", session.turn(f"Stored turn {n}.")).status_code == 200
        outage = [
            session.turn("Said while the sidecar was down."),
            session.turn("And once more, with a tool.", tool=True),
        ]
    finally:
        host.close()

    assert main(["doctor", "--json"]) == 1
    gap = next(f for f in json.loads(capsys.readouterr().out)["findings"] if f["check"] == "transcript-gaps")
    assert not gap["ok"] and gap["code"] == "turns_missing"
    lost = [m for body in outage for m in body["messages"]]
    assert gap["data"]["missing"] == len(lost) and gap["data"]["agents"] == {"main": len(lost)}
    assert gap["data"]["firstAt"] == pytest.approx(min(m["timestamp"] for m in lost) / 1000)
    assert [s["sessionKey"] for s in gap["data"]["sessions"]] == ["agent:main:main"]
    command = gap["fix"].split("bring them in now: ", 1)[1]
    assert command == f"openclaw-lossless import --agent main --state-dir {state}"

    assert main(shlex.split(command)[1:]) == 0  # the fix, as printed
    capsys.readouterr()
    main(["doctor", "--json"])
    gap = next(f for f in json.loads(capsys.readouterr().out)["findings"] if f["check"] == "transcript-gaps")
    assert gap["ok"] and gap["code"] == "gaps_none", gap


def test_the_state_dirs_socket_is_checked_as_the_plugin_uses_it(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "s"
    server = SidecarProcess(state, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}).spawn()
    try:
        server.wait_healthy()
        write_config(home / ".openclaw", linked_config(stateDir=str(state)))  # the default sidecarUrl
        reach = findings(home, tmp_path)["sidecar-reach"]
    finally:
        server.stop()
    assert reach.ok and reach.code == "sidecar_verified", reach
    assert reach.data is not None and reach.data["via"] == str(state / "sidecar.sock")
    assert reach.data["pid"] == server.pid


def test_an_install_record_in_the_hosts_state_database_counts_and_is_only_read(home: Path, tmp_path: Path) -> None:
    """As ``openclaw plugins install`` records it: ``<state>/state/openclaw.sqlite``, WAL mode, closed."""
    openclaw = home / ".openclaw"
    config = linked_config(sidecarUrl=quiet_url())
    config["plugins"].pop("load")
    write_config(openclaw, config)
    (openclaw / "state").mkdir()
    index = {"index": {"installRecords": {"lossless": {"source": "path", "installPath": str(PLUGIN_DIR)}}}}
    with closing(sqlite3.connect(openclaw / "state" / "openclaw.sqlite")) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            "CREATE TABLE config_machine_state (state_key TEXT PRIMARY KEY, value_json TEXT, updated_at_ms INT)"
        )
        conn.execute("INSERT INTO config_machine_state VALUES ('plugins.installedIndex', ?, 0)", (json.dumps(index),))
        conn.commit()
    before = sorted(str(p) for p in openclaw.rglob("*"))
    install = findings(home, tmp_path)["plugin-install"]
    assert install.ok and (install.data or {})["how"] == "install record"
    assert sorted(str(p) for p in openclaw.rglob("*")) == before, "doctor must leave the host's files as they were"


def test_nothing_listening_fails_while_the_gateway_runs(home: Path, tmp_path: Path) -> None:
    """The lock the running gateway holds (``<state>/tmp/openclaw-<uid>/gateway.state.lock``) names it."""
    openclaw = home / ".openclaw"
    write_config(openclaw, linked_config(sidecarUrl=quiet_url()))
    lock = lock_path(openclaw)
    lock.parent.mkdir(parents=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass", "openclaw-gateway"])
    gone.wait()
    lock.write_text(json.dumps({"pid": gone.pid, "port": 18789, "stateDir": str(openclaw)}))
    reach = findings(home, tmp_path)["sidecar-reach"]
    assert reach.ok and reach.code == "sidecar_not_running", "a lock left by a killed gateway is not a gateway"
    gateway = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "openclaw-gateway"])
    try:
        lock.write_text(json.dumps({"pid": gateway.pid, "port": 18789, "stateDir": str(openclaw)}))
        reach = findings(home, tmp_path)["sidecar-reach"]
    finally:
        gateway.kill()
        gateway.wait()
    assert not reach.ok and reach.code == "sidecar_not_running" and f"pid {gateway.pid}" in reach.detail
    # the plugin leaves a sidecar it did not start alone: the hint never promises it starts one at the next turn
    assert "next turn" not in reach.detail and "restarts only a sidecar it started itself" in reach.detail
    assert (reach.fix or "").startswith("start it again yourself: openclaw-lossless serve")
    assert "restart the gateway to let the plugin start and watch it" in (reach.fix or "")
    assert (reach.data or {})["gateway"] == {"pid": gateway.pid, "port": 18789}


def test_history_from_before_the_plugin_is_a_note_naming_the_import(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    openclaw, state = home / ".openclaw", tmp_path / "plugin-state"
    for name, value in openclaw_env(home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    write_config(openclaw, linked_config(sidecarUrl=quiet_url(), stateDir=str(state)))
    host = AgentDatabase(openclaw)
    try:
        old = HostSession(host, "0a7e5c2d-old", "agent:main:telegram:direct:42")
        old.turn("From before the plugin was installed.")
        set_born(host, old.session_id, int(time.time() * 1000) - 86_400_000)
        with live_sidecar(make_settings(state, openclaw_state=openclaw, embedding_provider="none"), None) as server:
            assert server.post("commit-turn", HostSession(host).turn("The first stored turn.")).status_code == 200
    finally:
        host.close()
    assert main(["doctor", "--json"]) == 0
    gap = next(f for f in json.loads(capsys.readouterr().out)["findings"] if f["check"] == "transcript-gaps")
    assert gap["ok"] and gap["code"] == "history_not_imported" and gap["data"]["notImported"] == 2
    assert gap["fix"] == f"to add them: openclaw-lossless import --state-dir {state}"


def test_an_older_sidecar_without_the_identity_check_is_named_for_a_restart(home: Path, tmp_path: Path) -> None:
    with foreign_server(healthz={"status": "ok", "version": "0.0.9", "pid": 4242}) as url:
        write_config(home / ".openclaw", linked_config(sidecarUrl=url))
        reach = findings(home, tmp_path)["sidecar-reach"]
    assert not reach.ok and reach.code == "sidecar_version_mismatch" and "kill 4242" in (reach.fix or "")


def test_the_cli_takes_a_profile_as_openclaw_does(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in openclaw_env(home).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    write_config(home / ".openclaw-work", linked_config(sidecarUrl=quiet_url()))
    assert main(["doctor", "--json", "--profile", "work"]) == 0
    config = next(f for f in json.loads(capsys.readouterr().out)["findings"] if f["check"] == "openclaw-config")
    assert config["data"]["path"] == str(home / ".openclaw-work" / "openclaw.json")
    assert config["data"]["chosenBy"] == "--profile work"
    with pytest.raises(SystemExit) as refused:  # argparse refuses it before doctor runs
        main(["doctor", "--profile", "not a name"])
    assert refused.value.code == 2
    assert "invalid profile 'not a name'" in capsys.readouterr().err
