// Where the inbox's cards go: one list newest first, or grouped under their session (the
// agent and the count in each group's head, a group collapsible and decided as a whole).

import { h } from "./dom.js";
import { rejectArea } from "./reasons.js";

const newest = (card) => card.request().created_at;

function insertSorted(container, card) {
  const key = newest(card);
  const after = [...container.children].find((c) => newest(c) < key);
  container.insertBefore(card, after ?? null);
}

/**
 * A session's group: its head names the session, its agents and how many wait; "Approve all"
 * asks to confirm and "Reject all" for a reason (with the cards' quick picks), then they
 * call onBatch(type, ids, reason), which resolves when done.
 */
function sessionGroup(sessionId, onBatch) {
  const body = h("div", { class: "group-body" });
  const meta = h("span", { class: "meta", "data-role": "group-meta" });
  const confirmRow = h("div", { class: "row confirm", "data-role": "group-confirm", hidden: true });
  const toggle = h("button", { type: "button", class: "group-toggle", "data-action": "toggle-group",
    "aria-expanded": "true", onclick: () => {
      body.hidden = !body.hidden;
      toggle.setAttribute("aria-expanded", String(!body.hidden));
      el.classList.toggle("collapsed", body.hidden);
    } }, `session ${sessionId}`);
  const ids = () => [...body.children].map((c) => c.dataset.id);
  const ask = (type) => {
    const n = ids().length;
    const question = h("span", {}, `${type === "approve" ? "Approve" : "Reject"} all ${n} pending in session ${sessionId}?`);
    const cancel = h("button", { type: "button", onclick: () => { confirmRow.hidden = true; } }, "Cancel");
    const done = async (reason) => {
      await onBatch(type, ids(), reason);
      confirmRow.hidden = true;
    };
    if (type === "reject") {
      // the card's reject row: a reason is required, quick picks fill one in
      const area = rejectArea((reason, button) => { button.disabled = true; done(reason); });
      confirmRow.replaceChildren(question, area, cancel);
      confirmRow.hidden = false;
      area.querySelector('[data-role="reason"]').focus();
      return;
    }
    const yes = h("button", { type: "button", class: "approve", "data-action": "confirm-group-approve",
      onclick: () => { yes.disabled = true; done(""); } }, `Yes, approve ${n}`);
    confirmRow.replaceChildren(question, yes, cancel);
    confirmRow.hidden = false;
    yes.focus();
  };
  const el = h("section", { class: "group", "data-session": sessionId, "aria-label": `session ${sessionId}` },
    h("header", { class: "group-head" }, toggle, meta,
      h("button", { type: "button", class: "approve", "data-action": "group-approve-all", onclick: () => ask("approve") }, "Approve all"),
      h("button", { type: "button", class: "reject", "data-action": "group-reject-all", onclick: () => ask("reject") }, "Reject all")),
    confirmRow, body);
  el.body = body;
  el.refresh = () => {
    const cards = [...body.children];
    const agents = [...new Set(cards.map((c) => c.request().requested_by))].sort();
    meta.textContent = `${agents.join(", ")} · ${cards.length} pending`;
  };
  return el;
}

/**
 * The layout of the queue element `list`. onBatch(type, ids, reason) decides a group.
 * Returns {place(card), remove(card), setGrouped(on, cards), order()}.
 */
export function queueLayout(list, onBatch) {
  let grouped = false;
  const groups = new Map();

  const groupOf = (card) => {
    const session = card.request().session_id;
    let group = groups.get(session);
    if (!group) {
      group = sessionGroup(session, onBatch);
      groups.set(session, group);
      // groups stay where they first appeared: moving one would take focus from a card in it
      const key = newest(card);
      const after = [...list.children].find((g) => g.body.firstElementChild && newest(g.body.firstElementChild) < key);
      list.insertBefore(group, after ?? null);
    }
    return group;
  };

  const place = (card) => {
    if (!grouped) { insertSorted(list, card); return; }
    const group = groupOf(card);
    insertSorted(group.body, card);
    group.refresh();
  };

  const remove = (card) => {
    const group = grouped ? groups.get(card.request().session_id) : null;
    card.remove();
    if (!group) return;
    if (group.body.children.length) group.refresh();
    else { group.remove(); groups.delete(group.dataset.session); }
  };

  return {
    place,
    remove,
    setGrouped(on, cards) {
      grouped = on;
      groups.clear();
      list.replaceChildren();
      // newest first, so the groups come in the order of their newest requests
      for (const card of [...cards].sort((a, b) => (newest(a) < newest(b) ? 1 : -1))) place(card);
    },
    /** The cards a person can move through (j/k), in the order shown; collapsed groups skipped. */
    order: () => [...list.querySelectorAll("article.card")].filter((c) => !c.closest(".group-body[hidden]")),
  };
}
