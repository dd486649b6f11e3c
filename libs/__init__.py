"""Shared library code for blockheat: trace readers and helpers."""

from __future__ import annotations
