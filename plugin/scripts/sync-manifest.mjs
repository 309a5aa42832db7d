#!/usr/bin/env node
// Keep the plugin folder equal to the repository's contract file, plugin-manifest.json:
//  - plugin/plugin-manifest.json is a byte-for-byte copy (the shim reads it at run time, and the
//    plugin folder must be self-contained once installed);
//  - plugin/openclaw.plugin.json's configSchema is the manifest's `config`, and its id the engine id.
// `node scripts/sync-manifest.mjs` writes both; `--check` only compares and exits 1 on drift.

import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const pluginDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const sourcePath = join(pluginDir, "..", "plugin-manifest.json");
const copyPath = join(pluginDir, "plugin-manifest.json");
const openclawPath = join(pluginDir, "openclaw.plugin.json");

const source = readFileSync(sourcePath, "utf8");
const manifest = JSON.parse(source);

function expectedOpenclawManifest() {
  const current = existsSync(openclawPath) ? JSON.parse(readFileSync(openclawPath, "utf8")) : {};
  const out = {
    id: manifest.engineId,
    name: current.name ?? "Lossless",
    description: current.description ?? manifest.description,
    kind: "context-engine",
    ...current,
  };
  out.id = manifest.engineId;
  out.kind = "context-engine";
  out.configSchema = manifest.config;
  return `${JSON.stringify(out, null, 2)}\n`;
}

const wanted = new Map([
  [copyPath, source],
  [openclawPath, expectedOpenclawManifest()],
]);

const check = process.argv.includes("--check");
let drift = false;
for (const [path, text] of wanted) {
  const current = existsSync(path) ? readFileSync(path, "utf8") : null;
  if (current === text) continue;
  if (check) {
    drift = true;
    console.error(`out of date: ${path} (run: node plugin/scripts/sync-manifest.mjs)`);
  } else {
    writeFileSync(path, text);
    console.log(`wrote ${path}`);
  }
}
process.exit(drift ? 1 : 0);
