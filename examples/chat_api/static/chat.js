// The chat page: talks to the Stalwart API on its own origin.
//
// A conversation is a run of the `chat` policy. The page streams the run's
// events with fetch (not EventSource, so that it can send the bearer token)
// and reconnects with Last-Event-ID after a network drop: the stream
// rebuilds the conversation from the ledger, missing nothing. Every text
// from the server goes into the page with textContent: never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
const shown = new Set(); // step keys already on the page
let runId = localStorage.getItem("chat-run");
let lastEventId = null;
let streaming = null; // the AbortController of the open stream

function headers(json) {
  const h = {};
  const token = $("token").value.trim();
  if (token) h["Authorization"] = "Bearer " + token;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "bubble " + role;
  div.textContent = text;
  $("log").appendChild(div);
  div.scrollIntoView({ block: "end" });
}

function setState(text, canSend) {
  $("state").textContent = text;
  $("text").disabled = !canSend;
  $("send").disabled = !canSend;
  if (canSend) $("text").focus();
}

function onEvent(type, data) {
  if (type === "step") {
    if (shown.has(data.key)) return; // a replayed step: already shown
    shown.add(data.key);
    if (data.name === "reply" && data.error === null) bubble("assistant", String(data.output));
    if (data.kind === "signal:message") bubble("user", String(data.output && data.output.text));
  } else if (type === "status") {
    if (data.status === "suspended" && data.waiting_for === "message") setState("", true);
    else setState(data.status + "…", false);
  } else if (type === "end") {
    setState("conversation " + data.status + (data.error ? ": " + data.error.message : ""), false);
  }
}

async function stream(id) {
  const controller = new AbortController();
  streaming = controller;
  let ended = false;
  while (!ended && streaming === controller) {
    try {
      const h = headers(false);
      if (lastEventId) h["Last-Event-ID"] = lastEventId;
      const res = await fetch("/runs/" + encodeURIComponent(id) + "/events",
                              { headers: h, signal: controller.signal });
      if (!res.ok) {
        const body = await res.json().catch(() => ({ error: res.statusText }));
        setState("cannot stream the run: " + body.error, false);
        return;
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let type = "message", data = "", eid = null;
          for (const line of frame.split("\n")) {
            if (line.startsWith("event: ")) type = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
            else if (line.startsWith("id: ")) eid = line.slice(4);
          }
          if (!data) continue; // a keepalive comment
          if (eid !== null) lastEventId = eid;
          onEvent(type, JSON.parse(data));
          if (type === "end") ended = true;
        }
      }
    } catch (err) {
      if (controller.signal.aborted) return;
    }
    if (!ended) await new Promise((r) => setTimeout(r, 1000)); // then resume where it stopped
  }
}

function open(id) {
  if (streaming) streaming.abort();
  runId = id;
  localStorage.setItem("chat-run", id);
  lastEventId = null;
  shown.clear();
  $("log").replaceChildren();
  $("run").textContent = "run " + id;
  stream(id);
}

async function start() {
  const res = await fetch("/policies/chat/runs", {
    method: "POST",
    headers: headers(true),
    body: JSON.stringify({ inputs: { name: $("name").value || "friend" } }),
  });
  const body = await res.json();
  if (!res.ok) {
    setState("cannot start: " + body.error, false);
    return;
  }
  open(body.id);
}

async function send(event) {
  event.preventDefault();
  const text = $("text").value.trim();
  if (!text || !runId) return;
  setState("sending…", false);
  const res = await fetch("/runs/" + encodeURIComponent(runId) + "/signals/message", {
    method: "POST",
    headers: headers(true),
    body: JSON.stringify({ text: text }),
  });
  if (res.ok) $("text").value = "";
  else setState("not sent: " + (await res.json()).error, true);
}

$("token").value = sessionStorage.getItem("chat-token") || "";
$("token").addEventListener("change", () => sessionStorage.setItem("chat-token", $("token").value));
$("new").addEventListener("click", start);
$("say").addEventListener("submit", send);
if (runId) open(runId);
