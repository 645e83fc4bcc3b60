"""Per-rewrite checks, whole-model checks, runtimes, model comparison and the framework oracles."""
