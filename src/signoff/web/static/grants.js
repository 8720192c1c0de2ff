// Standing grants: what later calls they approve, until when, and a revoke button.

import { api, ApiError } from "./api.js";
import { h, toast, when } from "./dom.js";

const COLUMNS = ["Tool", "Scope", "Requester", "Arguments", "Granted", "Expires", ""];

// a cell names its column, which a phone shows beside the value (the header row is hidden there)
const cell = (n, ...content) => h("td", { "data-label": COLUMNS[n] || null }, ...content);

export function grantsView(root) {
  const body = h("tbody", { "data-role": "grants" });
  const all = h("input", { type: "checkbox", "data-role": "show-all", onchange: () => load() });
  const empty = h("p", { class: "empty", hidden: true }, "No standing grants.");

  const revoke = async (grant, button) => {
    button.disabled = true;
    try {
      await api("POST", `/grants/${encodeURIComponent(grant.id)}/revoke`);
      toast(`revoked the grant for ${grant.tool_name}`, "ok");
      await load();
    } catch (e) {
      button.disabled = false;
      toast(e instanceof ApiError ? e.message : String(e));
    }
  };

  const load = async () => {
    try {
      const { items } = await api("GET", `/grants?live=${all.checked ? "false" : "true"}`);
      body.replaceChildren(...items.map((g) => h("tr", { "data-id": g.id },
        cell(0, g.tool_name),
        cell(1, g.scope === "session" ? `session ${g.session_id}` : "always"),
        cell(2, g.requested_by),
        cell(3, g.args_pattern ? JSON.stringify(g.args_pattern) : "any arguments"),
        cell(4, g.created_by, " · ", when(g.created_at)),
        cell(5, when(g.expires_at)),
        cell(6, g.revoked_at
          ? `revoked by ${g.revoked_by} · ${when(g.revoked_at)}`
          : h("button", { type: "button", class: "reject", "data-action": "revoke", onclick: (e) => revoke(g, e.currentTarget) }, "Revoke")))));
      empty.hidden = items.length > 0;
    } catch (e) {
      toast(e instanceof ApiError ? e.message : String(e));
    }
  };

  root.replaceChildren(
    h("section", { class: "toolbar" }, h("h2", {}, "Standing grants"), h("label", {}, all, " show expired and revoked")),
    h("table", { class: "list" },
      h("thead", {}, h("tr", {}, COLUMNS.map((t) => h("th", {}, t)))),
      body),
    empty);
  load();
  return { onRequest: (req) => { if (req.grant_id || req.decision?.decision?.scope) load(); }, resync: load };
}
