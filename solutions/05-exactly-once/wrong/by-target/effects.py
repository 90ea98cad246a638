"""Plausible mistake: "publish R-1 once", so the key is the kind and the target; two tasks that
each publish to R-1 are taken for one effect."""


def effect_key(result, delivery_id):
    effect = result.payload["effect"]
    return f"{effect['kind']}:{effect['target']}"
