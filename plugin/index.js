// openclaw-lossless: the OpenClaw plugin shim.
//
// A thin, stateless context engine: every hook is forwarded as JSON to the sidecar (a local
// HTTP service that stores every message and recalls the relevant old ones). The host builds a new
// engine instance per logical turn, so nothing here keeps per-session state; the only process-wide
// state is the sidecar's start promise and its cached token (shared through globalThis because the
// host may evaluate this module more than once).
//
// The hook -> endpoint map, the auth scheme, the descriptor format and the config schema all come from
// plugin-manifest.json (a copy of the repository's contract file, kept equal by
// scripts/sync-manifest.mjs and its test).

import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, openSync, closeSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

const MANIFEST = JSON.parse(readFileSync(new URL("./plugin-manifest.json", import.meta.url), "utf8"));
const PACKAGE = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8"));

export const ENGINE_ID = MANIFEST.engineId;
const RECENT_USER_TEXTS = 3;
const HEALTH_TIMEOUT_MS = 1000;
const START_POLL_MS = 200;
// A failed autoStart is retried only after this long, so a broken install does not cost every turn
// the whole start timeout.
const START_RETRY_COOLDOWN_MS = 60_000;
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

// Process-wide state, shared by every engine instance and every evaluation of this module.
const SHARED = (globalThis[Symbol.for("openclaw-lossless.shim")] ??= {
  starts: new Map(), // `${url}|${stateDir}` -> {promise, failedAt?}
  tokens: new Map(), // stateDir -> token string
});

// ---------------------------------------------------------------------------------------------------
// Settings

function schemaDefaults(schema) {
  const out = {};
  for (const [key, prop] of Object.entries(schema.properties ?? {})) {
    if (prop.type === "object" && prop.properties) out[key] = schemaDefaults(prop);
    else if (prop.default !== undefined) out[key] = prop.default;
  }
  return out;
}

/** The OpenClaw state dir: $OPENCLAW_STATE_DIR, else $OPENCLAW_HOME/.openclaw, else ~/.openclaw. */
export function openclawStateDir(env = process.env) {
  if (env.OPENCLAW_STATE_DIR) return env.OPENCLAW_STATE_DIR;
  return join(env.OPENCLAW_HOME || homedir(), ".openclaw");
}

/** The effective plugin settings: manifest defaults overlaid with the user's plugins.entries.lossless.config. */
export function resolveSettings(pluginConfig = {}, env = process.env) {
  const defaults = schemaDefaults(MANIFEST.config);
  const user = pluginConfig && typeof pluginConfig === "object" ? pluginConfig : {};
  const settings = {
    ...defaults,
    ...user,
    timeouts: { ...defaults.timeouts, ...(user.timeouts ?? {}) },
  };
  settings.sidecarUrl = String(settings.sidecarUrl).replace(/\/+$/, "");
  settings.stateDir = user.stateDir || join(openclawStateDir(env), "plugins", ENGINE_ID);
  // Only the recall knobs the user set travel with each request; the sidecar owns the defaults.
  settings.overrides = Object.fromEntries(
    MANIFEST.requestOverrides.filter((key) => user[key] !== undefined).map((key) => [key, user[key]]),
  );
  return settings;
}

// ---------------------------------------------------------------------------------------------------
// What crosses the wire

/**
 * A JSON-safe copy of a value: functions, symbols, Sets, Maps, AbortSignals, promises and cycles are
 * dropped; typed arrays become base64; non-finite numbers become null. Host params hold all of these.
 */
export function jsonSafe(value, ancestors = new Set()) {
  if (value === null) return null;
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "bigint":
      return value.toString();
    case "object":
      break;
    default:
      return undefined; // undefined, function, symbol
  }
  if (ancestors.has(value)) return undefined;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? null : value.toISOString();
  if (ArrayBuffer.isView(value)) return Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64");
  if (
    value instanceof Set || value instanceof Map || value instanceof WeakMap || value instanceof WeakSet ||
    value instanceof Promise || value instanceof ArrayBuffer ||
    (typeof EventTarget !== "undefined" && value instanceof EventTarget) // AbortSignal
  ) return undefined;
  ancestors.add(value);
  try {
    if (Array.isArray(value)) return value.map((item) => jsonSafe(item, ancestors) ?? null);
    const out = {};
    for (const [key, item] of Object.entries(value)) {
      const safe = jsonSafe(item, ancestors);
      if (safe !== undefined) out[key] = safe;
    }
    return out;
  } finally {
    ancestors.delete(value);
  }
}

