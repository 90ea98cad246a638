"""A role's agent as a process of its own, speaking the wire (:mod:`sim.wire`, docs/wire.md).

``protolab run SCENARIO --agent researcher=CMD`` replaces the scripted worker of that role by
:class:`ProcessWorker`: the process started from CMD (:func:`launch`, the one place a process is
started, so that a sandbox can wrap it) is sent an ``init``, then each round a ``tick`` and each
envelope delivered to it a ``deliver``; after each the kit reads its lines up to its ``done``, so
nothing waits on a clock but a silence. The transport, the faults, the runtime and the store are the
ones every run has: the envelopes it sends are parsed as any envelope is and put on the same bus
(:meth:`sim.world.RunWorld.send_envelope`); what it answers to a delivery goes out when its turn
comes in the next round, as a scripted worker's would.

What goes wrong is recorded, never raised: a line the wire refuses, an envelope that does not parse,
an artifact whose ref is not its content's, an envelope sent in another's name (``agent_output_refused``,
the line dropped); a process that exits, or is silent past the deadline (``agent_stopped``; the run goes
on without it). A crash fault kills the process and starts its next generation with a new ``init``.

A run is reproducible from its seed when the agent is deterministic: the kit hands it nothing but
the seed, the round and what was delivered, and waits for each answer before it goes on.
"""

from __future__ import annotations

import dataclasses
import queue
import shlex
import subprocess
import threading

from . import digest as _digest
from .envelope import parse_envelope
from .errors import InputError, ProtolabError
from .events import AgentOutputRefused, AgentStopped
from .intent import Intent
from .runtime import put_artifact, record_agent
from .wire import EXCERPT, WireError, deliver_line, dumps, init_line, parse_agent_line, tick_line

__all__ = ["launch", "parse_agent_option", "install_agents", "close_agents", "agents_report", "ProcessWorker", "AgentProcess",
           "DEFAULT_DEADLINE", "MAX_LINES", "STARTUP"]

#: Seconds the kit waits for an agent's next line before it calls the agent silent (--agent-deadline).
DEFAULT_DEADLINE = 10.0

#: Lines an agent may write in answer to one of the kit's lines: past them it is stopped (E_AGENT_FLOOD),
#: so an agent that writes on and on without its done cannot keep the run from ending.
MAX_LINES = 1000
#: Seconds at least that a process is given to answer its init (its start).
STARTUP = 10.0

_SILENT = object()


def launch(argv: list[str]) -> subprocess.Popen:
    """Start an agent's process: its stdin and stdout are the wire (text, UTF-8, a line at a time), its
    stderr the kit's own (what it prints there is its log). The one place the kit starts an agent: a
    sandbox wraps this. A command that cannot be started is refused (E_AGENT_START)."""
    try:
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8",
                                errors="replace", bufsize=1)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot start agent {shlex.join(argv)!r}: {e}", code="E_AGENT_START") from None


def parse_agent_option(text: str) -> tuple[str, list[str]]:
    """``ROLE=CMD`` (``--agent``): the role and the command, split as a shell would (shlex)."""
    role, eq, cmd = text.partition("=")
    role = role.strip()
    try:
        argv = shlex.split(cmd)
    except ValueError as e:
        raise InputError(f"--agent {text!r}: {e}", code="E_AGENT_OPTION") from None
    if not eq or not role or not argv:
        raise InputError(f"--agent takes ROLE=CMD (researcher=\"python3 agent.py\"), not {text!r}",
                         code="E_AGENT_OPTION")
    return role, argv


