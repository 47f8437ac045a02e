"""Performance measurement, separate from the pass/fail checks."""
