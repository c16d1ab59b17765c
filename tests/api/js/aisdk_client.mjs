// The AI SDK's own client side, driving Stalwart's UI message stream:
// DefaultChatTransport sends the request (or resumes the stream) and
// readUIMessageStream builds the assistant's message from the chunks.
//
//   node aisdk_client.mjs send|resume BASE AGENT CHAT_ID [STOP_AFTER_CHUNKS] < {"messages": [...]}
//
// Prints one JSON line per chunk ({"chunk": ...}), then {"message": ...}
// (the UIMessage as the SDK built it) or {"aborted": true} when it stopped
// reading after STOP_AFTER_CHUNKS chunks (a client that goes away).
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [mode, base, agent, chatId, stopAfter] = process.argv.slice(2);
const input = JSON.parse(await new Promise((done) => {
  let text = "";
  process.stdin.on("data", (d) => (text += d));
  process.stdin.on("end", () => done(text || "{}"));
}));
const messages = input.messages ?? [];
const transport = new DefaultChatTransport({ api: `${base}/agents/${agent}/aisdk` });
const abort = new AbortController();
let stream;
if (mode === "send") {
  stream = await transport.sendMessages({
    chatId, messages, trigger: "submit-message", messageId: undefined, abortSignal: abort.signal,
  });
} else {
  stream = await transport.reconnectToStream({ chatId });
  if (stream === null) {
    console.log(JSON.stringify({ none: true }));
    process.exit(0);
  }
}
const limit = stopAfter ? Number(stopAfter) : Infinity;
let seen = 0;
const tapped = stream.pipeThrough(new TransformStream({
  transform(chunk, controller) {
    console.log(JSON.stringify({ chunk }));
    seen += 1;
    controller.enqueue(chunk);
    if (seen >= limit) {
      abort.abort();
      controller.terminate();
    }
  },
}));
const last = messages.at(-1);
let message;
try {
  for await (const m of readUIMessageStream({
    message: last?.role === "assistant" ? last : undefined,
    stream: tapped,
    onError: (e) => console.log(JSON.stringify({ error: String(e) })),
  })) {
    message = m;
  }
} catch (e) {
  if (seen < limit) throw e;
}
console.log(JSON.stringify(seen >= limit ? { aborted: true, message } : { message }));
