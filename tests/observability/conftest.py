from sim.testing import sim_server  # noqa: F401 - fixture
