// The context engine: what OpenClaw calls each turn, translated into one sidecar hook each.
//
// The host builds a new engine instance per logical turn (and per compaction and subagent hook) and disposes
// it at the end, so an instance is a cheap, stateless shim: it picks the JSON-safe fields of the host's
// params (host params hold functions, Sets and AbortSignals), POSTs them (sidecar-client.js) and maps the
// answer back. A session outside includeSessions / excludeSessions sends nothing. Failures follow the host's
// contract: commitTurn keeps a turn the sidecar did not answer for in the plugin's spool (spool.js) and
// answers committed, and throws (the host keeps the turn and re-delivers it) only when it cannot; bootstrap answers
// {bootstrapped: false, reason}; assemble without an answer returns the host's history trimmed to its token
// budget (trim.js), and throws only when the host gave no budget; afterTurn, ingestBatch, ingest, compaction
// and the subagent hooks never fail because of the sidecar (a 2026.7 host quarantines an engine that throws).

import { readFileSync } from "node:fs";

import { describeMessages, descriptorTokens } from "./descriptors.js";
import { sessionName } from "./sessions.js";
import { ENGINE_ID, resolveSettings } from "./settings.js";
import { SidecarError, callHook } from "./sidecar-client.js";
import { replaySpool, spooledNames, spoolTurn } from "./spool.js";
import { outageWindow } from "./trim.js";

const PACKAGE = JSON.parse(readFileSync(new URL("./package.json", import.meta.url), "utf8"));

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

let delegateCompaction;
/** openclaw/plugin-sdk/core, loaded lazily so the shim can be imported (and tested) without the host. */
async function runtimeCompaction(params) {
  delegateCompaction ??= (await import("openclaw/plugin-sdk/core")).delegateCompactionToRuntime;
  return delegateCompaction(params);
}

/**
 * Build one engine instance. `deps` lets tests replace the host's compaction and the clock.
 * Every method is a translation: pick the JSON-safe fields, POST, map the answer back.
 */
