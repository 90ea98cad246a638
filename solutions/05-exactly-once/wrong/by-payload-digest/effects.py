"""Plausible mistake: the key is the payload digest; another attempt writes another draft."""

def effect_key(result, delivery_id):
    return result.payload_digest
