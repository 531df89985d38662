"""Evaluation: LLM-written dialogues and questions into variant profiles (paper Fig. 2)."""
