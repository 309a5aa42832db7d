// The window the plugin sends when the sidecar does not answer: the host's own history, trimmed to its budget.
//
// Without this, a failed assemble leaves the host to send its whole untrimmed history, and in a long session
// that prompt overflows the model's window (the host then asks for a 1-token reply). The plugin has the
// messages and the budget in hand, so it keeps what the sidecar's window would have kept
// (openclaw_lossless/recall/window.py: the newest messages within windowShare x budget, by the same token
// estimate, descriptors.js), with two differences the missing recall block allows and the budget demands:
// the current prompt's tokens are reserved too, and the window never grows past its room to keep a tool
// call with its result: a toolResult whose assistant call does not fit goes with it. See
// docs/decisions/0221-outage-window.md.

import { descriptorTokens, tokenUnits } from "./descriptors.js";

const TOKEN_UNIT = 100;
const DEFAULT_SHARE = 0.6; // the manifest's windowShare default, for a config that fails its check

/**
 * The room the window gets: windowShare of the budget (the rest was the recall block's, and is the
 * headroom the host's output and framing keep), never more than the budget less the current prompt.
 */
export function windowRoom(tokenBudget, { windowShare, prompt } = {}) {
  const share = Number.isFinite(windowShare) && windowShare > 0 && windowShare <= 1 ? windowShare : DEFAULT_SHARE;
  const promptTokens = typeof prompt === "string" ? Math.ceil(tokenUnits(prompt) / TOKEN_UNIT) : 0;
  return Math.max(0, Math.min(Math.floor(share * tokenBudget), tokenBudget - promptTokens));
}

/**
 * The newest `messages` within `room` tokens, as {messages, estimatedTokens, dropped}: taken from the end
 * while they fit; an assistant message that calls tools is kept only with all of its results after it, and a
 * toolResult whose call is dropped is dropped too (results follow their call, so a suffix that does not
 * open on a result holds every call with all its results), and the model never gets half of a call.
 */
export function trimToRoom(messages, room) {
  const list = Array.isArray(messages) ? messages : [];
  let start = list.length;
  let used = 0;
  while (start > 0) {
    const cost = descriptorTokens(list[start - 1]);
    if (used + cost > room) break;
    used += cost;
    start -= 1;
  }
  // The window must not open on a result whose call lies outside it: drop those results as well.
  while (start < list.length && list[start]?.role === "toolResult") {
    used -= descriptorTokens(list[start]);
    start += 1;
  }
  return { messages: list.slice(start), estimatedTokens: used, dropped: start };
}

/**
 * The host's history trimmed for a turn the sidecar did not answer; `undefined` when the host gave no
 * usable token budget (nothing to trim against: the host's own pipeline decides, as before).
 */
export function outageWindow(messages, { tokenBudget, windowShare, prompt } = {}) {
  if (!Number.isFinite(tokenBudget) || tokenBudget <= 0) return undefined;
  return trimToRoom(messages, windowRoom(tokenBudget, { windowShare, prompt }));
}
