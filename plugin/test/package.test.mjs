// The npm package ships every file the entry loads: a module left out of package.json "files" would install
// fine and fail on the host's first import of the plugin.

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const PACKAGE = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
const RELATIVE = /(?:\bfrom\s+|\bimport\s*\(\s*|new URL\(\s*)"(\.\/[^"]+)"/g;

/** Every file of the plugin folder that `entry` loads, itself included, following relative imports and reads. */
function loadedFiles(entry) {
  const seen = new Set();
  const pending = [entry];
  while (pending.length) {
    const name = pending.pop();
    if (seen.has(name)) continue;
    seen.add(name);
    if (!name.endsWith(".js")) continue;
    const source = readFileSync(new URL(`../${name}`, import.meta.url), "utf8");
    for (const [, path] of source.matchAll(RELATIVE)) pending.push(path.slice(2));
  }
  return [...seen].sort();
}

const shipped = (name) =>
  name === "package.json" || PACKAGE.files.some((entry) => (entry.endsWith("/") ? name.startsWith(entry) : name === entry));

test("every module and file the entry loads is listed in package.json files", () => {
  const entry = PACKAGE.openclaw.extensions[0].replace(/^\.\//, "");
  const loaded = loadedFiles(entry);
  // The split entry really is followed: the engine, the tools and the sidecar client are among them.
  const parts = ["index.js", "settings.js", "descriptors.js", "sidecar-client.js", "engine.js", "agent-tools.js", "command.js"];
  for (const module of [...parts, "plugin-manifest.json"]) assert.ok(loaded.includes(module), module);
  assert.deepEqual(loaded.filter((name) => !shipped(name)), []);
  assert.ok(shipped("openclaw.plugin.json"), "the host reads openclaw.plugin.json from the installed package");
});
