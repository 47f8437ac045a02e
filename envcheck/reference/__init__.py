"""Independent references the numerics checks compare against, never hand-written expectations: float64
optimizer steps written from the documented algorithms, the autograd op set, dtype-derived tolerances and the
comparison that reports the worst element, which devices to run on, and the local causes of wrong math."""
