"""Evaluation: trap questions asked and their reader (MedMemoryBench §5 "Query Design")."""
