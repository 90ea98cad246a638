"""Exercise 5, a model answer.

A side effect must happen once however many times the message that asks for it is delivered,
resent, or replayed, and even when the consumer below re-executes (a naive intake, a replay of
the whole log). So the commit record's key names the EFFECT, not the message that carries it:

* what is done (kind: publish),
* to what (target: the report R-1),
* for which task (T-2): one task, one publication of it.

Nothing the transport or the attempt chooses goes into it: not the message id (a resend has a
new one), not the delivery (a duplicate is a new delivery), not the idempotency key (a crashed
worker's stale attempt has its own key), not the payload digest (that attempt's draft differs).
And nothing is left out that tells two real effects apart: another target or another task is
another publication, which must not be suppressed.
"""


def effect_key(result, delivery_id):
    effect = result.payload["effect"]
    return f"{effect['kind']}:{effect['target']}:{result.task_id}"