class AgentProcess:
    """The pipes of one agent process: lines written to its stdin, lines read from its stdout by a
    reader thread (so that a silence can end at the deadline), the process ended when asked."""

    def __init__(self, argv: list[str], deadline: float, launcher=launch):
        self.deadline = deadline
        self.proc = launcher(argv)
        self._lines: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for line in self.proc.stdout:
                self._lines.put(line)
        except (OSError, ValueError):  # (the pipe closed under it: the process is being ended)
            pass
        self._lines.put(None)

    def write(self, obj: dict) -> bool:
        """Write one line; False when the process no longer reads (its stdin is closed)."""
        try:
            self.proc.stdin.write(dumps(obj) + "\n")
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def read(self, deadline: float | None = None):
        """Its next line (without the newline), None at its end of output, or ``_SILENT`` past the deadline."""
        try:
            line = self._lines.get(timeout=self.deadline if deadline is None else deadline)
        except queue.Empty:
            return _SILENT
        return None if line is None else line.rstrip("\n").rstrip("\r")

    def status(self) -> int | None:
        """Its exit status, once its output has ended (None: it closed its output and lives on; killed)."""
        try:
            return self.proc.wait(timeout=self.deadline)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._close()

    def close(self) -> None:
        """The run is over: its stdin closed (its end of input), then it is given the deadline to exit."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=self.deadline)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def _close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._reader.join(timeout=self.deadline)


class ProcessWorker:
    """A worker of the run that is a process (the surface :class:`sim.agents.Worker` shows the run)."""

    def __init__(self, world, role: str, argv: list[str], *, deadline: float = DEFAULT_DEADLINE, generation: int = 1,
                 launcher=launch):
        self.world, self.id, self.argv = world, role, list(argv)
        self.deadline, self.generation, self.launcher = deadline, generation, launcher
        self.jobs: dict = {}  # (a scripted worker's bookkeeping; a process keeps its own to itself)
        self.dead = False
        self.stopped: tuple[str, str] | None = None  # (code, reason) once it exited or went silent
        self.pending: list = []  # what it answered to deliveries: sent when its turn comes, next round
        self.artifacts: dict[str, dict] = {}  # ref -> content it stored
        self.proc = AgentProcess(self.argv, deadline, launcher)
        settings = {k: v for k, v in dataclasses.asdict(world.settings).items() if isinstance(v, int)}
        self.pending += self._exchange(init_line(
            role=role, agent_id=role, generation=generation, seed=world.seed, scenario=world.scenario.name,
            trace=world.trace, settings=settings))

    # ------------------------------------------------------------ what the run calls

    def act(self, now: int) -> None:
        if self.dead:
            return
        answered, self.pending = self.pending, []
        self._apply(answered)
        if not self.dead:
            w = self.world
            self._apply(self._exchange(tick_line(round=now, time=w._clock_of(self.id), epoch=w.epoch,
                                                 tasks=self._tasks())))

    def on_delivery(self, env, decision: str, spec=None, intent=None) -> None:
        if env.recipient == self.id and env.type != "fence":  # (a fence comes through on_fence, to each it names)
            self._hand(env, decision)

    def on_fence(self, env) -> None:
        self._hand(env, "accepted")

    def restart(self) -> "ProcessWorker":
        """A crash: this process is killed; the next generation is started (a new init)."""
        self.dead = True
        self.proc.kill()
        return ProcessWorker(self.world, self.id, self.argv, deadline=self.deadline, generation=self.generation + 1,
                             launcher=self.launcher)

    def close(self) -> None:
        self.dead = True
        self.proc.close()

    # ------------------------------------------------------------ the wire

    def _hand(self, env, decision: str) -> None:
        if not self.dead:
            self.pending += self._exchange(deliver_line(round=self.world.now, envelope=env.to_dict(), decision=decision))

    def _tasks(self) -> list[dict]:
        """The tasks of its role as the runtime holds them, with what the scenario says of each."""
        out = []
        for spec in self.world.specs.values():
            t = self.world.task(spec.id)
            if t is None or (spec.worker != self.id and t.assignee != self.id):
                continue
            view = {"task_id": t.task_id, "state": t.state.value, "state_version": t.state_version,
                    "assignee": t.assignee, "lease_version": t.lease_version, "budget_left": t.budget_left,
                    "goal": spec.goal, "kind": spec.kind}
            if spec.publish:
                view["publish"] = spec.publish
            if spec.vote is not None:
                view["vote"] = spec.vote
            out.append(view)
        return out

    def _exchange(self, line: dict) -> list:
        """Write ``line``; read the agent's lines up to its ``done``: those the wire takes, in order."""
        if self.dead:
            return []
        if not self.proc.write(line):
            self._stop("E_AGENT_EXITED", f"it no longer reads its input (before the {line['type']} of round "
                                         f"{self.world.now}); exit status {self.proc.status()}")
            return []
        out = []
        for _ in range(MAX_LINES + 1):
            # (its start, answered by the done of its init, is given at least STARTUP: an interpreter may take
            # seconds to start on a loaded machine, which is no silence of the agent's)
            wait = max(self.deadline, STARTUP) if line["type"] == "init" else self.deadline
            text = self.proc.read(wait)
            if text is _SILENT:
                self.proc.kill()
                self._stop("E_AGENT_SILENT", f"no done within {wait:g} s of its {line['type']} of round "
                                             f"{self.world.now}; killed")
                return out
            if text is None:
                self._stop("E_AGENT_EXITED", f"its output ended before the done of its {line['type']} of round "
                                             f"{self.world.now}; exit status {self.proc.status()}")
                return out
            try:
                got = parse_agent_line(text)
            except WireError as e:
                self._refuse(e.code, e.message, text)
                continue
            if got.type == "done":
                return out
            out.append(got)
        self.proc.kill()
        self._stop("E_AGENT_FLOOD", f"more than {MAX_LINES} lines without a done in answer to its {line['type']} of "
                                    f"round {self.world.now}; killed")
        return []

    def _apply(self, lines: list) -> None:
        for got in lines:
            if self.dead:  # (a crash fault on one of its sends: it died right after it)
                return
            if got.type == "artifact":
                self._store(got.fields)
            else:
                self._send(got.fields["envelope"])

    def _store(self, f: dict) -> None:
        try:
            ref = _digest.digest(f["content"], "json-sorted-v1")
        except ProtolabError as e:
            self._refuse(e.code, e.message, dumps({"type": "artifact", **f}))
            return
        if ref != f["ref"]:
            self._refuse("E_WIRE_REF", f"artifact.ref {f['ref']!r} is not its content's json-sorted-v1 digest ({ref})",
                         dumps({"type": "artifact", **f}))
            return
        put_artifact(self.world.store, f["content"], kind=f["kind"], task_id=f["task_id"], tick=self.world.now)
        self.artifacts[ref] = f["content"]

    def _send(self, raw: dict) -> None:
        try:
            env = parse_envelope(raw)
        except ProtolabError as e:  # refused as any envelope is, with its own code
            self._refuse(e.code, e.message, dumps({"type": "send", "envelope": raw}))
            return
        if env.sender != self.id:
            self._refuse("E_WIRE_SENDER", f"{self.id} sends as itself, not as {env.sender!r}",
                         dumps({"type": "send", "envelope": raw}))
            return
        lease = env.payload.get("lease_version")
        attempt = lease if isinstance(lease, int) and not isinstance(lease, bool) and lease > 0 else 1
        artifact = env.payload.get("artifact")
        intent = Intent(type=env.type, sender=env.sender, recipient=env.recipient, trace_id=env.trace_id,
                        task_id=env.task_id, attempt=attempt, body=dict(env.payload), refs=tuple(env.evidence_refs),
                        content=self.artifacts.get(artifact) if isinstance(artifact, str) else None,
                        message_id=env.message_id, created_at=env.created_at)
        self.world.send_envelope(env, intent, self.generation)

    # ------------------------------------------------------------ the record

    def _refuse(self, code: str, reason: str, line: str) -> None:
        cut = line if len(line) <= EXCERPT else line[:EXCERPT] + "..."
        record_agent(self.world.store, AgentOutputRefused(agent=self.id, generation=self.generation, code=code,
                                                          reason=reason, line=cut), tick=self.world.now)

    def _stop(self, code: str, reason: str) -> None:
        self.dead = True
        self.stopped = (code, reason)
        record_agent(self.world.store, AgentStopped(agent=self.id, generation=self.generation, code=code,
                                                    reason=reason), tick=self.world.now)


