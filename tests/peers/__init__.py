"""Real third-party embedding servers (Infinity, KServe v2) for the tests and `make peers`."""
