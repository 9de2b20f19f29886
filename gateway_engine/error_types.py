"""The error types' names, where older imports read them: ``ErrorType`` lives beside the rows that say
what each one means, in gateway_engine/error_kinds.py (a new error type is a name and a row there)."""

from __future__ import annotations

from .error_kinds import ErrorType as ErrorType

__all__ = ["ErrorType"]
