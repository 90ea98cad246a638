"""Plausible mistake: the key is only the kind of effect, so a second, different publication is lost."""

def effect_key(result, delivery_id):
    return result.payload["effect"]["kind"]
