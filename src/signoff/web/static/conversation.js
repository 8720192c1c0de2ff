// One conversation, drawn from the task's AG-UI event stream: messages streamed token by
// token, tool calls as compact cards, and each call a person must decide as an inline box
// (the inbox's request card). Reload replays the stream from the start, so the page shows
// the same conversation, history and waiting boxes, on any device.

import { api, ApiError } from "./api.js";
import { requestCard } from "./card.js";
import { composer, STATUS_LABELS } from "./chat.js";
import { h, pretty, toast, visible, visibleJson } from "./dom.js";
import { readStream } from "./sse.js";

const DECIDED = { approved: "approved", rejected: "rejected", expired: "expired", canceled: "canceled" };

/** "approved by alice (edited) · reason: too risky" from a signoff.decision event's value. */
function decisionLine(d) {
  const bits = [`${DECIDED[d.status] ?? d.status}${d.by ? ` by ${d.by}` : ""}`];
  if (d.via && d.via !== "person" && d.via !== "policy") bits.push(`via ${d.via}`);
  if (d.edited) bits.push("with edited arguments");
  if (d.choice !== undefined && d.choice !== null) bits.push(`choice: ${d.choice}`);
  if (d.choices) bits.push(`choices: ${d.choices.join(", ")}`);
  if (d.reason) bits.push(`reason: ${d.reason}`);
  if (d.feedback) bits.push(`feedback: ${d.feedback}`);
  return bits.join(" · ");
}

/** Whether an event ends the conversation for now (the server then ends the stream). */
function isEnd(event) {
  if (event.type === "RUN_ERROR") return true;
  return event.type === "RUN_FINISHED" && event.outcome?.type !== "interrupt";
}

