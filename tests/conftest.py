"""Hypothesis runs derandomized under CI (the same examples every run, so a green build
stays green); locally each run draws new examples and keeps hunting."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
