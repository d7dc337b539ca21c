"""Stage 5, boards: a track's stored records turned into its board (:mod:`.report`) with its statistics
(:mod:`.stats`); :mod:`.tuning` selects hyperparameters by the same scores."""
