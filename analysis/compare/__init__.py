"""Two runs compared: the samples each step resamples, the changes with bootstrap intervals, the gate."""
