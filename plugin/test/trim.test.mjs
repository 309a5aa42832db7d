// The outage window (trim.js) and the token estimate it trims by: `node --test plugin/test/trim.test.mjs`.
//
// When the sidecar does not answer, assemble returns the host's newest messages within the token budget,
// never half of a tool call, by the sidecar's own token estimate (checked here against the same real
// tokenizer counts as tests/test_token_estimate.py).

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { createEngine, descriptorTokens, tokenUnits } from "../index.js";
import { outageWindow, trimToRoom, windowRoom } from "../trim.js";

const REFERENCE = JSON.parse(readFileSync(new URL("../../tests/fixtures/token_reference.json", import.meta.url), "utf8"));
const TOLERANCE = 0.25; // as tests/test_token_estimate.py: within 25% of cl100k_base's count

const user = (text, timestamp) => ({ role: "user", content: text, timestamp });
const said = (text, timestamp) => ({ role: "assistant", content: [{ type: "text", text }], timestamp });
const calls = (id, timestamp) => ({
  role: "assistant", timestamp,
  content: [{ type: "text", text: "checking" }, { type: "toolCall", id, name: "session_status", arguments: { verbose: true } }],
});
const result = (id, text, timestamp) => ({ role: "toolResult", toolCallId: id, toolName: "session_status", content: [{ type: "text", text }], timestamp });

const tokensOf = (messages) => messages.reduce((sum, m) => sum + descriptorTokens(m), 0);

/** Every toolCall id of the kept assistant messages has its result kept, and every kept result its call. */
function pairsIntact(messages) {
  const called = new Set(messages.flatMap((m) => (m.role === "assistant" && Array.isArray(m.content) ? m.content : [])
    .filter((b) => b.type === "toolCall").map((b) => b.id)));
  const answered = new Set(messages.filter((m) => m.role === "toolResult").map((m) => m.toolCallId));
  return [...called].every((id) => answered.has(id)) && [...answered].every((id) => called.has(id));
}

test("the token estimate is within tolerance of the real count for every reference text, every script", () => {
  assert.ok(REFERENCE.texts.length >= 20);
  for (const { script, text, tokens } of REFERENCE.texts) {
    const estimate = Math.ceil(tokenUnits(text) / 100);
    const real = tokens.cl100k_base;
    assert.ok(Math.abs(estimate - real) <= TOLERANCE * real, `${script}: estimate ${estimate}, real ${real}: ${text}`);
    assert.ok(estimate >= 0.9 * tokens.o200k_base, `${script}: far under o200k_base: ${text}`);
  }
});

test("a long history is cut to the newest messages that fit, oldest dropped first", () => {
  const history = [];
  for (let i = 0; i < 60; i++) history.push(user(`question ${i}: ${"words ".repeat(80)}`, 1000 + 2 * i), said(`answer ${i}`, 1001 + 2 * i));
  const room = 1000;
  const out = trimToRoom(history, room);
  assert.ok(out.messages.length > 0 && out.messages.length < history.length);
  assert.deepEqual(out.messages, history.slice(history.length - out.messages.length)); // a suffix, in order
  assert.equal(out.estimatedTokens, tokensOf(out.messages));
  assert.ok(out.estimatedTokens <= room);
  // One more message would not have fit.
  assert.ok(out.estimatedTokens + descriptorTokens(history[out.dropped - 1]) > room);
  // A history that fits is returned whole.
  assert.deepEqual(trimToRoom(history.slice(-4), room).messages, history.slice(-4));
});

test("a tool call and its results stay together or go together, whatever the room", () => {
  const history = [
    user("old question", 1), said("old answer", 2),
    user("check the status twice", 3), calls("c1", 4), result("c1", "status one ".repeat(30), 5),
    calls("c2", 6), result("c2", "status two ".repeat(30), 7), said("both checked", 8),
    user("and now?", 9), said("all good", 10),
  ];
  for (let room = 0; room <= tokensOf(history) + 5; room++) {
    const out = trimToRoom(history, room);
    assert.ok(pairsIntact(out.messages), `room ${room}: ${JSON.stringify(out.messages.map((m) => m.role))}`);
    assert.ok(out.estimatedTokens <= room, `room ${room}: ${out.estimatedTokens}`);
    assert.notEqual(out.messages[0]?.role, "toolResult");
    assert.deepEqual(out.messages, history.slice(out.dropped));
  }
});

