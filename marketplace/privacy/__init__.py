"""Differential privacy: noise mechanisms, the RNG policy, and the privacy accountant."""
