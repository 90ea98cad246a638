"""Plausible mistake: one effect of each kind per task, so the key is (task, kind). A task whose
result asks for a publication to another target is taken for a repeat."""


def effect_key(result, delivery_id):
    return f"{result.payload['effect']['kind']}:{result.task_id}"
