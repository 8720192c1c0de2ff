// Building DOM nodes. Every string becomes a text node: agent-supplied text is never parsed as HTML,
// and its control, bidi and invisible format characters are shown as escapes (visible()).

// The twin of signoff.terminal.safe_text: controls (C0, DEL, C1), format characters (bidi
// embeddings, overrides, isolates and marks, zero-width characters, BOM, tags...), lone
// surrogates, line and paragraph separators, and the invisible fillers.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u034F\u115F\u1160\u17B4\u17B5\u2065\u3164\uFFA0\u{E0000}-\u{E007F}]/gu;

function hex(code, width) {
  return code.toString(16).padStart(width, "0");
}

/** text with hidden characters as visible escapes (\x1b, \u202e); newlines and tabs stay if multiline. */
export function visible(text, multiline = true) {
  return String(text).replace(HIDDEN, (c) => {
    if (multiline && (c === "\n" || c === "\t")) return c;
    const code = c.codePointAt(0);
    return code < 0x100 ? `\\x${hex(code, 2)}` : code < 0x10000 ? `\\u${hex(code, 4)}` : `\\U${hex(code, 8)}`;
  });
}

/** JSON text with hidden characters as JSON \u escapes: shown visibly, and it parses to the same value. */
export function visibleJson(text) {
  if (typeof text !== "string") return text;
  return text.replace(HIDDEN, (c) => {
    if (c === "\n" || c === "\t") return c;
    let escaped = ""; // an astral character as its UTF-16 pair, as JSON writes it
    for (let i = 0; i < c.length; i++) escaped += `\\u${hex(c.charCodeAt(i), 4)}`;
    return escaped;
  });
}

// attributes a person reads (or hears): agent text in them is made visible too
const READ_ATTRIBUTES = new Set(["aria-label", "title", "placeholder"]);

/** h("div", {class: "x", onclick: fn}, child, "text", ...) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, READ_ATTRIBUTES.has(key) ? visible(value) : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(visible(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** A JSON value, indented, hidden characters as JSON escapes (numbers kept as the server wrote them). */
export function pretty(value) {
  return visibleJson(JSON.stringify(value, null, 2));
}

export function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

export function ago(iso) {
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** "4:05" or "1h 02m" until iso; "expired" once past. */
export function remaining(iso) {
  const s = Math.floor((new Date(iso).getTime() - Date.now()) / 1000);
  if (s <= 0) return "expired";
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

let toastTimer = 0;
export function toast(message, kind = "error") {
  const el = document.getElementById("toast");
  el.textContent = visible(message);
  el.dataset.kind = kind;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 6000);
}
