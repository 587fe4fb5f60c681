"""How many plan runs a qualification runs at once: `akk qualify --parallel`'s default.

Apart from `qualification` so the command line shows it without importing the run.
"""

PARALLEL = 3
"""Plan runs at a time. A run mostly waits on its client's screen, so three share two
cores: Claude 2.1.332's 136 runs take 190 s at three, with none failed."""
