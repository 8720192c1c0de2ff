// The official AG-UI client (@ag-ui/client's HttpAgent) holding one conversation with a hosted
// signoff agent: it sends the prompt, receives the run's interrupt, waits for a line on stdin
// (the test checks the request is pending meanwhile), then resumes with an approval through
// the client's own resume mechanism and reads the reply; then it follows up with one more
// message in the same thread, as a chat would.
//
//   node client.mjs RUNS_URL TOKEN PROMPT FOLLOW_UP
//
// stdout: one JSON line after each run ({"phase": "interrupted" | "done" | "followed", ...});
// on a failure
// one {"phase": "error", "message"} line and exit code 1. Everything the client warns about
// (it strips and reports what the protocol does not describe) is in the lines as "warnings".

import { createInterface } from "node:readline";
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token, prompt, followUp] = process.argv.slice(2);

const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...parts) => {
    warnings.push(parts.map(String).join(" "));
    process.stderr.write(`${level}: ${parts.map(String).join(" ")}\n`);
  };
}

function say(line) {
  process.stdout.write(`${JSON.stringify({ ...line, warnings })}\n`);
}

/** One run through the client: the event types it saw and how it ended. */
async function run(agent, parameters) {
  const seen = { events: [], outcome: null, interrupts: [], custom: [], error: null };
  const subscriber = {
    onEvent({ event }) {
      seen.events.push(event.type);
    },
    onCustomEvent({ event }) {
      seen.custom.push({ name: event.name, value: event.value });
    },
    onRunFinishedEvent({ outcome, interrupts }) {
      seen.outcome = outcome;
      seen.interrupts = interrupts ?? [];
    },
    onRunFailed({ error }) {
      seen.error = String(error?.message ?? error);
    },
  };
  const { result, newMessages } = await agent.runAgent(parameters, subscriber);
  return { ...seen, result: result ?? null, newMessages };
}

/** The messages the client holds, as the test reads them. */
function held(agent) {
  return agent.messages.map((m) => ({ id: m.id, role: m.role, content: m.content ?? null }));
}

function lastAssistantText(messages) {
  const replies = messages.filter((m) => m.role === "assistant" && typeof m.content === "string");
  return replies.length > 0 ? replies[replies.length - 1].content : null;
}

async function main() {
  const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` } });
  agent.addMessage({ id: "user-1", role: "user", content: prompt });

  const first = await run(agent, {});
  say({
    phase: "interrupted",
    threadId: agent.threadId,
    events: first.events,
    outcome: first.outcome,
    interrupts: first.interrupts,
    pending: agent.pendingInterrupts.map((i) => i.id),
    messages: held(agent),
    error: first.error,
  });

  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  await lines.next();

  const approvals = Object.fromEntries(
    agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload: { approved: true } }]),
  );
  const resume = buildResumeArray(agent.pendingInterrupts, approvals);
  const second = await run(agent, { resume });
  say({
    phase: "done",
    threadId: agent.threadId,
    resume,
    events: second.events,
    outcome: second.outcome,
    custom: second.custom,
    result: second.result,
    finalText: lastAssistantText(agent.messages),
    pending: agent.pendingInterrupts.map((i) => i.id),
    messages: held(agent),
    error: second.error,
  });

  agent.addMessage({ id: "user-2", role: "user", content: followUp });
  const third = await run(agent, {});
  say({
    phase: "followed",
    threadId: agent.threadId,
    events: third.events,
    outcome: third.outcome,
    finalText: lastAssistantText(agent.messages),
    messages: held(agent),
    error: third.error,
  });
  process.exit(0);
}

main().catch((error) => {
  say({ phase: "error", message: String(error?.stack ?? error) });
  process.exit(1);
});
