// The sidecar's lifecycle and transport, with real processes and real sockets:
//  - the plugin restarts a sidecar it started (in this process, or in an earlier gateway process) after SIGKILL,
//    with backoff and a crash-loop guard, and leaves a sidecar someone else runs alone;
//  - only a peer that proves it holds the token gets a hook or the token (a foreign HTTP server gets neither);
//  - the state dir's Unix socket is preferred; the config is validated; excluded sessions send nothing.
// The sidecar here is tests/e2e/stub_sidecar.py (the real sidecar's CLI and HTTP contract, stdlib only) or
// fixtures/fake-sidecar.mjs; `node --test plugin/test/sidecar.test.mjs`.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createServer } from "node:http";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { createEngine, resolveSettings, sidecarEnv, stopSupervising } from "../index.js";
import { globMatch, sessionSelector } from "../sessions.js";
import { spooledNames } from "../spool.js";
import { identityAnswer } from "./fixtures/identity.mjs";
import { freePort, recorder } from "./fixtures/helpers.mjs";

const STUB = fileURLToPath(new URL("../../tests/e2e/stub_sidecar.py", import.meta.url));
const FAKE = fileURLToPath(new URL("./fixtures/fake-sidecar.mjs", import.meta.url));
const GATEWAY_ONCE = fileURLToPath(new URL("./fixtures/gateway-once.mjs", import.meta.url));
const GATEWAY_WATCH = fileURLToPath(new URL("./fixtures/gateway-watch.mjs", import.meta.url));
const FAST = { firstDelayMs: 50, maxDelayMs: 200, maxCrashes: 5, windowMs: 60_000, coolDownMs: 60_000, watchMs: 100, pollMs: 50 };

