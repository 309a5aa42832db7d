// The sidecar client: one authenticated request to this state dir's verified sidecar.
//
// Before the token or any conversation goes anywhere, the peer proves it holds the token (transport.js); a
// sidecar that does not answer is started when autoStart allows it, and kept alive (sidecar-process.js).
// The verified peer, the supervisors and the problems already logged are process-wide, shared through
// globalThis because the host may evaluate the plugin's modules more than once; everything else is
// per request. Failures become a SidecarError with the sidecar's code and whether a retry may help.

import { readFile } from "node:fs/promises";
import { join } from "node:path";

import { isLoopbackHost } from "./config-check.js";
import { Supervisor, isAlive, processStart } from "./sidecar-process.js";
import { DEFAULT_URL, MANIFEST } from "./settings.js";
import { describeTarget, portHolder, request, targets, verifyPeer } from "./transport.js";

const HEALTH_TIMEOUT_MS = 1000;

// Process-wide state, shared by every engine instance and every evaluation of this module.
const SHARED = (globalThis[Symbol.for("openclaw-lossless.shim")] ??= {});
SHARED.supervisors ??= new Map(); // `${url}|${stateDir}` -> Supervisor (sidecar-process.js)
SHARED.peers ??= new Map(); // `${url}|${stateDir}` -> {target, token, pid}: the verified sidecar
SHARED.notices ??= new Map(); // `${url}|${stateDir}` -> Set of problems already logged (each is logged once)

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
// Sidecar lifecycle (sidecar-process.js) and the verified peer (transport.js)

const slotOf = (settings) => `${settings.sidecarUrl}|${settings.stateDir}`;

function mayStart(settings) {
  let host;
  try {
    host = new URL(settings.sidecarUrl).hostname.replace(/^\[|\]$/g, "");
  } catch {
    return false;
  }
  return settings.autoStart === true && isLoopbackHost(host);
}

/** Whether the peer's pid is a process of this machine (the socket, or a loopback URL). */
function onThisMachine(settings, target) {
  if (target.socketPath) return true;
  try {
    return isLoopbackHost(new URL(settings.sidecarUrl).hostname.replace(/^\[|\]$/g, ""));
  } catch {
    return false;
  }
}

/** Log `message` once per (slot, key) until the sidecar is verified again. */
function notice(settings, key, log, message) {
  const slot = slotOf(settings);
  const seen = SHARED.notices.get(slot) ?? new Set();
  SHARED.notices.set(slot, seen);
  if (seen.has(key)) return;
  seen.add(key);
  log.warn?.(message);
}

// The gateway's own credentials are no business of the sidecar.
const GATEWAY_SECRETS = new Set(["OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PASSWORD"]);
/** The sidecar's environment: the gateway's, minus its secrets, plus the session selection for its catch-up. */
export function sidecarEnv(settings, env = process.env) {
  const out = Object.fromEntries(Object.entries(env).filter(([key]) => !GATEWAY_SECRETS.has(key)));
  if (settings.excludeSessions?.length) out.LOSSLESS_EXCLUDE_SESSIONS = settings.excludeSessions.join(",");
  if (settings.includeSessions?.length) out.LOSSLESS_INCLUDE_SESSIONS = settings.includeSessions.join(",");
  return out;
}

/**
 * Stop watching and restarting every sidecar (timers only: the sidecars keep running, and a later hook
 * supervises again). For tests and a host that unloads the plugin.
 */
export function stopSupervising() {
  for (const supervisor of SHARED.supervisors.values()) supervisor.close();
  SHARED.supervisors.clear();
  SHARED.peers.clear();
}

function supervisorFor(settings, log) {
  const slot = slotOf(settings);
  let supervisor = SHARED.supervisors.get(slot);
  if (!supervisor || supervisor.phase === "closed") {
    supervisor = new Supervisor(settings, {
      log, probe: () => probePeer(settings), env: () => sidecarEnv(settings), policy: settings.supervision, now: settings.now,
    });
    SHARED.supervisors.set(slot, supervisor);
  }
  return supervisor;
}

