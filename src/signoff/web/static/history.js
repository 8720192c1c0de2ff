// Decided and executed requests: who decided, when, and what happened.

import { api, ApiError } from "./api.js";
import { title } from "./card.js";
import { h, toast, when } from "./dom.js";

const ENDED = ["approved", "rejected", "expired", "canceled", "executing", "completed", "failed"];

function resultText(req) {
  if (!req.result) return req.status === "executing" ? "running" : "";
  if (!req.result.ok) return `failed: ${req.result.error ?? ""}`;
  const value = req.result.result;
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text.length > 120 ? `${text.slice(0, 117)}…` : text;
}

export function historyView(root) {
  const rows = new Map();
  const body = h("tbody", { "data-role": "history" });
  const status = h("select", { "data-role": "status-filter", "aria-label": "status", onchange: () => load(true) },
    h("option", { value: "" }, "all decided"), ENDED.map((s) => h("option", { value: s }, s)));
  const more = h("button", { type: "button", hidden: true, onclick: () => load(false) }, "Load more");
  let cursor = null;

  const row = (req) => h("tr", { "data-id": req.id, "data-status": req.status },
    h("td", {}, h("time", { datetime: req.created_at }, when(req.created_at))),
    h("td", {}, req.kind),
    h("td", {}, h("a", { href: `/requests/${encodeURIComponent(req.id)}` }, title(req))),
    h("td", {}, h("span", { class: `badge status-${req.status}` }, req.status)),
    h("td", {}, req.decision?.decided_by ?? ""),
    h("td", {}, req.decision ? when(req.decision.decided_at) : ""),
    h("td", { class: "result-cell" }, resultText(req)));

  const show = (req, atTop) => {
    if (req.status === "pending" || (status.value && req.status !== status.value)) {
      rows.get(req.id)?.remove();
      rows.delete(req.id);
      return;
    }
    const old = rows.get(req.id);
    if (old && Number(old.dataset.version) > req.version) return;
    const fresh = row(req);
    fresh.dataset.version = req.version;
    if (old) old.replaceWith(fresh);
    else if (atTop) body.prepend(fresh);
    else body.append(fresh);
    rows.set(req.id, fresh);
  };

  const load = async (reset) => {
    if (reset) { body.replaceChildren(); rows.clear(); cursor = null; }
    const query = new URLSearchParams({ limit: "100" });
    if (status.value) query.set("status", status.value);
    if (cursor) query.set("cursor", cursor);
    try {
      const page = await api("GET", `/requests?${query}`);
      for (const r of page.items) show(r, false);
      cursor = page.next_cursor;
      more.hidden = !cursor;
    } catch (e) {
      toast(e instanceof ApiError ? e.message : String(e));
    }
  };

  root.replaceChildren(
    h("section", { class: "toolbar" }, h("h2", {}, "History"), status),
    h("table", { class: "list" },
      h("thead", {}, h("tr", {}, ["Asked", "Kind", "What", "Status", "Decided by", "Decided", "Result"].map((t) => h("th", {}, t)))),
      body),
    more);
  load(true);
  return { onRequest: (req) => show(req, true), resync: () => load(true) };
}