export function conversationView(root, taskId) {
  const path = encodeURIComponent(taskId);
  const transcript = h("div", { class: "transcript", "data-role": "transcript" });
  const status = h("span", { class: "badge", "data-role": "task-status" }, "…");
  const agent = h("span", { class: "agent", "data-role": "agent" });
  const streamState = h("span", { class: "hint", "data-role": "stream" });
  const messages = new Map();
  const tools = new Map();
  const boxes = new Map();
  let current = null; // the status the stream last showed
  let focused = null;
  let reader = null;
  let seen = 0; // events read so far

  const followUp = composer({
    label: "follow-up message", placeholder: "Reply to continue the conversation", button: "Send",
    send: async (content) => {
      const before = seen;
      await api("POST", `/tasks/${path}/messages`, { content });
      // an open stream may have brought the new run's events first: they say where it is
      if (seen === before) setStatus("Running");
      reader.restart();
    },
  });
  followUp.hidden = true;

  const nearBottom = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
  const add = (el, parent = transcript) => {
    const stick = nearBottom();
    parent.append(el);
    if (stick) el.scrollIntoView({ block: "end" });
  };

  const setStatus = (s) => {
    current = s;
    status.textContent = STATUS_LABELS[s] ?? s;
    status.className = `badge task-${s.toLowerCase()}`;
    status.dataset.status = s;
    followUp.hidden = s !== "Completed";
  };

  // --- messages -------------------------------------------------------------------------

  const message = (id, role = "assistant") => {
    let m = messages.get(id);
    if (!m) {
      const text = document.createTextNode("");
      const el = h("div", { class: `message ${role === "user" ? "user" : "assistant"}`, "data-role": `message-${role}`, "data-message": id },
        h("div", { class: "who" }, role === "user" ? "You" : "Agent"), h("div", { class: "text" }, text));
      m = { el, text };
      messages.set(id, m);
      add(el);
    }
    return m;
  };
  const say = (id, role, delta) => {
    const m = message(id, role);
    const stick = nearBottom();
    m.text.appendData(visible(delta ?? ""));
    if (stick) m.el.scrollIntoView({ block: "end" });
  };

  // --- tool calls -----------------------------------------------------------------------

  const tool = (id, name = "tool") => {
    let t = tools.get(id);
    if (!t) {
      const args = h("pre", { class: "args", "data-role": "tool-args" });
      const decided = h("p", { class: "decided", "data-role": "tool-decision", hidden: true });
      const result = h("pre", { class: "result", "data-role": "tool-result", hidden: true });
      const slot = h("div", { class: "slot" });
      const label = h("span", { class: "tool-name", "data-role": "tool-name" }, visible(name, false));
      const el = h("section", { class: "tool", "data-call": id, "aria-label": `tool call ${visible(name, false)}` },
        h("header", {}, h("span", { class: "badge kind-approval" }, "Tool"), label), args, slot, decided, result);
      t = { el, args, decided, result, slot, label, raw: "", name };
      tools.set(id, t);
      add(el);
    }
    if (name !== "tool" && t.name === "tool") { t.name = name; t.label.textContent = visible(name, false); }
    return t;
  };
  const showArgs = (t) => {
    try {
      t.args.textContent = pretty(JSON.parse(t.raw || "{}"));
    } catch {
      t.args.textContent = visibleJson(t.raw);
    }
  };

  // --- boxes: a waiting request, drawn by the inbox's card -------------------------------

  const box = (interrupt) => {
    const meta = interrupt.metadata?.signoff ?? {};
    const id = meta.requestId ?? interrupt.id;
    if (!id || boxes.has(id)) return;
    const callId = interrupt.toolCallId ?? meta.toolCallId;
    const t = callId ? tool(callId, meta.toolName ?? "tool") : null;
    const holder = h("div", { class: "box", "data-request": id },
      h("p", { class: "waiting" }, visible(interrupt.message ?? "Waiting for a person", false), " ",
        h("a", { href: `/requests/${encodeURIComponent(id)}` }, "open")));
    // the tool card above the box shows the arguments already
    const b = { holder, card: null, hideArgs: Boolean(t) };
    boxes.set(id, b);
    if (t) t.slot.append(holder);
    else add(holder);
    load(id);
  };
  const load = async (id) => {
    const b = boxes.get(id);
    try {
      const req = await api("GET", `/requests/${encodeURIComponent(id)}`);
      if (b.card) { b.card.update(req); return; }
      b.card = requestCard(req, { compact: true, hideArgs: b.hideArgs, onDecided: () => { if (focused === b.card) next(1); } });
      b.card.addEventListener("focusin", () => setFocus(b.card, false));
      b.holder.replaceChildren(b.card);
      if (req.status === "pending" && !focused) setFocus(b.card, false);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) toast(e instanceof ApiError ? e.message : String(e));
    }
  };

  const setFocus = (card, scroll = true) => {
    focused?.classList.remove("focused");
    focused = card;
    if (!card) return;
    card.classList.add("focused");
    if (scroll) { card.focus({ preventScroll: true }); card.scrollIntoView({ block: "nearest" }); }
  };
  const waiting = () => [...boxes.values()].map((b) => b.card).filter((c) => c && c.request().status === "pending");
  const next = (step) => {
    const all = waiting();
    if (!all.length) { setFocus(null); return false; }
    const at = all.indexOf(focused);
    setFocus(all[at < 0 ? 0 : Math.max(0, Math.min(all.length - 1, at + step))]);
    return true;
  };

  // --- the stream -----------------------------------------------------------------------

  const onEvent = (e) => {
    seen += 1;
    switch (e.type) {
      case "RUN_STARTED":
        setStatus("Running");
        break;
      case "TEXT_MESSAGE_START":
        message(e.messageId, e.role);
        break;
      case "TEXT_MESSAGE_CONTENT":
      case "TEXT_MESSAGE_CHUNK":
        say(e.messageId, e.role, e.delta);
        break;
      case "TOOL_CALL_START":
        tool(e.toolCallId, e.toolCallName);
        break;
      case "TOOL_CALL_ARGS":
      case "TOOL_CALL_CHUNK": {
        const t = tool(e.toolCallId, e.toolCallName);
        t.raw += e.delta ?? "";
        t.args.textContent = visibleJson(t.raw);
        break;
      }
      case "TOOL_CALL_END":
        showArgs(tool(e.toolCallId));
        break;
      case "TOOL_CALL_RESULT": {
        const t = tool(e.toolCallId);
        t.result.hidden = false;
        t.result.textContent = visible(typeof e.content === "string" ? e.content : pretty(e.content));
        break;
      }
      case "CUSTOM":
        if (e.name === "signoff.decision" && e.value) {
          const d = e.value;
          const t = tool(d.toolCallId, d.toolName);
          t.decided.hidden = false;
          t.decided.textContent = visible(decisionLine(d));
          t.el.dataset.decision = d.status;
          if (d.status !== "approved") t.result.classList.add("failed");
          if (boxes.get(d.requestId)?.card?.request().status === "pending") load(d.requestId);
        }
        break;
      case "RUN_FINISHED":
        if (e.outcome?.type === "interrupt") {
          setStatus("Paused");
          for (const i of e.outcome.interrupts ?? []) box(i);
        } else setStatus(e.outcome?.type === "cancelled" ? "Canceled" : "Completed");
        break;
      case "RUN_ERROR":
        setStatus("Failed");
        add(h("p", { class: "run-error", role: "alert", "data-role": "run-error" }, visible(e.message ?? "the run failed")));
        break;
      default:
        break; // reasoning, state and other events: nothing to show
    }
  };

  const gone = () => root.replaceChildren(h("p", { class: "empty", "data-role": "not-found" },
    "No such conversation, or you may not see it. ", h("a", { href: "/chat" }, "Your conversations")));

  root.replaceChildren(
    h("header", { class: "chat-head" }, h("a", { href: "/chat" }, "← Conversations"), agent, status, streamState),
    transcript, followUp);
  api("GET", `/tasks/${path}`).then((t) => {
    agent.textContent = visible(t.agent, false);
    if (!current) setStatus(t.status);
  }, (e) => { if (e instanceof ApiError && e.status === 404) gone(); });

  reader = readStream(`/api/v1/tasks/${path}/stream`, {
    onEvent,
    isLast: isEnd,
    onState: (state, code) => {
      streamState.textContent = state === "reconnecting" ? "reconnecting…" : "";
      if (state === "refused") {
        if (code === 404 || code === 403) gone();
        else streamState.textContent = `the stream was refused (${code})`;
      }
    },
  });

  return {
    onRequest: (req) => boxes.get(req.id)?.card?.update(req),
    resync: () => { for (const [id, b] of boxes) if (b.card?.request().status === "pending") load(id); },
    key(e) {
      if (e.key === "j") return next(1) || true;
      if (e.key === "k") return next(-1) || true;
      if (!focused || focused.request().status !== "pending") return false;
      if (e.key === "a") focused.approve?.();
      else if (e.key === "r") focused.focusReject?.();
      else return false;
      return true;
    },
  };
}
