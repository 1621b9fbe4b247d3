"""Algorithms, one module each, readable top to bottom."""