/** Copy only the named fields that are present, JSON-safe. */
function pick(source, keys) {
  const out = {};
  for (const key of keys) {
    const safe = source?.[key] === undefined ? undefined : jsonSafe(source[key]);
    if (safe !== undefined) out[key] = safe;
  }
  return out;
}

// The session target is identity only (agent, session, store path); keep nothing else from it.
const TARGET_FIELDS = ["agentId", "sessionId", "sessionKey", "storePath", "threadId"];

/** The descriptor text: string content, else the text of its `text` blocks joined by newlines. */
export function descriptorText(message) {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((b) => b && typeof b === "object" && b.type === "text").map((b) => String(b.text ?? "")).join("\n");
}

function numericTimestamp(message) {
  const ts = message?.timestamp;
  return typeof ts === "number" && Number.isFinite(ts) ? Math.trunc(ts) : undefined;
}

/** The token estimate of plugin-manifest.json's descriptor (mirrors capture/text.py descriptor_tokens). */
export function descriptorTokens(message) {
  let chars = codePoints(descriptorText(message));
  if (Array.isArray(message?.content)) {
    for (const block of message.content) {
      if (block && typeof block === "object" && block.type === "toolCall") chars += codePoints(JSON.stringify(block.arguments ?? null) ?? "");
    }
  }
  // Summaries carry their text outside `content`; without this a long summary would count as empty.
  if (message?.role === "compactionSummary" || message?.role === "branchSummary") chars += codePoints(String(message.summary ?? ""));
  return Math.ceil(chars / 4) + 4;
}

const SURROGATE_PAIR = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;
/** Characters as Python counts them (code points, not UTF-16 units), so both sides agree on tokens. */
function codePoints(text) {
  const pairs = text.match(SURROGATE_PAIR);
  return text.length - (pairs ? pairs.length : 0);
}

/** sha256 hex of role \n timestamp \n text: how the sidecar matches a host message to a stored one. */
export function descriptorKey(message) {
  const ts = numericTimestamp(message);
  const raw = `${message?.role ?? ""}\n${ts === undefined ? "" : String(ts)}\n${descriptorText(message)}`;
  return createHash("sha256").update(raw, "utf8").digest("hex");
}

/** Compact descriptors of the host's history; `text` only on the last few user messages (the query). */
export function describeMessages(messages) {
  const list = Array.isArray(messages) ? messages : [];
  const withText = new Set();
  for (let i = list.length - 1; i >= 0 && withText.size < RECENT_USER_TEXTS; i--) {
    if (list[i]?.role === "user") withText.add(i);
  }
  return list.map((message, i) => {
    const descriptor = { role: String(message?.role ?? ""), key: descriptorKey(message), tokens: descriptorTokens(message) };
    const ts = numericTimestamp(message);
    if (ts !== undefined) descriptor.timestamp = ts;
    if (withText.has(i)) descriptor.text = descriptorText(message);
    return descriptor;
  });
}

// ---------------------------------------------------------------------------------------------------
// Errors

/** A sidecar failure. Carries the sidecar's code and message (never the token) and whether a retry may help. */
export class SidecarError extends Error {
  constructor(hook, code, message, { status, retryable = false, cause } = {}) {
    super(`lossless sidecar ${hook}: ${code}: ${message}`, cause ? { cause } : undefined);
    this.name = "SidecarError";
    this.code = code;
    this.status = status;
    this.retryable = retryable;
  }
}

function isAbort(error) {
  return error?.name === "AbortError" || error?.name === "TimeoutError";
}

// ---------------------------------------------------------------------------------------------------
// Sidecar lifecycle

async function fetchWithTimeout(url, init, timeoutMs) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  try {
    return await fetch(url, { ...init, signal: controller.signal });
  } finally {
    clearTimeout(timer);
  }
}

async function isHealthy(settings) {
  try {
    const response = await fetchWithTimeout(`${settings.sidecarUrl}${MANIFEST.operator.healthz.path}`, {}, HEALTH_TIMEOUT_MS);
    await response.arrayBuffer();
    // "degraded" (e.g. the embedder still loading) is up: hooks work, recall falls back to keywords.
    return response.ok;
  } catch {
    return false;
  }
}

function sidecarAddress(settings) {
  const url = new URL(settings.sidecarUrl);
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  return { host: url.hostname, port };
}

