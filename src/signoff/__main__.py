"""``python -m signoff`` runs the command line."""

from signoff.cli import main

main()
