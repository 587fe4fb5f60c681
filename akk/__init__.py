"""AKK: a supervisor for coding-agent TUIs in tmux."""

__version__ = "0.1.0"
