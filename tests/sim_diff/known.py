"""Differences between cks-sim and the real API server that cks-sim cannot remove, by step, with why."""

KNOWN: dict[str, str] = {}
