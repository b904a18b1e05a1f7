"""embedperf history: the headline figures of comparable runs across commits, and the newest run flagged."""
