#!/usr/bin/env python3
"""A worker agent as a process of its own: the kit's scripted researcher, stand-alone.

Run by the kit: ``protolab run publish-report --agent researcher="python3 data/agents/researcher.py"``.
It speaks the kit's wire, version 1 (docs/wire.md): one JSON object a line on stdin (init, tick,
deliver), one a line on stdout (send, artifact), and a ``done`` after answering each line. Python's
standard library only: it imports nothing of the kit, so it is what a student's agent in any
language would be. It plays whichever worker role its init names (researcher, writer).

What it does is what the kit's scripted worker does:
* a task_request the runtime accepted, addressed to it, is a job (the inputs are its evidence_refs);
* each round, a job whose task is ready and assigned to it is started (task_started, asking for the
  next lease), again after retry_ticks if the start never took effect;
* work_ticks rounds after a start it stores its product (a fact table, or a draft citing its inputs) as
  an artifact and answers with a task_result citing it; a result that has not taken effect after
  retry_ticks is sent again (its retry number in the key);
* a fence is acknowledged (an ack of a fence speaks for the conversation).
Every envelope is built as the course's reference design builds it: the idempotency key names the
logical intent, the payload is digested with json-sorted-v1. Every choice is drawn from a generator
seeded with the run's seed, so the same run gives the same answers.
"""

import hashlib
import json
import random
import sys
from datetime import datetime, timedelta

WIRE = 1
DONE_STATES = {"succeeded", "failed", "canceled", "denied", "needs_review"}
WORDS = ("evidence", "source", "survey", "ledger", "archive", "field", "report", "record", "witness", "sample",
         "index", "study", "census", "notes", "memo", "trial")