def install_agents(run, agents: dict[str, list[str]], *, deadline: float = DEFAULT_DEADLINE, launcher=launch) -> None:
    """Replace the scripted worker of each role named by a process agent (each started, its init answered)."""
    for role in agents:
        if role not in run.workers:
            raise InputError(f"--agent {role}: the scenario {run.scenario.name} has no worker {role!r}; workers: "
                             f"{', '.join(sorted(run.workers))}", code="E_AGENT_ROLE")
    for role, argv in agents.items():
        run.workers[role] = ProcessWorker(run, role, argv, deadline=deadline, launcher=launcher)


def close_agents(run) -> None:
    """End every process agent the run started (each given the deadline to exit once its input ends)."""
    for w in list(getattr(run, "workers", {}).values()):
        if isinstance(w, ProcessWorker):
            w.close()


def agents_report(store, roles) -> dict:
    """What each process agent of a finished run did wrong, read from its record: per role, its command,
    each stop (generation, code, reason) and how many of its lines were refused, by code."""
    out = {role: {"command": store.get_meta(f"plugin_agent_{role}"), "stopped": [], "refused": {}} for role in roles}
    for e in store.events_of_type("agent_stopped"):
        d = e.data
        if d["agent"] in out:
            out[d["agent"]]["stopped"].append({"generation": d["generation"], "code": d["code"], "reason": d["reason"]})
    for e in store.events_of_type("agent_output_refused"):
        d = e.data
        if d["agent"] in out:
            refused = out[d["agent"]]["refused"]
            refused[d["code"]] = refused.get(d["code"], 0) + 1
    return out
