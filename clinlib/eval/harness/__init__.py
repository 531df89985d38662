"""Evaluation: the answering harness: runs, sessions, cells, stored predictions (paper §4)."""
