"""Plausible mistake: the key is the delivery, so a redelivered result commits again."""

def effect_key(result, delivery_id):
    return f"publish#{delivery_id}"
