// Engine mode or watch mode, as the host's config says: the gateway log line, the tools and /lossless
// registered either way, and a sidecar the plugin starts in watch mode runs `serve --watch`.
// `node --test plugin/test/mode.test.mjs`.

import { test } from "node:test";
import assert from "node:assert/strict";

import plugin, { pluginMode } from "../index.js";
import { serveArgs } from "../sidecar-process.js";
import { resolveSettings } from "../settings.js";

function registerWith(config, lines) {
  const got = { engines: [], tools: 0, commands: 0 };
  plugin.register({
    config, pluginConfig: {}, registrationMode: "full",
    logger: { info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) },
    registerContextEngine: (id) => got.engines.push(id),
    registerTool: () => { got.tools += 1; },
    registerCommand: () => { got.commands += 1; },
  });
  return got;
}

test("the mode follows plugins.slots.contextEngine", () => {
  assert.equal(pluginMode({ plugins: { slots: { contextEngine: "lossless" } } }), "engine");
  assert.equal(pluginMode({ plugins: { slots: { contextEngine: "legacy" } } }), "watch");
  assert.equal(pluginMode({ plugins: {} }), "watch");
  assert.equal(pluginMode(undefined), null);
});

test("with another engine selected the plugin says watch mode once and still registers its tools and /lossless", () => {
  const lines = [];
  const first = registerWith({ plugins: { slots: { contextEngine: "legacy" } } }, lines);
  registerWith({ plugins: { slots: { contextEngine: "legacy" } } }, lines); // register may run again
  assert.deepEqual(first, { engines: ["lossless"], tools: 1, commands: 1 });
  const watch = lines.filter((line) => line.startsWith("lossless: watch mode"));
  assert.equal(watch.length, 1, lines.join("\n"));
  assert.match(watch[0], /another engine \(legacy\) is selected; memory comes from the host's transcripts/);
  registerWith({ plugins: { slots: { contextEngine: "lossless" } } }, lines);
  assert.equal(lines.filter((line) => line.startsWith("lossless: engine mode")).length, 1, lines.join("\n"));
});

test("a sidecar started in watch mode runs serve --watch; in engine mode it does not", () => {
  const settings = resolveSettings({ sidecarUrl: "http://127.0.0.1:8377", stateDir: "/tmp/lossless-state" });
  assert.ok(!serveArgs(settings).includes("--watch"));
  assert.deepEqual(serveArgs({ ...settings, watch: true }).slice(-1), ["--watch"]);
});
