import pytest

from sim.store import Store


@pytest.fixture
def store():
    """A fresh in-memory protolab store with the default machine loaded."""
    s = Store.memory()
    yield s
    s.close()
