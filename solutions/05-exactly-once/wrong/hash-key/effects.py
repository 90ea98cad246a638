"""Plausible mistake: a compact key from Python's built-in hash() of the effect's parts. Within
one process it names the effect; in another process (a restarted worker, a replay) hash() is
salted differently and the same effect gets another key."""


def effect_key(result, delivery_id):
    effect = result.payload["effect"]
    return f"effect-{hash((effect['kind'], effect['target'], result.task_id)) & 0xFFFFFFFF:08x}"