function spawnSidecar(settings, log) {
  const { host, port } = sidecarAddress(settings);
  mkdirSync(settings.stateDir, { recursive: true, mode: 0o700 });
  const logPath = join(settings.stateDir, "sidecar.log");
  const logFd = openSync(logPath, "a", 0o600);
  try {
    const args = ["serve", "--host", host.replace(/^\[|\]$/g, ""), "--port", port, "--state-dir", settings.stateDir];
    log.info?.(`[lossless] starting sidecar: ${settings.command} ${args.join(" ")} (log: ${logPath})`);
    // Detached with its own stdio: the sidecar outlives this engine, this turn and even the gateway.
    const child = spawn(settings.command, args, { detached: true, stdio: ["ignore", logFd, logFd], env: sidecarEnv() });
    child.unref();
    return { child, logPath };
  } finally {
    closeSync(logFd);
  }
}

// The gateway's own credentials are no business of the sidecar.
const GATEWAY_SECRETS = new Set(["OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PASSWORD"]);
function sidecarEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !GATEWAY_SECRETS.has(key)));
}

async function startAndWait(settings, log) {
  const { child, logPath } = spawnSidecar(settings, log);
  let exited = null;
  child.once("error", (error) => { exited = `could not run ${settings.command}: ${error.message}`; });
  child.once("exit", (code, signal) => { exited ??= `exited with ${signal ?? `code ${code}`} (see ${logPath})`; });
  const deadline = Date.now() + settings.timeouts.startMs;
  while (Date.now() < deadline) {
    if (await isHealthy(settings)) return;
    if (exited) throw new SidecarError("start", "sidecar_start_failed", exited);
    await new Promise((resolve) => setTimeout(resolve, START_POLL_MS));
  }
  throw new SidecarError("start", "sidecar_start_timeout",
    `not healthy after ${settings.timeouts.startMs} ms (see ${logPath})`, { retryable: true });
}

/**
 * Make sure a sidecar answers. A sidecar started by hand is used as is; otherwise, with autoStart on
 * and a loopback URL, start one, once per gateway process (concurrent engines share the promise).
 * Returns true when a sidecar is up.
 */
async function ensureSidecar(settings, log) {
  if (await isHealthy(settings)) return true;
  if (!settings.autoStart || !LOOPBACK_HOSTS.has(sidecarAddress(settings).host)) return false;
  const slot = `${settings.sidecarUrl}|${settings.stateDir}`;
  let entry = SHARED.starts.get(slot);
  if (entry?.failedAt && Date.now() - entry.failedAt > START_RETRY_COOLDOWN_MS) entry = undefined;
  if (!entry) {
    entry = { promise: startAndWait(settings, log) };
    entry.promise.catch((error) => {
      entry.failedAt = Date.now();
      log.warn?.(`[lossless] ${error.message}`);
    });
    SHARED.starts.set(slot, entry);
  }
  try {
    await entry.promise;
  } catch {
    return false;
  }
  return isHealthy(settings);
}

async function readToken(settings, { fresh = false } = {}) {
  if (!fresh && SHARED.tokens.has(settings.stateDir)) return SHARED.tokens.get(settings.stateDir);
  try {
    const token = (await readFile(join(settings.stateDir, MANIFEST.auth.tokenFile), "utf8")).trim();
    SHARED.tokens.set(settings.stateDir, token);
    return token;
  } catch (error) {
    SHARED.tokens.delete(settings.stateDir);
    throw new SidecarError("auth", "token_unavailable",
      `cannot read the sidecar token in ${settings.stateDir} (${error.code ?? error.message})`);
  }
}

// ---------------------------------------------------------------------------------------------------
// The client

/** POST one hook to the sidecar; returns the parsed JSON answer or throws a SidecarError. */
export async function callHook(settings, hook, body, log = console) {
  const route = MANIFEST.hooks[hook];
  if (!route) throw new SidecarError(hook, "unknown_hook", "not in plugin-manifest.json");
  const timeoutMs = settings.timeouts[route.timeout];
  const payload = JSON.stringify(body);
  const send = async (token) =>
    fetchWithTimeout(`${settings.sidecarUrl}${route.path}`, {
      method: route.method,
      headers: { "content-type": "application/json", [MANIFEST.auth.header]: `${MANIFEST.auth.scheme} ${token}` },
      body: payload,
    }, timeoutMs);

  let response;
  try {
    response = await send(await readTokenOrStart(settings, hook, log));
  } catch (error) {
    if (error instanceof SidecarError) throw error;
    if (isAbort(error)) throw new SidecarError(hook, "sidecar_timeout", `no answer within ${timeoutMs} ms`, { retryable: true });
    // Not reachable: start it if we may, then try once more.
    if (!(await ensureSidecar(settings, log))) {
      throw new SidecarError(hook, "sidecar_unreachable", `${settings.sidecarUrl} is not reachable`, { retryable: true, cause: error });
    }
    try {
      response = await send(await readToken(settings, { fresh: true }));
    } catch (retryError) {
      if (retryError instanceof SidecarError) throw retryError;
      const code = isAbort(retryError) ? "sidecar_timeout" : "sidecar_unreachable";
      throw new SidecarError(hook, code, `${settings.sidecarUrl} failed: ${retryError.message}`, { retryable: true });
    }
  }
  if (response.status === 401) {
    // The token may have been rotated: read it again once.
    await response.arrayBuffer().catch(() => undefined);
    try {
      response = await send(await readToken(settings, { fresh: true }));
    } catch (error) {
      if (error instanceof SidecarError) throw error;
      throw new SidecarError(hook, isAbort(error) ? "sidecar_timeout" : "sidecar_unreachable", error.message, { retryable: true });
    }
  }
  return parseAnswer(hook, response);
}

