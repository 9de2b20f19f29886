import pytest

from .server import broken_provider as _broken_provider


@pytest.fixture(scope="module")
def broken():
    """The deliberately broken provider, as its own process, for the tests of one module."""
    with _broken_provider() as server:
        yield server
