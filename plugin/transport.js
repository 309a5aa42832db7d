// How the plugin reaches its sidecar, and how it knows the peer IS its sidecar.
//
// Two ways in: the Unix socket `<stateDir>/sidecar.sock` (mode 0600 in the 0700 state dir: only this user can
// have made it) when it exists and sidecarUrl is the default one, else TCP to sidecarUrl. Either way, before
// the token or any conversation is sent, the peer must answer GET /v1/identity?challenge=<random hex> with
// HMAC-SHA256(key = the token, "openclaw-lossless identity v1\n" + challenge): only the holder of the token
// can. A program that merely holds the port (anything answering HTTP there) gets one GET with a random
// challenge and nothing else.

import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { join } from "node:path";

export const SOCKET_NAME = "sidecar.sock";
const IDENTITY_PREFIX = "openclaw-lossless identity v1\n";
const SERVICE = "openclaw-lossless";
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;
const IDENTITY_MAX_BYTES = 64 * 1024;

/** The proof only the token holder can give for `challenge` (hex HMAC-SHA256, key = the token as UTF-8). */
export function identityProof(token, challenge) {
  return createHmac("sha256", Buffer.from(token, "utf8")).update(IDENTITY_PREFIX + challenge, "utf8").digest("hex");
}

/** The Unix socket to use for these settings, or undefined (TCP). */
export function socketTarget(settings, defaultUrl) {
  if (settings.sidecarUrl !== defaultUrl) return undefined;
  const path = join(settings.stateDir, SOCKET_NAME);
  try {
    return lstatSync(path).isSocket() ? { socketPath: path } : undefined;
  } catch {
    return undefined;
  }
}

/** Where requests go: the socket when there is one for these settings, else sidecarUrl over TCP. */
export function targets(settings, defaultUrl) {
  const socket = socketTarget(settings, defaultUrl);
  const tcp = { url: settings.sidecarUrl };
  return socket ? [socket, tcp] : [tcp];
}

export function describeTarget(target) {
  return target.socketPath ?? target.url;
}

/**
 * One HTTP request over the target's transport. Resolves to {status, ok, statusText, text()} like fetch's
 * Response (the body is read here); rejects with the socket error, or an AbortError on timeout/cancel.
 */
export function request(target, { method = "GET", path, headers = {}, body, timeoutMs, signal, maxBytes = MAX_ANSWER_BYTES }) {
  return new Promise((resolve, reject) => {
    let options;
    let client = http;
    if (target.socketPath) {
      options = { socketPath: target.socketPath, path, host: "localhost" };
    } else {
      const url = new URL(target.url);
      client = url.protocol === "https:" ? https : http;
      options = { hostname: url.hostname.replace(/^\[|\]$/g, ""), port: url.port || undefined, path: `${url.pathname.replace(/\/+$/, "")}${path}` };
    }
    const payload = body === undefined ? undefined : Buffer.from(body, "utf8");
    const req = client.request({
      ...options,
      method,
      headers: { ...headers, ...(payload ? { "content-length": payload.length } : {}) },
    });
    let settled = false;
    const finish = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener?.("abort", cancel);
      fn(value);
    };
    const abortError = () => Object.assign(new Error("the request was aborted"), { name: "AbortError" });
    const cancel = () => {
      req.destroy(abortError());
    };
    const timer = setTimeout(cancel, timeoutMs);
    if (signal?.aborted) cancel();
    else signal?.addEventListener?.("abort", cancel, { once: true });
    req.on("error", (error) => finish(reject, error));
    req.on("response", (res) => {
      const chunks = [];
      let size = 0;
      res.on("data", (chunk) => {
        size += chunk.length;
        if (size > maxBytes) req.destroy(new Error("the answer is too large"));
        else chunks.push(chunk);
      });
      res.on("error", (error) => finish(reject, error));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        finish(resolve, {
          status: res.statusCode,
          ok: res.statusCode >= 200 && res.statusCode < 300,
          statusText: res.statusMessage ?? "",
          text: async () => text,
          arrayBuffer: async () => Buffer.from(text),
        });
      });
    });
    req.end(payload);
  });
}

/**
 * Ask `target` to prove it holds `token`. Resolves to
 *   {state: "ours", pid, version}   the proof matches;
 *   {state: "foreign", detail}      something answered, but not with the proof (no such route, HTML, another
 *                                   sidecar's token, ...);
 *   {state: "down", error}          nothing answered (refused, no socket, timeout).
 * Sends no token and no content: only a fresh random challenge.
 */
export async function verifyPeer(target, token, timeoutMs) {
  const challenge = randomBytes(32).toString("hex");
  let response;
  try {
    response = await request(target, { path: `/v1/identity?challenge=${challenge}`, timeoutMs, maxBytes: IDENTITY_MAX_BYTES });
  } catch (error) {
    if (error.message === "the answer is too large") return { state: "foreign", detail: "it answered with a body far too large for an identity" };
    return { state: "down", error };
  }
  const text = await response.text();
  let data;
  try {
    data = JSON.parse(text);
  } catch {
    return { state: "foreign", detail: `it answered HTTP ${response.status} without JSON` };
  }
  if (!response.ok || !data || data.service !== SERVICE || typeof data.proof !== "string") {
    return { state: "foreign", detail: `it answered HTTP ${response.status} that is not an openclaw-lossless identity` };
  }
  if (typeof token !== "string" || !token) {
    return { state: "foreign", detail: "an openclaw-lossless sidecar answers, but this state dir has no token", pid: data.pid, sidecar: true };
  }
  const expected = Buffer.from(identityProof(token, challenge), "utf8");
  const given = Buffer.from(data.proof, "utf8");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return { state: "foreign", detail: "an openclaw-lossless sidecar of another state dir (its token differs)", pid: data.pid, sidecar: true };
  }
  return { state: "ours", pid: Number.isInteger(data.pid) ? data.pid : undefined, version: data.version };
}

// ---------------------------------------------------------------------------------------------------
// Who holds a TCP port (Linux: /proc/net/tcp{,6} gives the listening socket's inode, /proc/<pid>/fd the owner)

function listeningInodes(port) {
  const inodes = new Set();
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const localPort = fields[1].split(":").at(-1);
      if (localPort === hexPort && fields[3] === "0A") inodes.add(fields[9]); // 0A: LISTEN
    }
  }
  return inodes;
}

/** {pid, name} of the process listening on `port`, where this platform and the permissions tell; else undefined. */
export function portHolder(port) {
  const inodes = listeningInodes(Number(port));
  if (!inodes.size) return undefined;
  const wanted = new Set([...inodes].map((inode) => `socket:[${inode}]`));
  let pids;
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds;
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // another user's process, or gone
    }
    for (const fd of fds) {
      let link;
      try {
        link = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      if (wanted.has(link)) {
        let name;
        try {
          name = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
        } catch {
          name = undefined;
        }
        return { pid: Number(pid), name };
      }
    }
  }
  return undefined;
}
