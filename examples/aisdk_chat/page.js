// The chat page: the AI SDK's transport and stream reader, as useChat uses
// them, over Stalwart's UI message stream. Bundled into static/chat.js by
// `npm run build`. Everything shown is set as text, never as markup.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const transport = new DefaultChatTransport({ api: "/agents/support/aisdk" });
const chatId = sessionStorage.getItem("chat") ?? `chat-${crypto.randomUUID()}`;
sessionStorage.setItem("chat", chatId);
const log = document.getElementById("log");
const form = document.getElementById("ask");
const text = document.getElementById("text");
const state = document.getElementById("state");
const messages = [];

function render() {
  log.replaceChildren();
  for (const message of messages) {
    const bubble = document.createElement("div");
    bubble.className = `bubble ${message.role}`;
    for (const part of message.parts) {
      if (part.type === "text") {
        const p = document.createElement("p");
        p.textContent = part.text;
        bubble.append(p);
      } else if (part.type === "dynamic-tool") {
        bubble.append(tool(part));
      }
    }
    log.append(bubble);
  }
}

function tool(part) {
  const box = document.createElement("div");
  box.className = "tool";
  const what = document.createElement("code");
  what.textContent = `${part.toolName}(${JSON.stringify(part.input ?? {})}) ${part.state}`;
  box.append(what);
  if (part.state === "output-available") {
    const out = document.createElement("code");
    out.className = "output";
    out.textContent = JSON.stringify(part.output);
    box.append(out);
  }
  if (part.state === "approval-requested") {
    for (const [label, approved] of [["Approve", true], ["Deny", false]]) {
      const button = document.createElement("button");
      button.textContent = label;
      button.className = approved ? "approve" : "deny";
      button.onclick = () => decide(part, approved);
      box.append(button);
    }
  }
  return box;
}

async function read(stream, continuing) {
  state.textContent = "answering…";
  for await (const message of readUIMessageStream({
    message: continuing ? messages.at(-1) : undefined,
    stream,
  })) {
    if (messages.at(-1)?.id === message.id) messages[messages.length - 1] = message;
    else messages.push(message);
    render();
  }
  state.textContent = "ready";
}

async function post(continuing) {
  const stream = await transport.sendMessages({
    chatId, messages, trigger: "submit-message", messageId: undefined, abortSignal: undefined,
  });
  await read(stream, continuing);
}

// What addToolApprovalResponse does, then the request sendAutomaticallyWhen sends.
async function decide(part, approved) {
  part.state = "approval-responded";
  part.approval = { ...part.approval, approved, ...(approved ? {} : { reason: "the customer said no" }) };
  render();
  await post(true);
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const said = text.value.trim();
  if (!said) return;
  text.value = "";
  messages.push({ id: crypto.randomUUID(), role: "user", parts: [{ type: "text", text: said }] });
  render();
  await post(false);
});

// A turn being answered when the page (re)loads: resumeStream's request.
const resumed = await transport.reconnectToStream({ chatId });
if (resumed !== null) await read(resumed, false);
state.textContent = "ready";
