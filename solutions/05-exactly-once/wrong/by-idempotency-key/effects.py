"""Plausible mistake: the key is the intent's idempotency key; a crashed worker's stale attempt has its own."""

def effect_key(result, delivery_id):
    return result.idempotency_key
