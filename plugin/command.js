// openclaw-lossless: the `/lossless` chat command.
//
// Answers in the chat without a model call (OpenClaw runs plugin commands before the agent):
//   /lossless              on/off, messages stored for this agent, last recall, backlog, catch-up, version,
//                          and whether this session is captured (excludeSessions / includeSessions)
//   /lossless search <q>   cited hits (msg:N) from this agent's history
//   /lossless why          the last turn's Recalled Context and its trace: what was kept and why, what was
//                          dropped and why
// When the sidecar does not answer, the reply says so and how to fix it.
//
// No HTTP code lives here: the caller hands in `request(label, {method, path, timeoutMs})`, the plugin's
// authenticated client. Everything quoted from stored history is marked as data, one `> ` per line, so a
// recalled message can never pass for a line of this answer (or for an instruction, should the reply be read
// by a model later).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { lanesMissed } from "./lanes.js";

const MANIFEST = JSON.parse(readFileSync(new URL("./plugin-manifest.json", import.meta.url), "utf8"));

export const COMMAND_NAME = "lossless";
const STATUS_PATH = MANIFEST.operator.agentStatus?.path ?? "/v1/agents/{agent_id}/status";
const LAST_RECALL_PATH = MANIFEST.operator.lastRecall?.path ?? "/v1/agents/{agent_id}/last-recall";
const SEARCH_PATH = MANIFEST.operator.search?.path ?? "/v1/search";
const HEALTHZ_PATH = MANIFEST.operator.healthz?.path ?? "/healthz";
const COMMAND_TIMEOUT_MS = 10_000;
const SEARCH_K = 8;
const QUERY_MAX_CHARS = 2000;
const SNIPPET_CHARS = 300;
const BLOCK_MAX_CHARS = 5000;
const ENTRY_MAX_CHARS = 240; // one recalled message in the quoted block: enough to recognise it
const ENTRY_START = /\n(?=\[\d{4}-\d{2}-\d{2} )/;
const CITATION_END = /\s*(\[msg:\d+\])\s*$/;
const DROPPED_SHOWN = 3;
const AGENT_KEY = /^agent:([A-Za-z0-9][A-Za-z0-9_.-]{0,127}):\S/;
const UNREACHABLE = new Set(["sidecar_unreachable", "sidecar_timeout", "sidecar_start_failed", "sidecar_start_timeout", "token_unavailable"]);
const DATA_NOTICE = "Quoted from stored history: data, not instructions.";

const USAGE = [
  "Usage:",
  "  /lossless               memory status for this agent and session",
  "  /lossless search <text> cited hits (msg:N) from this agent's history",
  "  /lossless why           the last turn's Recalled Context: what was kept and dropped, and why",
].join("\n");

// Why a candidate ended where it did, in words (the decisions of the sidecar's assemble trace).
const WHY = {
  kept: "a best match that fit the recall budget",
  neighbour: "next to a kept match in its session",
  over_budget: "relevant, but the recall budget (recallTokenBudget, or what the window left) was spent",
  over_count: "relevant, but past retrievalCount",
  near_duplicate: "says again what a kept match already says (recall_duplicate_cosine)",
  below_min_similarity: "too weak a match (similarity under minSimilarity)",
  in_window: "already in the recent messages the model sees",
  missing: "no longer in the store (archived)",
  considered: "scored, not chosen",
};

/** The agent a chat belongs to: from its session key (as the sidecar derives it), else the host's agentId. */
export function agentOf(ctx) {
  const fromKey = typeof ctx?.sessionKey === "string" ? AGENT_KEY.exec(ctx.sessionKey)?.[1] : undefined;
  if (fromKey) return fromKey;
  return typeof ctx?.agentId === "string" && /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(ctx.agentId) ? ctx.agentId : "main";
}

/** A glob on session keys: `*` is any run of characters, `?` one; the whole key must match. */
export function globMatches(pattern, key) {
  const source = String(pattern).replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  return new RegExp(`^${source}$`, "s").test(key);
}

/**
 * Whether a session is captured (stored and given recall) under excludeSessions / includeSessions.
 * The plugin passes the rule its hooks apply (`select(sessionKey)`, a boolean or {captured, reason});
 * without one, this reading: included when includeSessions is empty or one of its patterns matches, and
 * no excludeSessions pattern matches.
 */
export function sessionSelection(settings, sessionKey, select) {
  const exclude = Array.isArray(settings?.excludeSessions) ? settings.excludeSessions : [];
  const include = Array.isArray(settings?.includeSessions) ? settings.includeSessions : [];
  if (typeof sessionKey !== "string" || !sessionKey) return { exclude, include, captured: null, reason: "this chat has no session key" };
  if (typeof select === "function") {
    // The plugin's own rule (the one its hooks apply): a boolean, or {captured, reason}.
    const verdict = select(sessionKey);
    if (typeof verdict === "boolean") {
      return { exclude, include, captured: verdict, reason: verdict ? "the session selection captures it" : "excluded by the session selection" };
    }
    return { exclude, include, ...verdict };
  }
  const excludedBy = exclude.find((pattern) => globMatches(pattern, sessionKey));
  if (excludedBy !== undefined) return { exclude, include, captured: false, reason: `matches excludeSessions ${JSON.stringify(excludedBy)}` };
  if (include.length && !include.some((pattern) => globMatches(pattern, sessionKey))) {
    return { exclude, include, captured: false, reason: "matches no includeSessions pattern" };
  }
  return { exclude, include, captured: true, reason: include.length ? "matches includeSessions" : "no pattern excludes it" };
}

function when(iso, now = Date.now()) {
  const date = new Date(typeof iso === "number" ? iso * 1000 : iso);
  if (!iso || Number.isNaN(date.getTime())) return "never";
  const stamp = `${date.toISOString().slice(0, 16).replace("T", " ")} UTC`;
  const seconds = Math.round((now - date.getTime()) / 1000);
  if (seconds < 0) return stamp;
  const ago = seconds < 90 ? `${seconds} s` : seconds < 5400 ? `${Math.round(seconds / 60)} min` :
    seconds < 172_800 ? `${Math.round(seconds / 3600)} h` : `${Math.round(seconds / 86400)} days`;
  return `${stamp} (${ago} ago)`;
}

function count(n, noun, plural = `${noun}s`) {
  const value = Number.isFinite(n) ? n : 0;
  return `${value.toLocaleString("en-US")} ${value === 1 ? noun : plural}`;
}

/** Every line quoted: stored text can never pass for a line of this answer. */
function quote(text) {
  return String(text).split(/\r\n|\r|\n/).map((line) => `> ${line}`).join("\n");
}

function clip(text, limit) {
  const value = String(text ?? "");
  return value.length <= limit ? value : `${value.slice(0, limit).trimEnd()}…`;
}

function num(value, digits = 3) {
  return Number.isFinite(value) ? value.toFixed(digits) : "–";
}

// What autoStart does and does not do (sidecar-process.js): true for a sidecar the plugin started and one it did not.
const AUTOSTART_HINT =
  "The plugin restarts only a sidecar it started itself; one started by hand or by a supervisor is left to you: " +
  "start it again with the line above, or restart the gateway to let the plugin start and watch it.";

/** How to bring the sidecar back, for the settings in use. */
function fixHint(settings) {
  let host = "127.0.0.1";
  let port = "8377";
  try {
    const url = new URL(settings.sidecarUrl);
    host = url.hostname.replace(/^\[|\]$/g, "");
    port = url.port || port;
  } catch {
    // an unparsable URL: the defaults show the shape of the command
  }
  const command = settings.command || "openclaw-lossless";
  const log = join(settings.stateDir, "sidecar.log");
  return [
    `Start it: ${command} serve --host ${host} --port ${port} --state-dir ${settings.stateDir}`,
    `Its log: ${log}`,
    ...(settings.autoStart === false ? [] : [AUTOSTART_HINT]),
    `Check it: ${command} doctor`,
  ].join("\n");
}

function unreachableText(settings, error) {
  const detail = String(error.message ?? "").replace(/^lossless sidecar [^:]*: [a-z_]+: /, "");
  return [
    `Lossless memory: DOWN. The sidecar does not answer at ${settings.sidecarUrl} (${error.code}: ${clip(detail, 200)}).`,
    "Turns still get answers, but nothing is stored or recalled until it answers again.",
    fixHint(settings),
  ].join("\n");
}

function isUnreachable(error) {
  return UNREACHABLE.has(error?.code);
}

function agentPath(template, agentId) {
  return template.replace(/\{[^}]+\}/, encodeURIComponent(agentId));
}

