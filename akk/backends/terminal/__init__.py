"""The terminal backend: a Turn typed into a supervised tmux pane, answered by keys.

`watcher` (the TmuxWatcher: one tmux server's agent panes, a TerminalActor each,
published on the terminal board), `actor` (the TerminalActor, the only sender of
keys to its pane: one step at a time, proven and reserved), `observer` (how it
reads the pane and publishes each Observation), `typing_step` and `answer_step`
(a reserved step's keys and their proofs), `stages` (what a step in flight
records), `steps` (its messages and receipts), `rounds` (a task or a next round
typed through it), `resolve` (an answer's ids into the plan's intent, pure),
`checks` (an answer's plan and fence, pure), `answers` (the methods' side: offers
and answers), `follow` (the TurnActor's follower: screen and file evidence) and
`witness` (what the watch methods read of a person's task in a pane).
"""
