"""Block I/O trace readers, one module per trace format."""

from __future__ import annotations
