"""Hypothesis profiles for the fuzzing tests (tests/test_fuzz_*.py): `fast` in the default test run
(seconds), `long` for a deeper search, chosen with HYPOTHESIS_PROFILE (docs/runner.md, "Fuzzing")."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("fast", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))
