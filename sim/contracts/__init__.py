"""Contract suites: data plus a runner, usable against any implementation.

``sim.contracts.intake`` pins the intake decision (:func:`sim.intake.decide`) as a
table of :class:`~sim.contracts.intake.Case` rows and a :func:`~sim.contracts.intake.run`
function that checks any ``decide`` with the same signature, so the same suite
grades the reference and a student's implementation.
"""

__all__ = ["intake"]
