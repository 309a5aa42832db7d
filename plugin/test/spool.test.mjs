// The plugin's spool (spool.js): `node --test plugin/test/spool.test.mjs`.
//
// When the sidecar does not answer, commitTurn keeps the turn on disk (0600 in a 0700 dir, never logged) and
// answers committed; the next commit that reaches the sidecar sends the spooled turns first, in order, each
// removed only once acknowledged; a restarted process finds them; a full or unwritable spool leaves the turn
// to the host (commitTurn throws as before). The sidecar here is an in-process HTTP server that keeps each
// advancementKey once, as the real one does (tests/test_spool.py replays through the real app).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { createEngine, stopSupervising } from "../index.js";
import { SPOOL_DIR, spooledNames } from "../spool.js";
import { identityAnswer } from "./fixtures/identity.mjs";
import { freePort, recorder } from "./fixtures/helpers.mjs";

const SECRET_TEXT = "the vault code is 4-8-15-16";
const ENGINE = fileURLToPath(new URL("../index.js", import.meta.url));

/** A sidecar that stores each advancementKey once, in arrival order; `refuse` names keys it answers 422 for. */
async function sidecar(port, stateDir, { refuse = new Set(), busy = { now: false } } = {}) {
  writeFileSync(join(stateDir, "token"), "spool-token", { mode: 0o600 });
  const stored = [];
  const seen = new Set();
  const server = createServer((req, res) => {
    const send = (status, body) => { res.writeHead(status, { "content-type": "application/json" }); res.end(JSON.stringify(body)); };
    const identity = identityAnswer(req.url, "spool-token");
    if (identity) return send(...identity);
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      if (req.url !== "/v1/hooks/commit-turn") return send(200, { windowStart: 0, estimatedTokens: 0, systemPromptAddition: "" });
      if (busy.now) return send(503, { error: { code: "store_unavailable", message: "busy" } });
      if (refuse.has(body.advancementKey)) return send(422, { error: { code: "invalid_request", message: "refused" } });
      const status = seen.has(body.advancementKey) ? "duplicate" : "committed";
      if (status === "committed") {
        seen.add(body.advancementKey);
        stored.push(body.advancementKey);
      }
      send(200, { status, stored: body.messages.length, skippedHeartbeat: false });
    });
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  return { stored, close: () => new Promise((r) => server.close(r)) };
}

const turn = (key, text = `turn ${key}`) => ({
  advancementKey: key, sessionId: "s-1", sessionKey: "agent:main:main",
  messages: [{ role: "user", content: text, timestamp: 1_767_225_600_000 }, { role: "assistant", content: [{ type: "text", text: "ok" }], timestamp: 1_767_225_601_000 }],
});

function setup() {
  const stateDir = mkdtempSync(join(tmpdir(), "ll-spool-"));
  chmodSync(stateDir, 0o700);
  return stateDir;
}

test("without a sidecar a turn is spooled durably, user-only, never logged, and answered committed", async () => {
  const stateDir = setup();
  const port = await freePort();
  const { lines, log } = recorder();
  const engine = createEngine({ sidecarUrl: `http://127.0.0.1:${port}`, stateDir, autoStart: false }, { log });
  assert.deepEqual(await engine.commitTurn(turn("k-1", SECRET_TEXT)), { status: "committed" });
  const dir = join(stateDir, SPOOL_DIR);
  const names = readdirSync(dir);
  assert.equal(names.length, 1, names); // no temporary file left beside it
  assert.equal(statSync(dir).mode & 0o777, 0o700);
  assert.equal(statSync(join(dir, names[0])).mode & 0o777, 0o600);
  const record = JSON.parse(readFileSync(join(dir, names[0]), "utf8"));
  assert.equal(record.body.advancementKey, "k-1");
  assert.equal(record.body.messages[0].content, SECRET_TEXT);
  assert.ok(lines.some((line) => line.includes("spool") && line.includes("sidecar_unreachable")), lines);
  assert.ok(!lines.join("\n").includes("vault code"), lines);
  stopSupervising();
});

test("the spooled turns go first, in order, once the sidecar answers; each is stored once and then removed", async () => {
  const stateDir = setup();
  const port = await freePort();
  const { log } = recorder();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir, autoStart: false };
  for (const key of ["k-1", "k-2", "k-3"]) assert.equal((await createEngine(config, { log }).commitTurn(turn(key))).status, "committed");
  // The same turn twice (a host that re-delivers a turn whose answer it lost): still stored once.
  await createEngine(config, { log }).commitTurn(turn("k-2"));
  assert.equal(spooledNames({ stateDir }).length, 4);
  const up = await sidecar(port, stateDir);
  try {
    assert.deepEqual(await createEngine(config, { log }).commitTurn(turn("k-4")), { status: "committed" });
    assert.deepEqual(up.stored, ["k-1", "k-2", "k-3", "k-4"]);
    assert.deepEqual(readdirSync(join(stateDir, SPOOL_DIR)), []);
  } finally {
    await up.close();
    stopSupervising();
  }
});

