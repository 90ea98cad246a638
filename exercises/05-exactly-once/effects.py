"""Exercise 5: the effect-commit rule.

When a successful result asks for a side effect (publishing the report), the runtime commits it
as a row of the effects table under a UNIQUE key: if a row with that key exists already, the
effect is suppressed instead of done again. You choose the key.

    protolab run --policy naive --effects effects.py --fault resend --db ex5.db
    protolab replay --db ex5.db --effects effects.py
    protolab exercise check 5         # exit 1 on the starter; exit 0 on a right answer
"""


def effect_key(result, delivery_id):
    """The unique key the side effect of ``result`` (an accepted, successful task_result whose
    payload has an "effect": {"kind": ..., "target": ...}) commits under; None commits nothing."""
    # Every message has its own id, so every message commits its own row. Is that "once"?
    return f"effect:{result.message_id}"