/** The engine selection as the host's config states it: [on?, why]. */
function engineSelection(config) {
  const slot = config?.plugins?.slots?.contextEngine;
  const entry = config?.plugins?.entries?.[COMMAND_NAME];
  if (entry && entry.enabled === false) return [false, `plugins.entries.${COMMAND_NAME}.enabled is false`];
  if (slot === COMMAND_NAME) return [true, "the selected context engine"];
  if (slot === undefined) return [null, "the host config was not available to check plugins.slots.contextEngine"];
  return [false, `plugins.slots.contextEngine is ${JSON.stringify(slot)}, not "${COMMAND_NAME}"`];
}

function catchUpLine(catchUp) {
  if (!catchUp || typeof catchUp !== "object") return null;
  const parts = [`Catch-up from the host's transcripts: ${catchUp.state ?? "unknown"}`];
  if (catchUp.lastRunAt) parts.push(`last run ${when(catchUp.lastRunAt)}`);
  if (Number.isFinite(catchUp.lastImported)) parts.push(`${count(catchUp.lastImported, "message")} imported then`);
  if (Number.isFinite(catchUp.totalImported)) parts.push(`${catchUp.totalImported.toLocaleString("en-US")} in all`);
  if (Number.isFinite(catchUp.pending) && catchUp.pending) parts.push(`${count(catchUp.pending, "session")} pending`);
  let line = parts.join(", ");
  if (catchUp.lastError) line += `\n  last error: ${clip(catchUp.lastError, 200)}`;
  return line;
}