/** The cached token; when there is none yet (first call, sidecar maybe not started), start the sidecar first. */
async function readTokenOrStart(settings, hook, log) {
  if (SHARED.tokens.has(settings.stateDir)) return SHARED.tokens.get(settings.stateDir);
  try {
    return await readToken(settings);
  } catch (error) {
    // No token file yet usually means the sidecar never ran with this state dir.
    if (!(await ensureSidecar(settings, log))) {
      throw new SidecarError(hook, "sidecar_unreachable", `${settings.sidecarUrl} is not reachable`, { retryable: true, cause: error });
    }
    return readToken(settings, { fresh: true });
  }
}

async function parseAnswer(hook, response) {
  let text = "";
  try {
    text = await response.text();
  } catch (error) {
    throw new SidecarError(hook, "sidecar_unreachable", `reading the answer failed: ${error.message}`, { retryable: true });
  }
  let data;
  try {
    data = text ? JSON.parse(text) : {};
  } catch {
    data = undefined;
  }
  if (!response.ok) {
    const code = data?.error?.code ?? `http_${response.status}`;
    const message = data?.error?.message ?? (text.slice(0, 200) || response.statusText);
    const retryable = response.status >= 500 || response.status === 429;
    throw new SidecarError(hook, code, message, { status: response.status, retryable });
  }
  if (!data || typeof data !== "object") throw new SidecarError(hook, "invalid_response", "the answer is not a JSON object");
  return data;
}

// ---------------------------------------------------------------------------------------------------
// The engine

function logger(api) {
  const base = api?.logger ?? console;
  return {
    info: (m) => (base.info ?? console.info).call(base, m),
    warn: (m) => (base.warn ?? console.warn).call(base, m),
    error: (m) => (base.error ?? console.error).call(base, m),
  };
}

let delegateCompaction;
/** openclaw/plugin-sdk/core, loaded lazily so the shim can be imported (and tested) without the host. */
async function runtimeCompaction(params) {
  delegateCompaction ??= (await import("openclaw/plugin-sdk/core")).delegateCompactionToRuntime;
  return delegateCompaction(params);
}

/**
 * Build one engine instance. `deps` lets tests replace the host's compaction.
 * Every method is a translation: pick the JSON-safe fields, POST, map the answer back.
 */