def canonical(value) -> bytes:
    """json-sorted-v1: sorted keys, no whitespace, UTF-8 as itself."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def digest(value) -> str:
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


def later(time_text: str, seconds: int) -> str:
    t = datetime.strptime(time_text, "%Y-%m-%dT%H:%M:%SZ") + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Agent:
    def __init__(self, init: dict):
        self.me = init["agent_id"]
        self.generation = init["generation"]
        self.seed = init["seed"]
        self.trace = init["trace"]
        self.settings = init["settings"]
        self.jobs = {}  # task id -> what it knows of the job
        self.fences = []  # fences to acknowledge
        self.sent = 0
        self.out = []

    # -------------------------------------------------------------- what it writes

    def emit(self, line: dict) -> None:
        self.out.append(json.dumps({"wire": WIRE, **line}, separators=(",", ":"), ensure_ascii=False))

    def send(self, tick: dict, type_: str, recipient: str, task_id: str, payload: dict, key: str, refs=()) -> None:
        self.sent += 1
        env = {
            # its own ids: its role, then its generation and a count (a restarted body does not reuse them)
            "message_id": f"{self.me.capitalize()}-{self.generation * 1000 + self.sent}",
            "trace_id": self.trace, "task_id": task_id, "sender": self.me, "recipient": recipient, "type": type_,
            "schema_version": "1", "created_at": tick["time"], "idempotency_key": key,
            "payload_digest": digest(payload), "digest_scheme": "json-sorted-v1", "payload": payload,
            "evidence_refs": list(refs),
        }
        if tick["epoch"] > 1:
            env["epoch"] = tick["epoch"]
        if self.settings.get("expires_ticks"):
            env["expires_at"] = later(tick["time"], self.settings["expires_ticks"])
        self.emit({"type": "send", "envelope": env})

    # -------------------------------------------------------------- what it reads

    def deliver(self, line: dict) -> None:
        env, decision = line["envelope"], line["decision"]
        if env["type"] == "fence" and decision == "accepted" and self.me in env["payload"].get("to", []):
            self.fences.append(env)
            self.jobs.clear()  # the fence closed what work was still open
        elif env["type"] == "task_request" and env["recipient"] == self.me and decision == "accepted":
            self.jobs[env["task_id"]] = {"inputs": list(env["evidence_refs"]), "lease": 0, "started_at": -1,
                                         "start_tries": 0, "result": None, "result_at": -1, "result_tries": 0}

    def tick(self, line: dict) -> None:
        now, s = line["round"], self.settings
        tasks = {t["task_id"]: t for t in line["tasks"]}
        for fence in self.fences:
            ack_epoch = {**line, "epoch": fence.get("epoch", 1)}  # an ack of a fence speaks in the fence's epoch
            self.send(ack_epoch, "ack", fence["sender"], fence["task_id"], {"of": fence["message_id"]},
                      f"{self.trace}:ack:{fence['message_id']}:{self.me}")
        self.fences = []
        for tid in list(self.jobs):
            job, t = self.jobs[tid], tasks.get(tid)
            if t is None or t["state"] in DONE_STATES:
                del self.jobs[tid]
                continue
            if t["state"] == "ready" and t["assignee"] == self.me:
                wanted = t["lease_version"] + 1
                fresh = job["lease"] != wanted
                if fresh or now - job["started_at"] >= s["retry_ticks"]:
                    if fresh:
                        job["lease"], job["start_tries"] = wanted, 0
                    job["result"], job["result_at"], job["result_tries"] = None, -1, 0
                    retry = f":retry-{job['start_tries']}" if job["start_tries"] else ""
                    self.send(line, "task_started", "manager", tid, {"lease_version": wanted},
                              f"{self.trace}:{tid}:attempt-{wanted}:started{retry}")
                    job["started_at"], job["start_tries"] = now, job["start_tries"] + 1
                    continue
            if job["lease"] and job["result"] is None and job["started_at"] >= 0 \
                    and now - job["started_at"] >= s["work_ticks"]:
                job["result"] = self.produce(t, job)
                job["result_at"], job["result_tries"] = now, 1
                self.send(line, "task_result", "manager", tid, job["result"], f"{self.trace}:{tid}:attempt-{job['lease']}",
                          [job["result"]["artifact"], *job["inputs"]])
            elif job["result"] is not None and t["state"] == "running" and t["lease_version"] == job["lease"] \
                    and now - job["result_at"] >= s["retry_ticks"]:
                self.send(line, "task_result", "manager", tid, job["result"],
                          f"{self.trace}:{tid}:attempt-{job['lease']}:retry-{job['result_tries']}",
                          [job["result"]["artifact"], *job["inputs"]])
                job["result_at"], job["result_tries"] = now, job["result_tries"] + 1

    def produce(self, t: dict, job: dict) -> dict:
        """The work product, stored as an artifact; the result's payload citing it."""
        rng = random.Random(f"{self.seed}:{self.me}:{t['task_id']}:{job['lease']}")
        if t["kind"] == "draft":
            content = {"kind": "draft", "task_id": t["task_id"],
                       "title": " ".join(rng.choice(WORDS) for _ in range(3)).title(),
                       "body": " ".join(rng.choice(WORDS) for _ in range(24)) + ".", "cites": list(job["inputs"])}
            kind = "draft"
        else:
            rows = [[" ".join(rng.choice(WORDS) for _ in range(6)).capitalize() + ".",
                     f"https://{rng.choice(WORDS)}.example.org/notes/{rng.randrange(100, 1000)}",
                     f"2026-{rng.randrange(1, 7):02d}-{rng.randrange(1, 29):02d}"] for _ in range(3)]
            content = {"kind": "fact-table", "task_id": t["task_id"], "goal": t["goal"],
                       "columns": ["claim", "source", "date"], "rows": rows}
            kind = "fact-table"
        if "vote" in t:
            content["vote"] = t["vote"]
        ref = digest(content)
        self.emit({"type": "artifact", "task_id": t["task_id"], "kind": kind, "ref": ref, "content": content})
        payload = {"status": "succeeded", "lease_version": job["lease"], "artifact": ref,
                   "summary": f"{len(content.get('rows', [])) or 1} item(s) in {ref[:15]}"}
        if t.get("publish"):
            payload["effect"] = {"kind": "publish", "target": t["publish"]}
        return payload


def main() -> None:
    agent = None
    for text in sys.stdin:
        line = json.loads(text)
        if line["type"] == "init":
            agent = Agent(line)
        elif line["type"] == "deliver":
            agent.deliver(line)
        elif line["type"] == "tick":
            agent.tick(line)
        for out in agent.out:
            sys.stdout.write(out + "\n")
        agent.out = []
        sys.stdout.write(json.dumps({"wire": WIRE, "type": "done"}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
