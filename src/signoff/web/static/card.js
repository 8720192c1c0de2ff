// One request as a card: what the agent asks, exactly what would run, and the controls
// for the decisions its kind allows. Used by the inbox, by a request's own page and, in a
// compact variant, inline in a chat conversation.

import { ApiError, decide } from "./api.js";
import { argsEditor } from "./argsform.js";
import { lineDiff } from "./diff.js";
import { ago, h, pretty, remaining, visible, when } from "./dom.js";
import { outcomeText, statusLabel } from "./outcome.js";
import { previewSection } from "./preview.js";
import { rejectArea } from "./reasons.js";

const TITLES = { approval: "Tool call", choice: "Choice", questions: "Questions" };

/** One line naming the request; agent text with every control (newlines too) escaped. */
export function title(req) {
  if (req.kind === "approval") return visible(req.tool_name, false);
  return visible(req.prompt || (req.kind === "questions" ? req.questions.map((q) => q.text).join(" · ") : ""), false);
}

function statusBadge(req) {
  return h("span", { class: `badge status-${req.status}`, "data-role": "status", title: req.status }, statusLabel(req));
}

export function countdown(req) {
  if (!req.expires_at || req.status !== "pending") return null;
  return h("span", { class: "countdown", "data-expires": req.expires_at, title: `expires ${when(req.expires_at)}` },
    `expires in ${remaining(req.expires_at)}`);
}

/** Keep every countdown on the page current. */
export function tickCountdowns() {
  for (const el of document.querySelectorAll(".countdown[data-expires]")) {
    const left = remaining(el.dataset.expires);
    el.textContent = left === "expired" ? "expiring…" : `expires in ${left}`;
    el.classList.toggle("soon", new Date(el.dataset.expires).getTime() - Date.now() < 60_000);
  }
}

function section(label, ...content) {
  return h("section", { class: "part" }, h("h3", {}, label), ...content);
}

function describe(req, opts = {}) {
  const parts = [];
  if (req.kind === "approval") {
    if (!opts.hideArgs) parts.push(section("Arguments", h("pre", { class: "args", "data-role": "args" }, pretty(req.tool_args))));
    if (req.preview) parts.push(previewSection(req.preview));
  } else if (req.status !== "pending" && req.kind === "choice") {
    parts.push(h("p", { class: "meta" }, `options: ${req.options.join(" · ")}`));
  }
  // the chat's box leaves the agent's context to the request's own page (its title links there)
  if (req.context !== null && req.context !== undefined && !opts.compact) {
    const text = typeof req.context === "string" ? req.context : pretty(req.context);
    parts.push(section("Context", h("pre", { class: "context" }, text)));
  }
  if (req.policy_note) parts.push(h("p", { class: "note" }, `Policy: ${req.policy_note}`));
  if (req.quorum > 1) {
    const names = req.votes.map((v) => v.decided_by).join(", ");
    parts.push(h("p", { class: "votes", "data-role": "votes" },
      `${req.votes.length} of ${req.quorum} approvals${names ? ` (${names})` : ""}`));
  }
  return parts;
}

const DECIDED = { approve: "approved", reject: "rejected", respond: "answered", choose: "answered", answer: "answered" };

function decisionSummary(d) {
  const x = d.decision;
  const bits = [`${DECIDED[x.type] ?? x.type} by ${d.decided_by}`];
  if (d.via === "mcp-elicitation") bits.push(`(in the MCP client ${d.client || "(unnamed)"})`);
  else if (d.via !== "person") bits.push(`(via ${d.via})`);
  if (x.scope && x.scope !== "once") bits.push(`scope ${x.scope}`);
  if (x.reason) bits.push(`reason: ${x.reason}`);
  if (x.feedback) bits.push(`feedback: ${x.feedback}`);
  if (x.choice) bits.push(`choice: ${x.choice}`);
  if (x.choices) bits.push(`choices: ${x.choices.join(", ")}`);
  return bits.join(" · ");
}

function outcome(req, opts = {}) {
  const parts = [];
  // the outcome in words when it says more than the badge (a result has its own section)
  const said = req.result ? "" : outcomeText(req);
  if (said && said !== statusLabel(req)) parts.push(h("p", { class: "outcome", "data-role": "outcome" }, said));
  if (req.decision) {
    parts.push(h("p", { class: "decision", "data-role": "decision" },
      decisionSummary(req.decision), " · ", when(req.decision.decided_at)));
    const answers = req.decision.decision.answers;
    if (answers && Object.keys(answers).length) {
      parts.push(h("dl", { class: "answers" }, Object.entries(answers).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])));
    }
  }
  if (req.kind === "approval" && req.approved_args && JSON.stringify(req.approved_args) !== JSON.stringify(req.tool_args)) {
    parts.push(section("Approved with edited arguments", lineDiff(pretty(req.tool_args), pretty(req.approved_args), "edited arguments")));
  }
  // the chat's tool card shows what the call returned; its box says only what was decided
  if (opts.compact) return parts;
  if (req.claimed_by) {
    const lease = req.status === "executing" && req.lease_until ? ` · lease until ${when(req.lease_until)}` : "";
    parts.push(h("p", { class: "meta", "data-role": "claim" }, `claimed by ${req.claimed_by} · ${when(req.claimed_at)}${lease}`));
  }
  if (req.result) {
    const r = req.result;
    parts.push(section(r.ok ? "Result" : "Failed",
      h("pre", { class: `result ${r.ok ? "ok" : "failed"}`, "data-role": "result" },
        r.ok ? pretty(r.result) : r.error || "failed")));
  }
  return parts;
}

