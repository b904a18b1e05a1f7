"""`embedperf canary`: one load split between a baseline and a candidate, stage by stage, promote or roll back."""
