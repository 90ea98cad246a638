"""Faces in a browser: Datasette over a run (datasette.py) and the TUI served by textual-serve
(serve.py); ports.py binds the local socket both listen on, guard.py decides who may speak to them
(a Host naming localhost, a WebSocket from their own page), quiet.py keeps Datasette's errors off the
host's terminal. The timeline page is drawn below the faces, in :mod:`sim.timeline`. Each module
imports its web library only when called."""
