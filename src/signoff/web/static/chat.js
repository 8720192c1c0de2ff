// The chat page: the person's conversations with hosted agents, newest first, and a box to
// start one with an agent of their choice.

import { api, ApiError } from "./api.js";
import { ago, h, toast, visible, when } from "./dom.js";

export const STATUS_LABELS = {
  Running: "Running",
  Paused: "Paused: waiting for you",
  Completed: "Completed",
  Failed: "Failed",
  Canceled: "Canceled",
};

/** The signed-in person's name, as the server rendered it. */
export const me = () => document.querySelector('meta[name="signoff-user"]').content;

/**
 * A message box: a textarea that sends on Enter and adds a line on Shift+Enter, and its
 * button. send(text) is awaited with the box disabled; the text is cleared once it resolves.
 */
export function composer({ label, placeholder, button, send, extra = [] }) {
  const text = h("textarea", { rows: 3, maxlength: 100000, "data-role": "message", "aria-label": label, placeholder });
  const error = h("p", { class: "error", role: "alert", "data-role": "send-error" });
  const submit = h("button", { type: "submit", class: "approve", "data-action": "send" }, button);
  const form = h("form", { class: "composer" }, ...extra, text,
    h("div", { class: "row" }, submit, h("span", { class: "hint" }, "Enter sends · Shift+Enter adds a line")), error);
  const go = async () => {
    if (!text.value.trim() || submit.disabled) return;
    error.textContent = "";
    submit.disabled = true;
    text.readOnly = true;
    try {
      await send(text.value);
      text.value = "";
    } catch (e) {
      error.textContent = visible(e instanceof ApiError ? e.message : String(e));
    } finally {
      submit.disabled = false;
      text.readOnly = false;
    }
  };
  form.addEventListener("submit", (e) => { e.preventDefault(); go(); });
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); go(); }
  });
  form.text = text;
  return form;
}

export function chatView(root) {
  const picker = h("select", { "data-role": "agent", "aria-label": "agent" });
  const list = h("ul", { class: "conversations", "data-role": "conversations" });
  const empty = h("p", { class: "empty", "data-role": "empty", hidden: true }, "No conversations yet.");
  const start = composer({
    label: "first message", placeholder: "Ask the agent something", button: "Start",
    extra: [h("label", { class: "agent-pick" }, "Agent ", picker)],
    send: async (prompt) => {
      if (!picker.value) throw new ApiError(0, "NoAgent", "this server hosts no agents (signoff serve --agent NAME=module:agent)");
      const task = await api("POST", `/agents/${encodeURIComponent(picker.value)}/runs`, { prompt });
      location.assign(`/chat/${encodeURIComponent(task.id)}`);
    },
  });

  const row = (t) => h("li", { class: "conversation", "data-task": t.id, "data-status": t.status },
    h("a", { href: `/chat/${encodeURIComponent(t.id)}` }, visible(t.prompt.split("\n")[0].slice(0, 200), false)),
    h("span", { class: `badge task-${t.status.toLowerCase()}`, "data-role": "status" }, STATUS_LABELS[t.status] ?? t.status),
    h("span", { class: "meta" }, `${t.agent} · `,
      h("time", { datetime: t.updated_at, title: when(t.updated_at) }, ago(t.updated_at))));

  let loading = null;
  const load = async () => {
    try {
      const { items } = await api("GET", "/tasks?limit=200");
      const mine = items.filter((t) => t.user === me());
      list.replaceChildren(...mine.map(row));
      empty.hidden = mine.length > 0;
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        empty.textContent = "This server hosts no agents: start it with signoff serve --agent NAME=module:agent.";
        empty.hidden = false;
      } else toast(e instanceof ApiError ? e.message : String(e));
    }
  };
  // request events hint that a conversation paused or went on: reload, at most twice a second
  const reload = () => { loading ??= setTimeout(() => { loading = null; load(); }, 500); };

  root.replaceChildren(
    h("section", { class: "new-chat", "aria-label": "new conversation" }, h("h2", {}, "New conversation"), start),
    h("section", { "aria-label": "your conversations" }, h("h2", {}, "Your conversations"), empty, list));
  api("GET", "/agents").then(({ items }) => {
    picker.replaceChildren(...items.map((name) => h("option", { value: name }, name)));
    if (!items.length) {
      picker.append(h("option", { value: "" }, "(no agents hosted)"));
      start.querySelector("button").disabled = true;
    }
  }, (e) => toast(e instanceof ApiError ? e.message : String(e)));
  load();
  start.text.focus();
  return { onRequest: reload, resync: load };
}
