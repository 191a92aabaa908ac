"""`pld bench`: corpora, the methods compared (pld's and transformers'), the report, its view."""
