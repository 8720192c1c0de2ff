"""Released migrations never change: each one's text is pinned by its SHA-256.

Both stores build their migrations from the shared fragments in :mod:`signoff.store.ddl`;
an edit to one of those would silently edit released migrations of both. A new schema
change is a new migration: append its hash here.
"""

from __future__ import annotations

import hashlib
from types import ModuleType

import pytest

from signoff.store import postgres_migrations, sqlite_migrations

RELEASED = {
    "postgres": [
        "f505a5a49e4999a05c7876c891333e475c8ea42b99f93181e71813e86a52cc02",
        "b40cf91b91181cbb8355665bb3f9ddb5e4c05d8c041e67c36d31a8eb20eec3fc",
        "838b26fd8851b5668fdcefdf3d17ffee26338d1d4f53aa51a251ba98210e2209",
        "2224a8f2ca8d5fd6dece4ac2e84c0ffa7ac4100844fe535ee5478a88901af219",
        "ed846def271870f7c7e6484ea3a1ad056010147d026c657c34bd865ad485e531",
        "4b2e9600632991e2789e5978283e3684cdf60388747a832ef01089ac1c947548",
        "e83c00446bb4d18386fd690f3d33dbd2d62271396e7aa4497d4fd8f2ad18544f",
        "01b9284f649bda35cfeb119c10de31dc935ec9a4b1dca9aa0866b3c0dff3bd91",
        "b4918321afd5751eb4bf1930af910ec2888d264c456f2d6fbd5a854823139090",
        "57efc6590393d2c2d072c5b172114b51f690e7306375ee4b636a1ea2d033fe4a",
    ],
    "sqlite": [
        "f95b88db69451fc91a2287d746d5e558fffe1a6b20287735ee0e51bac0db6e16",
        "64612958d341f211f6d8687f9cdff7e021b5e66fd50495e4ca963ec0a6caa794",
        "6e9145a2e80db19448008bc79c021a72a503fe7b766a5af7b47956bd335bcb45",
        "064297bb934ac344753e6c9cd434e518175fa62b93bbbb5a1e7032cf128ab0bb",
        "838b26fd8851b5668fdcefdf3d17ffee26338d1d4f53aa51a251ba98210e2209",
        "8568e5b0ae217d4ce04e1fc56db65579179e1dbd24d1780dda258351a64fa600",
        "1e622f6c5f210bab446ef372a1eaec308617c3effda33b3792f6a3607e17a86e",
        "3335a9aca5232af31376d7ae84382879958a062dafa592b89a0bc78eacbbbfd0",
    ],
}


@pytest.mark.parametrize(
    ("dialect", "module"), [("postgres", postgres_migrations), ("sqlite", sqlite_migrations)]
)
def test_released_migrations_are_unchanged(dialect: str, module: ModuleType) -> None:
    """Every released migration's text is exactly what was released; new ones only append."""
    released = RELEASED[dialect]
    migrations: tuple[str, ...] = module.MIGRATIONS
    hashes = [hashlib.sha256(sql.encode()).hexdigest() for sql in migrations]
    assert hashes[: len(released)] == released
    assert len(migrations) == module.SCHEMA_VERSION
