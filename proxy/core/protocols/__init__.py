"""Wire protocols: each a decoder and an encoder at the edge of the core."""
