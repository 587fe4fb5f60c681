"""The operator console: a page under /ui that shows every pane, Turn and prompt, live."""
