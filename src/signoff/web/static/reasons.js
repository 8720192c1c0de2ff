// Rejecting on a card: a reason is required (the server refuses a blank one too), and
// quick picks fill in a common reason that the person can still edit. The picks are the
// same list as signoff.domain.decisions.QUICK_REASONS (a test checks they agree).

import { h } from "./dom.js";

export const QUICK_REASONS = Object.freeze([
  "Not safe to run",
  "Wrong arguments",
  "Not needed",
  "Ask me first",
]);

/** What a person is told who rejects without a reason (the server's own words). */
export const REASON_REQUIRED = "a reason is required to reject";

/**
 * The reject row: a reason field, quick picks and the Reject button, which stays disabled
 * until the reason is not blank. `reject(reason, button)` sends the decision.
 */
export function rejectArea(reject) {
  const hint = h("p", { class: "error", role: "alert", "data-role": "reason-hint", hidden: true },
    `Say why: ${REASON_REQUIRED}.`);
  const reason = h("input", {
    type: "text", "data-role": "reason", placeholder: "reason (required, told to the agent)",
    maxlength: 20000, required: true, "aria-label": "rejection reason",
    oninput: () => refresh(),
    onkeydown: (e) => {
      if (e.key !== "Enter") return;
      e.preventDefault();
      if (reason.value.trim()) button.click();
      else hint.hidden = false;
    },
  });
  const button = h("button", { type: "button", class: "reject", "data-action": "reject", disabled: true,
    title: REASON_REQUIRED,
    onclick: (e) => {
      if (!reason.value.trim()) { hint.hidden = false; return; } // re-enabled after a failed send
      reject(reason.value.trim(), e.currentTarget);
    } }, "Reject");
  const picks = QUICK_REASONS.map((text) => h("button", {
    type: "button", class: "chip", "data-quick-reason": text,
    onclick: () => { reason.value = text; refresh(); reason.focus(); },
  }, text));
  const refresh = () => {
    const blank = !reason.value.trim();
    button.disabled = blank;
    button.title = blank ? REASON_REQUIRED : "";
    if (!blank) hint.hidden = true;
  };
  const area = h("div", { class: "reject-area", "data-role": "reject-area" },
    h("div", { class: "row" }, reason, button),
    h("div", { class: "row quick-reasons", "data-role": "quick-reasons", "aria-label": "quick reasons" },
      ...picks),
    hint);
  return area;
}
