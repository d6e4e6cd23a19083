"""Order of the default scenario's verify modules: they share one host and each leaves it as the next expects.

test_default and test_security check what converge and idempotence left (test_security's canary deploy puts the
inventory configuration back); test_restart takes the one-instance host through every failure case of the
restart chain and leaves it healthy; test_instances then turns it into two instances, so it runs last.
"""

from __future__ import annotations

import pytest

ORDER = ["test_default.py", "test_security.py", "test_restart.py", "test_instances.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Sort the collected cases by ORDER of their module (file order inside each); a module not listed fails."""
    unknown = sorted({item.path.name for item in items} - set(ORDER))
    if unknown:
        raise pytest.UsageError(f"molecule/default/tests: add {unknown} to ORDER in conftest.py")
    items.sort(key=lambda item: ORDER.index(item.path.name))
