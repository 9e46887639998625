"""The executable SQLite schema of the run store (``v1.sql``), shipped as package data."""