/**
 * Build the card. opts: {selectable, link, onDecided(request), onSelect(), compact, hideArgs,
 * via (the channel its decisions are recorded through: "mcp-url" or none)}.
 * compact: the chat's inline box: no requester line, "Approve" and "Approve for this session"
 * as two buttons, and once decided only what was decided and by whom. hideArgs: the
 * arguments are shown beside the card already (the chat's tool card).
 * Returns the element; el.update(req) refreshes it in place.
 */
export function requestCard(req, opts = {}) {
  const el = h("article", { class: opts.compact ? "card compact" : "card", tabindex: "-1" });
  let current = null;

  const render = (r) => {
    current = r;
    el.replaceChildren();
    el.dataset.id = r.id;
    el.dataset.kind = r.kind;
    el.dataset.status = r.status;
    const head = h("header", {},
      opts.selectable && r.status === "pending"
        ? h("input", { type: "checkbox", class: "select", "aria-label": `select ${title(r)}`, onchange: () => opts.onSelect?.() })
        : null,
      h("span", { class: `badge kind-${r.kind}` }, TITLES[r.kind]),
      opts.link || opts.compact
        ? h("a", { class: "title", href: `/requests/${encodeURIComponent(r.id)}` }, title(r))
        : h("span", { class: "title" }, title(r)),
      statusBadge(r),
      countdown(r),
      opts.compact ? null : h("span", { class: "meta" },
        `${r.requested_by}${r.started_by ? ` (run started by ${r.started_by})` : ""} · session ${r.session_id} · `,
        h("time", { datetime: r.created_at, title: when(r.created_at) }, ago(r.created_at))));
    el.append(head);
    if (!opts.compact || r.status === "pending") el.append(...describe(r, opts));
    if (r.status === "pending") el.append(controls(r, el, opts));
    else el.append(...outcome(r, opts));
  };

  el.update = (r) => {
    if (current && r.version <= current.version) return;
    // keep what a person is typing unless the request left the state they were deciding in
    if (current && r.status === current.status && el.contains(document.activeElement)) {
      const votes = el.querySelector('[data-role="votes"]');
      const fresh = describe(r, opts).find((p) => p.dataset?.role === "votes");
      if (votes && fresh) votes.replaceWith(fresh);
      current = r;
      return;
    }
    render(r);
  };
  el.request = () => current;
  render(req);
  return el;
}

function controls(req, card, opts) {
  const allowed = new Set(req.allowed_decisions);
  const error = h("p", { class: "error", role: "alert", "data-role": "error" });
  const box = h("div", { class: "controls" });

  const send = async (decision, button) => {
    error.textContent = "";
    const buttons = box.querySelectorAll("button");
    for (const b of buttons) b.disabled = true;
    if (button) button.setAttribute("aria-busy", "true");
    try {
      const decided = await decide(req.id, decision, opts.via);
      card.update(decided);
      opts.onDecided?.(decided);
    } catch (e) {
      error.textContent = visible(e instanceof ApiError ? e.message : String(e));
      for (const b of buttons) b.disabled = false;
    } finally {
      if (button) button.removeAttribute("aria-busy");
    }
  };
  card.approve = () => {
    const scope = box.querySelector('[data-role="scope"]');
    if (allowed.has("approve")) send({ type: "approve", ...(scope ? { scope: scope.value } : {}) });
  };
  card.focusReject = () => box.querySelector('[data-role="reason"]')?.focus();

  if (req.kind === "approval") {
    const row = h("div", { class: "row" });
    if (allowed.has("approve") && opts.compact) {
      row.append(
        h("button", { type: "button", class: "approve", "data-action": "approve",
          onclick: (e) => send({ type: "approve", scope: "once" }, e.currentTarget) }, "Approve"),
        h("button", { type: "button", class: "approve-session", "data-action": "approve-session",
          onclick: (e) => send({ type: "approve", scope: "session" }, e.currentTarget) }, "Approve for this session"));
      if (req.editable !== false) {
        row.append(h("button", { type: "button", "data-action": "edit", onclick: () => editor.toggle() }, "Edit arguments"));
      }
    } else if (allowed.has("approve")) {
      const scope = h("select", { "data-role": "scope", "aria-label": "what the approval covers" },
        h("option", { value: "once" }, "only this call"),
        h("option", { value: "session" }, "same calls in this session"),
        h("option", { value: "always" }, "same calls from now on"));
      row.append(
        h("button", { type: "button", class: "approve", "data-action": "approve",
          onclick: (e) => send({ type: "approve", scope: scope.value }, e.currentTarget) }, "Approve"),
        h("label", { class: "scope" }, "for ", scope));
      // a call the requester marked not editable is approved as proposed or rejected
      if (req.editable !== false) {
        row.append(h("button", { type: "button", "data-action": "edit", onclick: () => editor.toggle() }, "Edit arguments"));
      }
    }
    box.append(row);
    const editor = argsEditor(req, (args, button) =>
      send({ type: "approve", args, scope: box.querySelector('[data-role="scope"]')?.value ?? "once" }, button), card);
    if (allowed.has("approve") && req.editable !== false) box.append(editor);
  } else if (req.kind === "choice" && allowed.has("choose")) {
    box.append(choiceControls(req, send));
  } else if (req.kind === "questions") {
    box.append(questionControls(req, allowed, send));
  }
  if (allowed.has("reject")) box.append(rejectArea((reason, button) => send({ type: "reject", reason }, button)));
  if (allowed.has("respond")) {
    const feedback = h("input", { type: "text", "data-role": "feedback", maxlength: 20000,
      placeholder: "tell the model instead of running the tool", "aria-label": "message to the model instead of running" });
    box.append(h("div", { class: "row" }, feedback,
      h("button", { type: "button", "data-action": "respond", onclick: (e) => {
        if (!feedback.value.trim()) { error.textContent = "write what the model should be told"; return; }
        send({ type: "respond", feedback: feedback.value }, e.currentTarget);
      } }, "Tell the model, don't run")));
  }
  box.append(error);
  return box;
}

