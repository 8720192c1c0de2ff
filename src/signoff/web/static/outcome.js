// Words for a request's outcome: what its badge says, what came of it, and one sentence that
// tells who did what for whom. Pure functions of the request's JSON; they return strings, which
// the pages put into text nodes (dom.js's h()), never into HTML.

const SHORT = 80;

/** text cut to at most max characters, with an ellipsis when cut; newlines become spaces. */
export function shorten(text, max = SHORT) {
  const flat = String(text).replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

function jsonText(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** A tool call's arguments in a few words: a lone argument's value, else key=value pairs. */
export function argsShort(args, max = SHORT) {
  const entries = Object.entries(args ?? {});
  if (entries.length === 0) return "";
  if (entries.length === 1) return shorten(jsonText(entries[0][1]), max);
  return shorten(entries.map(([k, v]) => `${k}=${jsonText(v)}`).join(" "), max);
}

function edited(req) {
  return req.kind === "approval" && req.approved_args != null
    && JSON.stringify(req.approved_args) !== JSON.stringify(req.tool_args);
}

/** What the badge says: a word a person uses, not the raw status. */
export function statusLabel(req) {
  const type = req.decision?.decision?.type;
  switch (req.status) {
    case "pending": return "waiting";
    case "executing": return "running";
    case "rejected": return type === "respond" ? "answered" : "rejected";
    case "approved":
      if (type === "choose" || type === "answer") return "answered";
      return edited(req) ? "approved with edits" : "approved";
    default: return req.status; // expired, canceled, completed, failed
  }
}

function choices(req) {
  const d = req.decision;
  const picked = d?.extra?.choices ?? d?.decision?.choices ?? (d?.decision?.choice != null ? [d.decision.choice] : []);
  return picked.join(", ");
}

function answers(req) {
  const given = req.decision?.decision?.answers ?? {};
  const text = new Map((req.questions ?? []).map((q) => [q.id, q.text]));
  return Object.entries(given).map(([id, a]) => `${text.get(id) ?? id}: ${a}`).join("; ");
}

function resultText(result) {
  if (!result.ok) return `failed: ${shorten(result.error || "no error given")}`;
  return result.result == null ? "done" : shorten(jsonText(result.result));
}

/** The outcome in words: "answered: Canary", "rejected: too risky", "Q: A; Q2: A2", a result. */
export function outcomeText(req) {
  if (req.result) return resultText(req.result);
  const x = req.decision?.decision;
  if (!x) return req.status === "pending" ? "" : statusLabel(req);
  switch (x.type) {
    case "reject":
      if (req.status === "expired") return "expired without a decision";
      return x.reason ? `rejected: ${shorten(x.reason)}` : "rejected";
    case "respond": return `answered: ${shorten(x.feedback)}`;
    case "choose": return `answered: ${shorten(choices(req))}`;
    case "answer": {
      const given = answers(req);
      return shorten([given, x.feedback].filter(Boolean).join("; ")) || "answered";
    }
    default: return statusLabel(req);
  }
}

/** What was asked, short: a tool call as tool `args`, a question as "prompt". */
export function subject(req) {
  if (req.kind === "approval") {
    // an edited call is told by what was approved to run
    const args = argsShort(edited(req) ? req.approved_args : req.tool_args, 60);
    const call = args ? `${req.tool_name} \`${args}\`` : req.tool_name;
    return edited(req) ? `${call} (edited)` : call;
  }
  const prompt = req.prompt || (req.questions ?? []).map((q) => q.text).join(" · ");
  return `“${shorten(prompt, 60)}”`;
}

const VERBS = { approve: "approved", reject: "rejected", respond: "answered", choose: "answered", answer: "answered" };

/** "alice approved shell `rm -rf build` for agent:build-bot", in words for every outcome. */
export function sentence(req) {
  const what = subject(req);
  const who = req.requested_by;
  const d = req.decision;
  if (req.status === "pending") return `${who} asks: ${what}`;
  if (req.status === "canceled") return `${who} canceled ${what}`;
  if (req.status === "expired") return `${what} for ${who} expired without a decision`;
  if (!d) return `${what} for ${who} is ${statusLabel(req)}`;
  const verb = VERBS[d.decision.type] ?? d.decision.type;
  if (d.via === "expiry") return `${what} for ${who} was ${verb} on expiry`;
  if (d.via === "policy") return `policy ${verb} ${what} for ${who}`;
  if (d.via === "grant") return `${d.decided_by}'s standing grant approved ${what} for ${who}`;
  return `${d.decided_by} ${verb} ${what} for ${who}`;
}
