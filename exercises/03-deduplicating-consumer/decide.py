"""Exercise 3: a deduplicating consumer.

decide() is the runtime's intake: for each delivery it says what the delivery means (accepted,
duplicate, conflict, late or rejected) and which move, if any, the task makes. The runtime turns
your Verdict into events and state; the invariants judge the result.

This starter applies whatever the allowlist permits and knows nothing of keys, digests, leases
or versions. It runs. Try:

    protolab run --intake decide.py --fault duplicate
    protolab exercise check 3
"""

from sim.envelope import role_of
from sim.intake import Decision, IntentRecord, Move, TaskView, Verdict, target_state  # noqa: F401
from sim.machine import RuleBook, TaskState  # noqa: F401


def decide(env, task, prior, rules, unresolved=frozenset()):
    """env: the Envelope delivered. task: a TaskView (None if the task does not exist yet).
    prior: the IntentRecords already recorded under (env.task_id, env.idempotency_key).
    rules: the task's RuleBook (rules.allows(from_state, to_state, role)). unresolved: the
    evidence_refs that name nothing stored."""
    role = role_of(env.sender)
    if task is None:
        if env.type != "task_request":
            return Verdict(Decision.REJECTED, f"task {env.task_id} does not exist", code="E_UNKNOWN_TASK")
        return Verdict(Decision.ACCEPTED, "created",
                       move=Move(TaskState.PENDING, TaskState.READY, "assigned", env.sender, role),
                       create=True, record_intent=True)
    target = target_state(env)
    if target is None:  # an ack
        return Verdict(Decision.ACCEPTED, "receipt recorded", record_intent=True)
    grant = task.lease_version + 1 if env.type == "task_started" else None
    if rules.allows(task.state, target, role):
        return Verdict(Decision.ACCEPTED, f"{task.state.value} -> {target.value}",
                       move=Move(task.state, target, "allowed", env.sender, role), grant_lease=grant, record_intent=True)
    return Verdict(Decision.REJECTED, f"{task.state.value} -> {target.value} is not allowed",
                   code="E_TRANSITION_NOT_ALLOWED")
