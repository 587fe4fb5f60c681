"""The terminal backend: a Turn typed into a supervised tmux pane, answered by keys."""
