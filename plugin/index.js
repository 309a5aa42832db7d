// openclaw-lossless: the OpenClaw plugin's entry, the module the host loads (package.json openclaw.extensions).
//
// A thin, stateless shim: every hook is forwarded as JSON to the sidecar (a local HTTP service that stores
// every message and recalls the relevant old ones). This file only wires the parts to the host's `api`; each
// job has its module:
//   settings.js        the user's config over the manifest's defaults, checked (config-check.js) and with
//                      the session selection (sessions.js)
//   descriptors.js     window keys and token units of the host's messages (in step with capture/text.py)
//   sidecar-client.js  one authenticated request to the verified sidecar, started when allowed
//                      (sidecar-process.js) and reached over its socket or TCP (transport.js)
//   engine.js          the context engine: one sidecar hook per host hook
//   agent-tools.js     lossless_search, lossless_recover, lossless_forget
//   command.js         the /lossless chat command
// The named exports below are the modules' public functions, re-exported for tests and tools that import
// them from the entry.
//
// The hook -> endpoint map, the auth scheme, the descriptor format and the config schema all come from
// plugin-manifest.json (a copy of the repository's contract file, kept equal by
// scripts/sync-manifest.mjs and its test).

import { TOOL_NAMES, createAgentTools } from "./agent-tools.js";
import { createLosslessCommand } from "./command.js";
import { createEngine } from "./engine.js";
import { ENGINE_ID, resolveSettings } from "./settings.js";
import { sidecarRequest } from "./sidecar-client.js";

export {
  TOOL_NAMES, ToolParamError, agentOfSessionKey, createAgentTools, renderRecover, renderSearch, resolveScope,
  validateForgetParams, validateRecoverParams, validateSearchParams,
} from "./agent-tools.js";
export { describeMessages, descriptorKey, descriptorText, descriptorTokens, tokenUnits } from "./descriptors.js";
export { createEngine, jsonSafe } from "./engine.js";
export { ENGINE_ID, openclawStateDir, resolveSettings } from "./settings.js";
export { SidecarError, callHook, sidecarEnv, stopSupervising } from "./sidecar-client.js";

/** The host's logger when it gives one (each level falling back to the console's). */
function logger(api) {
  const base = api?.logger ?? console;
  return {
    info: (m) => (base.info ?? console.info).call(base, m),
    warn: (m) => (base.warn ?? console.warn).call(base, m),
    error: (m) => (base.error ?? console.error).call(base, m),
  };
}

/**
 * Which mode the host's config puts the plugin in: "engine" (plugins.slots.contextEngine is lossless),
 * "watch" (another engine, or none, is selected: the tools and /lossless still work, memory comes from the
 * host's transcripts through `openclaw-lossless serve --watch`), or null when the host gave no config.
 */
export function pluginMode(config) {
  if (!config || typeof config !== "object") return null;
  const slot = config.plugins?.slots?.contextEngine;
  return slot === ENGINE_ID ? "engine" : "watch";
}

const announced = new Set(); // register may run several times per process: each mode is said once

function announceMode(api, mode) {
  const slot = api?.config?.plugins?.slots?.contextEngine;
  const full = api?.registrationMode === undefined || api.registrationMode === "full"; // not CLI metadata loads
  if (mode === null || !full || announced.has(mode)) return;
  announced.add(mode);
  const line = mode === "engine"
    ? "lossless: engine mode — the selected context engine; every turn is stored and recalled"
    : `lossless: watch mode — ${slot === undefined ? "no context engine" : `another engine (${slot})`} is selected;` +
      " memory comes from the host's transcripts (openclaw-lossless serve --watch), recall only through the tools";
  logger(api).info(line);
}

// The plugin entry: register only (it may run several times; no side effects but one log line per mode).

export default {
  id: ENGINE_ID,
  name: "Lossless",
  description: "Stores every message verbatim and recalls the relevant old ones every turn; lossless_search and lossless_recover let the agent look further back itself.",
  register(api) {
    const mode = pluginMode(api?.config);
    announceMode(api, mode);
    // In watch mode a sidecar the plugin starts (for the tools or /lossless) watches the transcripts itself.
    const watch = mode === "watch";
    const pluginConfig = api.pluginConfig ?? {};
    api.registerContextEngine(ENGINE_ID, () => createEngine(api.pluginConfig ?? {}, { log: logger(api) }));
    // Agent tools, built per run with its identity (declared under contracts.tools in openclaw.plugin.json).
    if (typeof api.registerTool === "function") {
      api.registerTool((toolContext) => createAgentTools(pluginConfig, toolContext, { log: logger(api), watch }), { names: TOOL_NAMES });
    }
    // The /lossless chat command (status, search, why), answered without the model (command.js).
    if (typeof api.registerCommand === "function") {
      const settings = { ...resolveSettings(pluginConfig), watch };
      const request = (label, init) => sidecarRequest(settings, label, init, logger(api));
      api.registerCommand(createLosslessCommand({ settings, request, log: logger(api) }));
    }
  },
};
