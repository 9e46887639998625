"""Statistics of repeated measurements: pure functions of numbers (SPEC.md section 17)."""
