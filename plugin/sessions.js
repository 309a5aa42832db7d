// Which sessions the lossless engine captures: the plugin's `includeSessions` / `excludeSessions`.
//
// The same rule as the sidecar's (openclaw_lossless/selection.py, settings LOSSLESS_INCLUDE_SESSIONS /
// LOSSLESS_EXCLUDE_SESSIONS): glob patterns with Python's fnmatch.fnmatchcase semantics, matched
// case-sensitively against the session key (`agent:<agentId>:<name>`), or the session id when there is no
// key. `*` is any run of characters (':' included), `?` one character, `[...]` a class (`[!...]` negated,
// `a-z` a range, a leading `]` literal, an unclosed `[` literal); a backslash is an ordinary character.
// A session is captured iff (no include pattern, or one matches) and no exclude pattern matches.

/** A pattern compiled to tokens: "*", "?", a literal code point, or a class {negate, items: [[lo, hi]]}. */
function compile(pattern) {
  const chars = Array.from(pattern);
  const tokens = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i];
    if (c === "*") {
      if (tokens.at(-1) !== "*") tokens.push("*");
    } else if (c === "?") {
      tokens.push("?");
    } else if (c === "[") {
      let j = i + 1;
      if (chars[j] === "!") j++;
      if (chars[j] === "]") j++;
      while (j < chars.length && chars[j] !== "]") j++;
      if (j >= chars.length) {
        tokens.push({ literal: "[" });
        continue;
      }
      tokens.push(compileClass(chars.slice(i + 1, j)));
      i = j;
    } else {
      tokens.push({ literal: c });
    }
  }
  return tokens;
}

function compileClass(body) {
  const negate = body[0] === "!";
  const chars = negate ? body.slice(1) : body;
  const items = [];
  let single = false; // whether the last item is one character that may start a range
  for (let k = 0; k < chars.length; k++) {
    // A '-' after a single character and before another is a range; elsewhere it is itself (as in Python).
    if (single && chars[k] === "-" && k + 1 < chars.length) {
      const [low] = items.pop();
      items.push([low, chars[k + 1]]);
      k++;
      single = false;
    } else {
      items.push([chars[k], chars[k]]);
      single = true;
    }
  }
  return { negate, items };
}

function classMatches({ negate, items }, c) {
  const point = c.codePointAt(0);
  const inside = items.some(([low, high]) => low.codePointAt(0) <= point && point <= high.codePointAt(0));
  return inside !== negate;
}

function matchTokens(tokens, chars) {
  // Iterative glob matching with one backtrack point per star: linear-ish, no regex, no catastrophic cases.
  let t = 0;
  let s = 0;
  let starT = -1;
  let starS = 0;
  while (s < chars.length) {
    const token = tokens[t];
    if (token === "*") {
      starT = t++;
      starS = s;
    } else if (t < tokens.length && (token === "?" || (token.literal !== undefined ? token.literal === chars[s] : classMatches(token, chars[s])))) {
      t++;
      s++;
    } else if (starT >= 0) {
      t = starT + 1;
      s = ++starS;
    } else {
      return false;
    }
  }
  while (tokens[t] === "*") t++;
  return t === tokens.length;
}

/** fnmatch.fnmatchcase(name, pattern). */
export function globMatch(name, pattern) {
  return matchTokens(compile(String(pattern)), Array.from(String(name)));
}

/** The patterns as the sidecar reads them: strings, trimmed, empty ones dropped. */
export function patternList(value) {
  return (Array.isArray(value) ? value : []).filter((p) => typeof p === "string").map((p) => p.trim()).filter(Boolean);
}

/** The name a session is matched by: its key, else its id. */
export function sessionName(params) {
  const key = params?.sessionKey;
  if (typeof key === "string" && key) return key;
  const id = params?.sessionId;
  return typeof id === "string" ? id : undefined;
}

/**
 * A predicate `captured(name)` for the configured lists. With no pattern every session is captured and no
 * matching is done; a session without any name is captured (the sidecar decides, as before).
 */
export function sessionSelector(includeSessions, excludeSessions) {
  const include = patternList(includeSessions).map(compile);
  const exclude = patternList(excludeSessions).map(compile);
  if (!include.length && !exclude.length) return () => true;
  return (name) => {
    if (typeof name !== "string") return true;
    const chars = Array.from(name);
    if (include.length && !include.some((tokens) => matchTokens(tokens, chars))) return false;
    return !exclude.some((tokens) => matchTokens(tokens, chars));
  };
}
