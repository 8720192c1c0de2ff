// Editing a tool call's arguments before approving them. One field per argument, typed by the
// tool's JSON Schema when the request carries one (else by the value the agent sent): text
// areas for strings, number inputs, checkboxes, selects for enums, and raw JSON for nested or
// unknown shapes; or the whole arguments as raw JSON. As the person edits, the server makes
// the call's preview again for the edited arguments (POST /requests/{id}/preview, the same
// code and preview root as the agent's own) and it is shown in place of the agent's, with the
// schema's complaints beside their fields. Agent text (names, values) only ever becomes text
// nodes or input values; a string holding hidden characters is edited as JSON, escapes shown.

import { api, ApiError, parseJson } from "./api.js";
import { lineDiff } from "./diff.js";
import { h, pretty, visible } from "./dom.js";
import { previewSection } from "./preview.js";

const DEBOUNCE_MS = 300;
const MAX_ROWS = 30;
const SIMPLE = new Set(["string", "number", "boolean"]);
const NOTICE = "You are approving these edited arguments, not what the agent asked";

const raw = (v) => typeof JSON.isRawJSON === "function" && JSON.isRawJSON(v);
const rowsFor = (text, least = 2) => Math.min(MAX_ROWS, Math.max(least, String(text).split("\n").length));
const hasOwn = (object, key) => Object.prototype.hasOwnProperty.call(object, key);

/** The single JSON type a schema property names, or null (none, or several). */
function schemaType(prop) {
  if (Array.isArray(prop.type)) return prop.type.length === 1 ? prop.type[0] : null;
  return typeof prop.type === "string" ? prop.type : null;
}

/** How an argument is edited: "text", "integer", "number", "boolean", "enum" or "json". */
function kindOf(prop, value, present) {
  let kind = "json";
  if (prop && Array.isArray(prop.enum) && prop.enum.length && prop.enum.every((e) => SIMPLE.has(typeof e))) {
    kind = "enum";
  } else if (prop && schemaType(prop)) {
    const t = schemaType(prop);
    kind = t === "string" ? "text" : ["integer", "number", "boolean"].includes(t) ? t : "json";
  } else if (present && typeof value === "string") kind = "text";
  else if (present && typeof value === "number") kind = Number.isInteger(value) ? "integer" : "number";
  else if (present && typeof value === "boolean") kind = "boolean";
  if (!present || fits(kind, value, prop)) return kind;
  return "json"; // what the agent sent does not fit the field: shown exactly, as JSON
}

function fits(kind, value, prop) {
  if (kind === "text") return typeof value === "string" && visible(value) === value;
  if (kind === "integer") return typeof value === "number" && Number.isInteger(value);
  if (kind === "number") return typeof value === "number";
  if (kind === "boolean") return typeof value === "boolean";
  if (kind === "enum") return prop.enum.some((e) => e === value);
  return true;
}

/** One argument's field: its element, and read() -> {absent} | {value} | {error}. */
function field(name, prop, value, present, required, onEdit) {
  const kind = kindOf(prop, value, present);
  let touched = present;
  const edited = () => { touched = true; onEdit(); };
  let control;
  let read;
  if (kind === "text") {
    control = h("textarea", { rows: rowsFor(present ? value : "", 1), spellcheck: "false" });
    control.value = present ? value : "";
    control.addEventListener("input", () => { control.rows = rowsFor(control.value, 1); edited(); });
    read = () => (touched || control.value ? { value: control.value } : { absent: true });
  } else if (kind === "integer" || kind === "number") {
    control = h("input", { type: "number", step: kind === "integer" ? "1" : "any", inputmode: "decimal" });
    control.value = present ? String(value) : "";
    control.addEventListener("input", edited);
    read = () => {
      if (control.value.trim() === "") return control.validity.badInput ? { error: "not a number" } : { absent: true };
      const n = Number(control.value);
      return Number.isFinite(n) ? { value: n } : { error: "not a number" };
    };
  } else if (kind === "boolean") {
    control = h("input", { type: "checkbox" });
    control.checked = value === true;
    control.addEventListener("change", edited);
    read = () => (touched ? { value: control.checked } : { absent: true });
  } else if (kind === "enum") {
    control = h("select", {},
      present ? null : h("option", { value: "" }, "(not set)"),
      prop.enum.map((e, i) => h("option", { value: String(i) }, typeof e === "string" ? e : JSON.stringify(e))));
    control.value = present ? String(prop.enum.findIndex((e) => e === value)) : "";
    control.addEventListener("change", edited);
    read = () => (control.value === "" ? { absent: true } : { value: prop.enum[Number(control.value)] });
  } else {
    const text = present ? pretty(value) : "";
    control = h("textarea", { class: "json", rows: rowsFor(text), spellcheck: "false" });
    control.value = text;
    control.addEventListener("input", () => { control.rows = rowsFor(control.value); edited(); });
    read = () => {
      if (!control.value.trim()) return { absent: true };
      try {
        return { value: parseJson(control.value) };
      } catch (e) {
        return { error: `not valid JSON: ${e.message}` };
      }
    };
  }
  control.setAttribute("aria-label", visible(name));
  control.dataset.arg = name;
  control.dataset.kind = kind;
  const error = h("p", { class: "error", role: "alert", "data-role": "field-error" });
  const element = h("div", { class: "arg-field", "data-kind": kind },
    h("label", {}, h("span", { class: "arg-name" }, name, required ? " *" : ""),
      kind === "json" ? h("small", { class: "meta" }, " JSON") : null,
      prop?.description ? h("small", { class: "meta" }, ` ${prop.description}`) : null),
    control, error);
  return { name, element, read, showError: (text) => { error.textContent = visible(text); } };
}

