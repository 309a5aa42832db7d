// Descriptor maths: what the plugin sends the sidecar about the host's history instead of the messages.
//
// assemble describes each host message by role, a window key and a token estimate (and the text of the last
// few user messages, the recall query), so the sidecar can match the host's history to what it stored and
// size the window without the whole history crossing the wire on every turn. The rules are the `descriptor`
// section of plugin-manifest.json and must give exactly what openclaw_lossless/capture/text.py
// (descriptor_text, window_key, descriptor_tokens) and capture/token_estimate.py give for the same message:
// tests/e2e/test_plugin_contract.py runs both on the same messages and every UTF-16 code unit.

import { createHash } from "node:crypto";

// The recall query is the prompt read with this many last user messages of the window.
const RECENT_USER_TEXTS = 3;

/** The descriptor text: string content, else the text of its `text` blocks joined by newlines. */
export function descriptorText(message) {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.filter((b) => b && typeof b === "object" && b.type === "text").map((b) => String(b.text ?? "")).join("\n");
}

function numericTimestamp(message) {
  const ts = message?.timestamp;
  return typeof ts === "number" && Number.isFinite(ts) ? Math.trunc(ts) : undefined;
}

/** The token estimate of plugin-manifest.json's descriptor (mirrors capture/text.py descriptor_tokens). */
export function descriptorTokens(message) {
  let units = tokenUnits(descriptorText(message));
  if (Array.isArray(message?.content)) {
    for (const block of message.content) {
      if (block && typeof block === "object" && block.type === "toolCall") units += tokenUnits(JSON.stringify(block.arguments ?? null) ?? "");
    }
  }
  // Summaries carry their text outside `content`; without this a long summary would count as empty.
  if (message?.role === "compactionSummary" || message?.role === "branchSummary") units += tokenUnits(String(message.summary ?? ""));
  return Math.ceil(units / TOKEN_UNIT) + 4;
}

// The per-script token estimate of openclaw_lossless/capture/token_estimate.py: the same weights (hundredths of a
// token per UTF-16 code unit, by its 256-code-point block), so both sides give the same count for every text.
// Characters / 4 counted Chinese, Japanese or Korean at a quarter of what a model spends on them.
const TOKEN_UNIT = 100;
const LIGHT_WEIGHT = 20; // ASCII letters and whitespace
const DENSE_WEIGHT = 70; // ASCII digits, punctuation, control characters
const LATIN1_WEIGHT = 160; // U+0080-U+00FF
const OTHER_WEIGHT = 100; // a block below names no weight
// [first block, last block, weight]; a character beyond the BMP weighs its high surrogate's 250, its low one 0.
const TOKEN_BLOCKS = [
  [0x01, 0x02, 160], [0x03, 0x03, 100], [0x04, 0x04, 55], [0x05, 0x05, 110], [0x06, 0x06, 85], [0x09, 0x0d, 115],
  [0x0e, 0x0e, 95], [0x11, 0x11, 120], [0x1e, 0x1e, 160], [0x22, 0x2b, 150], [0x30, 0x30, 80], [0x31, 0x9f, 120],
  [0xac, 0xd7, 120], [0xd8, 0xdb, 250], [0xdc, 0xdf, 0], [0xf9, 0xfa, 120], [0xff, 0xff, 70],
];
// One table lookup per code unit (64 KiB, built once at load): this runs on every message of every assemble.
const UNIT_WEIGHTS = (() => {
  const blocks = new Uint8Array(256).fill(OTHER_WEIGHT);
  for (const [first, last, weight] of TOKEN_BLOCKS) blocks.fill(weight, first, last + 1);
  const light = /[A-Za-z \t\n\r\v\f]/;
  return Uint8Array.from({ length: 0x10000 }, (_, unit) => {
    if (unit < 0x80) return light.test(String.fromCharCode(unit)) ? LIGHT_WEIGHT : DENSE_WEIGHT;
    return unit < 0x100 ? LATIN1_WEIGHT : blocks[unit >> 8];
  });
})();

/** The text's cost in hundredths of a token (sum these before rounding, as descriptorTokens does). */
export function tokenUnits(text) {
  let units = 0;
  for (let i = 0; i < text.length; i++) units += UNIT_WEIGHTS[text.charCodeAt(i)];
  return units;
}

/** sha256 hex of role \n timestamp \n text: how the sidecar matches a host message to a stored one. */
export function descriptorKey(message) {
  const ts = numericTimestamp(message);
  const raw = `${message?.role ?? ""}\n${ts === undefined ? "" : String(ts)}\n${descriptorText(message)}`;
  return createHash("sha256").update(raw, "utf8").digest("hex");
}

/** Compact descriptors of the host's history; `text` only on the last few user messages (the query). */
export function describeMessages(messages) {
  const list = Array.isArray(messages) ? messages : [];
  const withText = new Set();
  for (let i = list.length - 1; i >= 0 && withText.size < RECENT_USER_TEXTS; i--) {
    if (list[i]?.role === "user") withText.add(i);
  }
  return list.map((message, i) => {
    const descriptor = { role: String(message?.role ?? ""), key: descriptorKey(message), tokens: descriptorTokens(message) };
    const ts = numericTimestamp(message);
    if (ts !== undefined) descriptor.timestamp = ts;
    if (withText.has(i)) descriptor.text = descriptorText(message);
    return descriptor;
  });
}
