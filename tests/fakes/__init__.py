"""tests.fakes."""
