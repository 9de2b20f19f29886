"""Engine test fixtures: a real local provider server."""

import pytest

from .provider_server import ProviderServer


@pytest.fixture
def provider_server():
    server = ProviderServer().start()
    yield server
    server.stop()
