"""kue_example: the demo and its example handlers (to come)."""
