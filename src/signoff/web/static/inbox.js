// The pending queue: live, with selection, batch decisions and the keyboard.

import { api, ApiError } from "./api.js";
import { requestCard } from "./card.js";
import { h, toast } from "./dom.js";

export function inboxView(root) {
  const cards = new Map();
  const list = h("div", { class: "queue", "data-role": "queue" });
  const empty = h("p", { class: "empty", "data-role": "empty" }, "Nothing is waiting for you.");
  const selectedCount = h("span", { "data-role": "selected-count" }, "0 selected");
  const batchReason = h("input", { type: "text", "data-role": "batch-reason", maxlength: 20000,
    placeholder: "reason for rejections", "aria-label": "reason for batch rejection" });
  const confirmRow = h("div", { class: "row confirm", hidden: true });
  let focused = null;

  const selectedIds = () =>
    [...cards.values()].filter((c) => c.querySelector("input.select")?.checked).map((c) => c.dataset.id);
  const refreshSelection = () => { selectedCount.textContent = `${selectedIds().length} selected`; };

  const batch = async (type, ids) => {
    confirmRow.hidden = true;
    if (!ids.length) { toast("select some requests first"); return; }
    try {
      const { results } = await api("POST", "/decisions", { ids, type, reason: batchReason.value });
      const failed = results.filter((r) => r.error);
      for (const r of results) if (!r.error && r.status !== "pending") remove(r.id);
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
    confirmRow.replaceChildren(
      h("span", {}, `${type === "approve" ? "Approve" : "Reject"} all ${ids.length} pending requests?`),
      h("button", { type: "button", class: type, "data-action": `confirm-${type}-all`, onclick: () => batch(type, ids) },
        `Yes, ${type} all ${ids.length}`),
      h("button", { type: "button", onclick: () => { confirmRow.hidden = true; } }, "Cancel"));
    confirmRow.hidden = false;
  };

  root.replaceChildren(
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

  const sortKey = (c) => c.request().created_at;
  const place = (card) => {
    const key = sortKey(card);
    const after = [...list.children].find((c) => sortKey(c) < key);
    list.insertBefore(card, after ?? null);
  };
  const remove = (id) => {
    const card = cards.get(id);
    if (!card) return;
    if (focused === card) move(1) || move(-1);
    if (focused === card) focused = null;
    card.remove();
    cards.delete(id);
    empty.hidden = cards.size > 0;
    refreshSelection();
  };
  const upsert = (req) => {
    if (req.status !== "pending") { remove(req.id); return; }
    const card = cards.get(req.id);
    if (card) { card.update(req); return; }
    const fresh = requestCard(req, { selectable: true, link: true, onSelect: refreshSelection,
      onDecided: (r) => { if (r.status !== "pending") remove(r.id); } });
    fresh.addEventListener("focusin", () => setFocus(fresh, false));
    cards.set(req.id, fresh);
    place(fresh);
    empty.hidden = true;
  };
  const setFocus = (card, scroll = true) => {
    if (focused) focused.classList.remove("focused");
    focused = card;
    if (!card) return;
    card.classList.add("focused");
    if (scroll) { card.focus({ preventScroll: true }); card.scrollIntoView({ block: "nearest" }); }
  };
  const move = (step) => {
    const all = [...list.children];
    if (!all.length) return false;
    const at = all.indexOf(focused);
    const next = at < 0 ? all[0] : all[at + step];
    if (!next) return false;
    setFocus(next);
    return true;
  };

  return {
    onRequest: upsert,
    key(e) {
      if (e.key === "j") move(1);
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
