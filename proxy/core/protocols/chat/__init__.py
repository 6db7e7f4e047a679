"""Chat Completions: chunks in, repaired chunks out; ``stream: false`` bodies too."""
