"""Several documents decoded at once on one native runtime, each exactly as alone (scheduler.py),
and what a document's rows cost in a pass it shares (costs.py)."""
