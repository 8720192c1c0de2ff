// The pending queue: live, searched and filtered by the server, optionally grouped by
// session, with selection, batch decisions and the keyboard.

import { api, ApiError } from "./api.js";
import { requestCard } from "./card.js";
import { h, toast } from "./dom.js";
import { filterBar, fitsExact, listQuery, narrowed, readState } from "./filters.js";
import { queueLayout } from "./groups.js";
import { REASON_REQUIRED } from "./reasons.js";

const MAX_SHOWN = 1000;

/**
 * The inbox in root. pending: every pending request the page knows (id -> request, kept by
 * main.js), for the filters' choices and the "of M pending" count; notifier: the opt-in
 * browser notifications, whose button sits in the filter bar.
 */
export function inboxView(root, { pending = new Map(), notifier = null } = {}) {
  const cards = new Map();
  const ended = new Set(); // ids seen decided: a list fetched before that is stale about them
  const list = h("div", { class: "queue", "data-role": "queue" });
  const empty = h("p", { class: "empty", "data-role": "empty" }, "Nothing is waiting for you.");
  const selectedCount = h("span", { "data-role": "selected-count" }, "0 selected");
  const batchReason = h("input", { type: "text", "data-role": "batch-reason", maxlength: 20000,
    placeholder: "reason for rejections (required)", "aria-label": "reason for batch rejection" });
  const confirmRow = h("div", { class: "row confirm", hidden: true });
  let focused = null;
  let total = { count: 0, more: false };
  let capped = false;
  let loading = 0; // the newest list load; an older one's answer is dropped
  let reloadTimer = 0;

  const selectedIds = () =>
    [...cards.values()].filter((c) => c.querySelector("input.select")?.checked).map((c) => c.dataset.id);
  const refreshSelection = () => { selectedCount.textContent = `${selectedIds().length} selected`; };

  const batch = async (type, ids, reason = batchReason.value) => {
    confirmRow.hidden = true;
    if (!ids.length) { toast("select some requests first"); return; }
    if (type === "reject" && !reason.trim()) { toast(`${REASON_REQUIRED}: type it first`); batchReason.focus(); return; }
    try {
      const { results } = await api("POST", "/decisions", { ids, type, reason });
      const failed = results.filter((r) => r.error);
      for (const r of results) if (!r.error && r.status !== "pending") remove(r.id, true);
      const done = results.length - failed.length;
      const verb = type === "approve" ? "approved" : "rejected";
      if (failed.length) {
        toast(`${done} ${verb}; ${failed.length} not: ${failed[0].detail}`);
      } else {
        toast(`${done} ${verb}`, "ok");
      }
    } catch (e) {
      toast(e instanceof ApiError ? e.message : String(e));
    }
    refreshSelection();
  };
  const confirmAll = (type) => {
    const ids = [...cards.keys()];
    const what = narrowed(bar.state) ? "shown" : "pending";
    confirmRow.replaceChildren(
      h("span", {}, `${type === "approve" ? "Approve" : "Reject"} all ${ids.length} ${what} requests?`),
      h("button", { type: "button", class: type, "data-action": `confirm-${type}-all`, onclick: () => batch(type, ids) },
        `Yes, ${type} all ${ids.length}`),
      h("button", { type: "button", onclick: () => { confirmRow.hidden = true; } }, "Cancel"));
    confirmRow.hidden = false;
  };

  const layout = queueLayout(list, batch);
  const showCount = () => {
    const of = `${total.count}${total.more ? "+" : ""}`;
    bar.setCount(`${cards.size}${capped ? "+" : ""} shown of ${of} pending`);
    empty.hidden = cards.size > 0;
    empty.textContent = narrowed(bar.state) ? "No pending request matches." : "Nothing is waiting for you.";
  };

  const remove = (id, decided = false) => {
    if (decided) ended.add(id);
    const card = cards.get(id);
    if (!card) return;
    if (focused === card) move(1) || move(-1);
    if (focused === card) focused = null;
    layout.remove(card);
    cards.delete(id);
    showCount();
    refreshSelection();
  };
  const add = (req) => {
    const card = requestCard(req, { selectable: true, link: true, onSelect: refreshSelection,
      onDecided: (r) => { if (r.status !== "pending") remove(r.id, true); } });
    card.addEventListener("focusin", () => setFocus(card, false));
    cards.set(req.id, card);
    layout.place(card);
    showCount();
  };
  const upsert = (req) => {
    if (req.status !== "pending") { remove(req.id, true); return; }
    const card = cards.get(req.id);
    if (card) { card.update(req); return; }
    if (ended.has(req.id)) return;
    if (!narrowed(bar.state)) add(req);
    else if (!fitsExact(req, bar.state)) return;
    else if (bar.state.q) scheduleReload(); // whether the text matches is the server's call
    else add(req);
  };

  // the filtered list, from the server; cards it lacks go, those it has come or update
  const reload = async () => {
    const mine = ++loading;
    const items = [];
    let cursor = null;
    try {
      do {
        const got = await api("GET", `/requests?${listQuery(bar.state, cursor)}`);
        if (mine !== loading) return;
        items.push(...got.items);
        cursor = got.next_cursor;
      } while (cursor && items.length < MAX_SHOWN);
    } catch (e) {
      if (mine === loading) bar.setError(e instanceof ApiError ? e.message : String(e));
      return;
    }
    bar.setError("");
    capped = Boolean(cursor);
    const fresh = new Set(items.map((r) => r.id));
    for (const id of [...cards.keys()]) if (!fresh.has(id)) remove(id);
    for (const r of items) {
      if (cards.has(r.id)) cards.get(r.id).update(r);
      else if (r.status === "pending" && !ended.has(r.id)) add(r);
    }
    showCount();
  };
  const scheduleReload = () => {
    clearTimeout(reloadTimer);
    reloadTimer = setTimeout(reload, 100);
  };

  let grouped = false;
  const bar = filterBar(readState(), (state) => {
    if (state.group !== grouped) {
      grouped = state.group;
      layout.setGrouped(grouped, [...cards.values()]);
    }
    reload();
  });
  grouped = bar.state.group;
  layout.setGrouped(grouped, []);
  if (notifier) bar.el.append(notifier.button());

  root.replaceChildren(
    bar.el,
    h("section", { class: "toolbar", "aria-label": "batch decisions" },
      h("label", { class: "select-all" },
        h("input", { type: "checkbox", "data-role": "select-all", "aria-label": "select all", onchange: (e) => {
          for (const c of cards.values()) { const box = c.querySelector("input.select"); if (box) box.checked = e.target.checked; }
          refreshSelection();
        } }), " all"),
      selectedCount,
      h("button", { type: "button", class: "approve", "data-action": "approve-selected", onclick: () => batch("approve", selectedIds()) }, "Approve selected"),
      h("button", { type: "button", class: "reject", "data-action": "reject-selected", onclick: () => batch("reject", selectedIds()) }, "Reject selected"),
      batchReason,
      h("button", { type: "button", "data-action": "approve-all", onclick: () => confirmAll("approve") }, "Approve all"),
      h("button", { type: "button", "data-action": "reject-all", onclick: () => confirmAll("reject") }, "Reject all"),
      h("span", { class: "hint" }, "press ? for keys")),
    confirmRow, empty, list);
  showCount();
  if (narrowed(bar.state)) reload();

  const setFocus = (card, scroll = true) => {
    if (focused) focused.classList.remove("focused");
    focused = card;
    if (!card) return;
    card.classList.add("focused");
    if (scroll) { card.focus({ preventScroll: true }); card.scrollIntoView({ block: "nearest" }); }
  };
  const move = (step) => {
    const all = layout.order();
    if (!all.length) return false;
    const at = all.indexOf(focused);
    const next = at < 0 ? all[0] : all[at + step];
    if (!next) return false;
    setFocus(next);
    return true;
  };

  let optionsTimer = 0;
  return {
    onRequest: upsert,
    /** The page's pending total changed (main.js); the count and the filters' choices follow. */
    onCount(count, more) {
      total = { count, more };
      showCount();
      clearTimeout(optionsTimer);
      optionsTimer = setTimeout(() => bar.setOptions([...pending.values()]), 200);
    },
    resync() { if (narrowed(bar.state)) reload(); },
    key(e) {
      if (e.key === "/") bar.focusSearch();
      else if (e.key === "j") move(1);
      else if (e.key === "k") move(-1);
      else if (!focused) return false;
      else if (e.key === "a") focused.approve?.();
      else if (e.key === "r") { e.preventDefault(); focused.focusReject?.(); }
      else if (e.key === "x") {
        const box = focused.querySelector("input.select");
        if (box) { box.checked = !box.checked; refreshSelection(); }
      } else if (e.key === "o") location.assign(`/requests/${encodeURIComponent(focused.dataset.id)}`);
      else return false;
      return true;
    },
  };
}
