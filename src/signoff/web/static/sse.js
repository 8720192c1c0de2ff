// A reader of a server-sent event stream over fetch(): EventSource cannot start from a
// Last-Event-ID of our choosing, and it reconnects forever even when the server ended the
// stream on purpose (a finished conversation).

import { parseJson } from "./api.js";

/** "K-N" as [K, N], or null for anything else. */
export function eventOrder(id) {
  const m = /^(\d+)-(\d+)$/.exec(id ?? "");
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/** Whether id a comes after id b (ids ordered by K, then N). */
export function isAfter(a, b) {
  const x = eventOrder(a);
  const y = eventOrder(b);
  if (!x || !y) return true;
  return x[0] !== y[0] ? x[0] > y[0] : x[1] > y[1];
}

/** Split the text received so far into complete frames; returns [frames, the unfinished rest]. */
export function frames(buffer) {
  const parts = buffer.replace(/\r\n?/g, "\n").split("\n\n");
  const rest = parts.pop();
  const done = [];
  for (const part of parts) {
    let id = null;
    const data = [];
    for (const line of part.split("\n")) {
      if (!line || line.startsWith(":")) continue; // a comment: the server's keepalive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") id = value;
      else if (field === "data") data.push(value);
    }
    if (data.length || id !== null) done.push({ id, data: data.join("\n") });
  }
  return [done, rest];
}

/**
 * Read `url` as a stream of JSON events, reconnecting with Last-Event-ID after a drop
 * (back-off 0.5 s doubling to 8 s). `isLast(event)` says whether an event ends what is worth
 * reading: when the server ends the stream after one, the reader stops instead of coming back.
 * onEvent(event, id); onState("live" | "reconnecting" | "ended" | "refused", status).
 * Returns {stop(), restart()}: restart reads on from the last id (after a follow-up).
 */
export function readStream(url, { after = null, onEvent, onState = () => {}, isLast = () => false }) {
  let last = after;
  let lastWasFinal = false;
  let delay = 500;
  let controller = null;
  let running = false;
  let stopped = false;
  let wanted = false; // a restart asked for while reading: read on even if the stream ends

  const once = async () => {
    controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (last) headers["Last-Event-ID"] = last;
    const response = await fetch(url, { headers, credentials: "same-origin", signal: controller.signal, cache: "no-store" });
    if (response.status === 401) {
      location.assign(`/login?next=${encodeURIComponent(location.pathname)}`);
      return "refused";
    }
    if (!response.ok) {
      onState("refused", response.status);
      return "refused";
    }
    onState("live", response.status);
    delay = 500;
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const [got, rest] = frames(buffer + value);
      buffer = rest;
      for (const frame of got) {
        if (frame.id && last && !isAfter(frame.id, last)) continue; // seen before a reconnect
        if (!frame.data) continue;
        let event;
        try {
          event = parseJson(frame.data);
        } catch {
          continue;
        }
        if (frame.id) last = frame.id;
        lastWasFinal = isLast(event);
        onEvent(event, frame.id);
      }
    }
    return lastWasFinal ? "ended" : "dropped";
  };

  const loop = async () => {
    running = true;
    while (!stopped) {
      let how;
      try {
        how = await once();
      } catch {
        how = stopped ? "ended" : "dropped";
      }
      if (how === "refused") break;
      if (how === "ended" && wanted) { wanted = false; continue; }
      if (how === "ended") { onState("ended"); break; }
      if (stopped) break;
      onState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 8000);
    }
    running = false;
  };

  loop();
  return {
    stop() { stopped = true; controller?.abort(); },
    restart() {
      if (stopped) return;
      if (running) wanted = true; // the open stream may carry on; if it ends, read on from the last id
      else loop();
    },
    lastId: () => last,
  };
}
