"""protolab: a course lab kit for agent message protocols and shared state.

Layers (imports point down only): faces (cli, tui, grading) -> engine (runtime)
-> store (the only SQL) -> domain (envelope, digest, machine, intake; pure).
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
