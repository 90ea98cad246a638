"""A lab's reference path (and its wrong paths) as data, played through the engine.

``lab.toml`` lists, under ``[[reference]]``, the actions a learner takes to meet every checkpoint,
and under ``[[wrong]]`` plausible mistakes with the checkpoint each leaves unmet and words its
hint must contain. :func:`play` performs them on a :class:`~sim.live.LiveRun` and a
:class:`~sim.labs.session.LabSession` directly (the TUI's keys do the same through the app; the
tests play both). Actions:

``{do = "step", until = "M-6" | "end", count = N}``   deliver until that message was delivered
``{do = "inject", fault = "duplicate", message = "M-6"}``
``{do = "crash", worker = "researcher"}``
``{do = "reconcile", task = "T-1", decision = "ready", evidence = ["M-3"]}``   (``before = "review_decided"``:
decided from the state shown by time travel to just before that event, a stale read)
``{do = "open", message = "M-6"}``     the delivery's detail view (the newest delivery of it; ``delivery = 1``: its
first, ``2``: its second...)
``{do = "conversation"}``              the conversation view
``{do = "travel", before = "effect_committed"}``   time travel to the event just before that one
``{do = "answer", question = "reused", value = "M-6"}``
"""

from __future__ import annotations

from ..errors import ProtolabError

__all__ = ["play", "reference", "wrong_paths"]


def reference(lab) -> list[dict]:
    import tomllib

    return list(tomllib.loads((lab.folder / "lab.toml").read_text(encoding="utf-8")).get("reference", []))


def wrong_paths(lab) -> list[dict]:
    import tomllib

    return list(tomllib.loads((lab.folder / "lab.toml").read_text(encoding="utf-8")).get("wrong", []))


def delivered(store, message_id: str) -> bool:
    return bool(store.deliveries_of(message_id))


def first_event_seq(store, etype: str) -> int | None:
    for e in store.iter_events(etype=etype):
        return e.seq
    return None


def before_delivery_of(store, etype: str) -> int:
    """The last event before the delivery that first recorded an event of ``etype`` began (time
    travel there shows state just before that delivery changed anything)."""
    for e in store.iter_events(etype=etype):
        if e.delivery_id is None:
            return max(0, e.seq - 1)
        return max(0, min(x.seq for x in store.events_of_delivery(e.delivery_id)) - 1)
    return 0


def play(live, session, actions: list[dict]) -> list[str]:
    """Perform ``actions``; returns what each did, in words (an action the engine refuses is
    recorded as refused, as the TUI would show it)."""
    said = []
    for a in actions:
        do = a["do"]
        if do == "step":
            until, count = a.get("until", "end"), a.get("count")
            n = 0
            while True:
                if count is not None and n >= count:
                    break
                if until != "end" and count is None and delivered(live.store, until):
                    break
                if live.step() is None:
                    break
                n += 1
            said.append(f"stepped {n}")
        elif do == "inject":
            said.append(live.inject(a["fault"], a["message"]))
        elif do == "crash":
            said.append(live.crash(a["worker"]))
        elif do == "reconcile":
            read_version = None
            if a.get("before"):
                # decided from the state shown by time travel to just before that event: the task's
                # version when it last entered needs_review
                frozen = [t for t in live.store.transitions(a["task"]) if t["new_state"] == "needs_review"]
                read_version = frozen[-1]["state_version"] if frozen else None
            try:
                out = live.reconcile(a["task"], a.get("decision", "ready"), list(a.get("evidence", [])),
                                     read_version=read_version)
                said.append(f"reconciled: {out.decision}")
            except ProtolabError as e:
                session.action("reconcile-refused", {"task_id": a["task"], "code": e.code, "reason": str(e)})
                said.append(f"refused: {e.code}")
        elif do == "open":
            rows = live.store.deliveries_of(a["message"])
            row = (rows[a["delivery"] - 1] if len(rows) >= a["delivery"] else None) if a.get("delivery") else \
                (rows[-1] if rows else None)
            session.action("open-detail", {"message_id": a["message"], "type": row["type"] if row else "",
                                           "delivery_id": row["delivery_id"] if row else None})
            said.append(f"opened {a['message']}" + (f" (delivery #{row['delivery_id']})" if row else ""))
        elif do == "conversation":
            session.action("open-conversation", {})
            said.append("opened the conversation")
        elif do == "travel":
            seq = first_event_seq(live.store, a["before"])
            target = max(0, (seq or 1) - 1)
            session.action("visit", {"seq": target})
            said.append(f"visited event {target}")
        elif do == "answer":
            ok, feedback = session.answer(a["question"], str(a["value"]))
            said.append(f"answer {'right' if ok else 'wrong'}: {feedback}")
        else:
            raise ValueError(f"unknown action {do!r}")
        session.refresh()
    return said
