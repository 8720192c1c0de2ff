// One request's page: the card (with its controls while pending) and its audit trail.

import { api, ApiError } from "./api.js";
import { requestCard } from "./card.js";
import { h, pretty, toast, when } from "./dom.js";

/** The only channel a page's address may name: opened from the link an MCP client showed. */
const MCP_URL = "mcp-url";

export function requestView(root, id) {
  let card = null;
  const via = new URLSearchParams(location.search).get("via") === MCP_URL ? MCP_URL : undefined;
  const audit = h("tbody", { "data-role": "audit" });

  const loadAudit = async () => {
    try {
      const { items } = await api("GET", `/audit?request_id=${encodeURIComponent(id)}`);
      audit.replaceChildren(...items.map((e) => h("tr", {},
        h("td", {}, String(e.seq)),
        h("td", {}, when(e.at)),
        h("td", {}, e.actor),
        h("td", {}, e.action),
        h("td", {}, e.from_status ? `${e.from_status} → ${e.to_status}` : e.to_status ?? ""),
        h("td", {}, h("details", {}, h("summary", {}, "details"), h("pre", {}, pretty(e.details)))))));
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
        h("thead", {}, h("tr", {}, ["#", "When", "Who", "Action", "Status", ""].map((t) => h("th", {}, t)))),
        audit)));
  load();
  return {
    onRequest: (req) => { if (req.id === id && card) { card.update(req); loadAudit(); } },
    resync: load,
  };
}
