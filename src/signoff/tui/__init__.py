"""Full-screen terminal apps (Textual): ``signoff chat`` and ``signoff inbox``."""
