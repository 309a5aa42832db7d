// Unit tests of the shim against an in-process stub sidecar (no OpenClaw needed):
// `node --test plugin/test/shim.test.mjs` (Node >= 20).

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import plugin, {
  createEngine, describeMessages, descriptorKey, descriptorTokens, tokenUnits, jsonSafe, resolveSettings, openclawStateDir, SidecarError, callHook,
} from "../index.js";

import { identityAnswer } from "./fixtures/identity.mjs";

const MANIFEST = JSON.parse(readFileSync(new URL("../plugin-manifest.json", import.meta.url), "utf8"));
const quiet = { info() {}, warn() {}, error() {} };

/** A stub sidecar: `routes[path](body) -> [status, json]`; records every request. */
async function stubSidecar(routes, { token = "tok-1", identityToken = () => token } = {}) {
  const stateDir = mkdtempSync(join(tmpdir(), "lossless-shim-"));
  writeFileSync(join(stateDir, "token"), token);
  const requests = [];
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => { raw += c; });
    req.on("end", async () => {
      const identity = identityAnswer(req.url, identityToken());
      if (identity) {
        res.writeHead(identity[0], { "content-type": "application/json" });
        return res.end(JSON.stringify(identity[1]));
      }
      const body = raw ? JSON.parse(raw) : undefined;
      requests.push({ method: req.method, path: req.url, auth: req.headers.authorization, body });
      const route = routes[req.url] ?? (() => [404, { error: { code: "not_found", message: req.url } }]);
      const [status, answer, delayMs] = await route(body, req);
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, stateDir, requests, close: () => new Promise((r) => server.close(r)) };
}

function engineFor(sidecar, extra = {}, deps = {}) {
  return createEngine({ sidecarUrl: sidecar.url, stateDir: sidecar.stateDir, autoStart: false, ...extra }, { log: quiet, ...deps });
}

const HOST_NOISE = {
  availableTools: new Set(["read", "exec"]),
  runtimeSettings: { model: { provider: "fake" } },
  runtimeContext: { config: { models: { providers: { fake: { apiKey: "sk-SECRET" } } } }, llm: { complete: () => 1 } },
  abortSignal: new AbortController().signal,
};

test("settings: manifest defaults, user overrides, state dir from the OpenClaw env", () => {
  const s = resolveSettings({ retrievalCount: 7, timeouts: { assembleMs: 900 } }, { OPENCLAW_HOME: "/h" });
  assert.equal(s.retrievalCount, 7);
  assert.equal(s.windowShare, MANIFEST.config.properties.windowShare.default);
  assert.equal(s.timeouts.assembleMs, 900);
  assert.equal(s.timeouts.commitMs, MANIFEST.config.properties.timeouts.properties.commitMs.default);
  assert.equal(s.stateDir, "/h/.openclaw/plugins/lossless");
  assert.deepEqual(s.overrides, { retrievalCount: 7 });
  assert.equal(openclawStateDir({ OPENCLAW_STATE_DIR: "/s", OPENCLAW_HOME: "/h" }), "/s");
});

test("jsonSafe drops what JSON cannot carry", () => {
  const cyclic = { a: 1 };
  cyclic.self = cyclic;
  const shared = { x: 1 };
  const out = jsonSafe({ f() {}, s: new Set([1]), m: new Map(), sig: new AbortController().signal, n: NaN,
    big: 10n, bytes: new Uint8Array([104, 105]), cyclic, pair: [shared, shared], keep: "yes" });
  assert.deepEqual(out, { n: null, big: "10", bytes: "aGk=", cyclic: { a: 1 }, pair: [{ x: 1 }, { x: 1 }], keep: "yes" });
});

