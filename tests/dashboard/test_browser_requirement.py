"""The real-browser tests never pass silently without a browser: skip with a reason locally, fail in CI."""

from __future__ import annotations

import pytest

from .test_browser import MISSING, require


def test_missing_chromium_fails_when_ci_is_set(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="Chromium is not installed.*required when CI is set"):
        require(MISSING)


def test_missing_chromium_skips_with_the_reason_otherwise(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Chromium is not installed"):
        require(MISSING)


def test_present_chromium_neither_skips_nor_fails(monkeypatch):
    monkeypatch.setenv("CI", "1")
    assert require(None) is None
