"""The course: exercises, their judges, and the sandbox student code runs in.

This layer sits above the engine, beside the CLI and the TUI: it drives the simulator, the
invariants and the validator to judge students' work, and never reaches into the store's SQL.
Student code is only ever imported inside a host process started by :mod:`sim.course.sandbox` (in
bubblewrap where it works) when judged (``protolab exercise check``, ``protolab grade``), and
in-process only when a student runs their own file (``protolab run --design``).
"""