export function createEngine(pluginConfig, { log = console, delegateCompactionToRuntime = runtimeCompaction, now, supervision, spoolLimits } = {}) {
  const settings = resolveSettings(pluginConfig);
  if (now) settings.now = now;
  if (supervision) settings.supervision = supervision; // restart backoff and crash-loop limits (tests shorten them)
  if (spoolLimits) settings.spoolLimits = spoolLimits; // {turns, bytes}: the spool's bounds (tests lower them)
  // A session outside includeSessions / excludeSessions: nothing of it is sent to the sidecar.
  const skipped = (params) => !settings.captures(sessionName(params));
  const call = (hook, body) => callHook(settings, hook, body, log);
  const config = settings.overrides;
  const identity = (params) => pick(params, ["sessionId", "sessionKey"]);
  // The hooks of hosts without durable turns (afterTurn, ingestBatch, ingest) never throw: such a host
  // (2026.7) quarantines an engine for the whole process on any throw, and does not re-deliver the turn
  // anyway; the sidecar's catch-up reads the turn from the host's transcript once it answers.
  const stored = async (hook, body) => {
    try {
      return await call(hook, body);
    } catch (error) {
      if (!(error instanceof SidecarError)) throw error;
      log.warn(`[lossless] ${hook} not stored now (${error.code}): the sidecar catches the turn up from the host's transcript once it answers`);
      return undefined;
    }
  };

  // A turn the sidecar did not take: kept in the spool and answered committed, or, when it cannot be kept
  // (full, unwritable), the sidecar's error thrown as before (the host keeps the turn and re-delivers it).
  const spool = (body, error) => {
    let waiting;
    try {
      waiting = spoolTurn(settings, body);
    } catch (problem) {
      log.warn(`[lossless] commitTurn failed (${error.code}) and the turn could not be spooled (${problem.message}): the host keeps it`);
      throw error;
    }
    log.warn(`[lossless] commitTurn without the sidecar (${error.code}): the turn is kept in the plugin's spool ` +
      `(${waiting} waiting) and sent, in order, once the sidecar answers`);
    return { status: "committed" };
  };

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
      if (skipped(params)) return { bootstrapped: false, reason: "session not captured (includeSessions/excludeSessions)" };
      const body = { ...identity(params), ...pick(params, ["sessionFile"]) };
      if (params?.sessionTarget) body.sessionTarget = pick(params.sessionTarget, TARGET_FIELDS);
      let answer;
      try {
        answer = await call("bootstrap", body);
      } catch (error) {
        // A throw would quarantine the engine on a 2026.7 host; the turn goes on without it either way.
        if (!(error instanceof SidecarError)) throw error;
        log.warn(`[lossless] bootstrap without the sidecar (${error.code}): the session is registered once it answers`);
        return { bootstrapped: false, reason: error.message };
      }
      return pick(answer, ["bootstrapped", "importedMessages", "reason"]);
    },

    async assemble(params) {
      const messages = Array.isArray(params?.messages) ? params.messages : [];
      if (skipped(params)) return { messages, estimatedTokens: messages.reduce((sum, m) => sum + descriptorTokens(m), 0) };
      const body = {
        ...identity(params),
        descriptors: describeMessages(messages),
        ...pick(params, ["prompt", "tokenBudget"]),
        ...(typeof params?.model === "string" ? { model: params.model } : {}),
        config,
      };
      let answer;
      try {
        answer = await call("assemble", body);
      } catch (error) {
        // No answer: the host's history trimmed to its budget here (trim.js), not the host's untrimmed one.
        const trimmed = error instanceof SidecarError ? outageWindow(messages, { ...pick(params, ["tokenBudget", "prompt"]), windowShare: settings.windowShare }) : undefined;
        if (!trimmed) throw error;
        log.warn(`[lossless] assemble without the sidecar (${error.code}): the newest ${trimmed.messages.length} of ` +
          `${messages.length} messages, ~${trimmed.estimatedTokens} tokens within the budget of ${params.tokenBudget}; the turn is stored once it answers`);
        return { messages: trimmed.messages, estimatedTokens: trimmed.estimatedTokens };
      }
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
      if (skipped(params)) return { status: "committed" }; // nothing to store: the turn is done
      const body = {
        ...pick(params, ["advancementKey"]),
        ...identity(params),
        messages: jsonSafe(params?.messages ?? []),
        isHeartbeat: params?.isHeartbeat === true,
        config,
      };
      // Turns spooled while the sidecar did not answer go first, in order; while it still does not, this one
      // joins them (spool.js): answered `committed`, so the host keeps calling this engine (and its assemble).
      if (spooledNames(settings).length) {
        const backlog = await replaySpool(settings, (spooled) => call("commitTurn", spooled), log);
        if (backlog.blocked) return spool(body, backlog.blocked);
      }
      let answer;
      try {
        answer = await call("commitTurn", body);
      } catch (error) {
        if (error instanceof SidecarError && error.retryable) return spool(body, error);
        throw error;
      }
      if (answer.status !== "committed" && answer.status !== "duplicate") {
        throw new SidecarError("commitTurn", "invalid_response", `status ${JSON.stringify(answer.status)}`);
      }
      return { status: answer.status };
    },

    async ingest(params) {
      if (skipped(params)) return { ingested: false };
      const body = { ...identity(params), message: jsonSafe(params?.message ?? null), isHeartbeat: params?.isHeartbeat === true, config };
      const answer = await stored("ingest", body);
      return { ingested: answer?.ingested === true };
    },

    async ingestBatch(params) {
      if (skipped(params)) return { ingestedCount: 0 };
      const body = { ...identity(params), messages: jsonSafe(params?.messages ?? []), isHeartbeat: params?.isHeartbeat === true, config };
      const answer = await stored("ingestBatch", body);
      return { ingestedCount: Number.isInteger(answer?.ingestedCount) ? answer.ingestedCount : 0 };
    },

    async afterTurn(params) {
      if (skipped(params)) return;
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
      await stored("afterTurn", body);
    },

    async compact(params) {
      // Recording is bookkeeping: its failure must never fail, or change, the host's compaction. The host's own
      // verdict travels with it: a failed compaction ({ok: false}) or one with nothing to compact ({ok: true,
      // compacted: false}) is recorded as such, without a pre-compaction snapshot, and not counted as one.
      const record = async (outcome) => {
        if (skipped(params)) return; // the host's compaction, not recorded for a session not captured
        try {
          await call("compact", {
            ...identity(params),
            compacted: outcome?.compacted === true,
            ...(typeof outcome?.ok === "boolean" ? { ok: outcome.ok } : {}),
            ...pick(outcome?.result, ["tokensBefore", "tokensAfter", "summary"]),
            ...(typeof outcome?.reason === "string" ? { reason: outcome.reason.slice(0, 2000) } : {}),
          });
        } catch (error) {
          log.warn(`[lossless] compaction ran but was not recorded: ${error.message}`);
        }
      };
      let result;
      try {
        result = await delegateCompactionToRuntime(params);
      } catch (error) {
        await record({ ok: false, compacted: false, reason: `the host's compaction threw: ${error?.message ?? error}` });
        throw error;
      }
      await record(result);
      return result;
    },

    async prepareSubagentSpawn(params) {
      // Linking is best effort: a throw here would fail the spawn and quarantine the engine.
      if (skipped({ sessionKey: params?.childSessionKey })) return undefined;
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
      if (skipped({ sessionKey: params?.childSessionKey })) return;
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
