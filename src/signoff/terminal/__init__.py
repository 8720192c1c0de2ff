"""How signoff looks in a terminal, for the commands (``cli/``) and the full-screen apps
(``tui/``) alike: agent text made safe to print, and the rich renderables of a request."""
