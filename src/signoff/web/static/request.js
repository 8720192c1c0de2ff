// One request's page: the card (with its controls while pending) and its audit trail.

import { api, ApiError } from "./api.js";
import { requestCard } from "./card.js";
import { h, pretty, toast, when } from "./dom.js";

/** The only channel a page's address may name: opened from the link an MCP client showed. */
const MCP_URL = "mcp-url";

const COLUMNS = ["#", "When", "Who", "Action", "Status", ""];

// a cell names its column, which a phone shows beside the value (the header row is hidden there)
const cell = (n, ...content) => h("td", { "data-label": COLUMNS[n] || null }, ...content);

export function requestView(root, id) {
  let card = null;
  const via = new URLSearchParams(location.search).get("via") === MCP_URL ? MCP_URL : undefined;
  const audit = h("tbody", { "data-role": "audit" });

  const loadAudit = async () => {
    try {
      const { items } = await api("GET", `/audit?request_id=${encodeURIComponent(id)}`);
      audit.replaceChildren(...items.map((e) => h("tr", {},
        cell(0, String(e.seq)),
        cell(1, when(e.at)),
        cell(2, e.actor),
        cell(3, e.action),
        cell(4, e.from_status ? `${e.from_status} → ${e.to_status}` : e.to_status ?? ""),
        cell(5, h("details", {}, h("summary", {}, "details"), h("pre", {}, pretty(e.details)))))));
    } catch (e) {
      toast(e instanceof ApiError ? e.message : String(e));
    }
  };

  const load = async () => {
    try {
      const req = await api("GET", `/requests/${encodeURIComponent(id)}`);
      if (card) card.update(req);
      else {
        card = requestCard(req, { onDecided: () => loadAudit(), via });
        root.prepend(card);
      }
      await loadAudit();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        root.replaceChildren(h("p", { class: "empty" }, "No such request, or you may not see it."));
      } else toast(e instanceof ApiError ? e.message : String(e));
    }
  };

  root.replaceChildren(
    h("section", { class: "part audit" }, h("h2", {}, "Audit trail"),
      h("table", { class: "list" },
        h("thead", {}, h("tr", {}, COLUMNS.map((t) => h("th", {}, t)))),
        audit)));
  load();
  return {
    onRequest: (req) => { if (req.id === id && card) { card.update(req); loadAudit(); } },
    resync: load,
  };
}
