"""The Claude Code headless backend: a Turn run through `claude -p` and its stream-json protocol.

`wire` (the stream-json lines as typed values, both ways) and `process` (one
supervised `claude -p` process: start, lines in and out, interrupt, kill and reap).
"""
