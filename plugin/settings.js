// The plugin's settings: the contract file it reads them from, and the user's config resolved against it.
//
// plugin-manifest.json (a copy of the repository's contract file, kept equal by scripts/sync-manifest.mjs and
// its test) holds the config schema with its defaults; the user's `plugins.entries.lossless.config` is laid
// over them here, checked against the same schema (config-check.js), and turned into the one settings object
// every other module takes. Nothing here starts, reads or sends anything.

import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

import { validateConfig } from "./config-check.js";
import { patternList, sessionSelector } from "./sessions.js";

/** The contract: hook routes, auth scheme, descriptor format, config schema (plugin-manifest.json). */
export const MANIFEST = JSON.parse(readFileSync(new URL("./plugin-manifest.json", import.meta.url), "utf8"));

export const ENGINE_ID = MANIFEST.engineId;
/** The default sidecarUrl, without trailing slashes (the state dir's socket is tried only for it). */
export const DEFAULT_URL = String(MANIFEST.config.properties.sidecarUrl.default).replace(/\/+$/, "");

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
  settings.now = Date.now; // the supervisor's clock (tests pass their own to createEngine)
  // Checked against the manifest's schema: a bad value is one log line and hooks that fail at once.
  settings.configErrors = validateConfig(pluginConfig ?? {}, MANIFEST.config);
  settings.excludeSessions = patternList(settings.excludeSessions);
  settings.includeSessions = patternList(settings.includeSessions);
  // captures(name): whether the session named so (sessions.js sessionName) is stored and given recall.
  settings.captures = sessionSelector(settings.includeSessions, settings.excludeSessions);
  // Only the recall knobs the user set travel with each request; the sidecar owns the defaults.
  settings.overrides = Object.fromEntries(
    MANIFEST.requestOverrides.filter((key) => user[key] !== undefined).map((key) => [key, user[key]]),
  );
  return settings;
}
