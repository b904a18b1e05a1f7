"""One run from its first stage to its manifest: the session, options, pre-flight, the worker book, the verdict."""