test("a turn spooled by a process that ended is sent by the next one", async () => {
  const stateDir = setup();
  const port = await freePort();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir, autoStart: false };
  // Another process (a gateway that stopped) spools two turns.
  const script = `import { createEngine } from ${JSON.stringify(ENGINE)};
    const quiet = { info() {}, warn() {}, error() {} };
    const config = ${JSON.stringify(config)};
    const base = ${JSON.stringify(turn("x"))};
    for (const key of ["old-1", "old-2"]) await createEngine(config, { log: quiet }).commitTurn({ ...base, advancementKey: key });
    process.exit(0);`;
  execFileSync(process.execPath, ["--input-type=module", "-e", script]);
  assert.equal(spooledNames({ stateDir }).length, 2);
  const up = await sidecar(port, stateDir);
  try {
    await createEngine(config, { log: recorder().log }).commitTurn(turn("new-1"));
    assert.deepEqual(up.stored, ["old-1", "old-2", "new-1"]);
    assert.equal(spooledNames({ stateDir }).length, 0);
  } finally {
    await up.close();
    stopSupervising();
  }
});

test("a spooled turn the sidecar refuses stays in the spool and does not hold the others back", async () => {
  const stateDir = setup();
  const port = await freePort();
  const { lines, log } = recorder();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir, autoStart: false };
  for (const key of ["r-1", "bad", "r-2"]) await createEngine(config, { log }).commitTurn(turn(key));
  const up = await sidecar(port, stateDir, { refuse: new Set(["bad"]) });
  try {
    await createEngine(config, { log }).commitTurn(turn("r-3"));
    assert.deepEqual(up.stored, ["r-1", "r-2", "r-3"]);
    const left = spooledNames({ stateDir });
    assert.equal(left.length, 1);
    assert.equal(JSON.parse(readFileSync(join(stateDir, SPOOL_DIR, left[0]), "utf8")).body.advancementKey, "bad");
    assert.ok(lines.some((line) => line.includes("refused spooled turn") && line.includes("invalid_request")), lines);
  } finally {
    await up.close();
    stopSupervising();
  }
});

test("a sidecar that cannot store now (503) stops the replay, and the turn joins the spool behind the others", async () => {
  const stateDir = setup();
  const port = await freePort();
  const { log } = recorder();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir, autoStart: false };
  await createEngine(config, { log }).commitTurn(turn("b-1"));
  const busy = { now: true };
  const up = await sidecar(port, stateDir, { busy });
  try {
    assert.deepEqual(await createEngine(config, { log }).commitTurn(turn("b-2")), { status: "committed" });
    assert.deepEqual(up.stored, []);
    assert.equal(spooledNames({ stateDir }).length, 2);
    busy.now = false;
    await createEngine(config, { log }).commitTurn(turn("b-3"));
    assert.deepEqual(up.stored, ["b-1", "b-2", "b-3"]);
    assert.equal(spooledNames({ stateDir }).length, 0);
  } finally {
    await up.close();
    stopSupervising();
  }
});

test("a full or unwritable spool leaves the turn to the host: commitTurn throws the sidecar's error", async () => {
  const stateDir = setup();
  const port = await freePort();
  const { lines, log } = recorder();
  const config = { sidecarUrl: `http://127.0.0.1:${port}`, stateDir, autoStart: false };
  const limited = (turns) => createEngine(config, { log, spoolLimits: { turns } });
  assert.equal((await limited(2).commitTurn(turn("f-1"))).status, "committed");
  assert.equal((await limited(2).commitTurn(turn("f-2"))).status, "committed");
  await assert.rejects(limited(2).commitTurn(turn("f-3")), (error) => error.code === "sidecar_unreachable");
  assert.equal(spooledNames({ stateDir }).length, 2);
  assert.ok(lines.some((line) => line.includes("could not be spooled") && line.includes("the host keeps it")), lines);
  if (process.getuid?.() !== 0) { // root writes anywhere
    const other = setup();
    mkdirSync(join(other, SPOOL_DIR), { mode: 0o500 });
    await assert.rejects(createEngine({ ...config, stateDir: other }, { log }).commitTurn(turn("f-4")), (error) => error.code === "sidecar_unreachable");
  }
  stopSupervising();
});