test("descriptors: key/tokens for all, text only for the last three user messages", () => {
  const messages = [
    { role: "user", content: "one", timestamp: 1 },
    { role: "assistant", content: [{ type: "text", text: "a" }, { type: "toolCall", id: "c", name: "read", arguments: { path: "/x" } }], timestamp: 2 },
    { role: "user", content: [{ type: "text", text: "two" }, { type: "image", data: "AAAA", mimeType: "image/png" }], timestamp: 3 },
    { role: "user", content: "three", timestamp: 4.9 },
    { role: "compactionSummary", summary: "s".repeat(40), tokensBefore: 10, timestamp: "2026-01-01T00:00:00Z" },
    { role: "user", content: "four" },
  ];
  const d = describeMessages(messages);
  assert.deepEqual(d.map((x) => x.text), [undefined, undefined, "two", "three", undefined, "four"]);
  assert.equal(d[3].timestamp, 4);
  assert.equal(d[4].timestamp, undefined);
  // Hundredths of a token: ASCII letters 20, ASCII punctuation 70; "a" + '{"path":"/x"}' = 6 x 20 + 8 x 70 = 6.8 -> 7.
  assert.equal(d[1].tokens, 7 + 4);
  assert.equal(d[4].tokens, Math.ceil((40 * 20) / 100) + 4);
  assert.equal(d[0].key, descriptorKey(messages[0]));
  assert.match(d[0].key, /^[0-9a-f]{64}$/);
});

test("descriptors count Chinese, Japanese and Korean at about a token a character, not a quarter", () => {
  // Real counts (cl100k_base) from tests/fixtures/token_reference.json: 61, 47, 40 tokens.
  const texts = [
    ["會議改到星期四下午，因為設計團隊有一半的人星期三要出差。請更新共享日曆並通知大家議程沒有變。", 61],
    ["先週話し合ったデータベースの移行について、最終的にいつ実行することになったか覚えていますか？", 47],
    ["지난주에 논의한 데이터베이스 마이그레이션을 언제 실행하기로 했는지 기억나세요?", 40],
  ];
  for (const [text, reference] of texts) {
    const tokens = descriptorTokens({ role: "user", content: text }) - 4;
    assert.ok(Math.abs(tokens - reference) <= 0.25 * reference, `${tokens} vs ${reference}: ${text}`);
    assert.ok(Math.ceil([...text].length / 4) < 0.5 * reference); // what characters / 4 said
  }
  assert.equal(tokenUnits("😀"), 250); // one character beyond the BMP: its high surrogate carries the weight
  assert.equal(tokenUnits(""), 0);
});

test("assemble sends descriptors (no secrets) and slices the host's messages at windowStart", async () => {
  const sidecar = await stubSidecar({
    "/v1/hooks/assemble": (body) => [200, { windowStart: 1, estimatedTokens: 42, systemPromptAddition: "## Recalled Context\nx", recalled: [] }],
  });
  try {
    const messages = [{ role: "user", content: "old", timestamp: 1 }, { role: "assistant", content: "new", timestamp: 2 }];
    const out = await engineFor(sidecar, { retrievalCount: 3 }).assemble({
      sessionId: "s1", sessionKey: "agent:main:main", messages, prompt: "hi", tokenBudget: 1000, model: "m", ...HOST_NOISE,
    });
    assert.deepEqual(out, { messages: [messages[1]], estimatedTokens: 42, systemPromptAddition: "## Recalled Context\nx" });
    const sent = sidecar.requests[0];
    assert.equal(sent.auth, "Bearer tok-1");
    assert.deepEqual(Object.keys(sent.body).sort(), ["config", "descriptors", "model", "prompt", "sessionId", "sessionKey", "tokenBudget"]);
    assert.deepEqual(sent.body.config, { retrievalCount: 3 });
    assert.ok(!JSON.stringify(sent.body).includes("sk-SECRET"));
  } finally {
    await sidecar.close();
  }
});

test("assemble rejects a windowStart outside the history", async () => {
  const sidecar = await stubSidecar({ "/v1/hooks/assemble": () => [200, { windowStart: 5, estimatedTokens: 0, systemPromptAddition: "" }] });
  try {
    await assert.rejects(engineFor(sidecar).assemble({ sessionId: "s", messages: [] }), (e) => e.code === "invalid_response");
  } finally {
    await sidecar.close();
  }
});

test("commitTurn forwards the turn and returns the sidecar's status", async () => {
  const sidecar = await stubSidecar({ "/v1/hooks/commit-turn": () => [200, { status: "duplicate", stored: 0, skippedHeartbeat: false }] });
  try {
    const out = await engineFor(sidecar).commitTurn({
      advancementKey: "k1", admission: { entryId: "e" }, terminal: { entryId: "t" }, sessionId: "s", sessionKey: "agent:main:main",
      messages: [{ role: "user", content: "hi", extra: () => 1 }], isHeartbeat: false, ...HOST_NOISE,
    });
    assert.deepEqual(out, { status: "duplicate" });
    const body = sidecar.requests[0].body;
    assert.deepEqual(Object.keys(body).sort(), ["advancementKey", "config", "isHeartbeat", "messages", "sessionId", "sessionKey"]);
    assert.deepEqual(body.messages, [{ role: "user", content: "hi" }]);
  } finally {
    await sidecar.close();
  }
});

