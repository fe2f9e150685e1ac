"""Networks: the paper's teacher/student presets with width multipliers (Appendix A.2), building
any ``nn.Module`` from a specification, pruning, and cost (parameters, FLOPs, latency)."""
