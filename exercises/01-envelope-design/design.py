"""Exercise 1: your envelope design.

The simulator's agents decide WHAT they mean to say (an Intent); this file decides HOW it is
written down as an envelope. Every envelope of the run goes through these three functions.
See README.md for what an Intent holds and what is judged.

This starter runs, and a clean run even holds every invariant. Try it under a fault (each request
re-sent under a new message id: is the copy recognised as the same intent?):

    protolab run --design design.py --fault resend:task_request
    protolab exercise check 1         # exit 1 on the starter; exit 0 on a right answer
"""

# Which digest binds the payload: "json-sorted-v1" (the course's teaching digest) or "jcs-v2" (RFC 8785).
DIGEST_SCHEME = "json-sorted-v1"


def idempotency_key(intent) -> str:
    # Every message gets its own id, so this key is unique... is that what a key should be?
    return f"{intent.sender}:{intent.message_id}"


def payload(intent) -> dict:
    # Send the recipient everything we know: the body, the work product, and our context.
    out = dict(intent.body)
    if intent.content is not None:
        out["content"] = intent.content
    out.update(intent.context)
    return out


def evidence_refs(intent) -> list[str]:
    # The content is in the payload already, so there is nothing to cite.
    return []
