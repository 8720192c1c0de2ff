// The inbox's search and filters: their state in the page's URL, the query the server
// filters by (GET /api/v1/requests), whether a live request fits the exact-match filters,
// and the bar a person sets them in. Agent text (sessions, tools, agents) is only ever
// option text and values, never markup.

import { h } from "./dom.js";

/** The filters, by the API's parameter names (also the page URL's). */
export const FIELDS = ["q", "requested_by", "session_id", "tool_name", "kind"];
const KINDS = ["approval", "choice", "questions"];
const MAX_QUERY = 200;

/** The filters and the grouping in the page's address (unknown or empty values dropped). */
export function readState(search = location.search) {
  const params = new URLSearchParams(search);
  const state = { group: params.get("group") === "session" };
  for (const name of FIELDS) state[name] = (params.get(name) ?? "").slice(0, MAX_QUERY);
  if (!KINDS.includes(state.kind)) state.kind = "";
  state.q = state.q.trim();
  return state;
}

/** Put the state in the address without a new history entry (a reload keeps the view). */
export function writeState(state) {
  const params = new URLSearchParams();
  for (const name of FIELDS) if (state[name]) params.set(name, state[name]);
  if (state.group) params.set("group", "session");
  const query = params.toString();
  history.replaceState(history.state, "", `${location.pathname}${query ? `?${query}` : ""}`);
}

/** Whether any filter narrows the list. */
export function narrowed(state) {
  return FIELDS.some((name) => state[name]);
}

/** The pending requests' list query for this state. */
export function listQuery(state, cursor) {
  const query = new URLSearchParams({ status: "pending", limit: "200" });
  for (const name of FIELDS) if (state[name]) query.set(name, state[name]);
  if (cursor) query.set("cursor", cursor);
  return query;
}

/**
 * Whether req fits the exact-match filters (agent, session, tool, kind). The text search
 * is the server's to judge: a live request passing these is checked by listing again.
 */
export function fitsExact(req, state) {
  if (state.requested_by && req.requested_by !== state.requested_by) return false;
  if (state.session_id && req.session_id !== state.session_id) return false;
  if (state.tool_name && req.tool_name !== state.tool_name) return false;
  return !state.kind || req.kind === state.kind;
}

function choices(select, values, label) {
  const chosen = select.value;
  const all = new Set(values);
  if (chosen) all.add(chosen); // a value from the address stays choosable with no such request
  const sorted = [...all].sort();
  const known = [...select.options].slice(1).map((o) => o.value);
  if (known.length === sorted.length && known.every((v, i) => v === sorted[i])) return;
  select.replaceChildren(h("option", { value: "" }, label), ...sorted.map((v) => h("option", { value: v }, v)));
  select.value = chosen;
}

/**
 * The filter bar. onChange(state) runs after each change (the search after a pause in
 * typing). Returns {el, state, setOptions(requests), setCount(text), setError(text), focusSearch()}.
 */
export function filterBar(initial, onChange) {
  const state = { ...initial };
  let timer = 0;
  const changed = () => {
    writeState(state);
    onChange(state);
  };
  const pick = (name, label) => {
    const select = h("select", { "data-filter": name, "aria-label": label, onchange: () => {
      state[name] = select.value;
      changed();
    } }, h("option", { value: "" }, label));
    if (state[name]) { select.append(h("option", { value: state[name] }, state[name])); select.value = state[name]; }
    return select;
  };
  const search = h("input", { type: "search", "data-filter": "q", maxlength: MAX_QUERY,
    placeholder: "search tool, args, prompt", "aria-label": "search pending requests",
    oninput: () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        const q = search.value.trim();
        if (q === state.q) return;
        state.q = q;
        changed();
      }, 250);
    } });
  search.value = state.q;
  const agents = pick("requested_by", "all agents");
  const sessions = pick("session_id", "all sessions");
  const tools = pick("tool_name", "all tools");
  const kind = h("select", { "data-filter": "kind", "aria-label": "kind", onchange: () => {
    state.kind = kind.value;
    changed();
  } }, h("option", { value: "" }, "all kinds"), KINDS.map((k) => h("option", { value: k }, k)));
  kind.value = state.kind;
  const group = h("input", { type: "checkbox", "data-role": "group-by-session", checked: state.group,
    onchange: () => {
      state.group = group.checked;
      changed();
    } });
  const clear = h("button", { type: "button", "data-action": "clear-filters", onclick: () => {
    for (const name of FIELDS) state[name] = "";
    search.value = "";
    for (const select of [agents, sessions, tools, kind]) select.value = "";
    changed();
  } }, "Clear");
  const count = h("span", { class: "hint", "data-role": "shown-count", role: "status" });
  const error = h("p", { class: "error", role: "alert", "data-role": "filter-error" });
  const el = h("section", { class: "toolbar filters", "aria-label": "search and filters" },
    search, agents, sessions, tools, kind, clear,
    h("label", { class: "group-by" }, group, " group by session"), count, error);

  return {
    el,
    state,
    setOptions(requests) {
      const values = (name) => requests.map((r) => r[name]).filter((v) => typeof v === "string" && v);
      choices(agents, values("requested_by"), "all agents");
      choices(sessions, values("session_id"), "all sessions");
      choices(tools, values("tool_name"), "all tools");
    },
    setCount(text) { count.textContent = text; },
    setError(text) { error.textContent = text; },
    focusSearch() { search.focus(); search.select(); },
  };
}
