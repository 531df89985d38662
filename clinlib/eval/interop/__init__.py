"""Evaluation: the kit's doors: outside predictions, exports, inspect logs, prefix sharing."""
