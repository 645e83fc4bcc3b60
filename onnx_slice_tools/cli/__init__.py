"""The command line (convert, verify, batch, inspect, explain) and its renderings."""
