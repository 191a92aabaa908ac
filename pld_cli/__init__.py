"""pld: edit and summarize documents with a local language model, using prompt-lookup decoding."""

__version__ = "0.1.0"