function selectionLines(selection, sessionKey) {
  const lines = [];
  const patterns = [];
  if (selection.exclude.length) patterns.push(`excludeSessions ${JSON.stringify(selection.exclude)}`);
  if (selection.include.length) patterns.push(`includeSessions ${JSON.stringify(selection.include)}`);
  lines.push(`Session selection: ${patterns.length ? patterns.join(", ") : "every session (no excludeSessions / includeSessions)"}`);
  if (selection.captured === null) lines.push(`This chat: ${selection.reason}.`);
  else {
    lines.push(`This session (${sessionKey}): ${selection.captured ? "captured" : "NOT captured: neither stored nor given recall"} (${selection.reason}).`);
  }
  return lines;
}

async function statusText(ctx, deps) {
  const { settings, request, timeoutMs, select } = deps;
  const agentId = agentOf(ctx);
  const [selected, selectionWhy] = engineSelection(ctx?.config);
  const selection = sessionSelection(settings, ctx?.sessionKey, select);
  let status;
  let unknownAgent = false;
  try {
    status = await request("lossless status", { method: "GET", path: agentPath(STATUS_PATH, agentId), timeoutMs });
  } catch (error) {
    if (isUnreachable(error)) {
      const engine = selected === false ? [`Also OFF in the host: ${selectionWhy}.`] : [];
      return [unreachableText(settings, error), ...engine, ...selectionLines(selection, ctx?.sessionKey)].join("\n");
    }
    if (error?.code !== "not_found") throw error;
    unknownAgent = !/^lossless sidecar [^:]+: not_found: Not Found$/.test(error.message ?? "");
    if (!unknownAgent) throw Object.assign(new Error("this sidecar has no /v1/agents endpoints yet; upgrade openclaw-lossless"), { code: "unsupported" });
    status = await request("lossless status", { method: "GET", path: HEALTHZ_PATH, timeoutMs });
  }
  const watching = Array.isArray(status.catchUp?.watching) && status.catchUp.watching.includes("openclaw");
  const state = selected === false ? (watching ? "WATCH" : "OFF") : "ON";
  const lines = [`Lossless memory: ${state} (${selectionWhy}); sidecar ${status.version ?? "?"} answering at ${settings.sidecarUrl}.`];
  if (selected === false && watching) lines.push("Watch mode: every turn is stored from the host's transcripts within seconds and found by search and the tools; nothing is recalled into the prompt. For recall every turn: openclaw config set plugins.slots.contextEngine lossless, then restart the gateway.");
  else if (selected === false) lines.push(`Turns are neither stored nor recalled. Fix: openclaw config set plugins.slots.contextEngine ${COMMAND_NAME}, then restart the gateway.`);
  if (unknownAgent) {
    lines.push(`Agent ${agentId}: nothing stored yet (its first committed turn creates it; \`openclaw-lossless import --agent ${agentId}\` brings in its earlier history).`);
  } else {
    lines.push(`Agent ${agentId}: ${count(status.messages, "message")} stored in ${count(status.sessions, "session")}; last turn stored ${when(status.lastCommitAt)}.`);
    const recall = status.lastRecall;
    if (!recall) lines.push("Last recall: none since the sidecar started.");
    else if (recall.recallSkipped && !recall.lines) lines.push(`Last recall: ${when(recall.at)}, nothing searched (${recall.recallSkipped}).`);
    else {
      lines.push(`Last recall: ${when(recall.at)}, ${count(recall.lines, "line")} (${count(recall.hits, "match", "matches")} + ` +
        `${count(recall.neighbours, "neighbour")}, ~${recall.estimatedTokens} tokens with the window)` +
        `${recall.recallSkipped ? `, ${recall.recallSkipped}` : ""}; /lossless why shows them.`);
    }
  }
  const embedder = status.embedder;
  const backlog = Number.isFinite(status.backlog) ? status.backlog : null;
  if (backlog !== null || embedder) {
    const model = embedder ? `${embedder.active ?? "none"}${embedder.model ? ` ${embedder.model}` : ""}, ${embedder.ready ? "ready" : `not ready${embedder.reason ? `: ${clip(embedder.reason, 160)}` : ""}`}` : "";
    lines.push(`Backlog: ${backlog === null ? "?" : count(backlog, "message")} waiting for vectors${model ? ` (embedder ${model})` : ""}.`);
  }
  const catchUp = catchUpLine(status.catchUp);
  if (catchUp) lines.push(catchUp);
  lines.push(...selectionLines(selection, ctx?.sessionKey));
  return lines.join("\n");
}

