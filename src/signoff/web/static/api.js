// The public API, called with the session cookie and the page's CSRF token, and the live stream.

const API = "/api/v1";
const csrf = document.querySelector('meta[name="csrf-token"]').content;

export class ApiError extends Error {
  constructor(status, kind, detail) {
    super(detail);
    this.status = status;
    this.kind = kind;
  }
}

/**
 * JSON.parse that keeps every number exactly as the server wrote it: one that a double cannot
 * hold (an integer past 2^53, say) stays its source text, as JSON.rawJSON, which
 * JSON.stringify writes back verbatim; so args are shown and sent back unrounded.
 */
export function parseJson(text) {
  if (typeof JSON.rawJSON !== "function") return JSON.parse(text);
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && context?.source !== undefined && String(value) !== context.source
      ? JSON.rawJSON(context.source)
      : value);
}

export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (method !== "GET") init.headers["X-CSRF-Token"] = csrf;
  let response;
  try {
    response = await fetch(API + path, init);
  } catch {
    throw new ApiError(0, "Unreachable", "the server cannot be reached; try again in a moment");
  }
  if (response.status === 401) {
    location.assign(`/login?next=${encodeURIComponent(location.pathname)}`);
    throw new ApiError(401, "Unauthenticated", "signed out");
  }
  const data = await response.text().then(parseJson).catch(() => ({}));
  if (!response.ok) {
    throw new ApiError(response.status, data.error || "Error", data.detail || response.statusText);
  }
  return data;
}

/** Decide a request; ``via`` ("mcp-url" or none) says how the person reached its page. */
export const decide = (id, decision, via) =>
  api("POST", `/requests/${encodeURIComponent(id)}/decision${via ? `?via=${encodeURIComponent(via)}` : ""}`, decision);

/**
 * Follow the event stream over WebSocket, reconnecting by itself. After a reconnect it asks
 * for everything after the last seq it saw, so no event is missed across a server restart.
 * onEvent(message); onState("live" | "reconnecting", isReconnect).
 */
export function follow({ since, onEvent, onState }) {
  let last = since;
  let delay = 500;
  let opened = false;
  const connect = () => {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = last === null || last === undefined ? "" : `?since=${last}`;
    const ws = new WebSocket(`${scheme}://${location.host}${API}/ws${query}`);
    ws.onopen = () => {
      delay = 500;
      onState("live", opened);
      opened = true;
    };
    ws.onmessage = (m) => {
      const message = parseJson(m.data);
      if (message.type === "heartbeat") return;
      if (typeof message.seq === "number") last = Math.max(last ?? 0, message.seq);
      onEvent(message);
    };
    ws.onclose = (e) => {
      onState("reconnecting", opened);
      if (e.code === 4401) {
        location.assign(`/login?next=${encodeURIComponent(location.pathname)}`);
        return;
      }
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 5000);
    };
  };
  connect();
}
