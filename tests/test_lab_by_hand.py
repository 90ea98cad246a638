"""A lab in hand-delivery mode: no simulator; the learner delivers envelopes from another process
('protolab deliver') and the TUI and the Guide follow the file."""

from __future__ import annotations

import pytest

from sim import samples
from sim.labs.catalog import load_lab
from sim.labs.session import LabSession
from sim.runtime import deliver
from sim.store import ProgressStore, Store

LAB = '''number = 90
slug = "by-hand"
title = "By hand"
minutes = 20
summary = "deliver the story's first envelopes yourself"
scenario = "publish-report"
seed = 0
policy = "safe"
mode = "hand-delivery"

[[step]]
title = "Deliver a request"
text = "protolab deliver m1.json --db lab90.db"
checkpoints = ["created", "started", "result"]

[[checkpoint]]
id = "created"
title = "A task created by your request"
check = "delivery"
args = { type = "task_request", decision = "accepted" }
hint = "Deliver a task_request."

[[checkpoint]]
id = "started"
title = "The task started"
check = "delivery"
args = { type = "task_started", decision = "accepted" }
hint = "Deliver the task_started."

[[checkpoint]]
id = "result"
title = "The result accepted"
check = "task_state"
args = { task = "T-1", state = "succeeded" }
hint = "Deliver the task_result."

[[question]]
id = "q1"
kind = "choice"
text = "Who delivered?"
choices = ["you", "the simulator"]
answer = "you"

[[question]]
id = "q2"
kind = "choice"
text = "Where is it kept?"
choices = ["the file", "memory"]
answer = "the file"
'''


@pytest.fixture
def lab(tmp_path):
    folder = tmp_path / "90-by-hand"
    folder.mkdir()
    (folder / "lab.toml").write_text(LAB)
    return load_lab(folder)


def test_a_hand_delivery_lab_loads_and_ticks_from_deliveries_made_by_another_handle(lab, tmp_path):
    assert lab.mode == "hand-delivery"
    db = tmp_path / "lab90.db"
    store = Store.create(db, start_time="2026-07-13T04:00:00Z")
    store.set_meta({"scenario": lab.scenario})
    session = LabSession(lab, store, ProgressStore.open(None))
    session.refresh()
    assert session.done == 0
    other = Store.open(db)  # the learner's 'protolab deliver', another connection
    for env in (samples.m1(), samples.m2(), samples.m3()):
        deliver(other, env)
    other.close()
    assert store.poll() and not store.poll()
    session.refresh(force=True)
    assert session.done == 3
    store.close()


async def test_the_tui_follows_the_file_and_the_guide_ticks(lab, tmp_path):
    pytest.importorskip("textual")
    from sim.tui.app import ProtolabApp

    db = tmp_path / "lab90.db"
    store = Store.create(db, start_time="2026-07-13T04:00:00Z")
    store.set_meta({"scenario": lab.scenario})
    session = LabSession(lab, store, ProgressStore.open(None))
    app = ProtolabApp(store, lab=session, watch=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("space")  # nothing to step: says how to deliver
        assert "delivered by hand" in app.message_line and "protolab deliver" in app.message_line
        other = Store.open(db)
        for env in (samples.m1(), samples.m2(), samples.m3()):
            deliver(other, env)
        other.close()
        for _ in range(1200):  # until the app's poll saw them (60 s only guards against hanging)
            await pilot.pause(0.05)
            if session.done == 3:
                break
        assert session.done == 3
        assert len(app.messages_view.source) == 3
        assert "3/3 checkpoints" in str(app.guide.body.content)
    store.close()
