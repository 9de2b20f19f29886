"""/metrics reads the multiprocess directory while worker processes create their files."""

from __future__ import annotations

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


def test_a_just_created_empty_metrics_file_is_skipped_not_a_500(client, tmp_path):
    # what a process leaves for an instant between creating its file and writing the header
    (tmp_path / "counter_424242.db").write_bytes(b"")
    (tmp_path / "histogram_424242.db").write_bytes(b"\0\0\0")
    with override_settings(GATEWAY_METRICS_DIR=str(tmp_path), GATEWAY_METRICS_TOKEN=""):
        response = client.get("/metrics")
    assert response.status_code == 200
    assert b"gateway_leases_max" in response.content or b"# HELP" in response.content