function choiceControls(req, send) {
  const box = h("div", { class: "choice" });
  if (req.multi_select) {
    const boxes = req.options.map((o) => h("input", { type: "checkbox", value: o, "data-role": "option" }));
    box.append(h("div", { class: "checks" }, req.options.map((o, i) => h("label", {}, boxes[i], " ", o))));
    const other = req.allow_other ? otherInput() : null;
    if (other) box.append(other);
    box.append(h("button", { type: "button", class: "approve", "data-action": "choose",
      onclick: (e) => {
        const picked = boxes.filter((b) => b.checked).map((b) => b.value);
        if (other?.value.trim()) picked.push(other.value.trim());
        send({ type: "choose", choices: picked }, e.currentTarget);
      } }, "Choose selected"));
  } else {
    box.append(h("div", { class: "row options" }, req.options.map((o) =>
      h("button", { type: "button", class: "option", "data-action": "choose", "data-option": o,
        onclick: (e) => send({ type: "choose", choice: o }, e.currentTarget) }, `Choose ${o}`))));
    if (req.allow_other) {
      const other = otherInput();
      box.append(h("div", { class: "row" }, other,
        h("button", { type: "button", "data-action": "choose-other", onclick: (e) => {
          if (other.value.trim()) send({ type: "choose", choice: other.value.trim() }, e.currentTarget);
        } }, "Choose this answer")));
    }
  }
  return box;
}

function otherInput() {
  return h("input", { type: "text", "data-role": "other", placeholder: "other (free text)",
    maxlength: 20000, "aria-label": "other answer" });
}

function questionControls(req, allowed, send) {
  const fields = req.questions.map((q) =>
    h("textarea", { "data-question": q.id, rows: 2, maxlength: 20000, required: q.required, "aria-label": q.text }));
  const feedback = h("textarea", { "data-role": "answer-feedback", rows: 2, maxlength: 20000,
    "aria-label": "feedback", placeholder: "feedback for the agent" });
  const box = h("div", { class: "questions" },
    req.questions.map((q, i) => h("label", { class: "question" },
      h("span", {}, q.text, q.required ? " *" : ""), fields[i])));
  const row = h("div", { class: "row" });
  if (allowed.has("approve")) {
    // sending answers (below) comes first; this lets the agent go on with none
    row.append(h("button", { type: "button", "data-action": "approve",
      title: "the agent goes on without your answers",
      onclick: (e) => send({ type: "approve" }, e.currentTarget) }, "Continue without answers"));
  }
  if (allowed.has("answer")) {
    box.append(h("label", { class: "question" }, h("span", {}, "Feedback"), feedback));
    row.prepend(h("button", { type: "button", class: "approve", "data-action": "answer", onclick: (e) => {
      const answers = {};
      req.questions.forEach((q, i) => { if (fields[i].value.trim()) answers[q.id] = fields[i].value; });
      send({ type: "answer", answers, ...(feedback.value.trim() ? { feedback: feedback.value } : {}) }, e.currentTarget);
    } }, "Send answers"));
  }
  box.append(row);
  return box;
}
