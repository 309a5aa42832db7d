// Starting the sidecar and keeping it alive.
//
// The plugin restarts any sidecar it started, in this gateway process or an earlier one, and leaves alone a
// sidecar someone else runs (by hand, or under a supervisor). Ownership is a file in the state dir,
// `sidecar.owner` (0600, JSON {pid, procStart, startedAt, url, stateDir, command}), written once a sidecar
// the plugin spawned has proved its identity with its own pid; a later gateway process reads it and knows
// the sidecar answering with that pid is the plugin's. A sidecar whose pid is not in the file is someone
// else's: when it stops, the plugin says so once and starts nothing.
//
// A sidecar of the plugin's that exits (noticed at once for a child of this process, within `watchMs` for one
// started by an earlier process, or by the next hook) is started again after 1 s, then 2 s, 4 s ... up to
// `maxDelayMs`; after `maxCrashes` exits within `windowMs` the plugin stops trying for `coolDownMs` (a
// crash loop must not spin), then tries again. Every exit is logged once, with its reason; hooks never wait
// for a restart (only the first start of a gateway process is waited for): they fail at once, the host falls
// back, and the sidecar's catch-up stores the missed turns from the host's transcripts once it is back.

import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const OWNER_FILE = "sidecar.owner";
export const DEFAULT_POLICY = Object.freeze({
  firstDelayMs: 1000,
  maxDelayMs: 30_000,
  maxCrashes: 5,
  windowMs: 10 * 60_000,
  coolDownMs: 10 * 60_000,
  watchMs: 2000,
  pollMs: 200,
});

// ---------------------------------------------------------------------------------------------------
// Ownership

/** The process's start time in clock ticks since boot (Linux), so a reused pid is not mistaken for ours. */
export function processStart(pid) {
  const fields = procStat(pid);
  return fields?.[19]; // field 22: starttime
}

/** The fields of /proc/<pid>/stat after the command name (state first), or undefined. */
function procStat(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** Whether `pid` runs, and (where /proc tells) is the same process that was recorded. */
export function isAlive(pid, procStart) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if (error.code !== "EPERM") return false;
  }
  const fields = procStat(pid);
  if (fields === undefined) return procStart === undefined || !existsProc();
  if (fields[0] === "Z" || fields[0] === "X") return false; // exited, not yet reaped by its parent
  return procStart === undefined || fields[19] === procStart;
}

function existsProc() {
  try {
    readFileSync("/proc/self/stat");
    return true;
  } catch {
    return false;
  }
}

export function readOwner(stateDir) {
  try {
    const owner = JSON.parse(readFileSync(join(stateDir, OWNER_FILE), "utf8"));
    return Number.isInteger(owner?.pid) ? owner : undefined;
  } catch {
    return undefined;
  }
}