test("storage_full and 503 are retryable errors with the sidecar's code, never the token; the turn is spooled", async () => {
  const sidecar = await stubSidecar({
    "/v1/hooks/commit-turn": () => [507, { error: { code: "storage_full", message: "disk is full" } }],
    "/v1/hooks/bootstrap": () => [503, { error: { code: "store_unavailable", message: "busy" } }],
  }, { token: "super-secret-token" });
  try {
    const settings = resolveSettings({ sidecarUrl: sidecar.url, stateDir: sidecar.stateDir, autoStart: false });
    await assert.rejects(callHook(settings, "commitTurn", { advancementKey: "k", sessionId: "s", messages: [] }, quiet), (e) =>
      e instanceof SidecarError && e.code === "storage_full" && e.retryable && e.status === 507 && !e.message.includes("super-secret-token"));
    const warnings = [];
    const engine = engineFor(sidecar, {}, { log: { ...quiet, warn: (m) => warnings.push(m) } });
    // The engine keeps the turn in its spool (spool.js) and tells the host it is committed.
    assert.deepEqual(await engine.commitTurn({ advancementKey: "k", sessionId: "s", messages: [] }), { status: "committed" });
    assert.ok(warnings.some((w) => w.includes("(storage_full)") && w.includes("spool")), warnings.join("\n"));
    assert.ok(!warnings.join("\n").includes("super-secret-token"));
    assert.match((await engine.bootstrap({ sessionId: "s" })).reason, /: store_unavailable: /);
  } finally {
    await sidecar.close();
  }
});

test("a 401 makes the shim re-read the token file once", async () => {
  let current = "tok-old";
  const sidecar = await stubSidecar({
    "/v1/hooks/bootstrap": (_b, req) => req.headers.authorization === `Bearer ${current}`
      ? [200, { bootstrapped: true, importedMessages: 0, reason: "known" }]
      : [401, { error: { code: "unauthorized", message: "bad token" } }],
  }, { token: "tok-old", identityToken: () => current });
  try {
    const engine = engineFor(sidecar);
    assert.equal((await engine.bootstrap({ sessionId: "s" })).bootstrapped, true);
    current = "tok-new";
    writeFileSync(join(sidecar.stateDir, "token"), "tok-new\n");
    assert.deepEqual(await engine.bootstrap({ sessionId: "s" }), { bootstrapped: true, importedMessages: 0, reason: "known" });
  } finally {
    await sidecar.close();
  }
});

test("a slow sidecar times out; an unreachable one fails fast without autoStart", async () => {
  const sidecar = await stubSidecar({ "/v1/hooks/assemble": () => [200, { windowStart: 0, estimatedTokens: 0 }, 400] });
  try {
    const engine = engineFor(sidecar, { timeouts: { assembleMs: 100 } });
    await assert.rejects(engine.assemble({ sessionId: "s", messages: [] }), (e) => e.code === "sidecar_timeout");
  } finally {
    await sidecar.close();
  }
  // The server is closed now. Failing fast means not waiting out the (here long) bootstrap timeout; the bound
  // is half of it, so a loaded machine cannot fail the test while a wait for the timeout still would.
  const down = engineFor(sidecar, { timeouts: { bootstrapMs: 30000 } });
  const began = Date.now();
  const answer = await down.bootstrap({ sessionId: "s" });
  assert.equal(answer.bootstrapped, false);
  assert.match(answer.reason, /: sidecar_unreachable: /);
  assert.ok(Date.now() - began < 15000);
});

test("compact delegates to the host and a failed record does not fail it", async () => {
  const sidecar = await stubSidecar({ "/v1/hooks/compact": () => [500, { error: { code: "internal", message: "boom" } }] });
  try {
    const result = { ok: true, compacted: true, result: { summary: "S", tokensBefore: 10, tokensAfter: 4 } };
    let delegated;
    const engine = engineFor(sidecar, {}, { delegateCompactionToRuntime: async (p) => { delegated = p; return result; } });
    const params = { sessionId: "s", sessionKey: "agent:main:main", force: true, ...HOST_NOISE };
    assert.equal(await engine.compact(params), result);
    assert.equal(delegated, params);
    assert.deepEqual(sidecar.requests[0].body, { sessionId: "s", sessionKey: "agent:main:main", compacted: true, ok: true, tokensBefore: 10, tokensAfter: 4, summary: "S" });
  } finally {
    await sidecar.close();
  }
});

