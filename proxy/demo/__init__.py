"""Recorded broken streams for ``toolcall-proxy demo`` (PROVENANCE.md says where each is from)."""
