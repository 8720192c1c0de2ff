// Standing grants: what later calls they approve, until when, and a revoke button.

import { api, ApiError } from "./api.js";
import { h, toast, when } from "./dom.js";

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
        h("td", {}, g.tool_name),
        h("td", {}, g.scope === "session" ? `session ${g.session_id}` : "always"),
        h("td", {}, g.requested_by),
        h("td", {}, g.args_pattern ? JSON.stringify(g.args_pattern) : "any arguments"),
        h("td", {}, g.created_by, " · ", when(g.created_at)),
        h("td", {}, when(g.expires_at)),
        h("td", {}, g.revoked_at
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
      h("thead", {}, h("tr", {}, ["Tool", "Scope", "Requester", "Arguments", "Granted", "Expires", ""].map((t) => h("th", {}, t)))),
      body),
    empty);
  load();
  return { onRequest: (req) => { if (req.grant_id || req.decision?.decision?.scope) load(); }, resync: load };
}
