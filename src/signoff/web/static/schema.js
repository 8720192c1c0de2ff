// A small check of edited arguments against the tool's JSON Schema (the request's
// args_schema), so a person sees the mistake before sending; the server checks it fully.

// a number past what a double holds arrives as JSON.rawJSON (api.js parseJson)
const raw = (v) => typeof JSON.isRawJSON === "function" && JSON.isRawJSON(v);

const TYPES = {
  object: (v) => v !== null && typeof v === "object" && !Array.isArray(v) && !raw(v),
  array: Array.isArray,
  string: (v) => typeof v === "string",
  integer: (v) => (typeof v === "number" ? Number.isInteger(v) : raw(v) && /^-?\d+$/.test(v.rawJSON)),
  number: (v) => typeof v === "number" || raw(v),
  boolean: (v) => typeof v === "boolean",
  null: (v) => v === null,
};

/** The first problem of `value` against `schema` (type, enum, required, properties), or "". */
export function schemaProblem(schema, value, where = "arguments") {
  if (!schema || typeof schema !== "object") return "";
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const known = types.filter((t) => TYPES[t]);
    if (known.length && !known.some((t) => TYPES[t](value))) return `${where} must be ${types.join(" or ")}`;
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    return `${where} must be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`;
  }
  if (TYPES.object(value)) {
    for (const key of schema.required ?? []) {
      if (!(key in value)) return `${where}: "${key}" is required`;
    }
    const properties = schema.properties ?? {};
    for (const [key, item] of Object.entries(value)) {
      if (key in properties) {
        const problem = schemaProblem(properties[key], item, `"${key}"`);
        if (problem) return problem;
      } else if (schema.additionalProperties === false) {
        return `${where}: "${key}" is not an argument of this tool`;
      }
    }
  }
  return "";
}
