"""Renderers: table, JSON and JUnit, all from the same RunReport."""
