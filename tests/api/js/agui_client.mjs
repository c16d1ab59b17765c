// AG-UI's own client, HttpAgent from @ag-ui/client, running an agent that
// Stalwart serves: it posts RunAgentInput, verifies and applies the events.
//
//   node agui_client.mjs URL THREAD_ID RUN_ID [STOP_AFTER_EVENTS] < {"messages": [...], "resume": [...]}
//
// Prints one JSON line per event ({"event": ...}), then {"result": ...}:
// the messages as the client holds them and the run's outcome. With
// STOP_AFTER_EVENTS, it aborts the run after that many events (a client
// that goes away).
import { HttpAgent } from "@ag-ui/client";

const [url, threadId, runId, stopAfter] = process.argv.slice(2);
const limit = stopAfter ? Number(stopAfter) : Infinity;
let seen = 0;
const input = JSON.parse(await new Promise((done) => {
  let text = "";
  process.stdin.on("data", (d) => (text += d));
  process.stdin.on("end", () => done(text || "{}"));
}));
const agent = new HttpAgent({ url, threadId, initialMessages: input.messages ?? [] });
let outcome = null;
let failed = null;
const subscriber = {
  onEvent({ event }) {
    if (seen >= limit) return;
    console.log(JSON.stringify({ event }));
    seen += 1;
    if (seen >= limit) {
      agent.abortRun();
      finish(); // an aborted run never settles: report and leave
    }
  },
  onRunFinishedEvent({ event }) {
    outcome = event.outcome ?? null;
  },
  onRunErrorEvent({ event }) {
    failed = event.message;
  },
};
function finish() {
  console.log(JSON.stringify({ result: { messages: agent.messages, state: agent.state, outcome, failed } }));
  process.exit(0);
}
try {
  await agent.runAgent({ runId, resume: input.resume }, subscriber);
} catch (e) {
  failed = failed ?? String(e);
}
finish();