test("the window's room is windowShare of the budget, less the current prompt when that leaves less", () => {
  assert.equal(windowRoom(10000, { windowShare: 0.6 }), 6000);
  assert.equal(windowRoom(10000, { windowShare: 1 }), 10000);
  const prompt = "a long pasted log line; ".repeat(400);
  const promptTokens = Math.ceil(tokenUnits(prompt) / 100);
  assert.equal(windowRoom(10000, { windowShare: 1, prompt }), 10000 - promptTokens);
  assert.equal(windowRoom(100, { windowShare: 0.6, prompt }), 0);
  assert.equal(windowRoom(10000, { windowShare: "lots" }), 6000); // an invalid setting: the default share
  assert.equal(outageWindow([user("x", 1)], { tokenBudget: undefined }), undefined);
  assert.equal(outageWindow([user("x", 1)], { tokenBudget: 0 }), undefined);
});

test("assemble without a sidecar returns the host's history trimmed to the budget, and says so", async () => {
  const stateDir = mkdtempSync(join(tmpdir(), "lossless-trim-"));
  writeFileSync(join(stateDir, "token"), "tok");
  const warnings = [];
  const log = { info() {}, warn: (m) => warnings.push(m), error() {} };
  // Nothing listens on port 9 of loopback, and autoStart is off: the sidecar does not answer.
  const engine = createEngine({ sidecarUrl: "http://127.0.0.1:9", stateDir, autoStart: false, windowShare: 0.5 }, { log });
  const history = [];
  for (let i = 0; i < 70; i++) history.push(user(`note ${i} ${"filler text ".repeat(60)}`, 10 + 2 * i), said(`ok ${i}`, 11 + 2 * i));
  const tokenBudget = 4000;
  const out = await engine.assemble({ sessionId: "s", sessionKey: "agent:main:main", messages: history, prompt: "what now?", tokenBudget });
  assert.ok(out.messages.length > 0 && out.messages.length < history.length);
  assert.deepEqual(out.messages, history.slice(history.length - out.messages.length));
  assert.equal(out.estimatedTokens, tokensOf(out.messages));
  assert.ok(out.estimatedTokens <= tokenBudget / 2, out.estimatedTokens);
  assert.equal(out.systemPromptAddition, undefined);
  const noted = warnings.filter((w) => w.includes("assemble without the sidecar"));
  assert.equal(noted.length, 1, warnings);
  assert.match(noted[0], /assemble without the sidecar \(sidecar_unreachable\): the newest \d+ of 140 messages/);
  // With no budget from the host there is nothing to trim by: the failure goes to the host, as before.
  await assert.rejects(engine.assemble({ sessionId: "s", messages: history }), (e) => e.code === "sidecar_unreachable");
});

test("the hooks of hosts without durable turns never throw when the sidecar does not answer", async () => {
  const stateDir = mkdtempSync(join(tmpdir(), "lossless-nodurable-"));
  writeFileSync(join(stateDir, "token"), "tok");
  const warnings = [];
  const log = { info() {}, warn: (m) => warnings.push(m), error() {} };
  const engine = createEngine({ sidecarUrl: "http://127.0.0.1:9", stateDir, autoStart: false }, { log });
  const ids = { sessionId: "s", sessionKey: "agent:main:main" };
  const turn = [user("hello", 1), said("hi", 2)];
  assert.deepEqual(await engine.ingest({ ...ids, message: turn[0] }), { ingested: false });
  assert.deepEqual(await engine.ingestBatch({ ...ids, messages: turn }), { ingestedCount: 0 });
  assert.equal(await engine.afterTurn({ ...ids, sessionFile: "/x.jsonl", messages: turn, prePromptMessageCount: 0 }), undefined);
  for (const hook of ["ingest", "ingestBatch", "afterTurn"]) {
    assert.ok(warnings.some((w) => w.startsWith(`[lossless] ${hook} not stored now (sidecar_unreachable)`)), warnings.join("\n"));
  }
  // commitTurn keeps the turn in the plugin's spool and answers committed (spool.test.mjs), so a durable host
  // keeps calling the engine (and its assemble) for the next turns.
  assert.deepEqual(await engine.commitTurn({ ...ids, advancementKey: "k", messages: turn }), { status: "committed" });
});
