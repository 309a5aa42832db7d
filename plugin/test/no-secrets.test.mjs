// No secret leaves through the shim: every hook is called with the host's runtime config, settings, signals
// and environment-like noise (API keys, gateway tokens) beside the fields it needs, against a stub sidecar
// that records every request. Nothing of that noise may reach the wire, whatever the hook.

import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { createEngine } from "../index.js";
import { identityAnswer } from "./fixtures/identity.mjs";

const quiet = { info() {}, warn() {}, error() {} };
const SECRETS = ["sk-RUNTIME-provider-key-1234567890", "gw-GATEWAY-token-0987654321", "hunter2-PASSWORD-in-config"];
const SIDECAR_TOKEN = "tok-sidecar-never-in-a-body-123456";

// What OpenClaw hands an engine besides the hook's own fields.
const HOST_NOISE = {
  runtimeContext: {
    config: { models: { providers: { openai: { apiKey: SECRETS[0] } } }, gateway: { auth: { token: SECRETS[1] } } },
    llm: { complete: () => SECRETS[2] },
  },
  runtimeSettings: { gatewayPassword: SECRETS[2], model: { provider: "openai", apiKey: SECRETS[0] } },
  config: { plugins: { entries: { lossless: { config: { note: SECRETS[1] } } } } },
  env: { OPENAI_API_KEY: SECRETS[0], OPENCLAW_GATEWAY_TOKEN: SECRETS[1] },
  availableTools: new Set(["exec"]),
  abortSignal: new AbortController().signal,
  sessionTarget: { agentId: "main", sessionId: "s", apiKey: SECRETS[0], auth: { token: SECRETS[1] } },
};

async function recordingSidecar() {
  const stateDir = mkdtempSync(join(tmpdir(), "lossless-nosecret-"));
  writeFileSync(join(stateDir, "token"), SIDECAR_TOKEN);
  const requests = [];
  const answers = {
    "/v1/hooks/bootstrap": { bootstrapped: true, importedMessages: 0, reason: "known" },
    "/v1/hooks/assemble": { windowStart: 0, estimatedTokens: 1, systemPromptAddition: "", recalled: [] },
    "/v1/hooks/commit-turn": { status: "committed", stored: 1, skippedHeartbeat: false },
    "/v1/hooks/ingest": { ingested: true },
    "/v1/hooks/ingest-batch": { ingestedCount: 1 },
    "/v1/hooks/after-turn": { ingestedCount: 1 },
    "/v1/hooks/compact": { recorded: true, compactionId: 1, snapshot: "pre-compaction-1", lastMessageId: 1 },
    "/v1/hooks/subagent-spawn": { spawnId: 1 },
    "/v1/hooks/subagent-spawn/rollback": { rolledBack: true },
    "/v1/hooks/subagent-ended": { ended: true, outcomesCopied: 0 },
  };
  const server = createServer((req, res) => {
    let raw = "";
    req.on("data", (chunk) => { raw += chunk; });
    req.on("end", () => {
      const identity = identityAnswer(req.url, SIDECAR_TOKEN);
      if (identity) {
        res.writeHead(identity[0], { "content-type": "application/json" });
        return res.end(JSON.stringify(identity[1]));
      }
      requests.push({ path: req.url, headers: req.headers, raw });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(answers[req.url] ?? {}));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, stateDir, requests, close: () => new Promise((r) => server.close(r)) };
}

test("no hook forwards the host's runtime config, settings or credentials", async () => {
  const sidecar = await recordingSidecar();
  try {
    const engine = createEngine({ sidecarUrl: sidecar.url, stateDir: sidecar.stateDir, autoStart: false }, {
      log: quiet,
      delegateCompactionToRuntime: async () => ({ ok: true, compacted: true, result: { summary: "S", tokensBefore: 9, tokensAfter: 3 } }),
    });
    const ids = { sessionId: "s", sessionKey: "agent:main:main", ...HOST_NOISE };
    const message = { role: "user", content: "hello", timestamp: 1 };
    await engine.bootstrap({ ...ids, sessionFile: "/x.jsonl" });
    await engine.assemble({ ...ids, messages: [message], prompt: "hi", tokenBudget: 1000, model: "m" });
    await engine.commitTurn({ ...ids, advancementKey: "k", messages: [message], isHeartbeat: false });
    await engine.ingest({ ...ids, message });
    await engine.ingestBatch({ ...ids, messages: [message] });
    await engine.afterTurn({ ...ids, messages: [message], prePromptMessageCount: 0 });
    await engine.compact({ ...ids, force: true });
    const spawn = await engine.prepareSubagentSpawn({ ...HOST_NOISE, parentSessionKey: "agent:main:main", childSessionKey: "agent:main:subagent:1" });
    await spawn.rollback();
    await engine.onSubagentEnded({ ...HOST_NOISE, childSessionKey: "agent:main:subagent:1", reason: "completed" });

    const paths = new Set(sidecar.requests.map((r) => r.path));
    assert.equal(paths.size, 10, [...paths].join(", "));
    for (const request of sidecar.requests) {
      for (const secret of SECRETS) assert.ok(!request.raw.includes(secret), `${request.path} carried ${secret}`);
      assert.ok(!request.raw.includes(SIDECAR_TOKEN), `${request.path} carried the token in its body`);
      for (const key of ["runtimeContext", "runtimeSettings", "env", "availableTools", "abortSignal"]) {
        assert.ok(!request.raw.includes(`"${key}"`), `${request.path} carried ${key}`);
      }
      assert.equal(request.headers.authorization, `Bearer ${SIDECAR_TOKEN}`);
    }
  } finally {
    await sidecar.close();
  }
});
