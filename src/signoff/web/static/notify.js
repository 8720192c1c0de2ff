// Opt-in browser notifications: while the tab is hidden, a new pending request the signed-in
// person may decide shows a system notification (tool and short args, as plain text with
// hidden characters made visible and the length capped); clicking it opens the request.
// Permission is asked only when the person clicks "Notify me", never on load; the opt-in is
// remembered in localStorage.

import { h, toast, visible } from "./dom.js";

const KEY = "signoff.notify";
const MAX_TITLE = 80;
const MAX_BODY = 160;
/** Ids notified (or seen created) on this page, so a replayed event does not notify twice. */
const SEEN_LIMIT = 2000;

// localStorage throws where the browser keeps no site data: then the opt-in lasts as long
// as the page
let unsaved = null;

function remembered() {
  try { return localStorage.getItem(KEY); } catch { return unsaved; }
}

function remember(value) {
  unsaved = value;
  try {
    if (value === null) localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, value);
  } catch { /* kept in unsaved */ }
}

/** text on one line, hidden characters as escapes, at most max characters. */
export function shortText(text, max) {
  const line = visible(String(text ?? "").replace(/[ \t\r\n]+/g, " "), false).trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** What a notification says of req: {title, body}. */
export function notice(req) {
  const title = shortText(`signoff: ${req.requested_by} asks`, MAX_TITLE);
  let body;
  if (req.kind === "approval") body = `${req.tool_name} ${JSON.stringify(req.tool_args ?? {})}`;
  else if (req.kind === "choice") body = `${req.prompt} (${(req.options ?? []).join(" / ")})`;
  else body = req.prompt || (req.questions ?? []).map((q) => q.text).join(" · ");
  return { title, body: shortText(body, MAX_BODY) };
}

/** Whether `user` may decide req: no designated approvers or among them, and not their own. */
export function mayDecide(req, user) {
  if (req.status !== "pending" || req.requested_by === user) return false;
  if (Array.isArray(req.allowed_decisions) && !req.allowed_decisions.length) return false;
  return !req.approvers?.length || req.approvers.includes(user);
}

/**
 * The notifier of the signed-in `user`. onEvent(message) with each live event; button()
 * is the "Notify me" toggle.
 */
export function notifier(user) {
  const supported = typeof window.Notification === "function";
  const seen = new Set();
  const buttons = [];
  const wanted = () => remembered() === "on";
  const on = () => supported && wanted() && Notification.permission === "granted";

  const label = (b) => {
    b.textContent = on() ? "Notifications on" : "Notify me";
    b.setAttribute("aria-pressed", String(on()));
    b.title = !supported ? "this browser cannot show notifications"
      : on() ? "click to stop notifications from this browser"
        : "notify me of new requests while this tab is in the background";
  };
  const relabel = () => buttons.forEach(label);

  const toggle = async () => {
    if (on()) { remember(null); relabel(); return; }
    if (!supported) { toast("this browser cannot show notifications"); return; }
    const answer = await Notification.requestPermission();
    if (answer === "granted") {
      remember("on");
      toast("you will be notified of new requests while this tab is in the background", "ok");
    } else {
      remember(null);
      toast("notifications are blocked for this site; allow them in the browser's site settings");
    }
    relabel();
  };

  const show = (req) => {
    const { title, body } = notice(req);
    let note;
    try {
      note = new Notification(title, { body, tag: `signoff-${req.id}` });
    } catch {
      return; // a browser that shows notifications only from a service worker (Android)
    }
    note.onclick = () => {
      window.focus();
      note.close?.();
      location.assign(`/requests/${encodeURIComponent(req.id)}`);
    };
  };

  return {
    button() {
      const b = h("button", { type: "button", "data-action": "notify", disabled: !supported, onclick: toggle });
      label(b);
      buttons.push(b);
      return b;
    },
    onEvent(message) {
      const req = message.request;
      if (message.type !== "created" || !req || seen.has(req.id)) return;
      if (seen.size >= SEEN_LIMIT) seen.clear();
      seen.add(req.id);
      if (!on() || document.visibilityState !== "hidden" || !mayDecide(req, user)) return;
      show(req);
    },
  };
}
