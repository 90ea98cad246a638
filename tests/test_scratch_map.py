"""The store's scratch map (what a big export remembers of every message, in a temp table) answers as a
dict does, across its write buffer's flushes: membership, get, setdefault and assignment."""

import random

from sim.store import Store
from sim.store.reads import ScratchMap


def test_a_scratch_map_answers_as_a_dict_across_its_buffer(tmp_path, monkeypatch):
    monkeypatch.setattr(ScratchMap, "BUFFER", 7)  # a flush every few writes
    store = Store.create(tmp_path / "s.db")
    try:
        table, want = store.scratch_map("t"), {}
        rng = random.Random(5)
        for step in range(2000):
            k = f"k{rng.randrange(60)}"
            op = rng.randrange(5)
            if op == 0:
                assert (k in table) == (k in want), step
            elif op == 1:
                assert table.get(k) == want.get(k) and table.get(k, "none") == want.get(k, "none"), step
            elif op == 2:
                assert table.setdefault(k, step) == want.setdefault(k, step), step
            elif op == 3:
                table[k] = want[k] = f"v{step}"
            else:
                table.add(k)
                want[k] = 1
        assert all(table.get(k) == v for k, v in want.items())
        assert not any(f"k{n}" in table for n in range(60, 80))
        # two maps of one store are two tables
        other = store.scratch_map("u")
        other.add("k1")
        assert "k1" in other and ("k1" in table) == ("k1" in want)
    finally:
        store.close()
