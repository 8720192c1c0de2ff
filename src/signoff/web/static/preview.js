// A tool call's preview (the file diff the server made for it), shown the same way for the
// agent's own arguments and for a person's edit of them.

import { unifiedDiff } from "./diff.js";
import { h } from "./dom.js";

// where a preview's old side came from: the server reads no file outside its preview root
function previewOrigin(p) {
  if (p.old_source === "agent") return " (old text supplied by the agent, not read from the file)";
  if (p.old_source === "none") return " (current content not read)";
  return p.exists ? "" : " (new file)";
}

/** The section showing preview `p`; `role` names it for the page ("preview" or "edited-preview"). */
export function previewSection(p, role = "preview") {
  return h("section", { class: "part", "data-role": role },
    h("h3", {}, `File: ${p.path}${previewOrigin(p)}`),
    p.note ? h("p", { class: "note" }, p.note) : null,
    p.diff ? unifiedDiff(p.diff, `diff of ${p.path}`) : h("p", { class: "note" }, "no change"));
}
