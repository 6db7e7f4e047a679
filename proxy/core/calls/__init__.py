"""Call identity and the one state table of a tool call."""
