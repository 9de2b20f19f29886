"""The endpoint names: one tuple every surface and model reads."""

from batches.models import BatchItem
from gateway_engine.endpoints import ENDPOINTS, WIRE_FAMILY
from interactive.models import InteractiveCall


def test_every_endpoint_has_a_wire_family_and_the_models_take_them():
    assert set(WIRE_FAMILY) == set(ENDPOINTS)
    assert set(WIRE_FAMILY.values()) == {"chat", "embeddings"}
    call_choices = {value for value, _ in InteractiveCall._meta.get_field("endpoint").choices}
    item_choices = {value for value, _ in BatchItem._meta.get_field("endpoint").choices}
    assert call_choices == set(ENDPOINTS)
    assert item_choices == set(ENDPOINTS) - {"messages"}  # Anthropic's Messages API: interactive only
