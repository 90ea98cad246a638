#!/usr/bin/env node
// A worker agent as a process of its own, in JavaScript: data/agents/researcher.py, line for line.
//
// Run by the kit: protolab run publish-report --agent researcher="node data/agents/researcher.js"
// It speaks the kit's wire, version 1 (docs/wire.md): one JSON object a line on stdin (init, tick,
// deliver), one a line on stdout (send, artifact), and a done after answering each line. Node's own
// modules only. It plays whichever worker role its init names, as the kit's scripted worker does;
// every choice comes from a generator seeded with the run's seed, so the same run gives the same answers.
"use strict";

const crypto = require("crypto");
const readline = require("readline");

const WIRE = 1;
const DONE_STATES = new Set(["succeeded", "failed", "canceled", "denied", "needs_review"]);
const WORDS = ["evidence", "source", "survey", "ledger", "archive", "field", "report", "record", "witness", "sample",
  "index", "study", "census", "notes", "memo", "trial"];

// json-sorted-v1: keys sorted by code point, no whitespace, UTF-8 as itself (the values here are
// strings, integers, lists and objects: JSON.stringify writes them as Python's json does).
function canonical(value) {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

function digest(value) {
  return "sha256:" + crypto.createHash("sha256").update(canonical(value), "utf8").digest("hex");
}

function later(timeText, seconds) {
  return new Date(Date.parse(timeText) + seconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

// A small seeded generator (FNV-1a of the seed text, then mulberry32): deterministic, not Python's.
function generator(text) {
  let h = 0x811c9dc5;
  for (const ch of Buffer.from(text, "utf8")) { h ^= ch; h = Math.imul(h, 0x01000193) >>> 0; }
  return function next() {
    h = (h + 0x6d2b79f5) >>> 0;
    let t = h;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Agent {
  constructor(init) {
    this.me = init.agent_id;
    this.generation = init.generation;
    this.seed = init.seed;
    this.trace = init.trace;
    this.settings = init.settings;
    this.jobs = new Map();
    this.fences = [];
    this.sent = 0;
    this.out = [];
  }

  emit(line) { this.out.push(JSON.stringify({ wire: WIRE, ...line })); }

  send(tick, type, recipient, taskId, payload, key, refs = []) {
    this.sent += 1;
    const env = {
      message_id: `${this.me[0].toUpperCase()}${this.me.slice(1)}-${this.generation * 1000 + this.sent}`,
      trace_id: this.trace, task_id: taskId, sender: this.me, recipient, type,
      schema_version: "1", created_at: tick.time, idempotency_key: key,
      payload_digest: digest(payload), digest_scheme: "json-sorted-v1", payload, evidence_refs: [...refs],
    };
    if (tick.epoch > 1) env.epoch = tick.epoch;
    if (this.settings.expires_ticks) env.expires_at = later(tick.time, this.settings.expires_ticks);
    this.emit({ type: "send", envelope: env });
  }

  deliver(line) {
    const env = line.envelope;
    if (env.type === "fence" && line.decision === "accepted" && (env.payload.to || []).includes(this.me)) {
      this.fences.push(env);
      this.jobs.clear();
    } else if (env.type === "task_request" && env.recipient === this.me && line.decision === "accepted") {
      this.jobs.set(env.task_id, { inputs: [...env.evidence_refs], lease: 0, startedAt: -1, startTries: 0,
        result: null, resultAt: -1, resultTries: 0 });
    }
  }

  tick(line) {
    const now = line.round, s = this.settings;
    const tasks = new Map(line.tasks.map((t) => [t.task_id, t]));
    for (const fence of this.fences) {
      const inFenceEpoch = { ...line, epoch: fence.epoch || 1 };
      this.send(inFenceEpoch, "ack", fence.sender, fence.task_id, { of: fence.message_id },
        `${this.trace}:ack:${fence.message_id}:${this.me}`);
    }
    this.fences = [];
    for (const [tid, job] of [...this.jobs]) {
      const t = tasks.get(tid);
      if (t === undefined || DONE_STATES.has(t.state)) { this.jobs.delete(tid); continue; }
      if (t.state === "ready" && t.assignee === this.me) {
        const wanted = t.lease_version + 1;
        const fresh = job.lease !== wanted;
        if (fresh || now - job.startedAt >= s.retry_ticks) {
          if (fresh) { job.lease = wanted; job.startTries = 0; }
          job.result = null; job.resultAt = -1; job.resultTries = 0;
          const retry = job.startTries ? `:retry-${job.startTries}` : "";
          this.send(line, "task_started", "manager", tid, { lease_version: wanted },
            `${this.trace}:${tid}:attempt-${wanted}:started${retry}`);
          job.startedAt = now; job.startTries += 1;
          continue;
        }
      }
      if (job.lease && job.result === null && job.startedAt >= 0 && now - job.startedAt >= s.work_ticks) {
        job.result = this.produce(t, job);
        job.resultAt = now; job.resultTries = 1;
        this.send(line, "task_result", "manager", tid, job.result, `${this.trace}:${tid}:attempt-${job.lease}`,
          [job.result.artifact, ...job.inputs]);
      } else if (job.result !== null && t.state === "running" && t.lease_version === job.lease
                 && now - job.resultAt >= s.retry_ticks) {
        this.send(line, "task_result", "manager", tid, job.result,
          `${this.trace}:${tid}:attempt-${job.lease}:retry-${job.resultTries}`, [job.result.artifact, ...job.inputs]);
        job.resultAt = now; job.resultTries += 1;
      }
    }
  }

  produce(t, job) {
    const rnd = generator(`${this.seed}:${this.me}:${t.task_id}:${job.lease}`);
    const pick = () => WORDS[Math.floor(rnd() * WORDS.length)];
    const words = (n) => Array.from({ length: n }, pick).join(" ");
    let content, kind;
    if (t.kind === "draft") {
      const title = words(3).replace(/\b\w/g, (c) => c.toUpperCase());
      content = { kind: "draft", task_id: t.task_id, title, body: words(24) + ".", cites: [...job.inputs] };
      kind = "draft";
    } else {
      const rows = [0, 1, 2].map(() => {
        const claim = words(6);
        const day = String(1 + Math.floor(rnd() * 28)).padStart(2, "0");
        const month = String(1 + Math.floor(rnd() * 6)).padStart(2, "0");
        return [claim[0].toUpperCase() + claim.slice(1) + ".",
          `https://${pick()}.example.org/notes/${100 + Math.floor(rnd() * 900)}`, `2026-${month}-${day}`];
      });
      content = { kind: "fact-table", task_id: t.task_id, goal: t.goal, columns: ["claim", "source", "date"], rows };
      kind = "fact-table";
    }
    if ("vote" in t) content.vote = t.vote;
    const ref = digest(content);
    this.emit({ type: "artifact", task_id: t.task_id, kind, ref, content });
    const payload = { status: "succeeded", lease_version: job.lease, artifact: ref,
      summary: `${(content.rows || []).length || 1} item(s) in ${ref.slice(0, 15)}` };
    if (t.publish) payload.effect = { kind: "publish", target: t.publish };
    return payload;
  }
}

let agent = null;
const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
input.on("line", (text) => {
  const line = JSON.parse(text);
  if (line.type === "init") agent = new Agent(line);
  else if (line.type === "deliver") agent.deliver(line);
  else if (line.type === "tick") agent.tick(line);
  let out = agent.out.join("\n");
  agent.out = [];
  process.stdout.write((out ? out + "\n" : "") + JSON.stringify({ wire: WIRE, type: "done" }) + "\n");
});