test("compact tells the sidecar when the host's compaction failed, found nothing to compact, or threw", async () => {
  const sidecar = await stubSidecar({ "/v1/hooks/compact": () => [200, { recorded: true, compactionId: 1, status: "failed", snapshot: null, lastMessageId: null }] });
  try {
    const outcomes = [
      { ok: false, compacted: false, reason: "provider error: 529 overloaded" },
      { ok: true, compacted: false, reason: "no real conversation messages" },
    ];
    for (const outcome of outcomes) {
      const engine = engineFor(sidecar, {}, { delegateCompactionToRuntime: async () => outcome });
      assert.equal(await engine.compact({ sessionId: "s", sessionKey: "agent:main:main" }), outcome);
    }
    const boom = new Error("summary model unreachable");
    const throwing = engineFor(sidecar, {}, { delegateCompactionToRuntime: async () => { throw boom; } });
    await assert.rejects(throwing.compact({ sessionId: "s", sessionKey: "agent:main:main" }), (e) => e === boom);
    assert.deepEqual(sidecar.requests.map((r) => r.body), [
      { sessionId: "s", sessionKey: "agent:main:main", compacted: false, ok: false, reason: "provider error: 529 overloaded" },
      { sessionId: "s", sessionKey: "agent:main:main", compacted: false, ok: true, reason: "no real conversation messages" },
      { sessionId: "s", sessionKey: "agent:main:main", compacted: false, ok: false, reason: "the host's compaction threw: summary model unreachable" },
    ]);
  } finally {
    await sidecar.close();
  }
});

test("subagent hooks: link, rollback by spawnId, end; sidecar failures never throw", async () => {
  const sidecar = await stubSidecar({
    "/v1/hooks/subagent-spawn": () => [200, { spawnId: 9 }],
    "/v1/hooks/subagent-spawn/rollback": () => [200, { rolledBack: true }],
    "/v1/hooks/subagent-ended": () => [503, { error: { code: "store_unavailable", message: "busy" } }],
  });
  try {
    const engine = engineFor(sidecar);
    const prep = await engine.prepareSubagentSpawn({
      parentSessionKey: "agent:main:main", childSessionKey: "agent:main:subagent:1", contextMode: "isolated", parentSessionFile: "x",
    });
    await prep.rollback();
    await engine.onSubagentEnded({ childSessionKey: "agent:main:subagent:1", reason: "completed" });
    assert.deepEqual(sidecar.requests.map((r) => [r.path, r.body]), [
      ["/v1/hooks/subagent-spawn", { parentSessionKey: "agent:main:main", childSessionKey: "agent:main:subagent:1", contextMode: "isolated" }],
      ["/v1/hooks/subagent-spawn/rollback", { spawnId: 9, childSessionKey: "agent:main:subagent:1" }],
      ["/v1/hooks/subagent-ended", { childSessionKey: "agent:main:subagent:1", reason: "completed" }],
    ]);
  } finally {
    await sidecar.close();
  }
  const down = engineFor(sidecar);
  assert.equal(await down.prepareSubagentSpawn({ parentSessionKey: "agent:main:main", childSessionKey: "agent:main:subagent:2" }), undefined);
});

// Starting, restarting and supervising the sidecar: sidecar.test.mjs.

test("register registers the engine, whose info declares the durable-turn contract", () => {
  const registered = [];
  plugin.register({ pluginConfig: {}, logger: quiet, registerContextEngine: (id, factory) => registered.push([id, factory]) });
  assert.equal(registered.length, 1);
  const [id, factory] = registered[0];
  assert.equal(id, "lossless");
  const engine = factory({ config: {} });
  assert.equal(engine.info.id, "lossless");
  assert.equal(engine.info.ownsCompaction, false);
  assert.deepEqual(engine.info.transcriptSemantics, {
    currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1",
  });
  for (const method of ["bootstrap", "assemble", "commitTurn", "ingest", "ingestBatch", "afterTurn", "compact", "prepareSubagentSpawn", "onSubagentEnded", "dispose"]) {
    assert.equal(typeof engine[method], "function", method);
  }
});