async function readTokenFile(settings) {
  try {
    return (await readFile(join(settings.stateDir, MANIFEST.auth.tokenFile), "utf8")).trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Who answers for these settings, on each way in (the state dir's socket first, then TCP), checked with the
 * token as it is on disk now: {state: "ours", target, token, pid} | {state: "foreign", target, detail, pid?}
 * | {state: "down"}. Only a random challenge is sent.
 */
async function probePeer(settings) {
  const token = await readTokenFile(settings);
  let verdict = { state: "down" };
  for (const target of targets(settings, DEFAULT_URL)) {
    const answer = await verifyPeer(target, token, HEALTH_TIMEOUT_MS);
    if (answer.state === "ours") return { ...answer, target, token };
    if (answer.state === "foreign") verdict = { ...answer, target };
    else if (verdict.state === "down") verdict = { ...answer, target };
  }
  return verdict;
}

function foreignMessage(settings, verdict) {
  if (verdict.target.socketPath) {
    return `[lossless] ${verdict.target.socketPath} is not this state dir's sidecar (${verdict.detail}); ` +
      "nothing is sent to it: stop the program that made it, or remove the file";
  }
  const url = new URL(settings.sidecarUrl);
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  const holder = isLoopbackHost(url.hostname.replace(/^\[|\]$/g, "")) ? portHolder(port) : undefined;
  const pid = holder?.pid ?? verdict.pid;
  const who = pid ? `pid ${pid}${holder?.name ? `, name ${holder.name}` : ""}` : "pid unknown";
  return `[lossless] port ${port} is held by another program (${who}); set sidecarUrl/port. ` +
    `It is not this plugin's sidecar (${verdict.detail}), so nothing was sent to it; until this is fixed, turns run without lossless memory`;
}

/**
 * The verified sidecar for these settings: {target, token, pid}. Verified once per (url, stateDir) and again
 * after a connection failure (`fresh`); when nothing answers, the sidecar is started if autoStart allows it
 * (only the first start of this process is waited for). Throws a SidecarError labelled `label` otherwise:
 * a peer that fails the identity check gets no token and no content.
 */
async function connect(settings, label, log, { fresh = false } = {}) {
  const slot = slotOf(settings);
  const known = SHARED.peers.get(slot);
  // Verified once, and again whenever the verified process is gone: whatever took its place (another
  // program may grab the port between two turns) must prove itself before it gets the token.
  if (known && !fresh && (known.procStart === undefined || isAlive(known.pid, known.procStart))) return known;
  SHARED.peers.delete(slot);
  let verdict = await probePeer(settings);
  if (verdict.state === "down" && mayStart(settings) && (await supervisorFor(settings, log).ensure())) {
    verdict = await probePeer(settings);
  }
  if (verdict.state === "ours") {
    const peer = { target: verdict.target, token: verdict.token, pid: verdict.pid };
    if (onThisMachine(settings, verdict.target)) peer.procStart = processStart(verdict.pid); // undefined without /proc
    SHARED.peers.set(slot, peer);
    SHARED.notices.delete(slot);
    if (mayStart(settings)) supervisorFor(settings, log).adopt(verdict.pid);
    return peer;
  }
  if (verdict.state === "foreign") {
    notice(settings, `foreign:${describeTarget(verdict.target)}`, log, foreignMessage(settings, verdict));
    throw new SidecarError(label, "sidecar_not_verified", `${describeTarget(verdict.target)} is not this plugin's sidecar: ${verdict.detail}`, { retryable: true });
  }
  if (!mayStart(settings)) {
    notice(settings, "down", log, `[lossless] the sidecar on ${settings.sidecarUrl} does not answer` +
      `${settings.autoStart ? "" : " and autoStart is off"}: start it (openclaw-lossless serve); until then turns run without lossless memory`);
  }
  throw new SidecarError(label, "sidecar_unreachable", `${settings.sidecarUrl} is not reachable`, { retryable: true, cause: verdict.error });
}

/** A config the plugin cannot run with: logged once, and every call fails at once. */
function configError(settings, label, log) {
  const problems = settings.configErrors.join("; ");
  notice(settings, `config:${problems}`, log, `[lossless] the plugin config is invalid, so lossless memory is off until it is fixed ` +
    `(plugins.entries.lossless.config): ${problems}`);
  return new SidecarError(label, "invalid_config", problems);
}

// ---------------------------------------------------------------------------------------------------
// The client

/** POST one hook to the sidecar; returns the parsed JSON answer or throws a SidecarError. */
export async function callHook(settings, hook, body, log = console) {
  const route = MANIFEST.hooks[hook];
  if (!route) throw new SidecarError(hook, "unknown_hook", "not in plugin-manifest.json");
  return sidecarRequest(settings, hook, { method: route.method, path: route.path, body, timeoutMs: settings.timeouts[route.timeout] }, log);
}

/**
 * One authenticated request to the verified sidecar (a hook or a query): verifies (and starts) it first
 * when needed, verifies again after a failed connection and on 401 (a rotated token), retrying once, and
 * returns the parsed JSON answer or throws a SidecarError labelled `label`.
 */
export async function sidecarRequest(settings, label, { method, path, body, timeoutMs, signal }, log = console) {
  if (settings.configErrors?.length) throw configError(settings, label, log);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers = payload === undefined ? {} : { "content-type": "application/json" };
  const send = (peer) => request(peer.target, {
    method, path, body: payload, timeoutMs, signal,
    headers: { ...headers, [MANIFEST.auth.header]: `${MANIFEST.auth.scheme} ${peer.token}` },
  });
  const again = async () => {
    try {
      return await send(await connect(settings, label, log, { fresh: true }));
    } catch (error) {
      if (error instanceof SidecarError) throw error;
      if (isAbort(error)) throw abortError(label, timeoutMs, signal);
      throw new SidecarError(label, "sidecar_unreachable", `${settings.sidecarUrl} failed: ${error.message}`, { retryable: true });
    }
  };

  let response;
  try {
    response = await send(await connect(settings, label, log));
  } catch (error) {
    if (error instanceof SidecarError) throw error;
    if (isAbort(error)) throw abortError(label, timeoutMs, signal);
    // The connection failed: the sidecar stopped or was replaced. Verify (or start) it again, retry once.
    response = await again();
  }
  if (response.status === 401) {
    // The token may have been rotated: read it, verify the sidecar with it, and retry once.
    response = await again();
  }
  return parseAnswer(label, response);
}

function abortError(label, timeoutMs, signal) {
  if (signal?.aborted) return new SidecarError(label, "cancelled", "the call was cancelled");
  return new SidecarError(label, "sidecar_timeout", `no answer within ${timeoutMs} ms`, { retryable: true });
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
