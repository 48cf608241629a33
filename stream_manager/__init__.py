"""Stream manager: one per container; routes tuple batches, joins the clique."""
