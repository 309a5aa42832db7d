// The turns the sidecar could not take yet: the plugin's spool, so the host keeps calling the engine.
//
// A host with durable turns (2026.8+) runs the turn after a failed commitTurn on legacy, without the engine's
// assemble, and sends its whole history. So when the sidecar does not answer, commitTurn writes the turn here
// and answers `committed`: one file per turn in <stateDir>/spool/ (0600 in a 0700 dir), written to a temporary
// name, fsync'd, renamed, the dir fsync'd, never changed after; bounded (MAX_TURNS, MAX_BYTES: beyond them the
// commit throws as before and the host keeps the turn). The next commit that reaches the sidecar sends the
// spooled turns first, oldest first, each removed only once the sidecar answered committed or duplicate
// (idempotent on the turn's advancementKey). The sidecar stores the spool itself before a forget. Nothing of
// a turn's text is ever logged. See docs/decisions/0222-outage-spool.md.

import { createHash } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";

export const SPOOL_DIR = "spool";
export const RECORD_SUFFIX = ".turn.json";
export const RECORD_FORMAT = "openclaw-lossless spool v1";
export const MAX_TURNS = 5000;
export const MAX_BYTES = 256 * 1024 * 1024;

// Process-wide (the host may evaluate this module more than once): the replay in progress, the name counter,
// the records the sidecar refused in this process (retried only after a restart).
const SHARED = (globalThis[Symbol.for("openclaw-lossless.spool")] ??= {});
SHARED.sequence ??= 0;
SHARED.refused ??= new Set();

/** The spool is full: the turn stays with the host. */
export class SpoolFull extends Error {
  constructor(message) {
    super(message);
    this.name = "SpoolFull";
  }
}

export const spoolDir = (settings) => join(settings.stateDir, SPOOL_DIR);

/** The spooled records' file names, oldest first ([] without a spool). */
export function spooledNames(settings) {
  let names;
  try {
    names = readdirSync(spoolDir(settings));
  } catch (error) {
    if (error.code === "ENOENT") return [];
    throw error;
  }
  return names.filter((name) => name.endsWith(RECORD_SUFFIX)).sort();
}

function syncDir(path) {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** A name that sorts in spooling order: the time, this process and its counter, the key's hash. */
function recordName(advancementKey) {
  SHARED.sequence += 1;
  const hash = createHash("sha256").update(String(advancementKey ?? "")).digest("hex").slice(0, 16);
  return `${String(Date.now()).padStart(15, "0")}-${String(process.pid).padStart(8, "0")}-` +
    `${String(SHARED.sequence).padStart(8, "0")}-${hash}${RECORD_SUFFIX}`;
}

/**
 * Write one commitTurn body durably (fsync'd file and dir) and return how many turns wait now. Throws
 * SpoolFull beyond the bounds, or the file system's error: the caller then leaves the turn to the host.
 */
export function spoolTurn(settings, body) {
  const dir = spoolDir(settings);
  mkdirSync(settings.stateDir, { recursive: true, mode: 0o700 });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const data = Buffer.from(`${JSON.stringify({ format: RECORD_FORMAT, hook: "commitTurn", spooledAt: Date.now(), body })}\n`, "utf8");
  const names = spooledNames(settings);
  const bytes = names.reduce((sum, name) => sum + (statSync(join(dir, name), { throwIfNoEntry: false })?.size ?? 0), 0);
  const { turns = MAX_TURNS, bytes: most = MAX_BYTES } = settings.spoolLimits ?? {};
  if (names.length >= turns || bytes + data.length > most) {
    throw new SpoolFull(`the spool holds ${names.length} turns (${bytes} bytes), its bound is ${turns} turns / ${most} bytes`);
  }
  const name = recordName(body.advancementKey);
  const temporary = join(dir, `.${name}.tmp`);
  const fd = openSync(temporary, "wx", 0o600);
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, join(dir, name));
  syncDir(dir);
  return names.length + 1;
}

/** One record's body, or undefined when the file is gone (another replay took it) or is not a record. */
function readRecord(path) {
  let text;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (error.code === "ENOENT") return { gone: true };
    return { problem: error.code ?? "unreadable" };
  }
  try {
    const record = JSON.parse(text);
    if (record?.format === RECORD_FORMAT && record.hook === "commitTurn" && record.body && typeof record.body === "object") return { body: record.body };
  } catch {
    // fall through
  }
  return { problem: "not a spool record" };
}

/**
 * Whether the error stops a replay: nobody answered, or the sidecar answered that it cannot store anything now
 * (429, 502-504, 507); any other answer (a 4xx, a 500) refuses that one turn.
 */
export const cannotStoreNow = (error) => error?.retryable === true && error.status !== 500;

/**
 * Send the spooled turns, oldest first, through `send(body)` (the commitTurn hook); each is removed once
 * answered committed or duplicate. Stops at the first turn the sidecar cannot store now (cannotStoreNow); a
 * turn it refuses is kept (and not sent again by this process) and the others go on. One replay at a time per process.
 * Resolves to {sent, left, blocked?: the error that stopped it}.
 */
export function replaySpool(settings, send, log) {
  const run = async () => {
    const dir = spoolDir(settings);
    let sent = 0;
    const names = spooledNames(settings).filter((name) => !SHARED.refused.has(name));
    for (const [index, name] of names.entries()) {
      const path = join(dir, name);
      const record = readRecord(path);
      if (record.gone) continue;
      if (record.problem) {
        SHARED.refused.add(name);
        log.warn?.(`[lossless] spooled turn ${name} cannot be read (${record.problem}); it stays in ${dir}`);
        continue;
      }
      let answer;
      try {
        answer = await send(record.body);
      } catch (error) {
        if (cannotStoreNow(error)) return { sent, left: names.length - index, blocked: error };
        SHARED.refused.add(name);
        log.warn?.(`[lossless] the sidecar refused spooled turn ${name} (${error.code ?? error.name}); it stays in ${dir}`);
        continue;
      }
      if (answer?.status !== "committed" && answer?.status !== "duplicate") {
        SHARED.refused.add(name);
        log.warn?.(`[lossless] the sidecar answered spooled turn ${name} with status ${JSON.stringify(answer?.status)}; it stays in ${dir}`);
        continue;
      }
      try {
        unlinkSync(path);
      } catch (error) {
        if (error.code !== "ENOENT") throw error;
      }
      sent += 1;
    }
    if (sent) log.info?.(`[lossless] ${sent} spooled turns sent to the sidecar`);
    return { sent, left: 0 };
  };
  const next = (SHARED.replaying ?? Promise.resolve()).then(run, run);
  SHARED.replaying = next.catch(() => undefined);
  return next;
}
