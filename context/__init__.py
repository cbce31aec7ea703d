"""The context a model reads: session buffers, summary anchors, bridges, links and the composer."""
