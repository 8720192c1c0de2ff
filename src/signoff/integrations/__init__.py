"""Where signoff meets agent frameworks: one module (and one extra) per framework."""
