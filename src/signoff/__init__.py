"""signoff: human sign-off for what AI agents do."""
