"""The labs: guided exercises played in the TUI and checked live from the learner's own run.

A floor of its own, above the engine and beside the CLI, the TUI and the course's exercises:
``catalog`` reads ``labs/NN-slug/lab.toml``, ``checks`` holds the registry of named checks a
checkpoint may use, ``session`` evaluates a lab against a run and the learner's progress file,
``verify`` re-delivers a run to prove it was not edited, ``submit`` packs a lab submission,
``facts`` reads the ids, codes and counts a lab's texts and answer keys name from its runs,
``explain`` tells a wrong answer what it names, ``readme`` makes a lab's README.md.
Labs read the store and call the engine; they never write SQL.
"""