async function until(check, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not in time: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A short state dir: the socket path must fit the platform limit. */
const stateDir = () => mkdtempSync(join(tmpdir(), "ll-"));

async function identityPid(port) {
  try {
    const answer = await fetch(`http://127.0.0.1:${port}/healthz`);
    return (await answer.json()).pid;
  } catch {
    return undefined;
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function stop(pid) {
  if (pid && alive(pid)) process.kill(pid, "SIGKILL");
}

const bootstrap = (config, deps) => createEngine(config, deps).bootstrap({ sessionId: "s", sessionKey: "agent:main:main" });

// ---------------------------------------------------------------------------------------------------
// Keeping it alive

test("a sidecar started in this process is restarted after SIGKILL, once per exit, and its owner file follows", async () => {
  const port = await freePort();
  const dir = stateDir();
  const { lines, log } = recorder();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir: dir, autoStart: true, command: STUB, timeouts: { startMs: 20000 } };
  let second;
  try {
    const [a, b] = await Promise.all([bootstrap(config, { log, supervision: FAST }), bootstrap(config, { log, supervision: FAST })]);
    assert.equal(a.bootstrapped && b.bootstrapped, true);
    const first = await identityPid(port);
    const owner = JSON.parse(readFileSync(join(dir, "sidecar.owner"), "utf8"));
    assert.equal(owner.pid, first);
    assert.equal(statSync(join(dir, "sidecar.owner")).mode & 0o777, 0o600);
    assert.equal(lines.filter((l) => l.includes("starting sidecar")).length, 1, "concurrent hooks share one start");

    process.kill(first, "SIGKILL");
    const ownerPid = () => JSON.parse(readFileSync(join(dir, "sidecar.owner"), "utf8")).pid;
    await until(async () => (second = await identityPid(port)) && second !== first && ownerPid() === second, "a new sidecar answers, recorded as the plugin's");
    const exits = lines.filter((l) => l.includes(`(pid ${first})`) && l.includes("restarting it in"));
    assert.equal(exits.length, 1, lines.join("\n"));
    assert.match(exits[0], /^warn \[lossless\] the sidecar \(pid \d+\) was killed by SIGKILL; restarting it in 50 ms/);
    assert.equal((await bootstrap(config, { log, supervision: FAST })).bootstrapped, true);
  } finally {
    stopSupervising(); // or the plugin would restart the sidecar this test stops
    stop(await identityPid(port));
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a sidecar an earlier gateway process started is restarted by this one after SIGKILL", async () => {
  const port = await freePort();
  const dir = stateDir();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir: dir, autoStart: true, command: STUB, timeouts: { startMs: 20000 } };
  try {
    // An earlier gateway: starts the sidecar through the plugin, then exits (the sidecar outlives it).
    const earlier = JSON.parse(execFileSync(process.execPath, [GATEWAY_ONCE, JSON.stringify(config)], { encoding: "utf8" }));
    assert.equal(earlier.bootstrapped, true);
    const first = await identityPid(port);
    assert.equal(JSON.parse(readFileSync(join(dir, "sidecar.owner"), "utf8")).pid, first);

    const { lines, log } = recorder();
    assert.equal((await bootstrap(config, { log, supervision: FAST })).bootstrapped, true);
    assert.ok(!lines.some((l) => l.includes("starting sidecar")), "the running sidecar is used, not replaced");
    process.kill(first, "SIGKILL");
    let second;
    await until(async () => (second = await identityPid(port)) && second !== first, "a new sidecar answers");
    assert.ok(lines.some((l) => l.includes(`the sidecar (pid ${first}) is no longer running; restarting it in`)), lines.join("\n"));
    assert.equal((await bootstrap(config, { log, supervision: FAST })).bootstrapped, true);
  } finally {
    stopSupervising(); // or the plugin would restart the sidecar this test stops
    stop(await identityPid(port));
    rmSync(dir, { recursive: true, force: true });
  }
});

/** The pids of running stub sidecars serving `dir` (from /proc). */
function stubsServing(dir) {
  const found = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0];
      if (cmdline.some((arg) => arg.endsWith("stub_sidecar.py")) && cmdline.includes(dir) && state !== "Z") found.push(Number(pid));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

test("two gateway processes watching one sidecar bring back exactly one after SIGKILL", async () => {
  const port = await freePort();
  const dir = stateDir();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir: dir, autoStart: true, command: STUB, timeouts: { startMs: 20000 } };
  let other;
  try {
    assert.equal((await bootstrap(config, { log: recorder().log, supervision: FAST })).bootstrapped, true);
    const first = await identityPid(port);
    other = spawn(process.execPath, [GATEWAY_WATCH, JSON.stringify(config), JSON.stringify(FAST)], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((resolve) => other.stdout.once("data", resolve)); // "ready": it watches the same sidecar
    process.kill(first, "SIGKILL");
    const ownerPid = () => JSON.parse(readFileSync(join(dir, "sidecar.owner"), "utf8")).pid;
    let second;
    await until(async () => (second = await identityPid(port)) && second !== first && ownerPid() === second, "one of them restarted it");
    await new Promise((r) => setTimeout(r, 20 * FAST.firstDelayMs)); // ample time for a second, racing start to settle
    assert.deepEqual(stubsServing(dir), [await identityPid(port)]);
    assert.equal(ownerPid(), await identityPid(port));
  } finally {
    other?.kill("SIGKILL");
    stopSupervising();
    for (const pid of stubsServing(dir)) stop(pid);
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a sidecar someone else runs is left alone: not restarted, said once", async () => {
  const port = await freePort();
  const dir = stateDir();
  const own = spawn(STUB, ["serve", "--host", "127.0.0.1", "--port", String(port), "--state-dir", dir], { stdio: "ignore" });
  const { lines, log } = recorder();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir: dir, autoStart: true, command: FAKE, timeouts: { startMs: 20000 } };
  try {
    await until(async () => (await identityPid(port)) === own.pid, "the hand-run sidecar answers");
    assert.equal((await bootstrap(config, { log, supervision: FAST })).bootstrapped, true);
    own.kill("SIGKILL");
    await new Promise((r) => own.once("exit", r));
    for (let i = 0; i < 3; i++) {
      assert.match((await bootstrap(config, { log, supervision: FAST })).reason, /: sidecar_unreachable: /);
    }
    await new Promise((r) => setTimeout(r, 10 * FAST.firstDelayMs)); // ample time for a restart that must not come
    assert.equal(await identityPid(port), undefined);
    assert.ok(!existsSync(join(dir, "starts.log")), "the plugin started nothing");
    assert.ok(!existsSync(join(dir, "sidecar.owner")));
    const said = lines.filter((l) => l.includes("was not started by the plugin and no longer answers"));
    assert.equal(said.length, 1, lines.join("\n"));
  } finally {
    stop(own.pid);
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a crash loop: no hook waits, restarts back off, then rest for the cool-down; the env carries the session lists", async () => {
  const port = await freePort();
  const dir = stateDir();
  writeFileSync(join(dir, "refuse-start"), "");
  const { lines, log } = recorder();
  const policy = { ...FAST, maxCrashes: 3, coolDownMs: 1500 };
  const config = {
    sidecarUrl: `http://127.0.0.1:${port}`, stateDir: dir, autoStart: true, command: FAKE, timeouts: { startMs: 20000 },
    excludeSessions: ["agent:*:cron:*", "agent:ops:group-?"], includeSessions: ["agent:*"],
  };
  const starts = () => (existsSync(join(dir, "starts.log")) ? readFileSync(join(dir, "starts.log"), "utf8").trim().split("\n").length : 0);
  const timed = async () => {
    const began = Date.now();
    // bootstrap does not throw: a failure is its answer's reason ("lossless sidecar bootstrap: <code>: ...").
    const answer = await bootstrap(config, { log, supervision: policy });
    const error = answer.bootstrapped === false ? { code: /: (\w+): /.exec(answer.reason)?.[1] } : null;
    return { error, ms: Date.now() - began };
  };
  let pid;
  try {
    // The first start is waited for; it fails (the command exits 3).
    assert.equal((await timed()).error?.code, "sidecar_unreachable");
    // Then restarts run in the background, 50 ms, 100 ms, ...; hooks fail at once meanwhile.
    const meanwhile = await timed();
    assert.equal(meanwhile.error?.code, "sidecar_unreachable");
    assert.ok(meanwhile.ms < 10000, `${meanwhile.ms} ms`); // not the 20 s wait for a start
    await until(() => lines.some((l) => l.includes("not restarting it for")), "the crash-loop guard");
    assert.equal(starts(), 3);
    assert.equal(lines.filter((l) => l.includes("not restarting it for")).length, 1);
    assert.match(lines.find((l) => l.includes("not restarting it for")), /stopped 3 times within 1 min \(last: it could not be started: exited with code 3/);
    // Resting: hooks start nothing.
    assert.equal((await timed()).error?.code, "sidecar_unreachable");
    assert.equal(starts(), 3);
    // After the cool-down it tries again, and works once the install is fixed.
    rmSync(join(dir, "refuse-start"));
    await until(async () => (pid = await identityPid(port)) !== undefined, "the start after the cool-down");
    assert.equal((await timed()).error, null);
    const env = JSON.parse(readFileSync(join(dir, "env-seen.json"), "utf8"));
    assert.deepEqual(env, { exclude: "agent:*:cron:*,agent:ops:group-?", include: "agent:*", gatewayToken: null });
  } finally {
    stopSupervising();
    stop(pid ?? (await identityPid(port)));
    rmSync(dir, { recursive: true, force: true });
  }
});

test("sidecarEnv drops the gateway's secrets and passes the session lists only when set", () => {
  const env = { PATH: "/bin", OPENCLAW_GATEWAY_TOKEN: "gw", OPENCLAW_GATEWAY_PASSWORD: "pw", LOSSLESS_PORT: "1" };
  assert.deepEqual(sidecarEnv(resolveSettings({}), env), { PATH: "/bin", LOSSLESS_PORT: "1" });
  assert.deepEqual(sidecarEnv(resolveSettings({ excludeSessions: [" a:* ", ""] }), {}), { LOSSLESS_EXCLUDE_SESSIONS: "a:*" });
});

// ---------------------------------------------------------------------------------------------------
// Only our sidecar gets the conversation

/** A plain HTTP server that is not the sidecar: records every request, answers `answer(req)`. */
async function foreignServer(answer) {
  const requests = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => { raw += c; });
    req.on("end", () => {
      requests.push({ method: req.method, url: req.url, authorization: req.headers.authorization, body: raw });
      const [status, type, body] = answer(req);
      res.writeHead(status, { "content-type": type });
      res.end(body);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { port: server.address().port, requests, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

const HTML_404 = () => [404, "text/html", "<html><body><h1>Not Found</h1></body></html>"];
const OTHER_SIDECAR = (req) => {
  const identity = identityAnswer(req.url, "the-token-of-another-state-dir");
  return identity ? [identity[0], "application/json", JSON.stringify(identity[1])] : [401, "application/json", "{}"];
};

for (const [kind, answer] of [["an HTML server", HTML_404], ["another state dir's sidecar", OTHER_SIDECAR], ["a JSON server", () => [200, "application/json", "{\"ok\":true}"]]]) {
  test(`${kind} on the port gets no hook and no token; the log names the port once`, async () => {
    const foreign = await foreignServer(answer);
    const dir = stateDir();
    writeFileSync(join(dir, "token"), "tok-secret-of-this-state-dir-123456789");
    const { lines, log } = recorder();
    const engine = createEngine({ sidecarUrl: `http://127.0.0.1:${foreign.port}`, stateDir: dir, autoStart: true, command: FAKE }, { log, supervision: FAST });
    const messages = [{ role: "user", content: "the secret plan", timestamp: 1 }];
    try {
      assert.match((await engine.bootstrap({ sessionId: "s" })).reason, /: sidecar_not_verified: /);
      await assert.rejects(engine.assemble({ sessionId: "s", messages, prompt: "the secret plan" }), (e) => e.code === "sidecar_not_verified");
      // Kept in the plugin's spool until its own sidecar answers: nothing of it goes to the foreign program.
      assert.deepEqual(await engine.commitTurn({ advancementKey: "k", sessionId: "s", messages }), { status: "committed" });
      assert.equal(spooledNames({ stateDir: dir }).length, 1);
      assert.ok(foreign.requests.length >= 3);
      for (const request of foreign.requests) {
        assert.equal(request.method, "GET");
        assert.match(request.url, /^\/v1\/identity\?challenge=[0-9a-f]{64}$/);
        assert.equal(request.authorization, undefined);
        assert.equal(request.body, "");
      }
      const said = lines.filter((l) => l.includes("is held by another program"));
      assert.equal(said.length, 1, lines.join("\n"));
      assert.ok(said[0].startsWith(`warn [lossless] port ${foreign.port} is held by another program (pid ${process.pid}, name node`), said[0]);
      assert.ok(said[0].includes("; set sidecarUrl/port"));
      assert.ok(!existsSync(join(dir, "starts.log")), "no sidecar is started onto a taken port");
      assert.ok(!lines.join("\n").includes("tok-secret"));
    } finally {
      await foreign.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("a program that takes the port after the verified sidecar died gets nothing: the cached check is not trusted", async () => {
  const port = await freePort();
  const dir = stateDir();
  const child = spawn(STUB, ["serve", "--host", "127.0.0.1", "--port", String(port), "--state-dir", dir], { stdio: "ignore" });
  const requests = [];
  const foreign = createServer((req, res) => {
    req.resume();
    requests.push({ method: req.method, url: req.url, authorization: req.headers.authorization });
    res.writeHead(404, { "content-type": "text/html" });
    res.end("<html>not here</html>");
  });
  const engine = createEngine({ sidecarUrl: `http://127.0.0.1:${port}`, stateDir: dir, autoStart: false }, { log: recorder().log });
  try {
    await until(async () => (await identityPid(port)) === child.pid, "the stub answers");
    assert.equal((await engine.commitTurn({ advancementKey: "k1", sessionId: "s", messages: [] })).status, "committed");
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    await new Promise((r) => foreign.listen(port, "127.0.0.1", r));
    const secret = [{ role: "user", content: "the launch code is 0000" }];
    assert.deepEqual(await engine.commitTurn({ advancementKey: "k2", sessionId: "s", messages: secret }), { status: "committed" }); // spooled
    assert.equal(spooledNames({ stateDir: dir }).length, 1);
    assert.ok(requests.length >= 1);
    assert.ok(requests.every((r) => r.method === "GET" && r.url.startsWith("/v1/identity?") && r.authorization === undefined), JSON.stringify(requests));
  } finally {
    stop(child.pid);
    foreign.closeAllConnections();
    await new Promise((r) => foreign.close(r));
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A sidecar stand-in on a Unix socket or a TCP port: identity plus every hook; records the requests. */
async function fakeSidecar(token, listenOn) {
  const requests = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const identity = identityAnswer(req.url, token);
      requests.push({ url: req.url, authorization: req.headers.authorization });
      const [status, body] = identity ?? (req.headers.authorization === `Bearer ${token}`
        ? [200, { bootstrapped: true, importedMessages: 0, reason: "fake" }]
        : [401, { error: { code: "unauthorized", message: "no" } }]);
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise((r) => server.listen(listenOn, r));
  return { server, requests, close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

test("with the default sidecarUrl the state dir's socket is used; with another URL, TCP", async () => {
  const dir = stateDir();
  const token = "tok-socket-123456789012345678901234";
  writeFileSync(join(dir, "token"), token);
  const socket = await fakeSidecar(token, join(dir, "sidecar.sock"));
  const tcp = await fakeSidecar(token, { port: 0, host: "127.0.0.1" });
  try {
    // Default URL (port 8377 is not touched: the socket answers first).
    assert.equal((await bootstrap({ stateDir: dir, autoStart: false }, { log: recorder().log })).bootstrapped, true);
    assert.deepEqual(socket.requests.map((r) => [r.url.split("?")[0], r.authorization]), [
      ["/v1/identity", undefined], ["/v1/hooks/bootstrap", `Bearer ${token}`],
    ]);
    // Another URL: TCP, verified, even though the socket exists.
    const url = `http://127.0.0.1:${tcp.server.address().port}`;
    assert.equal((await bootstrap({ sidecarUrl: url, stateDir: dir, autoStart: false }, { log: recorder().log })).bootstrapped, true);
    assert.deepEqual(tcp.requests.map((r) => r.url.split("?")[0]), ["/v1/identity", "/v1/hooks/bootstrap"]);
    assert.equal(socket.requests.length, 2);
  } finally {
    await socket.close();
    await tcp.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the real sidecar CLI contract: the stub over TCP, verified, then a restart is verified again", async () => {
  const port = await freePort();
  const dir = stateDir();
  const run = () => spawn(STUB, ["serve", "--host", "127.0.0.1", "--port", String(port), "--state-dir", dir], { stdio: "ignore" });
  let child = run();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir: dir, autoStart: false };
  try {
    await until(async () => (await identityPid(port)) === child.pid, "the stub answers");
    const engine = createEngine(config, { log: recorder().log });
    assert.equal((await engine.commitTurn({ advancementKey: "k1", sessionId: "s", messages: [{ role: "user", content: "a" }] })).status, "committed");
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    // Unreachable: spooled, answered committed; the next commit sends it first.
    assert.equal((await engine.commitTurn({ advancementKey: "k2", sessionId: "s", messages: [{ role: "user", content: "b" }] })).status, "committed");
    child = run();
    await until(async () => (await identityPid(port)) === child.pid, "the stub answers again");
    assert.equal((await engine.commitTurn({ advancementKey: "k3", sessionId: "s", messages: [{ role: "user", content: "c" }] })).status, "committed");
    const sent = readFileSync(join(dir, "stub-requests.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(sent.map((r) => r.path), ["/v1/hooks/commit-turn", "/v1/hooks/commit-turn", "/v1/hooks/commit-turn"]); // both stubs append to one log
    assert.equal(spooledNames({ stateDir: dir }).length, 0);
  } finally {
    stop(child.pid);
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------------
// Config validation

test("bad config values are refused at run time: one log line, hooks fail at once, nothing is sent", async () => {
  const foreign = await foreignServer(HTML_404);
  const bad = [
    [{ sidecarUrl: "localhost:8377" }, /sidecarUrl must be an http\(s\) URL with scheme, host and port/],
    [{ sidecarUrl: `http://192.0.2.1:${foreign.port}` }, /sidecarUrl "http:\/\/192\.0\.2\.1:\d+" is not on this machine.*allowRemoteSidecar/],
    [{ sidecarUrl: "ftp://127.0.0.1:8377" }, /sidecarUrl must be an http\(s\) URL/],
    [{ timeouts: { assembleMs: 10 } }, /timeouts\.assembleMs must be at least 50, got 10/],
    [{ timeouts: { commitMs: "3000" } }, /timeouts\.commitMs must be an integer/],
    [{ command: "" }, /command must not be empty/],
    [{ command: " openclaw-lossless" }, /command must be a command name or path without leading or trailing spaces/],
    [{ stateDir: "relative/dir" }, /stateDir must be an absolute path/],
    [{ excludeSessions: ["a,b"] }, /excludeSessions\[0\] must be a glob pattern without commas/],
    [{ includeSessions: "agent:*" }, /includeSessions must be an array/],
    [{ autoStart: "yes" }, /autoStart must be a boolean/],
    [{ sidecarUrl: "http://127.0.0.1:8377", nonsense: 1 }, /nonsense is not a setting of this plugin/],
  ];
  try {
    for (const [config, pattern] of bad) {
      const { lines, log } = recorder();
      const engine = createEngine({ stateDir: "/nonexistent/lossless-test", ...config }, { log });
      const answer = await engine.bootstrap({ sessionId: "s" });
      assert.ok(answer.bootstrapped === false && answer.reason.includes(": invalid_config: ") && pattern.test(answer.reason), answer.reason);
      await assert.rejects(engine.assemble({ sessionId: "s", messages: [] }), (e) => e.code === "invalid_config");
      const said = lines.filter((l) => l.includes("the plugin config is invalid"));
      assert.equal(said.length, 1, JSON.stringify(config));
      assert.match(said[0], pattern);
    }
    assert.deepEqual(foreign.requests, []);
    const remote = resolveSettings({ sidecarUrl: "https://memory.example.com:8443", allowRemoteSidecar: true });
    assert.deepEqual(remote.configErrors, []);
    for (const ok of ["http://127.0.0.1:8377", "http://localhost:9000/", "http://[::1]:8377", "http://127.1.2.3:1"]) {
      assert.deepEqual(resolveSettings({ sidecarUrl: ok }).configErrors, [], ok);
    }
  } finally {
    await foreign.close();
  }
});

// ---------------------------------------------------------------------------------------------------
// Session selection

test("glob matching is Python's fnmatchcase (reference cases computed by Python)", () => {
  const { cases } = JSON.parse(readFileSync(new URL("./fixtures/glob-cases.json", import.meta.url), "utf8"));
  assert.ok(cases.length > 1000);
  const wrong = cases.filter(([name, pattern, expected]) => globMatch(name, pattern) !== expected);
  assert.deepEqual(wrong, []);
  const captures = sessionSelector(["agent:main:*", "s-*"], ["agent:main:cron:*"]);
  assert.deepEqual(["agent:main:main", "agent:main:cron:nightly", "agent:ops:main", "s-1", "S-1"].map(captures), [true, false, false, true, false]);
  assert.equal(sessionSelector([], [])("anything"), true);
});

test("an excluded session sends nothing: host messages unchanged, turns 'committed', nothing stored", async () => {
  const dir = stateDir();
  const token = "tok-select-1234567890123456789012345";
  writeFileSync(join(dir, "token"), token);
  const sidecar = await fakeSidecar(token, { port: 0, host: "127.0.0.1" });
  const config = { sidecarUrl: `http://127.0.0.1:${sidecar.server.address().port}`, stateDir: dir, autoStart: false, excludeSessions: ["agent:*:cron:*"] };
  let compacted = 0;
  const engine = createEngine(config, { log: recorder().log, delegateCompactionToRuntime: async () => { compacted++; return { ok: true, compacted: true }; } });
  const cron = { sessionId: "c1", sessionKey: "agent:main:cron:nightly" };
  const messages = [{ role: "user", content: "rotate the keys", timestamp: 1 }, { role: "assistant", content: "done", timestamp: 2 }];
  try {
    assert.deepEqual(await engine.bootstrap(cron), { bootstrapped: false, reason: "session not captured (includeSessions/excludeSessions)" });
    const assembled = await engine.assemble({ ...cron, messages, prompt: "rotate" });
    assert.equal(assembled.messages, messages);
    assert.equal(assembled.systemPromptAddition, undefined);
    assert.ok(assembled.estimatedTokens > 0);
    assert.deepEqual(await engine.commitTurn({ ...cron, advancementKey: "k", messages }), { status: "committed" });
    assert.deepEqual(await engine.ingest({ ...cron, message: messages[0] }), { ingested: false });
    assert.deepEqual(await engine.ingestBatch({ ...cron, messages }), { ingestedCount: 0 });
    assert.equal(await engine.afterTurn({ ...cron, messages, prePromptMessageCount: 0 }), undefined);
    assert.deepEqual(await engine.compact({ ...cron }), { ok: true, compacted: true });
    assert.equal(await engine.prepareSubagentSpawn({ parentSessionKey: "agent:main:main", childSessionKey: "agent:main:cron:sub" }), undefined);
    await engine.onSubagentEnded({ childSessionKey: "agent:main:cron:sub", reason: "completed" });
    assert.equal(compacted, 1);
    assert.deepEqual(sidecar.requests, []);
    // A session with no key is matched by its id; a captured one still reaches the sidecar.
    assert.equal((await engine.bootstrap({ sessionId: "s-plain" })).bootstrapped, true);
    assert.deepEqual(sidecar.requests.map((r) => r.url.split("?")[0]), ["/v1/identity", "/v1/hooks/bootstrap"]);
    const byId = createEngine({ ...config, excludeSessions: ["s-*"] }, { log: recorder().log });
    assert.equal((await byId.bootstrap({ sessionId: "s-plain" })).bootstrapped, false);
    assert.equal(sidecar.requests.length, 2);
  } finally {
    await sidecar.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