export function writeOwner(stateDir, record) {
  const path = join(stateDir, OWNER_FILE);
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(record)}\n`, { mode: 0o600 });
  renameSync(temporary, path);
}

// ---------------------------------------------------------------------------------------------------
// Spawning

/** The sidecar's command line for these settings. */
export function serveArgs(settings) {
  const url = new URL(settings.sidecarUrl);
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  const args = ["serve", "--host", url.hostname.replace(/^\[|\]$/g, ""), "--port", port, "--state-dir", settings.stateDir];
  return settings.watch ? [...args, "--watch"] : args; // watch mode: another engine is selected (index.js)
}

function spawnSidecar(settings, env, log) {
  mkdirSync(settings.stateDir, { recursive: true, mode: 0o700 });
  const logPath = join(settings.stateDir, "sidecar.log");
  const logFd = openSync(logPath, "a", 0o600);
  try {
    const args = serveArgs(settings);
    log.info?.(`[lossless] starting sidecar: ${settings.command} ${args.join(" ")} (log: ${logPath})`);
    // Detached with its own stdio: the sidecar outlives this engine, this turn and even the gateway.
    const child = spawn(settings.command, args, { detached: true, stdio: ["ignore", logFd, logFd], env });
    child.unref();
    return { child, logPath };
  } finally {
    closeSync(logFd);
  }
}

function exitReason(code, signal) {
  return signal ? `was killed by ${signal}` : `exited with code ${code}`;
}

// ---------------------------------------------------------------------------------------------------
// The supervisor: one per (sidecarUrl, stateDir) in a gateway process

/**
 * `probe()` resolves to the identity check's verdict ({state: "ours", pid} | {state: "foreign"} | {state:
 * "down"}); `env()` is the sidecar's environment. Phases: idle (nothing known yet), starting, up (a sidecar
 * of the plugin's answers), others (someone else's answers: left alone), waiting (a restart is scheduled),
 * resting (crash loop: no restart until the cool-down ends).
 */
export class Supervisor {
  constructor(settings, { log, probe, env, policy = {}, now = Date.now }) {
    this.settings = settings;
    this.log = log;
    this.probe = probe;
    this.env = env;
    this.policy = { ...DEFAULT_POLICY, ...policy };
    this.now = now;
    this.phase = "idle";
    this.crashes = [];
    this.owner = undefined; // the owner record of the sidecar the plugin watches
    this.child = undefined;
    this.timer = undefined;
    this.watchdog = undefined;
    this.logged = new Set();
    this.startPromise = undefined;
    this.first = true; // only the first start of this process is waited for by hooks
    this.waitable = false;
  }

  logOnce(key, level, message) {
    if (this.logged.has(key)) return;
    this.logged.add(key);
    this.log[level]?.(message);
  }

  /**
   * Called when the sidecar answered its identity with `pid`. The plugin's own (the owner file names it, or
   * it is the child just started) is watched; anyone else's is left alone.
   */
  adopt(pid) {
    if (this.phase === "closed") return;
    const owner = readOwner(this.settings.stateDir);
    const ours = owner && owner.pid === pid && isAlive(pid, owner.procStart);
    if (ours) {
      if (this.phase !== "up" || this.owner?.pid !== pid) this.logged.clear();
      this.owner = owner;
      this.phase = "up";
      this.watch();
      return;
    }
    if (this.phase !== "others") this.logged.clear();
    this.phase = "others";
    this.owner = undefined;
    this.othersPid = pid;
    this.stopWatch();
  }

  /**
   * The sidecar does not answer. Returns a promise of whether one should answer now: only the first start
   * of this process is waited for; every later (re)start runs in the background and this resolves false.
   */
  ensure() {
    if (this.phase === "idle") return this.firstStart();
    if (this.phase === "starting" && this.waitable) return this.startPromise; // concurrent hooks share the first start
    if (this.phase === "up") {
      if (!this.ownChild() && !isAlive(this.owner?.pid, this.owner?.procStart)) this.exited(`(pid ${this.owner?.pid}) is no longer running`);
      return Promise.resolve(false);
    }
    if (this.phase === "others") {
      this.logOnce("others-down", "warn", `[lossless] the sidecar on ${this.settings.sidecarUrl}` +
        `${this.othersPid ? ` (pid ${this.othersPid})` : ""} was not started by the plugin and no longer answers; ` +
        "it is left to whoever runs it: start it again (openclaw-lossless serve), or restart the gateway to let the plugin start one");
    }
    return Promise.resolve(false);
  }

  firstStart() {
    const owner = readOwner(this.settings.stateDir);
    if (owner && isAlive(owner.pid, owner.procStart)) {
      // The plugin's sidecar from an earlier gateway process, running but not answering yet (starting up).
      this.owner = owner;
      this.phase = "up";
      this.watch();
      this.first = false;
      return this.waitUntilUp(undefined).then((verdict) => verdict?.state === "ours");
    }
    return this.start();
  }

  start() {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.phase = "starting";
    const first = this.first;
    this.first = false;
    this.waitable = first;
    this.startPromise = this.beginStart(first);
    return first ? this.startPromise : Promise.resolve(false);
  }

  async beginStart(first) {
    // A restart: another gateway process (or the user) may have brought it back already; use that one
    // rather than race it for the port. (A first start comes right after nothing answered.)
    if (!first) {
      const already = await this.probe();
      if (this.phase === "closed") return false; // supervision stopped meanwhile
      if (already.state === "ours") {
        this.logged.clear();
        this.adopt(already.pid);
        return true;
      }
      if (already.state === "foreign") {
        // Spawning would only fail on the taken port; the hooks' log line names the holder.
        this.exited(`could not be started: ${already.target?.socketPath ?? this.settings.sidecarUrl} is held by another program`);
        return false;
      }
    }
    return this.spawnAndWait(first);
  }

  spawnAndWait(first) {
    let spawned;
    try {
      spawned = spawnSidecar(this.settings, this.env(), this.log);
    } catch (error) {
      this.exited(`could not be started: ${error.message}`);
      return Promise.resolve(false);
    }
    const { child, logPath } = spawned;
    this.child = child;
    this.logPath = logPath;
    let exited;
    child.once("error", (error) => {
      exited ??= `could not run ${this.settings.command}: ${error.message}`;
      if (this.child === child) this.child = undefined;
    });
    child.once("exit", (code, signal) => {
      exited ??= exitReason(code, signal);
      if (this.child === child) this.child = undefined;
      // A child that was up and then died: restart without waiting for the watchdog.
      if (this.phase === "up" && this.owner?.pid === child.pid) this.exited(`(pid ${child.pid}) ${exitReason(code, signal)}`);
    });
    return this.waitUntilUp(() => exited).then((verdict) => {
      if (verdict?.state === "ours") {
        if (verdict.pid === child.pid) {
          const record = {
            pid: child.pid, procStart: processStart(child.pid), startedAt: new Date().toISOString(),
            url: this.settings.sidecarUrl, stateDir: this.settings.stateDir, command: this.settings.command,
          };
          try {
            writeOwner(this.settings.stateDir, record);
          } catch (error) {
            this.log.warn?.(`[lossless] cannot write ${OWNER_FILE} in ${this.settings.stateDir} (${error.code ?? error.message}); this sidecar will not be restarted by a later gateway process`);
          }
          this.owner = record;
        }
        this.log.info?.(`[lossless] sidecar ready on ${this.settings.sidecarUrl} (pid ${verdict.pid}, state dir ${this.settings.stateDir})`);
        this.adoptStarted(verdict.pid, child.pid);
        return true;
      }
      const why = exited ? `${exited} (see ${logPath})` : `did not answer within ${this.settings.timeouts.startMs} ms (see ${logPath})`;
      this.exited(verdict?.state === "foreign" ? `could not be started: the port is held by another program (${why})` : `could not be started: ${why}`, { first });
      return false;
    });
  }

  adoptStarted(pid, childPid) {
    if (this.phase === "closed") return;
    // Another gateway process may have won the race to restart it: its sidecar is just as much the plugin's.
    if (pid === childPid) {
      this.logged.clear();
      this.phase = "up";
      this.watch();
    } else {
      this.adopt(pid);
    }
  }

  async waitUntilUp(exitedReason) {
    const deadline = this.now() + this.settings.timeouts.startMs;
    let verdict;
    while (this.now() < deadline) {
      verdict = await this.probe();
      if (verdict.state === "ours") return verdict;
      if (exitedReason?.()) return verdict; // the child is gone: no point waiting
      await new Promise((resolve) => setTimeout(resolve, this.policy.pollMs));
    }
    return verdict;
  }

  /** A sidecar of the plugin's stopped (or could not start): schedule a restart, unless it is crash-looping. */
  exited(reason, { first = false } = {}) {
    if (this.phase === "waiting" || this.phase === "resting" || this.phase === "closed") return;
    this.stopWatch();
    const now = this.now();
    this.crashes = this.crashes.filter((at) => now - at < this.policy.windowMs);
    this.crashes.push(now);
    const count = this.crashes.length;
    const logName = this.logPath ?? join(this.settings.stateDir, "sidecar.log");
    if (count >= this.policy.maxCrashes) {
      this.phase = "resting";
      const minutes = (ms) => `${Math.round(ms / 60_000 * 10) / 10} min`;
      this.log.warn?.(`[lossless] the sidecar stopped ${count} times within ${minutes(this.policy.windowMs)} ` +
        `(last: it ${reason}); not restarting it for ${minutes(this.policy.coolDownMs)}: see ${logName}. ` +
        "Until it answers, turns are answered without lossless memory, and the missed turns are stored when it is back");
      this.timer = setTimeout(() => {
        this.crashes = [];
        this.start();
      }, this.policy.coolDownMs);
      this.timer.unref?.();
      return;
    }
    const delay = Math.min(this.policy.firstDelayMs * 2 ** (count - 1), this.policy.maxDelayMs);
    this.phase = "waiting";
    const seconds = delay >= 1000 ? `${Math.round(delay / 100) / 10} s` : `${delay} ms`;
    this.log.warn?.(`[lossless] the sidecar ${reason}; restarting it in ${seconds} ` +
      `(${first ? "first start failed; " : ""}stop ${count} of ${this.policy.maxCrashes} allowed within ${Math.round(this.policy.windowMs / 60_000)} min; log: ${logName})`);
    this.timer = setTimeout(() => this.start(), delay);
    this.timer.unref?.();
  }

  watch() {
    if (this.watchdog || this.phase === "closed") return;
    this.watchdog = setInterval(() => {
      if (this.phase === "up" && this.owner && !this.ownChild() && !isAlive(this.owner.pid, this.owner.procStart)) {
        this.exited(`(pid ${this.owner.pid}) is no longer running`);
      }
    }, this.policy.watchMs);
    this.watchdog.unref?.();
  }

  /** Whether the watched sidecar is this process's child: its exit event (with the reason) reports its end. */
  ownChild() {
    return this.child !== undefined && this.child.pid === this.owner?.pid;
  }

  stopWatch() {
    clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  /** Stop every timer (tests; a plugin reload). The sidecar itself keeps running. */
  close() {
    this.stopWatch();
    clearTimeout(this.timer);
    this.timer = undefined;
    this.phase = "closed";
  }
}
