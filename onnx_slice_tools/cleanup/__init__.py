"""Exact cleanup passes after the rewrite and their protobuf pre-check."""
