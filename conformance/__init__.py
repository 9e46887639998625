"""The conformance suite (see README.md here)."""