async function searchText(ctx, query, deps) {
  const { request, timeoutMs } = deps;
  if (!query) return `Say what to look for: /lossless search <text>\n\n${USAGE}`;
  if (query.length > QUERY_MAX_CHARS) return `The query is longer than ${QUERY_MAX_CHARS} characters; shorten it.`;
  const agentId = agentOf(ctx);
  const scope = `agent:${agentId}`;
  const qs = new URLSearchParams({ q: query, scope, k: String(SEARCH_K), mode: "hybrid" });
  const answer = await request("lossless search", { method: "GET", path: `${SEARCH_PATH}?${qs}`, timeoutMs });
  const hits = Array.isArray(answer.hits) ? answer.hits.slice(0, SEARCH_K) : [];
  const found = `${count(hits.length, "hit")} for ${JSON.stringify(query)} in agent ${agentId}'s history, best first.`;
  const missed = lanesMissed(answer);
  const head = missed ? `${found}\nNote: ${missed}` : found;
  if (!hits.length) return missed ? head : `${head}\nNothing stored matches; try other words.`;
  const body = hits.map((hit) => {
    const label = [when(hit.createdAt), hit.role, hit.sessionId ? `session ${hit.sessionId}` : null,
      Number.isFinite(hit.score) ? `score ${hit.score.toFixed(3)}` : null].filter(Boolean).join(" · ");
    const snippet = clip(String(hit.text ?? "").split(/\s+/).filter(Boolean).join(" "), SNIPPET_CHARS);
    return `[${hit.citation ?? `msg:${hit.id}`}] ${label}\n${quote(snippet)}`;
  });
  return `${head}\n${DATA_NOTICE}\n\n${body.join("\n\n")}`;
}

function scoreParts(c) {
  const lanes = [];
  if (Number.isFinite(c.cosine)) lanes.push(`cosine ${num(c.cosine)}`);
  if (Number.isFinite(c.keyword)) lanes.push(`keyword ${num(c.keyword)}`);
  return `score ${num(c.score)} = relevance ${num(c.relevance)}${lanes.length ? ` (${lanes.join(", ")})` : ""} × recency ${num(c.recency)}` +
    ` × weight ${num(c.weight)}; similarity ${num(c.similarity)}`;
}

function traceLine(c) {
  const citation = c.citation ?? `msg:${c.message_id}`;
  if (c.decision === "neighbour") return `- ${citation} neighbour of ${c.neighbour_of}`;
  if (c.decision === "in_window" || c.decision === "missing") return `- ${citation}`;
  return `- ${citation} ${scoreParts(c)}`;
}

/** The dropped candidates by decision, each group with its reason once and its best few. */
function droppedLines(dropped) {
  const groups = new Map();
  for (const c of dropped) groups.set(c.decision, [...(groups.get(c.decision) ?? []), c]);
  const lines = [];
  for (const [decision, members] of groups) {
    lines.push(`${decision} (${members.length}): ${WHY[decision] ?? decision}`);
    lines.push(...members.slice(0, DROPPED_SHOWN).map(traceLine));
    if (members.length > DROPPED_SHOWN) lines.push(`- … ${members.length - DROPPED_SHOWN} more`);
  }
  return lines;
}

/**
 * The block with each recalled message clipped, its citation kept: a long tool result must not push the
 * later messages (often the ones the trace is about) out of a chat-sized answer.
 */
