// The plugin's config, checked at run time against the same JSON schema the host validates it with
// (plugin-manifest.json's `config`), plus what a schema cannot say well: sidecarUrl must be a loopback
// http(s) URL unless allowRemoteSidecar is set. A host that skipped validation, or an older one, must not
// leave memory silently off: every problem becomes one clear log line and hooks fail at once.

const LOOPBACK_NAMES = new Set(["localhost", "::1", "[::1]"]);

/** 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackHost(hostname) {
  const host = String(hostname).toLowerCase();
  if (LOOPBACK_NAMES.has(host)) return true;
  const parts = host.split(".");
  return parts.length === 4 && parts[0] === "127" && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255);
}

function typeOk(type, value) {
  switch (type) {
    case "object": return value !== null && typeof value === "object" && !Array.isArray(value);
    case "array": return Array.isArray(value);
    case "integer": return Number.isInteger(value);
    case "number": return typeof value === "number" && Number.isFinite(value);
    case "string": return typeof value === "string";
    case "boolean": return typeof value === "boolean";
    default: return true;
  }
}

// What a pattern in the schema asks for, in words (the key's last name, without an index).
const PATTERN_HINTS = {
  sidecarUrl: "must be an http(s) URL with scheme, host and port, e.g. http://127.0.0.1:8377",
  command: "must be a command name or path without leading or trailing spaces",
  stateDir: "must be an absolute path",
  excludeSessions: "must be a glob pattern without commas",
  includeSessions: "must be a glob pattern without commas",
};

function patternHint(where) {
  const key = where.replace(/\[\d+\]$/, "").split(".").at(-1);
  return PATTERN_HINTS[key] ?? "has the wrong form";
}

const show = (value) => JSON.stringify(value)?.slice(0, 120) ?? String(value);

/** The JSON-schema keywords the manifest uses, checked; returns messages naming the key and what to fix. */
function check(schema, value, where, out) {
  if (schema.type && !typeOk(schema.type, value)) {
    out.push(`${where} must be ${schema.type === "integer" ? "an integer" : `a${/^[aeiou]/.test(schema.type) ? "n" : ""} ${schema.type}`}, got ${show(value)}`);
    return;
  }
  if (schema.enum && !schema.enum.includes(value)) out.push(`${where} must be one of ${schema.enum.map(show).join(", ")}, got ${show(value)}`);
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) out.push(`${where} must be at least ${schema.minimum}, got ${value}`);
    if (schema.maximum !== undefined && value > schema.maximum) out.push(`${where} must be at most ${schema.maximum}, got ${value}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) out.push(`${where} must be more than ${schema.exclusiveMinimum}, got ${value}`);
  }
  if (typeof value === "string") {
    if (schema.minLength !== undefined && value.length < schema.minLength) out.push(`${where} must not be empty`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) out.push(`${where} is longer than ${schema.maxLength} characters`);
    if (schema.pattern && !new RegExp(schema.pattern, "u").test(value)) out.push(`${where} ${patternHint(where)}, got ${show(value)}`);
  }
  if (Array.isArray(value)) {
    if (schema.maxItems !== undefined && value.length > schema.maxItems) out.push(`${where} has more than ${schema.maxItems} entries`);
    if (schema.items) value.forEach((item, i) => check(schema.items, item, `${where}[${i}]`, out));
  }
  if (schema.type === "object" && schema.properties) {
    for (const [key, item] of Object.entries(value)) {
      const sub = schema.properties[key];
      if (!sub) {
        if (schema.additionalProperties === false) out.push(`${where ? `${where}.` : ""}${key} is not a setting of this plugin (see its README)`);
        continue;
      }
      if (item !== undefined) check(sub, item, where ? `${where}.${key}` : key, out);
    }
  }
}

/** Every problem of the user's plugin config, as messages (empty when it is valid). */
export function validateConfig(user, schema) {
  const out = [];
  if (user === undefined || user === null) return out;
  check(schema, user, "", out);
  if (typeof user !== "object" || Array.isArray(user)) return ["the plugin config must be an object"];
  if (out.length) return out;
  if (typeof user.sidecarUrl === "string" && user.allowRemoteSidecar !== true) {
    let host;
    try {
      host = new URL(user.sidecarUrl).hostname;
    } catch {
      host = undefined;
    }
    if (!host || !isLoopbackHost(host)) {
      out.push(`sidecarUrl ${show(user.sidecarUrl)} is not on this machine (127.0.0.1, ::1 or localhost); ` +
        "the conversation would leave it: set allowRemoteSidecar: true to mean it");
    }
  }
  return out;
}
