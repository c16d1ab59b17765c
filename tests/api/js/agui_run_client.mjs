// AG-UI's own client reading a durable run's stream (GET /runs/{id}/agui):
// HttpAgent, asked to GET rather than POST a RunAgentInput, verifies the
// events' order and applies them, STATE_SNAPSHOT and STATE_DELTA included,
// to the state it holds.
//
//   node agui_run_client.mjs URL [STOP_AFTER_EVENTS]
//
// Prints one JSON line per event ({"event": ...}), then {"result": ...}:
// the state as the client holds it, and how the run ended. With
// STOP_AFTER_EVENTS, it aborts after that many events (a client that goes
// away).
import { HttpAgent } from "@ag-ui/client";

class RunStream extends HttpAgent {
  requestInit() {
    return {
      method: "GET",
      headers: { Accept: "text/event-stream" },
      signal: this.abortController.signal,
    };
  }
}

const [url, stopAfter] = process.argv.slice(2);
const limit = stopAfter ? Number(stopAfter) : Infinity;
let seen = 0;
const agent = new RunStream({ url });
let outcome = null;
let failed = null;
let result = null;
function finish() {
  console.log(JSON.stringify({ result: { state: agent.state, outcome, failed, result } }));
  process.exit(0);
}
const subscriber = {
  onEvent({ event }) {
    if (seen >= limit) return;
    console.log(JSON.stringify({ event }));
    seen += 1;
    if (seen >= limit) {
      agent.abortRun();
      finish();
    }
  },
  onRunFinishedEvent({ event }) {
    outcome = event.outcome ?? null;
    result = event.result ?? null;
  },
  onRunErrorEvent({ event }) {
    failed = event.message;
  },
};
try {
  await agent.runAgent({}, subscriber);
} catch (e) {
  failed = failed ?? String(e);
}
finish();
