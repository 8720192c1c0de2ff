// Starts the page's view, keeps the pending count live and follows the event stream.

import { api, follow } from "./api.js";
import { tickCountdowns } from "./card.js";
import { chatView } from "./chat.js";
import { conversationView } from "./conversation.js";
import { historyView } from "./history.js";
import { grantsView } from "./grants.js";
import { inboxView } from "./inbox.js";
import { notifier } from "./notify.js";
import { requestView } from "./request.js";

const page = document.body.dataset.page;
const root = document.getElementById("app");
const countEl = document.getElementById("pending-count");
const liveEl = document.getElementById("live");
const help = document.getElementById("help");
const pending = new Map();
let more = false;
const notifications = notifier(document.querySelector('meta[name="signoff-user"]').content);

const nav = page === "conversation" ? "chat" : page;
document.querySelector(`[data-nav="${nav}"]`)?.setAttribute("aria-current", "page");

const view = page === "inbox" ? inboxView(root, { pending, notifier: notifications })
  : page === "history" ? historyView(root)
  : page === "grants" ? grantsView(root)
  : page === "chat" ? chatView(root)
  : page === "conversation" ? conversationView(root, document.body.dataset.taskId)
  : requestView(root, document.body.dataset.requestId);

function showCount() {
  const n = pending.size;
  countEl.textContent = more ? `${n}+` : String(n);
  document.title = `${n ? `(${n}${more ? "+" : ""}) ` : ""}${document.title.replace(/^\(\d+\+?\) /, "")}`;
  view.onCount?.(n, more);
}

function track(req) {
  const known = pending.get(req.id);
  if (known && known.version > req.version) return;
  if (req.status === "pending") pending.set(req.id, req);
  else pending.delete(req.id);
  showCount();
  view.onRequest?.(req);
}

async function resync() {
  const items = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ status: "pending", limit: "200" });
    if (cursor) query.set("cursor", cursor);
    const got = await api("GET", `/requests?${query}`);
    items.push(...got.items);
    cursor = got.next_cursor;
  } while (cursor && items.length < 1000);
  more = Boolean(cursor);
  const fresh = new Set(items.map((r) => r.id));
  for (const r of items) track(r);
  // requests we hold as pending that the fresh page lacks: ask for each
  for (const [id] of pending) {
    if (!fresh.has(id)) api("GET", `/requests/${encodeURIComponent(id)}`).then(track, () => {
      pending.delete(id);
      showCount();
    });
  }
  showCount();
}

const since = Number(document.querySelector('meta[name="signoff-seq"]').content);
follow({
  since: Number.isFinite(since) ? since : null,
  onEvent: (message) => {
    notifications.onEvent(message);
    track(message.request);
  },
  onState: (state, reconnected) => {
    liveEl.dataset.state = state;
    liveEl.textContent = state === "live" ? "live" : "reconnecting…";
    if (state === "live") {
      resync().catch(() => {});
      if (reconnected) view.resync?.();
    }
  },
});

setInterval(tickCountdowns, 1000);

// Notification routes that cannot send, named in a banner: a request nobody was told of
// would otherwise just wait.
const failingEl = document.getElementById("notify-failing");
async function showFailingRoutes() {
  const got = await api("GET", "/notify/failing").catch(() => ({ items: [] }));
  const items = got.items || [];
  failingEl.textContent = items.length
    ? `Notifications failing: ${items.map((r) => `${r.name} (${r.error})`).join("; ")}. `
      + "See signoff notify list."
    : "";
  failingEl.hidden = !items.length;
}
showFailingRoutes();
setInterval(showFailingRoutes, 30000);

help.querySelector("[data-close-help]").addEventListener("click", () => { help.hidden = true; });
document.addEventListener("keydown", (e) => {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const typing = e.target.closest?.("input, textarea, select");
  if (e.key === "Escape") {
    help.hidden = true;
    if (typing) e.target.blur();
    return;
  }
  if (typing) return;
  if (e.key === "?") { help.hidden = !help.hidden; e.preventDefault(); return; }
  if (view.key?.(e)) e.preventDefault();
});