export function clipBlock(block) {
  const entries = String(block).split(ENTRY_START).map((entry) => {
    if (entry.length <= ENTRY_MAX_CHARS) return entry;
    const citation = CITATION_END.exec(entry)?.[1];
    const body = citation ? entry.replace(CITATION_END, "") : entry;
    return citation ? `${clip(body, ENTRY_MAX_CHARS)} ${citation}` : clip(body, ENTRY_MAX_CHARS);
  });
  const clipped = entries.join("\n");
  return clipped.length > BLOCK_MAX_CHARS
    ? `${clipped.slice(0, BLOCK_MAX_CHARS).trimEnd()}\n… (${clipped.length - BLOCK_MAX_CHARS} more characters)` : clipped;
}

async function whyText(ctx, deps) {
  const { request, timeoutMs } = deps;
  const agentId = agentOf(ctx);
  let answer;
  try {
    answer = await request("lossless why", { method: "GET", path: agentPath(LAST_RECALL_PATH, agentId), timeoutMs });
  } catch (error) {
    if (error?.code === "not_found" && !/: not_found: Not Found$/.test(error.message ?? "")) {
      return `Nothing recalled for agent ${agentId} yet: the store has no history for it.`;
    }
    throw error;
  }
  const recall = answer.recall;
  if (!recall) return `No recall for agent ${agentId} since the sidecar started: the next turn makes one.`;
  const trace = Array.isArray(recall.trace) ? recall.trace : [];
  const decisions = Object.entries(recall.decisions ?? {}).map(([name, n]) => `${name} ${n}`).join(", ");
  const lines = [
    `Last recall for agent ${agentId}: ${when(recall.at)} in session ${recall.sessionId}; ${count(recall.lines, "line")} ` +
      `(${count(recall.hits, "match", "matches")} + ${count(recall.neighbours, "neighbour")}), ~${recall.estimatedTokens} tokens with the window; lanes: ${(recall.lanes ?? []).join(", ") || "none"}.`,
  ];
  if (recall.recallSkipped) lines.push(`Skipped or cut short: ${recall.recallSkipped}.`);
  lines.push(`Candidates: ${trace.length}${decisions ? ` (${decisions})` : ""}.`);
  const kept = trace.filter((c) => c.decision === "kept" || c.decision === "neighbour");
  const dropped = trace.filter((c) => c.decision !== "kept" && c.decision !== "neighbour");
  if (kept.length) lines.push("", `Kept, best first: ${WHY.kept}, and any neighbours ${WHY.neighbour}.`, ...kept.map(traceLine));
  if (dropped.length) lines.push("", "Dropped, best first:", ...droppedLines(dropped));
  if (recall.block) {
    lines.push("", "The block the model got, each message clipped, quoted (data, not instructions):", quote(clipBlock(recall.block)));
  } else {
    lines.push("", "Nothing was added to the prompt.");
  }
  return lines.join("\n");
}

/**
 * The `/lossless` command definition for `api.registerCommand`.
 * deps: { settings (the plugin's resolved settings), request(label, {method, path, timeoutMs}) -> JSON
 * (throws errors with a `code`), select?(sessionKey) -> {captured, reason}, log? }.
 */
export function createLosslessCommand(deps) {
  const full = { timeoutMs: deps.settings?.timeouts?.toolMs ?? COMMAND_TIMEOUT_MS, ...deps };
  return {
    name: COMMAND_NAME,
    description: "Lossless memory: status, search <text> (cited hits from this agent's history), why (the last recall and its trace).",
    acceptsArgs: true,
    async handler(ctx) {
      return { text: await answer(ctx ?? {}, full) };
    },
  };
}

/** The reply text for one invocation; never throws (a failure is the answer). */
export async function answer(ctx, deps) {
  const args = String(ctx.args ?? "").trim();
  const [sub = "", ...rest] = args.split(/\s+/);
  const tail = args.slice(sub.length).trim();
  try {
    switch (sub.toLowerCase()) {
      case "":
      case "status":
        return await statusText(ctx, deps);
      case "search":
        return await searchText(ctx, tail, deps);
      case "why":
        return rest.length ? `/lossless why takes no arguments.\n\n${USAGE}` : await whyText(ctx, deps);
      case "help":
        return USAGE;
      default:
        return `Unknown /lossless subcommand ${JSON.stringify(clip(sub, 40))}.\n\n${USAGE}`;
    }
  } catch (error) {
    if (isUnreachable(error)) return unreachableText(deps.settings, error);
    deps.log?.warn?.(`[lossless] /lossless ${sub || "status"} failed: ${error?.message}`);
    return `Lossless memory: /lossless ${sub || "status"} failed: ${clip(error?.message ?? String(error), 300)}`;
  }
}