/**
 * The editor of `req`'s arguments, hidden until toggle(). `card` is the request's card, whose
 * own preview ([data-role=preview]) the edited one replaces while shown;
 * `approveEdited(args, button)` approves the call with the edited arguments.
 */
export function argsEditor(req, approveEdited, card) {
  const schema = req.args_schema && typeof req.args_schema === "object" ? req.args_schema : null;
  const properties = schema?.properties && typeof schema.properties === "object" ? schema.properties : {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  const original = pretty(req.tool_args);
  let fields = [];
  let rawMode = false;
  let timer = null;
  let asked = 0;

  const fieldList = h("div", { class: "arg-fields", "data-role": "arg-fields" });
  const text = h("textarea", { class: "json", "data-role": "args-editor", spellcheck: "false", hidden: true,
    rows: rowsFor(original), "aria-label": "edited arguments (JSON)" });
  const rawToggle = h("button", { type: "button", "data-action": "raw-json", "aria-pressed": "false",
    onclick: () => switchMode() }, "Raw JSON");
  const problem = h("p", { class: "error", "data-role": "json-error", role: "alert" });
  const review = h("div", { class: "review", "data-role": "edit-review", "aria-live": "polite" });
  const wrap = h("div", { class: "editor argsform", hidden: true },
    h("div", { class: "row" }, rawToggle,
      h("button", { type: "button", "data-action": "review-edit", onclick: () => refresh() }, "Review changes"),
      h("button", { type: "button", "data-action": "cancel-edit", onclick: () => wrap.toggle() }, "Cancel")),
    fieldList, text, problem, review);

  const build = (args) => {
    const names = [...Object.keys(args), ...Object.keys(properties).filter((n) => !hasOwn(args, n))];
    fields = names.map((name) => {
      const prop = hasOwn(properties, name) && properties[name] && typeof properties[name] === "object" ? properties[name] : null;
      return field(name, prop, args[name], hasOwn(args, name), required.has(name), schedule);
    });
    fieldList.replaceChildren(...fields.map((f) => f.element));
  };

  /** The edited arguments: {args} or {error} (shown where it belongs). */
  const collect = () => {
    if (rawMode) {
      let args;
      try {
        args = parseJson(text.value); // numbers kept as typed: 2^53 + 1 is not rounded
      } catch (e) {
        return { error: `not valid JSON: ${e.message}` };
      }
      if (args === null || typeof args !== "object" || Array.isArray(args) || raw(args)) {
        return { error: "the arguments must be a JSON object" };
      }
      return { args };
    }
    const args = {};
    let bad = false;
    for (const f of fields) {
      const got = f.read();
      if (got.error) { f.showError(got.error); bad = true; } else if (!got.absent) args[f.name] = got.value;
    }
    return bad ? { error: "fix the fields marked above" } : { args };
  };

  const originalPreview = () => card?.querySelector('[data-role="preview"]') ?? null;
  const showOriginal = (shown) => { const p = originalPreview(); if (p) p.hidden = !shown; };

  const clearErrors = () => {
    problem.textContent = "";
    for (const f of fields) f.showError("");
  };

  const show = (args, answer) => {
    const errors = Array.isArray(answer.errors) ? answer.errors : [];
    for (const e of errors) {
      const f = !rawMode && e.field !== null ? fields.find((x) => x.name === e.field) : null;
      if (f) f.showError(e.message);
      else problem.textContent = visible(problem.textContent ? `${problem.textContent}; ${e.message}` : e.message);
    }
    const before = originalPreview();
    // replaceChildren would write a null as the text "null": only the parts there are
    review.replaceChildren(...[
      h("p", { class: "edited-notice", "data-role": "edited-notice" }, NOTICE),
      answer.preview ? previewSection(answer.preview, "edited-preview") : null,
      h("section", { class: "part" }, h("h3", {}, "Arguments: what the agent asked vs your edit"),
        lineDiff(original, pretty(args), "original vs edited arguments")),
      before ? h("details", { class: "original", "data-role": "original-preview" },
        h("summary", {}, "The agent's original file change"), before.cloneNode(true)) : null,
      errors.length ? h("p", { class: "error" }, "the edited arguments do not fit the tool's schema; fix them to approve") : null,
      h("button", { type: "button", class: "approve", "data-action": "approve-edited", disabled: errors.length > 0,
        onclick: (e) => approveEdited(args, e.currentTarget) }, "Approve edited call"),
    ].filter(Boolean));
    for (const d of review.querySelectorAll('details [data-role="preview"]')) { d.hidden = false; d.dataset.role = "agent-preview"; }
    showOriginal(!answer.preview);
  };

  // the preview on screen must be the one for what is in the fields: asked counts requests,
  // and an edit counts too, so an answer for what the fields held before it is never shown
  async function refresh() {
    clearTimeout(timer);
    const mine = ++asked;
    clearErrors();
    const got = collect();
    if (got.error) {
      problem.textContent = visible(got.error);
      review.replaceChildren();
      review.removeAttribute("aria-busy");
      showOriginal(true);
      return;
    }
    if (pretty(got.args) === original) {
      problem.textContent = "nothing changed; use Approve to run the call as proposed";
      review.replaceChildren();
      review.removeAttribute("aria-busy");
      showOriginal(true);
      return;
    }
    review.setAttribute("aria-busy", "true");
    try {
      const answer = await api("POST", `/requests/${encodeURIComponent(req.id)}/preview`, { args: got.args });
      if (mine === asked) show(got.args, answer);
    } catch (e) {
      if (mine !== asked) return;
      problem.textContent = visible(e instanceof ApiError ? e.message : String(e));
      review.replaceChildren();
      showOriginal(true);
    } finally {
      if (mine === asked) review.removeAttribute("aria-busy");
    }
  }

  function schedule() {
    clearTimeout(timer);
    // what is shown no longer matches the fields: no approving it until the preview catches
    // up, and an answer already on its way (for the fields as they were) is not shown
    asked++;
    review.setAttribute("aria-busy", "true");
    for (const b of review.querySelectorAll('[data-action="approve-edited"]')) b.disabled = true;
    timer = setTimeout(refresh, DEBOUNCE_MS);
  }

  function switchMode() {
    clearErrors();
    if (!rawMode) {
      const got = collect();
      text.value = got.error ? original : pretty(got.args);
      text.rows = rowsFor(text.value);
    } else {
      const got = collect();
      if (got.error) { problem.textContent = visible(got.error); return; }
      build(got.args);
    }
    rawMode = !rawMode;
    text.hidden = !rawMode;
    fieldList.hidden = rawMode;
    rawToggle.setAttribute("aria-pressed", String(rawMode));
    rawToggle.textContent = rawMode ? "Fields" : "Raw JSON";
    (rawMode ? text : fieldList.querySelector("textarea, input, select"))?.focus();
  }

  text.addEventListener("input", () => { text.rows = rowsFor(text.value); schedule(); });
  text.value = original;
  build(req.tool_args);

  wrap.toggle = () => {
    wrap.hidden = !wrap.hidden;
    if (wrap.hidden) {
      clearTimeout(timer);
      asked++;
      review.replaceChildren();
      review.removeAttribute("aria-busy");
      showOriginal(true);
    } else (rawMode ? text : fieldList.querySelector("textarea, input, select"))?.focus();
  };
  return wrap;
}
