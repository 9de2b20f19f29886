import pytest

from tests.faults.server import broken_provider as _broken_provider


@pytest.fixture(scope="module")
def broken():
    """The deliberately broken provider, as its own process, for the tests of one module."""
    with _broken_provider() as server:
        yield server


@pytest.fixture
def client(api_key):
    from rest_framework.test import APIClient

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key[1]}")
    return c


@pytest.fixture
def route(make_provider, make_route):
    """Route 'intent' → provider alpha."""
    alpha = make_provider("alpha")
    make_route("intent", alpha)
    return alpha