export function createEngine(pluginConfig, { log = console, delegateCompactionToRuntime = runtimeCompaction } = {}) {
  const settings = resolveSettings(pluginConfig);
  const call = (hook, body) => callHook(settings, hook, body, log);
  const config = settings.overrides;
  const identity = (params) => pick(params, ["sessionId", "sessionKey"]);

  return {
    info: {
      id: ENGINE_ID,
      name: "Lossless",
      version: PACKAGE.version,
      // Compaction stays the host's (delegated); the engine records it and recalls what it removed.
      ownsCompaction: false,
      // The durable-turn contract: without both declarations and commitTurn the host uses legacy.
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
    },

    async bootstrap(params) {
      const body = { ...identity(params), ...pick(params, ["sessionFile"]) };
      if (params?.sessionTarget) body.sessionTarget = pick(params.sessionTarget, TARGET_FIELDS);
      const answer = await call("bootstrap", body);
      return pick(answer, ["bootstrapped", "importedMessages", "reason"]);
    },

    async assemble(params) {
      const messages = Array.isArray(params?.messages) ? params.messages : [];
      const body = {
        ...identity(params),
        descriptors: describeMessages(messages),
        ...pick(params, ["prompt", "tokenBudget"]),
        ...(typeof params?.model === "string" ? { model: params.model } : {}),
        config,
      };
      const answer = await call("assemble", body);
      const start = answer.windowStart;
      if (!Number.isInteger(start) || start < 0 || start > messages.length) {
        throw new SidecarError("assemble", "invalid_response", `windowStart ${JSON.stringify(start)} is outside 0..${messages.length}`);
      }
      const result = {
        messages: messages.slice(start),
        estimatedTokens: Number.isFinite(answer.estimatedTokens) ? answer.estimatedTokens : 0,
      };
      if (typeof answer.systemPromptAddition === "string" && answer.systemPromptAddition) {
        result.systemPromptAddition = answer.systemPromptAddition;
      }
      return result;
    },

    async commitTurn(params) {
      const body = {
        ...pick(params, ["advancementKey"]),
        ...identity(params),
        messages: jsonSafe(params?.messages ?? []),
        isHeartbeat: params?.isHeartbeat === true,
        config,
      };
      const answer = await call("commitTurn", body);
      if (answer.status !== "committed" && answer.status !== "duplicate") {
        throw new SidecarError("commitTurn", "invalid_response", `status ${JSON.stringify(answer.status)}`);
      }
      return { status: answer.status };
    },

    async ingest(params) {
      const body = { ...identity(params), message: jsonSafe(params?.message ?? null), isHeartbeat: params?.isHeartbeat === true, config };
      const answer = await call("ingest", body);
      return { ingested: answer.ingested === true };
    },

    async ingestBatch(params) {
      const body = { ...identity(params), messages: jsonSafe(params?.messages ?? []), isHeartbeat: params?.isHeartbeat === true, config };
      const answer = await call("ingestBatch", body);
      return { ingestedCount: Number.isInteger(answer.ingestedCount) ? answer.ingestedCount : 0 };
    },

    async afterTurn(params) {
      // Only this turn's messages travel; the earlier ones were sent by earlier turns.
      const all = Array.isArray(params?.messages) ? params.messages : [];
      const before = Number.isInteger(params?.prePromptMessageCount) ? params.prePromptMessageCount : 0;
      const body = {
        ...identity(params),
        ...pick(params, ["sessionFile", "prePromptMessageCount", "autoCompactionSummary", "tokenBudget"]),
        messages: jsonSafe(all.slice(Math.max(0, Math.min(before, all.length)))),
        isHeartbeat: params?.isHeartbeat === true,
        config,
      };
      await call("afterTurn", body);
    },

    async compact(params) {
      const result = await delegateCompactionToRuntime(params);
      // Recording is bookkeeping: its failure must never fail the host's compaction.
      try {
        await call("compact", {
          ...identity(params),
          compacted: result?.compacted === true,
          ...pick(result?.result, ["tokensBefore", "tokensAfter", "summary"]),
          ...pick(result, ["reason"]),
        });
      } catch (error) {
        log.warn(`[lossless] compaction ran but was not recorded: ${error.message}`);
      }
      return result;
    },

    async prepareSubagentSpawn(params) {
      // Linking is best effort: a throw here would fail the spawn and quarantine the engine.
      let answer;
      try {
        answer = await call("prepareSubagentSpawn", pick(params, ["parentSessionKey", "childSessionKey", "contextMode", "ttlMs"]));
      } catch (error) {
        log.warn(`[lossless] subagent ${params?.childSessionKey} not linked to its parent: ${error.message}`);
        return undefined;
      }
      const rollbackBody = { ...pick(answer, ["spawnId"]), ...pick(params, ["childSessionKey"]) };
      return {
        rollback: async () => {
          try {
            await call("rollbackSubagentSpawn", rollbackBody);
          } catch (error) {
            log.warn(`[lossless] subagent link rollback failed: ${error.message}`);
          }
        },
      };
    },

    async onSubagentEnded(params) {
      try {
        await call("onSubagentEnded", pick(params, ["childSessionKey", "reason"]));
      } catch (error) {
        log.warn(`[lossless] subagent end of ${params?.childSessionKey} not recorded: ${error.message}`);
      }
    },

    async dispose() {
      // Nothing to release: the sidecar is shared and outlives every engine instance.
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// The plugin entry: register only (it may run several times; no side effects).

export default {
  id: ENGINE_ID,
  name: "Lossless",
  description: "Stores every message verbatim and recalls the relevant old ones every turn.",
  register(api) {
    api.registerContextEngine(ENGINE_ID, () => createEngine(api.pluginConfig ?? {}, { log: logger(api) }));
  },
};
