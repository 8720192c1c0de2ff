// History: every request as a sentence (who did what for whom, and what came of it), filtered
// and searched on the server, a page at a time. The filters live in the page's URL, so a
// filtered view can be reloaded or shared; each row has a link to its request to share.

import { api, ApiError } from "./api.js";
import { ago, h, toast, when } from "./dom.js";
import { outcomeText, sentence, statusLabel } from "./outcome.js";

const PAGE = "50";
const STATUSES = [
  ["ended", "all decided"], ["", "everything"], ["pending", "waiting"], ["approved", "approved"],
  ["rejected", "rejected"], ["executing", "running"], ["completed", "completed"],
  ["failed", "failed"], ["expired", "expired"], ["canceled", "canceled"],
];
const KINDS = [["", "every kind"], ["approval", "tool calls"], ["choice", "choices"], ["questions", "questions"]];
// the filters, by the list API's own parameter names (so the page's URL reads like its query)
const TEXT_FILTERS = [
  ["q", "search", "Search tool, arguments, prompts"],
  ["requested_by", "agent", "Agent"],
  ["session_id", "session", "Session"],
  ["decided_by", "person who decided", "Decided by"],
];
const DEFAULTS = { status: "ended" };

function select(name, options) {
  return h("select", { name, "data-filter": name, "aria-label": name },
    options.map(([value, label]) => h("option", { value }, label)));
}

function field(name, label, placeholder) {
  return h("input", { type: "search", name, "data-filter": name, "aria-label": label, placeholder,
    maxlength: "200", autocomplete: "off", spellcheck: "false" });
}

/** Whether a request the stream announces passes the filters (all but the search's words,
 * which only the server matches). */
function fits(req, filters) {
  const status = filters.status ?? "";
  if (status === "ended" ? req.status === "pending" : status && req.status !== status) return false;
  return (!filters.kind || req.kind === filters.kind)
    && (!filters.requested_by || req.requested_by === filters.requested_by)
    && (!filters.session_id || req.session_id === filters.session_id)
    && (!filters.decided_by || req.decision?.decided_by === filters.decided_by);
}

function linkTo(req) {
  return new URL(`/requests/${encodeURIComponent(req.id)}`, location.origin).href;
}

async function copyLink(req) {
  const link = linkTo(req);
  try {
    await navigator.clipboard.writeText(link);
    toast("Link copied", "ok");
  } catch {
    toast(`Copy this link: ${link}`, "ok"); // no clipboard (an insecure origin): show it
  }
}

function row(req) {
  const cells = [
    h("td", { class: "sentence" },
      h("a", { href: `/requests/${encodeURIComponent(req.id)}`, "data-role": "sentence" }, sentence(req)),
      h("span", { class: "when" }, " · ", h("time", { datetime: req.created_at, title: when(req.created_at) }, ago(req.created_at)))),
    h("td", {}, h("span", { class: `badge status-${req.status}`, "data-role": "status" }, statusLabel(req))),
    h("td", { class: "result-cell", "data-role": "outcome" }, outcomeText(req)),
    h("td", { class: "row-actions" },
      h("button", { type: "button", class: "link-button", "data-action": "copy-link", "data-link": linkTo(req),
        title: "Copy a link to this request", onclick: () => copyLink(req) }, "Copy link")),
  ];
  return h("tr", { "data-id": req.id, "data-status": req.status, "data-version": String(req.version),
    "data-created": req.created_at }, cells);
}

export function historyView(root) {
  const rows = new Map();
  const body = h("tbody", { "data-role": "history" });
  const controls = [select("status", STATUSES), select("kind", KINDS), ...TEXT_FILTERS.map(([n, l, p]) => field(n, l, p))];
  const byName = new Map(controls.map((c) => [c.name, c]));
  const more = h("button", { type: "button", hidden: true, "data-action": "more", onclick: () => load(false) }, "Load more");
  const empty = h("p", { class: "empty", "data-role": "empty", hidden: true }, "Nothing matches these filters.");
  let cursor = null;
  let generation = 0; // a reload started later wins over an older answer still on its way
  let timer = 0;

  const filters = () => {
    const out = {};
    for (const [name, el] of byName) if (el.value.trim()) out[name] = el.value.trim();
    return out;
  };

  const readUrl = () => {
    const params = new URLSearchParams(location.search);
    // "everything" is the empty status: the URL says status= for it, and nothing for the default
    for (const [name, el] of byName) el.value = params.get(name) ?? DEFAULTS[name] ?? "";
  };

  const writeUrl = () => {
    const params = new URLSearchParams();
    for (const [name, el] of byName) {
      const value = el.value.trim();
      if (value !== (DEFAULTS[name] ?? "")) params.set(name, value);
    }
    const query = params.toString();
    history.replaceState(null, "", query ? `${location.pathname}?${query}` : location.pathname);
  };

  // only a request newer than the newest shown goes on top: an older one the stream repeats
  // (the pending count's resync) belongs further down, where paging will bring it
  const newer = (req) => {
    const first = body.firstElementChild;
    return !first || Date.parse(req.created_at) > Date.parse(first.dataset.created);
  };

  const show = (req, atTop) => {
    const old = rows.get(req.id);
    if (old && Number(old.dataset.version) > req.version) return;
    const fresh = row(req);
    if (old) old.replaceWith(fresh);
    else if (atTop) body.prepend(fresh);
    else body.append(fresh);
    rows.set(req.id, fresh);
    empty.hidden = true;
  };

  const load = async (reset) => {
    const mine = reset ? ++generation : generation;
    const query = new URLSearchParams({ limit: PAGE, ...filters() });
    if (!reset && cursor) query.set("cursor", cursor);
    try {
      const page = await api("GET", `/requests?${query}`);
      if (mine !== generation) return;
      if (reset) { body.replaceChildren(); rows.clear(); }
      for (const r of page.items) show(r, false);
      cursor = page.next_cursor;
      more.hidden = !cursor;
      empty.hidden = rows.size > 0;
      root.dataset.loaded = String(generation);
    } catch (e) {
      toast(e instanceof ApiError ? e.message : String(e));
    }
  };

  const changed = () => {
    clearTimeout(timer);
    writeUrl();
    load(true);
  };
  for (const el of controls) {
    if (el.tagName === "SELECT") el.addEventListener("change", changed);
    else {
      el.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(changed, 300); });
      el.addEventListener("keydown", (e) => { if (e.key === "Enter") changed(); });
    }
  }
  window.addEventListener("popstate", () => { readUrl(); load(true); });

  readUrl();
  root.replaceChildren(
    h("section", { class: "toolbar history-filters" }, h("h2", {}, "History"), controls),
    h("table", { class: "list history" },
      h("thead", {}, h("tr", {}, ["What happened", "Status", "Outcome", ""].map((t) => h("th", {}, t)))),
      body),
    empty, more);
  load(true);
  return {
    onRequest: (req) => {
      const now = filters();
      if (!fits(req, now)) {
        rows.get(req.id)?.remove();
        rows.delete(req.id);
      } else if (rows.has(req.id) || (!now.q && newer(req))) show(req, true);
    },
    resync: () => load(true),
    key: (e) => {
      if (e.key !== "/") return false;
      byName.get("q").focus();
      return true;
    },
  };
}
