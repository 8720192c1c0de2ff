"""Attack tests: each one plays the agent (or someone on the network) against a real server.

The ``server`` fixture (tests/conftest.py) starts a real ``signoff serve`` process on its own
SQLite file; ``tests.serving`` has ``agent_token``, ``bearer`` and ``start_server`` for more.
"""
